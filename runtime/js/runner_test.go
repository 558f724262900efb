package js

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/host"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/runtime/js/script"
)

func newHost(t testing.TB) (*hostapi.Host, *Runner) {
	t.Helper()
	h, _, err := host.Open(hostapi.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	r := New(h)
	h.Runner = r
	return h, r
}

func runScript(t testing.TB, r *Runner, h *hostapi.Host, code string, input any) *hostapi.RunResult {
	t.Helper()
	return r.Run(context.Background(), h.Env("default", "sess-1"), hostapi.RunRequest{Code: code, Input: input})
}

func resultJSON(t testing.TB, res *hostapi.RunResult) string {
	t.Helper()
	if !res.OK {
		t.Fatalf("run failed: %+v", res.Error)
	}
	b, _ := json.Marshal(res.Result)
	return string(b)
}

func TestScriptBasics(t *testing.T) {
	h, r := newHost(t)
	res := runScript(t, r, h, `
		console.log("hello", {a: 1}, [1, 2], null, undefined, 3.5);
		console.error(new Error("boom"));
		const a = await files.create("notes/a.txt", {content: "one\ntwo\nthree\n"});
		const [info, lines, text] = await Promise.all([files.info(a.id), files.lineCount("notes/a.txt"), files.readText(a.id, {startLine: 2, endLine: 3})]);
		return {input, session, id: a.id === info.id, lines, text, mime: info.mimeType, icon: info.iconType,
			noRequire: typeof require, noProcess: typeof process, noSetTimeout: typeof setTimeout};`, map[string]any{"x": 1})
	got := resultJSON(t, res)
	want := `{"icon":"text","id":true,"input":{"x":1},"lines":3,"mime":"text/plain","noProcess":"undefined","noRequire":"undefined","noSetTimeout":"undefined","session":{"id":"sess-1"},"text":{"content":"two\nthree\n","totalLines":3}}`
	if normJSON(got) != normJSON(want) {
		t.Fatalf("result\n got %s\nwant %s", got, want)
	}
	if len(res.Logs) != 2 || res.Logs[0].Message != `hello {"a":1} [1,2] null undefined 3.5` || res.Logs[1].Level != "error" || !strings.Contains(res.Logs[1].Message, "Error: boom") {
		t.Fatalf("logs: %+v", res.Logs)
	}
	if len(res.Files) != 1 || res.Files[0].Name != "notes/a.txt" || res.Files[0].Action != "created" || res.Files[0].IconType != "text" {
		t.Fatalf("artifacts: %+v", res.Files)
	}
	if f, _ := h.Store.Workspace("default").Resolve(context.Background(), "notes/a.txt"); f.SourceSessionID != "sess-1" {
		t.Fatalf("provenance: %+v", f)
	}
}

func normJSON(s string) string {
	var v any
	json.Unmarshal([]byte(s), &v)
	b, _ := json.Marshal(v)
	return string(b)
}

func TestHostErrorsAreCodedExceptions(t *testing.T) {
	h, r := newHost(t)
	res := runScript(t, r, h, `
		const out = [];
		for (const f of [() => files.info("missing.txt"), () => files.readText(42), () => files.readText("x", {bogus: 1}), () => files.create("a", {content: "x"}).then(() => files.create("a"))]) {
			try { await f(); out.push("no error"); } catch (e) { out.push(e.code + ":" + (e instanceof Error)); }
		}
		return out;`, nil)
	if got := resultJSON(t, res); got != `["NOT_FOUND:true","VALIDATION_FAILED:true","VALIDATION_FAILED:true","ALREADY_EXISTS:true"]` {
		t.Fatalf("got %s", got)
	}
	// An uncaught host error fails the run with the host's code.
	res = runScript(t, r, h, `await files.info("nope");`, nil)
	if res.OK || res.Error.Code != apierr.NotFound || !strings.Contains(res.Error.Message, "nope") {
		t.Fatalf("uncaught: %+v", res.Error)
	}
	// A script's own exception.
	res = runScript(t, r, h, "const x = 1;\nnull.foo;", nil)
	if res.OK || res.Error.Code != apierr.ValidationFailed || !strings.Contains(res.Error.Message, "TypeError") || !strings.Contains(res.Error.Stack, "script.js:2") {
		t.Fatalf("exception: %+v", res.Error)
	}
	// Syntax error names the line.
	res = runScript(t, r, h, "const a = 1;\nconst = ;", nil)
	if res.OK || res.Error.Code != apierr.ValidationFailed || !strings.Contains(res.Error.Message, "line 2 column 7") {
		t.Fatalf("syntax: %+v", res.Error)
	}
	// A promise that can never settle.
	res = runScript(t, r, h, "await new Promise(() => {});", nil)
	if res.OK || res.Error.Code != apierr.ValidationFailed {
		t.Fatalf("never settles: %+v", res.Error)
	}
	// Results that are not JSON.
	res = runScript(t, r, h, "const a = {}; a.self = a; return a;", nil)
	if res.OK || res.Error.Code != apierr.ValidationFailed {
		t.Fatalf("cyclic result: %+v", res.Error)
	}
}

func TestTimeoutInterruptsInfiniteLoop(t *testing.T) {
	h, r := newHost(t)
	for _, code := range []string{"while (true) {}", "await files.list(); for (;;) {}", "const p = files.list(); while(true){}"} {
		start := time.Now()
		res := r.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{Code: code, Limits: hostapi.RunLimits{Timeout: 200 * time.Millisecond}})
		late := time.Since(start) - 200*time.Millisecond
		if res.OK || res.Error.Code != apierr.Timeout {
			t.Fatalf("%s: %+v", code, res.Error)
		}
		if late > 100*time.Millisecond {
			t.Fatalf("%s: ended %v after its deadline", code, late)
		}
	}
	if got := resultJSON(t, runScript(t, r, h, "return 1 + 1", nil)); got != "2" {
		t.Fatalf("next run: %s", got)
	}
}

