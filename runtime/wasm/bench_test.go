package wasm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	"github.com/metaclaw/metaclaw/runtime/wasm"
)

// samplesPerOp is how many runs each benchmark iteration times, so that a
// short -benchtime (make bench uses 3x) still gives a median.
const samplesPerOp = 25

// timeRuns runs fn samplesPerOp times per iteration and reports the
// median and the 90th percentile of one run.
func timeRuns(b *testing.B, fn func() *hostapi.RunResult) {
	b.Helper()
	// Warm: compiled, cached in memory, code paged in.
	for i := 0; i < 3; i++ {
		if res := fn(); !res.OK {
			b.Fatalf("warm-up run failed: %+v", res.Error)
		}
	}
	var d []time.Duration
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		for j := 0; j < samplesPerOp; j++ {
			start := time.Now()
			res := fn()
			d = append(d, time.Since(start))
			if !res.OK {
				b.Fatalf("run failed: %+v", res.Error)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/1000/float64(len(d)), "cpu-ms/run")
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(d[len(d)*9/10].Microseconds())/1000, "p90-ms")
}

// BenchmarkTinyModule: instantiate and run a tiny compiled module (target:
// p50 ≤ 1 ms).
func BenchmarkTinyModule(b *testing.B) {
	env := testEnv(b)
	r := sharedRunner(b)
	bin := tinyModule()
	timeRuns(b, func() *hostapi.RunResult {
		return r.Run(context.Background(), env, wasm.Request{Module: bin})
	})
}

// BenchmarkGoGuestRead50Lines: a Go guest (a few MB) reads 50 lines of a
// 1000-line file through the host ABI, compiled code cached (target: ≤ 15 ms).
func BenchmarkGoGuestRead50Lines(b *testing.B) {
	env := testEnv(b)
	r := sharedRunner(b)
	bin := probe(b)
	var text strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&text, "line %d of the benchmark file, with some words after it\n", i)
	}
	hosttest.Upload(b, env.WS, "bench.txt", []byte(text.String()), true)
	hosttest.Upload(b, env.WS, "probe.wasm", bin, true)
	b.ReportMetric(float64(len(bin))/(1<<20), "module-MB")
	for _, c := range []struct {
		name string
		req  wasm.Request
	}{
		// A saved tool's module: a workspace file, known by its checksum.
		{"ref", wasm.Request{Ref: "probe.wasm"}},
		// metaclaw run mod.wasm, POST /api/run {wasm}: bytes, hashed each run.
		{"bytes", wasm.Request{Module: bin}},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := c.req
			req.Input = map[string]any{"mode": "lines", "id": "bench.txt", "n": 50}
			timeRuns(b, func() *hostapi.RunResult {
				res := r.Run(context.Background(), env, req)
				if out, _ := json.Marshal(res.Result); res.OK && !strings.Contains(string(out), "line 50 of") {
					b.Fatalf("result %v", res.Result)
				}
				return res
			})
		})
	}
}

// BenchmarkHostCallOverhead: what one host call from a Go guest costs
// beyond its handler (target: ≤ 10 µs). The op does nothing; a run making
// n calls is timed against a run making none, and the registry's own cost
// of the same call (decode, validate, project, encode), called directly
// from Go, is reported beside it.
func BenchmarkHostCallOverhead(b *testing.B) {
	h := hosttest.New(b, hostapi.Config{})
	h.Registry.Add(hostapi.Op{Name: "bench.noop", Tool: "bench_noop", Doc: "does nothing",
		Params: []hostapi.Param{{Name: "n", Schema: hostapi.Schema{"type": "integer"}, Required: true}},
		Result: struct {
			OK bool `json:"ok"`
		}{},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			return struct {
				OK bool `json:"ok"`
			}{true}, nil
		}})
	r, err := wasm.New(h, wasm.Options{})
	if err != nil {
		b.Fatal(err)
	}
	env := h.Env("default", "bench")
	bin := probe(b)
	const calls = 2000
	runCalls := func(n int) time.Duration {
		start := time.Now()
		res := r.Run(context.Background(), env, wasm.Request{Module: bin,
			Input: map[string]any{"mode": "calls", "op": "bench_noop", "args": map[string]any{"n": 1}, "n": n}})
		d := time.Since(start)
		out, _ := json.Marshal(res.Result)
		if !res.OK || (n > 0 && !strings.Contains(string(out), `"ok":true`)) {
			b.Fatalf("run: %+v %v", res.Error, res.Result)
		}
		return d
	}
	runCalls(calls)
	runCalls(0)
	var per []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 5; j++ {
			with, without := runCalls(calls), runCalls(0)
			per = append(per, float64((with-without).Nanoseconds())/calls/1000)
		}
	}
	b.StopTimer()
	slices.Sort(per)
	b.ReportMetric(per[len(per)/2], "µs/call")

	args := []byte(`{"n":1}`)
	ctx := context.Background()
	start := time.Now()
	for i := 0; i < calls; i++ {
		if _, err := h.Registry.CallToolJSON(ctx, env, "bench_noop", args); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/calls/1000, "direct-µs/call")
}
