package worker_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/runtime/worker"
)

// BenchmarkTrivialRun measures `return 1` through the pool on warm
// workers, one run at a time: what a caller waits for. Each iteration is
// 500 runs (make bench runs 3 iterations).
func BenchmarkTrivialRun(b *testing.B) {
	h, p := newPool(b, worker.Options{Size: 2})
	env := h.Env("default", "bench")
	req := hostapi.RunRequest{Code: "return 1"}
	for i := 0; i < 50; i++ {
		p.Run(context.Background(), env, req)
	}
	const perIter = 500
	durs := make([]time.Duration, 0, b.N*perIter)
	u0 := measure(p)
	b.ResetTimer()
	for i := 0; i < b.N*perIter; i++ {
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
	b.ReportMetric(float64((u.hostCPU+u.workerCPU).Microseconds())/float64(len(durs)), "cpu-µs/run")
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

// BenchmarkHostCallCost is the CPU and thread switches one host call costs,
// in the host and in the worker, whatever else the machine runs: a script
// awaiting a no-op op 2000 times per iteration.
func BenchmarkHostCallCost(b *testing.B) {
	h, p := newPool(b, worker.Options{Size: 2})
	h.Registry.Add(hostapi.Op{Name: "files.benchNoop", Params: []hostapi.Param{hostapi.Ref("")}, Result: 0,
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) { return 1, nil }})
	env := h.Env("default", "bench")
	const perIter = 2000
	code := fmt.Sprintf("let n = 0; for (let i = 0; i < %d; i++) n += await files.benchNoop('a.txt'); return n;", b.N*perIter)
	p.Run(context.Background(), env, hostapi.RunRequest{Code: "return 1"})
	u0 := measure(p)
	b.ResetTimer()
	if res := p.Run(context.Background(), env, hostapi.RunRequest{Code: code, Limits: hostapi.RunLimits{Timeout: 10 * time.Minute}}); !res.OK {
		b.Fatal(res.Error)
	}
	b.StopTimer()
	u := measure(p).sub(u0)
	n := float64(b.N * perIter)
	b.ReportMetric(float64(u.hostCPU.Microseconds())/n, "host-cpu-µs/call")
	b.ReportMetric(float64(u.workerCPU.Microseconds())/n, "worker-cpu-µs/call")
	b.ReportMetric(float64(u.hostSw)/n, "host-switches/call")
	b.ReportMetric(float64(u.workerSw)/n, "worker-switches/call")
}

// BenchmarkWriteRange100k is the 100,000 × 10 writeRange script (rows built
// in JS, one host call) run in a worker against the same script run by the
// in-process runner (runtime/js, goja inside the host): what isolation
// costs. It also reports the host work alone (the same rows built in Go and
// handed to the registry) for reference.
func BenchmarkWriteRange100k(b *testing.B) {
	h, p := newPool(b, worker.Options{Size: 2})
	inProc := jsrt.New(h)
	env := h.Env("default", "bench")
	rows := make([]any, 100000)
	for r := range rows {
		row := make([]any, 10)
		row[0] = fmt.Sprintf("item %d", r)
		for c := 1; c < 10; c++ {
			row[c] = int64(r*10 + c)
		}
		rows[r] = row
	}
	create := h.Registry.ByName("files.create")
	write := h.Registry.ByName("files.spreadsheet.writeRange")
	// The in-process runner's budget is the whole process's heap growth:
	// give it room, so that it measures time, not its budget.
	inProcReq := hostapi.RunRequest{Code: bigRowsScript, Input: map[string]any{"name": "p.xlsx"}, Limits: hostapi.RunLimits{MemoryBytes: 8 << 30}}
	var inWorker, inProcess, goRows time.Duration
	var workerCPU, hostCPUWorkerPath, hostCPUInProcess time.Duration
	for i := 0; i < b.N; i++ {
		u0 := measure(p)
		t0 := time.Now()
		res := p.Run(context.Background(), env, hostapi.RunRequest{Code: bigRowsScript, Input: map[string]any{"name": "w.xlsx"}})
		if !res.OK {
			b.Fatal(res.Error)
		}
		t1 := time.Now()
		u1 := measure(p)
		if res := inProc.Run(context.Background(), env, inProcReq); !res.OK {
			b.Fatal(res.Error)
		}
		t2 := time.Now()
		u2 := measure(p)
		if _, err := h.Registry.Invoke(context.Background(), env, create, map[string]any{"name": "g.xlsx", "overwrite": true}); err != nil {
			b.Fatal(err)
		}
		if _, err := h.Registry.Invoke(context.Background(), env, write, map[string]any{"id": "g.xlsx", "sheet": "Sheet1", "start_cell": "A1", "data": rows}); err != nil {
			b.Fatal(err)
		}
		inWorker += t1.Sub(t0)
		inProcess += t2.Sub(t1)
		goRows += time.Since(t2)
		d := u1.sub(u0)
		workerCPU += d.workerCPU
		hostCPUWorkerPath += d.hostCPU
		hostCPUInProcess += u2.sub(u1).hostCPU
	}
	n := float64(b.N)
	b.ReportMetric(inWorker.Seconds()/n, "worker-s/op")
	b.ReportMetric(inProcess.Seconds()/n, "in-process-s/op")
	b.ReportMetric(float64(inWorker)/float64(inProcess), "ratio")
	b.ReportMetric(goRows.Seconds()/n, "go-rows-s/op")
	// CPU time, which a busy machine does not inflate as it does wall
	// time: the worker path (the worker building and sending the rows,
	// the host reading and writing them) against the in-process run.
	b.ReportMetric(float64(workerCPU+hostCPUWorkerPath)/float64(hostCPUInProcess), "cpu-ratio")
	b.ReportMetric(workerCPU.Seconds()/n, "worker-cpu-s/op")
	b.ReportMetric(hostCPUWorkerPath.Seconds()/n, "host-cpu-s/op")
	b.ReportMetric(hostCPUInProcess.Seconds()/n, "in-process-cpu-s/op")
}

// BenchmarkHTTPRuns is 16 clients POSTing /api/run with a trivial script to
// a real server on 127.0.0.1, 5000 runs per iteration: runs per second and
// the 99th percentile latency.
func BenchmarkHTTPRuns(b *testing.B) {
	// The pool as a serving host has it (idle workers retire after 30 s,
	// not the tests' 100 ms).
	s := newServer(b, hostapi.RunLimits{}, worker.Options{IdleTimeout: 30 * time.Second})
	ctx := context.Background()
	const clients = 16
	// Warm: the pool grows to the clients' concurrency.
	var warm sync.WaitGroup
	for c := 0; c < clients; c++ {
		warm.Add(1)
		go func() {
			defer warm.Done()
			for i := 0; i < 20; i++ {
				s.post(ctx, "return 1", 0)
			}
		}()
	}
	warm.Wait()
	spawned0 := s.p.Stats().Spawned
	total := int64(b.N) * 5000
	var next atomic.Int64
	durs := make([]time.Duration, total)
	var failed atomic.Int64
	var wg sync.WaitGroup
	u0 := measure(s.p)
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				t0 := time.Now()
				status, res, err := s.post(ctx, "return 1", 0)
				durs[i] = time.Since(t0)
				if err != nil || status != 200 || !res.OK {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	u := measure(s.p).sub(u0)
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d runs failed", failed.Load())
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(s.p.Stats().Spawned-spawned0), "workers-started")
	// Where the CPU goes (the host process holds the test's HTTP clients too).
	b.ReportMetric(float64(u.hostCPU.Microseconds())/float64(total), "host-cpu-µs/run")
	b.ReportMetric(float64(u.workerCPU.Microseconds())/float64(total), "worker-cpu-µs/run")
	reportQuantiles(b, durs)
}