func TestRecursionAndMemoryLimits(t *testing.T) {
	h, r := newHost(t)
	res := runScript(t, r, h, "function f(n) { return f(n + 1) + 1; } return f(0);", nil)
	if res.OK || res.Error.Code != apierr.ResourceExhausted {
		t.Fatalf("recursion: %+v", res.Error)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				if h := script.HeapBytes(); h > peak {
					peak = h
				}
			}
		}
	}()
	budget := int64(64 << 20)
	res = r.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{
		Code:   "const a = []; for (;;) a.push(new Array(1e6).fill(1));",
		Limits: hostapi.RunLimits{MemoryBytes: budget, Timeout: 20 * time.Second},
	})
	close(stop)
	wg.Wait()
	if res.OK || res.Error.Code != apierr.ResourceExhausted {
		t.Fatalf("allocation bomb: %+v", res.Error)
	}
	if grew := int64(peak) - int64(before.HeapAlloc); grew > budget+48<<20 {
		t.Fatalf("heap grew %d MB for a %d MB budget", grew>>20, budget>>20)
	}
	if got := resultJSON(t, runScript(t, r, h, "return 'still alive'", nil)); got != `"still alive"` {
		t.Fatal(got)
	}
}

func TestOutputCaps(t *testing.T) {
	h, r := newHost(t)
	res := r.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{
		Code:   "for (let i = 0; i < 10000; i++) console.log('x'.repeat(100)); return 'x'.repeat(2000);",
		Limits: hostapi.RunLimits{LogBytes: 10_000, ResultBytes: 1000},
	})
	if res.OK || res.Error.Code != apierr.ResourceExhausted || !strings.Contains(res.Error.Message, "the limit is 1000 bytes") {
		t.Fatalf("result cap: %+v", res.Error)
	}
	// Each entry costs its message, its level and its JSON envelope:
	// 100 + 3 + 26 bytes, so 77 fit in 10,000, then one warning.
	if n := len(res.Logs); n != 78 || !strings.Contains(res.Logs[77].Message, "truncated") {
		t.Fatalf("log cap: %d entries", n)
	}
	logs, _ := json.Marshal(res.Logs[:77])
	if len(logs) > 10_000 {
		t.Fatalf("logs are %d bytes of JSON", len(logs))
	}
	// Empty lines count too: a flood of them stays within the budget.
	res = r.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{
		Code:   "for (let i = 0; i < 3000000; i++) console.log(''); return 'done';",
		Limits: hostapi.RunLimits{LogBytes: 1 << 20},
	})
	if !res.OK || len(res.Logs) != (1<<20)/29+1 {
		t.Fatalf("flood: %v, %d entries", res.Error, len(res.Logs))
	}
	if b, _ := json.Marshal(res); len(b) > 1<<20+4096 {
		t.Fatalf("flood result is %d bytes", len(b))
	}
}

