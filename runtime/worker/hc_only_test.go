package worker_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/runtime/worker"
)

func BenchmarkHostCallOnly(b *testing.B) {
	h, p := newPool(b, worker.Options{Size: 2})
	h.Registry.Add(hostapi.Op{Name: "files.benchNoop", Params: []hostapi.Param{hostapi.Ref("")}, Result: 0,
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) { return 1, nil }})
	env := h.Env("default", "bench")
	code := fmt.Sprintf("let n = 0; for (let i = 0; i < %d; i++) n += await files.benchNoop('a.txt'); return n;", b.N)
	p.Run(context.Background(), env, hostapi.RunRequest{Code: "return 1"})
	u0 := measure(p)
	b.ResetTimer()
	p.Run(context.Background(), env, hostapi.RunRequest{Code: code})
	b.StopTimer()
	u := measure(p).sub(u0)
	n := float64(b.N)
	b.ReportMetric(float64(u.hostCPU.Microseconds())/n, "host-cpu-µs/call")
	b.ReportMetric(float64(u.workerCPU.Microseconds())/n, "worker-cpu-µs/call")
	b.ReportMetric(float64(u.hostSw)/n, "host-sw/call")
	b.ReportMetric(float64(u.workerSw)/n, "worker-sw/call")
}
