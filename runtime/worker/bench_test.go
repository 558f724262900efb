package worker_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/runtime/worker"
)

// BenchmarkTrivialRun measures `return 1` through the pool on warm
// workers, one run at a time: what a caller waits for.
func BenchmarkTrivialRun(b *testing.B) {
	h, p := newPool(b, worker.Options{Size: 2})
	env := h.Env("default", "bench")
	req := hostapi.RunRequest{Code: "return 1"}
	for i := 0; i < 50; i++ {
		p.Run(context.Background(), env, req)
	}
	durs := make([]time.Duration, 0, b.N)
	u0 := measure(p)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res := p.Run(context.Background(), env, req)
		durs = append(durs, time.Since(t0))
		if !res.OK {
			b.Fatal(res.Error)
		}
	}
	b.StopTimer()
	reportQuantiles(b, durs)
	u := measure(p).sub(u0)
	b.ReportMetric(float64((u.hostCPU+u.workerCPU).Microseconds())/float64(b.N), "cpu-µs/run")
}

// BenchmarkHostCallRoundTrip measures what one host call costs beyond its
// handler: a script awaiting a no-op op N times, against the same loop
// awaiting Promise.resolve, minus the handler's own time.
func BenchmarkHostCallRoundTrip(b *testing.B) {
	h, p := newPool(b, worker.Options{Size: 2})
	h.Registry.Add(hostapi.Op{Name: "files.benchNoop", Params: []hostapi.Param{hostapi.Ref("")}, Result: 0,
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) { return 1, nil }})
	env := h.Env("default", "bench")
	const calls = 2000
	code := fmt.Sprintf("let n = 0; for (let i = 0; i < %d; i++) n += await files.benchNoop('a.txt'); return n;", calls)
	base := fmt.Sprintf("let n = 0; for (let i = 0; i < %d; i++) n += await Promise.resolve(1); return n;", calls)
	op := h.Registry.ByName("files.benchNoop")
	p.Run(context.Background(), env, hostapi.RunRequest{Code: code})
	var script, loop, direct, cpuScript, cpuLoop time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c0 := measure(p)
		t0 := time.Now()
		if res := p.Run(context.Background(), env, hostapi.RunRequest{Code: code}); !res.OK || string(mustJSON(res.Result)) != fmt.Sprint(calls) {
			b.Fatal(res.Error, res.Result)
		}
		t1 := time.Now()
		c1 := measure(p)
		p.Run(context.Background(), env, hostapi.RunRequest{Code: base})
		t2 := time.Now()
		d1, d2 := c1.sub(c0), measure(p).sub(c1)
		cpuScript += d1.hostCPU + d1.workerCPU
		cpuLoop += d2.hostCPU + d2.workerCPU
		for j := 0; j < calls; j++ {
			h.Registry.InvokeJSON(context.Background(), env, op, []byte(`{"id":"a.txt"}`))
		}
		t3 := time.Now()
		script += t1.Sub(t0)
		loop += t2.Sub(t1)
		direct += t3.Sub(t2)
	}
	b.ReportMetric(float64(script-loop-direct)/float64(b.N*calls)/1000, "overhead-µs/call")
	b.ReportMetric(float64(direct)/float64(b.N*calls)/1000, "handler-µs/call")
	b.ReportMetric(float64(cpuScript-cpuLoop-direct)/float64(b.N*calls)/1000, "overhead-cpu-µs/call")
}

func reportQuantiles(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	q := func(f float64) float64 { return float64(durs[int(f*float64(len(durs)-1))].Nanoseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}