func TestParallelScriptsAppendWithoutLoss(t *testing.T) {
	h, r := newHost(t)
	ws := h.Store.Workspace("default")
	if _, err := ws.Create(context.Background(), store.CreateOptions{Name: "log.txt"}, strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res := runScript(t, r, h, fmt.Sprintf(`for (let j = 0; j < 100; j++) await files.insertLines("log.txt", 0, "script %d line " + j); return 1;`, i), nil)
			if !res.OK {
				t.Error(res.Error)
			}
		}(i)
	}
	wg.Wait()
	res := runScript(t, r, h, `return await files.lineCount("log.txt")`, nil)
	if got := resultJSON(t, res); got != "800" {
		t.Fatalf("lines: %s", got)
	}
}

func TestSavedToolsAndNesting(t *testing.T) {
	h, r := newHost(t)
	res := runScript(t, r, h, `
		await tools.save({name: "double_it", description: "Doubles n", inputSchema: {type: "object", properties: {n: {type: "number"}}, required: ["n"]}, code: "return input.n * 2"});
		const v2 = await tools.save({name: "double_it", description: "Doubles n", inputSchema: {type: "object", properties: {n: {type: "number"}}, required: ["n"]}, code: "return {doubled: input.n * 2}"});
		const out = await tools.call("double_it", {n: 21});
		const listed = (await tools.list()).map(t => t.name);
		let bad; try { await tools.call("double_it", {n: "x"}); } catch (e) { bad = e.code; }
		let shadow; try { await tools.save({name: "file_list", description: "x", code: "return 1"}); } catch (e) { shadow = e.code; }
		const meta = await tools.call("file_list", {});
		return {version: v2.version, out, listed, bad, shadow, meta};`, nil)
	got := resultJSON(t, res)
	if !strings.Contains(got, `"version":2`) || !strings.Contains(got, `"out":{"doubled":42}`) || !strings.Contains(got, `"bad":"VALIDATION_FAILED"`) ||
		!strings.Contains(got, `"shadow":"VALIDATION_FAILED"`) || !strings.Contains(got, `"double_it"`) || !strings.Contains(got, `"workspace_overview"`) || !strings.Contains(got, `"meta":{"files":[]}`) {
		t.Fatalf("got %s", got)
	}
	// The saved tool is a meta-tool too.
	v, err := h.Registry.CallTool(context.Background(), h.Env("default", "s"), "double_it", map[string]any{"n": 5})
	if err != nil || normJSON(mustJSON(v)) != `{"doubled":10}` {
		t.Fatalf("meta-tool call: %v %v", v, err)
	}
	// Unbounded recursion through tools ends at the depth limit.
	res = runScript(t, r, h, `
		await tools.save({name: "recurse", description: "calls itself", code: "return await tools.call('recurse', {})"});
		return await tools.call("recurse", {});`, nil)
	if res.OK || res.Error.Code != apierr.ResourceExhausted {
		t.Fatalf("recursion: %+v", res.Error)
	}
	// Other workspaces do not see the tool.
	if _, err := h.Registry.CallTool(context.Background(), h.Env("other", "s"), "double_it", map[string]any{"n": 1}); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("cross-workspace tool: %v", err)
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestArtifactsFold(t *testing.T) {
	h, r := newHost(t)
	ws := h.Store.Workspace("default")
	ws.Create(context.Background(), store.CreateOptions{Name: "keep.txt"}, strings.NewReader("a\n"))
	ws.Create(context.Background(), store.CreateOptions{Name: "gone.txt"}, strings.NewReader("a\n"))
	res := runScript(t, r, h, `
		await files.create("tmp.txt", {content: "x"}); await files.writeText("tmp.txt", "y"); await files.delete("tmp.txt");
		await files.create("new.txt", {content: "x"}); await files.writeText("new.txt", "y");
		await files.writeText("keep.txt", "b\n");
		await files.writeText("gone.txt", "b\n"); await files.delete("gone.txt");`, nil)
	if !res.OK {
		t.Fatal(res.Error)
	}
	var got []string
	for _, a := range res.Files {
		got = append(got, a.Name+":"+a.Action)
	}
	if strings.Join(got, ",") != "new.txt:created,keep.txt:modified,gone.txt:deleted" {
		t.Fatalf("artifacts: %v", got)
	}
}

// BenchmarkFreshVM measures a run of `return 1` with the full bindings.
func BenchmarkFreshVM(b *testing.B) {
	h, r := newHost(b)
	env := h.Env("default", "bench")
	req := hostapi.RunRequest{Code: "return 1"}
	r.Run(context.Background(), env, req)
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := time.Now()
		res := r.Run(context.Background(), env, req)
		durs = append(durs, time.Since(t))
		if !res.OK {
			b.Fatal(res.Error)
		}
	}
	reportP50(b, durs)
}

// BenchmarkHostCallOverhead measures one files.lineCount round trip from JS
// on a file whose line index is cached.
func BenchmarkHostCallOverhead(b *testing.B) {
	h, r := newHost(b)
	env := h.Env("default", "bench")
	h.Store.Workspace("default").Create(context.Background(), store.CreateOptions{Name: "a.txt"}, strings.NewReader("a\nb\n"))
	const calls = 200
	code := fmt.Sprintf("let n = 0; for (let i = 0; i < %d; i++) n += await files.lineCount('a.txt'); return n;", calls)
	base := fmt.Sprintf("let n = 0; for (let i = 0; i < %d; i++) n += await Promise.resolve(2); return n;", calls)
	op := h.Registry.ByName("files.lineCount")
	b.ResetTimer()
	var script, loop, direct time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if res := r.Run(context.Background(), env, hostapi.RunRequest{Code: code}); !res.OK {
			b.Fatal(res.Error)
		}
		t1 := time.Now()
		r.Run(context.Background(), env, hostapi.RunRequest{Code: base})
		t2 := time.Now()
		for j := 0; j < calls; j++ {
			h.Registry.Invoke(context.Background(), env, op, map[string]any{"id": "a.txt"})
		}
		t3 := time.Now()
		script += t1.Sub(t0)
		loop += t2.Sub(t1)
		direct += t3.Sub(t2)
	}
	perCall := float64(script-loop-direct) / float64(b.N*calls) / 1000
	b.ReportMetric(perCall, "overhead-µs/call")
	b.ReportMetric(float64(direct)/float64(b.N*calls)/1000, "handler-µs/call")
}

func reportP50(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	sorted := append([]time.Duration(nil), durs...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && sorted[j] < sorted[j-1]; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	b.ReportMetric(float64(sorted[len(sorted)/2].Microseconds()), "p50-µs")
}

// BenchmarkNoopHostCall isolates the JS → host → JS round trip: a
// registered op whose handler does nothing, against a loop awaiting
// Promise.resolve.
func BenchmarkNoopHostCall(b *testing.B) {
	h, r := newHost(b)
	h.Registry.Add(hostapi.Op{Name: "files.noop", Params: []hostapi.Param{hostapi.Ref("")}, Result: 0,
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) { return 1, nil }})
	env := h.Env("default", "bench")
	const calls = 5000
	code := fmt.Sprintf("let n = 0; for (let i = 0; i < %d; i++) n += await files.noop('a.txt'); return n;", calls)
	base := fmt.Sprintf("let n = 0; for (let i = 0; i < %d; i++) n += await Promise.resolve(1); return n;", calls)
	var script, loop time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if res := r.Run(context.Background(), env, hostapi.RunRequest{Code: code}); !res.OK {
			b.Fatal(res.Error)
		}
		t1 := time.Now()
		r.Run(context.Background(), env, hostapi.RunRequest{Code: base})
		script += t1.Sub(t0)
		loop += time.Since(t1)
	}
	b.ReportMetric(float64(script-loop)/float64(b.N*calls)/1000, "overhead-µs/call")
}
