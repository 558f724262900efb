package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/runtime/worker"
)

func run(t testing.TB, h *hostapi.Host, code string, input any) *hostapi.RunResult {
	t.Helper()
	return h.Runner.Run(context.Background(), h.Env("default", "sess-1"), hostapi.RunRequest{Code: code, Input: input})
}

func resultJSON(t testing.TB, res *hostapi.RunResult) string {
	t.Helper()
	if !res.OK {
		t.Fatalf("run failed: %+v", res.Error)
	}
	return string(mustJSON(res.Result))
}

func wantError(t testing.TB, res *hostapi.RunResult, code apierr.Code, contains string) {
	t.Helper()
	if res.OK || res.Error == nil || res.Error.Code != code || !strings.Contains(res.Error.Message, contains) {
		t.Fatalf("want %s containing %q, got ok=%v %+v", code, contains, res.OK, res.Error)
	}
}

func TestScriptsRunInWorkers(t *testing.T) {
	h, _ := newPool(t, worker.Options{Size: 2})
	res := run(t, h, `
		console.log("hello", {a: 1}, [1, 2], null, undefined, 3.5);
		console.error(new Error("boom"));
		const a = await files.create("notes/a.txt", {content: "one\ntwo\nthree\n"});
		const [info, lines, text] = await Promise.all([files.info(a.id), files.lineCount("notes/a.txt"), files.readText(a.id, {startLine: 2, endLine: 3})]);
		return {input, session, id: a.id === info.id, keys: Object.keys(info).slice(0, 3), lines, text, mime: info.mimeType,
			noRequire: typeof require, noProcess: typeof process, noSetTimeout: typeof setTimeout};`, map[string]any{"x": 1})
	got := resultJSON(t, res)
	want := `{"input":{"x":1},"session":{"id":"sess-1"},"id":true,"keys":["id","name","size"],"lines":3,"text":{"content":"two\nthree\n","totalLines":3},"mime":"text/plain","noRequire":"undefined","noProcess":"undefined","noSetTimeout":"undefined"}`
	if got != want {
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

func TestErrorsAreCoded(t *testing.T) {
	h, _ := newPool(t, worker.Options{Size: 2})
	res := run(t, h, `
		const out = [];
		for (const f of [() => files.info("missing.txt"), () => files.readText(42), () => files.readText("x", {bogus: 1}), () => files.create("a", {content: "x"}).then(() => files.create("a"))]) {
			try { await f(); out.push("no error"); } catch (e) { out.push(e.code + ":" + (e instanceof Error)); }
		}
		return out;`, nil)
	if got := resultJSON(t, res); got != `["NOT_FOUND:true","VALIDATION_FAILED:true","VALIDATION_FAILED:true","ALREADY_EXISTS:true"]` {
		t.Fatalf("got %s", got)
	}
	wantError(t, run(t, h, `await files.info("nope");`, nil), apierr.NotFound, "nope")
	res = run(t, h, "const x = 1;\nnull.foo;", nil)
	wantError(t, res, apierr.ValidationFailed, "TypeError")
	if !strings.Contains(res.Error.Stack, "script.js:2") {
		t.Fatalf("stack: %q", res.Error.Stack)
	}
	wantError(t, run(t, h, "const a = 1;\nconst = ;", nil), apierr.ValidationFailed, "line 2 column 7")
	wantError(t, run(t, h, "await new Promise(() => {});", nil), apierr.ValidationFailed, "can never settle")
	wantError(t, run(t, h, "const a = {}; a.self = a; return a;", nil), apierr.ValidationFailed, `the result at "self": the value refers back to itself`)
	wantError(t, run(t, h, "return 10n", nil), apierr.ValidationFailed, "BigInt")
	wantError(t, run(t, h, "throw {code: 'QUOTA_EXCEEDED', message: 'custom'}", nil), apierr.QuotaExceeded, "custom")
	// Values a script passes are copied with checks, naming where it failed.
	wantError(t, run(t, h, "const a = {}; a.self = a; await files.create('x.txt', {content: a})", nil), apierr.ValidationFailed, `argument "content.self"`)
	wantError(t, run(t, h, "let a = [], c = a; for (let i = 0; i < 10000; i++) { c[0] = []; c = c[0] } await files.create('x.txt', {content: a})", nil),
		apierr.ValidationFailed, "nested more than 256 levels")
	wantError(t, run(t, h, "await files.create('x.txt', {content: {n: NaN}})", nil), apierr.ValidationFailed, `argument "content.n": NaN`)
	wantError(t, run(t, h, "await files.create('x.txt', {content: {f() {}}})", nil), apierr.ValidationFailed, `argument "content.f": a function`)
	// A host error thrown on keeps its own message.
	res = run(t, h, "await files.readText('missing.txt')", nil)
	if res.Error == nil || strings.HasPrefix(res.Error.Message, "Error:") || strings.Contains(res.Error.Stack, "github.com") {
		t.Fatalf("host error: %+v", res.Error)
	}
}

// The envelope is the host's: what a script redefines changes nothing.
func TestScriptCannotBreakTheEnvelope(t *testing.T) {
	h, _ := newPool(t, worker.Options{Size: 2})
	res := run(t, h, `JSON.stringify = () => "pwned"; JSON.parse = () => ({pwned: true}); Error = 5;
		Object.prototype.toJSON = function() { return "pwned" }; Array.prototype.toJSON = undefined;
		const v = await files.list(); console.log({a: 1});
		return {list: v, n: 1}`, nil)
	if res.OK {
		// toJSON on Object.prototype is the script's own business for its
		// own value, as JSON.stringify would honour it; the run result is
		// still a well-formed envelope.
		if string(mustJSON(res.Result)) != `"pwned"` {
			t.Fatalf("result: %s", mustJSON(res.Result))
		}
	}
	res = run(t, h, `JSON.stringify = () => "pwned"; Error = 5; try { await files.info("missing") } catch (e) { return [e.code, e.message.length > 0, typeof Error] }`, nil)
	if got := resultJSON(t, res); got != `["NOT_FOUND",true,"number"]` {
		t.Fatalf("errors after Error = 5: %s", got)
	}
	res = run(t, h, `Object.defineProperty(Object.prototype, "code", {get() { throw new Error("hostile") }}); throw new Error("x")`, nil)
	if res.OK || res.Error == nil || res.Error.Code != apierr.ValidationFailed {
		t.Fatalf("hostile getters: %+v", res.Error)
	}
}

// A script finds nothing of the host: no globals beyond the sandbox API,
// no constructors that reach out, and the process it runs in has no
// environment, no files, no network and no privileges.
func TestSandboxHoldsNothing(t *testing.T) {
	h, p := newPool(t, worker.Options{Size: 2})
	res := run(t, h, `
		const g = Function('return this')();
		const viaCtor = ({}).constructor.constructor('return this')();
		const reach = [];
		for (const expr of ["process", "require", "module", "globalThis.process", "fetch", "XMLHttpRequest", "Deno", "Bun", "setTimeout", "queueMicrotask", "WebAssembly", "import('fs')"]) {
			try { reach.push(expr + ":" + typeof eval(expr)); } catch (e) { reach.push(expr + ":" + e.name); }
		}
		const stubSource = String(files.list);
		return {same: g === viaCtor && g === globalThis, globals: Object.getOwnPropertyNames(g).filter(n => !/^[A-Z]/.test(n)).sort(),
			reach, native: stubSource.includes("[native code]")};`, nil)
	var got struct {
		Same    bool
		Globals []string
		Reach   []string
		Native  bool
	}
	json.Unmarshal([]byte(resultJSON(t, res)), &got)
	want := map[string]bool{"console": true, "files": true, "tools": true, "input": true, "session": true}
	for _, g := range got.Globals {
		// Lower-case globals are the standard functions (parseInt, eval…)
		// and the sandbox's own.
		if !want[g] && !strings.Contains(" decodeURI decodeURIComponent encodeURI encodeURIComponent escape eval globalThis isFinite isNaN parseFloat parseInt undefined unescape NaN Infinity ", " "+g+" ") {
			t.Errorf("unexpected global %q", g)
		}
	}
	for _, r := range got.Reach {
		if !strings.HasSuffix(r, ":undefined") && !strings.HasSuffix(r, ":ReferenceError") && !strings.HasSuffix(r, ":SyntaxError") {
			t.Errorf("reachable: %s", r)
		}
	}
	if !got.Same || !got.Native {
		t.Fatalf("got %+v", got)
	}
	// The worker process itself.
	pids := p.PIDs()
	if len(pids) == 0 {
		t.Fatal("no workers")
	}
	pid := pids[0]
	base := "/proc/" + strconv.Itoa(pid)
	if env, err := os.ReadFile(base + "/environ"); err != nil || len(env) != 0 {
		t.Errorf("environment: %q %v", env, err)
	}
	fds, _ := os.ReadDir(base + "/fd")
	for _, fd := range fds {
		target, _ := os.Readlink(base + "/fd/" + fd.Name())
		// The channel's pipes, the Go runtime's epoll and eventfd, and the
		// cgroup files the runtime reads its CPU quota from.
		if !strings.HasPrefix(target, "pipe:") && !strings.HasPrefix(target, "anon_inode:") && !strings.HasPrefix(target, "/sys/fs/cgroup/cpu") {
			t.Errorf("worker holds fd %s → %s", fd.Name(), target)
		}
	}
	if os.Geteuid() == 0 {
		root, _ := os.Readlink(base + "/root")
		if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 || root == "/" {
			t.Errorf("worker root %q has %d entries (%v)", root, len(entries), err)
		}
		status, _ := os.ReadFile(base + "/status")
		if !strings.Contains(string(status), "Uid:\t65534\t65534\t65534\t65534") || !strings.Contains(string(status), "NoNewPrivs:\t1") {
			t.Errorf("worker credentials:\n%s", status)
		}
		mine, _ := os.Readlink("/proc/self/ns/net")
		theirs, _ := os.Readlink(base + "/ns/net")
		if mine == theirs || theirs == "" {
			t.Errorf("worker shares the network namespace %s", mine)
		}
	}
	cwd, _ := os.Readlink(base + "/cwd")
	if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
		t.Errorf("worker directory %s is not empty", cwd)
	}
}

func TestOutputCaps(t *testing.T) {
	h, _ := newPool(t, worker.Options{Size: 2})
	res := h.Runner.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{
		Code:   "for (let i = 0; i < 10000; i++) console.log('x'.repeat(100)); return 'x'.repeat(2000);",
		Limits: hostapi.RunLimits{LogBytes: 10_000, ResultBytes: 1000},
	})
	wantError(t, res, apierr.ResourceExhausted, "the limit is 1000 bytes")
	if n := len(res.Logs); n != 78 || !strings.Contains(res.Logs[77].Message, "truncated") {
		t.Fatalf("log cap: %d entries", n)
	}
	res = h.Runner.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{
		Code: "for (let i = 0; i < 3000000; i++) console.log(''); return 'done';",
	})
	if !res.OK || len(res.Logs) != (1<<20)/29+1 {
		t.Fatalf("flood: %v, %d entries", res.Error, len(res.Logs))
	}
	if b, _ := json.Marshal(res); len(b) > 1<<20+4096 {
		t.Fatalf("flood result is %d bytes", len(b))
	}
}

func TestSavedToolsNestAndStopAtTheDepthLimit(t *testing.T) {
	h, _ := newPool(t, worker.Options{Size: 2})
	res := run(t, h, `
		await tools.save({name: "double_it", description: "Doubles n", inputSchema: {type: "object", properties: {n: {type: "number"}}, required: ["n"]}, code: "return {doubled: input.n * 2}"});
		const out = await tools.call("double_it", {n: 21});
		const many = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(n => tools.call("double_it", {n})));
		let bad; try { await tools.call("double_it", {n: "x"}); } catch (e) { bad = e.code; }
		return {out, many: many.map(m => m.doubled), bad};`, nil)
	if got := resultJSON(t, res); got != `{"out":{"doubled":42},"many":[2,4,6,8,10,12,14,16,18,20],"bad":"VALIDATION_FAILED"}` {
		t.Fatalf("got %s", got)
	}
	v, err := h.Registry.CallTool(context.Background(), h.Env("default", "s"), "double_it", map[string]any{"n": 5})
	if err != nil || string(mustJSON(v)) != `{"doubled":10}` {
		t.Fatalf("meta-tool call: %s %v", mustJSON(v), err)
	}
	res = run(t, h, `
		await tools.save({name: "recurse", description: "calls itself", code: "return await tools.call('recurse', {})"});
		return await tools.call("recurse", {});`, nil)
	wantError(t, res, apierr.ResourceExhausted, "nested")
}

// A fan-out of saved tools, each calling several more, ends at the top
// run's deadline: nested runs see it and end with it.
func TestToolFanOutEndsAtTheDeadline(t *testing.T) {
	h, p := newPool(t, worker.Options{Size: 2, MaxNested: 4, IdleTimeout: 50 * time.Millisecond})
	res := run(t, h, `await tools.save({name: "fan", description: "fans out", code: "await Promise.all([1,2,3,4,5,6,7,8].map(() => tools.call('fan', {}))); return 1"}); return 1`, nil)
	resultJSON(t, res)
	start := time.Now()
	res = h.Runner.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{Code: `return await tools.call("fan", {})`, Limits: hostapi.RunLimits{Timeout: 1500 * time.Millisecond}})
	took := time.Since(start)
	if res.OK || res.Error.Code != apierr.Timeout {
		t.Fatalf("fan-out: %+v", res.Error)
	}
	if took > 1500*time.Millisecond+100*time.Millisecond {
		t.Fatalf("fan-out ended %v after its deadline", took-1500*time.Millisecond)
	}
	waitForWorkers(t, p, p.Size())
}

// When a run ends, its host calls have ended: a timed-out script that kept
// creating files reports exactly the files that exist, and none appear
// afterwards.
func TestHostCallsEndWithTheRun(t *testing.T) {
	h, _ := newPool(t, worker.Options{Size: 2})
	res := h.Runner.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{
		Code:   `let i = 0; for (;;) { const batch = []; for (let j = 0; j < 16; j++) batch.push(files.create("spam/" + (i++) + ".txt", {content: "x"})); await Promise.all(batch); }`,
		Limits: hostapi.RunLimits{Timeout: 700 * time.Millisecond},
	})
	wantError(t, res, apierr.Timeout, "time limit")
	ws := h.Store.Workspace("default")
	count := func() int {
		list, err := ws.List(context.Background(), "spam/**")
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	n := count()
	if n == 0 || len(res.Files) != n {
		t.Fatalf("run reports %d files, %d exist", len(res.Files), n)
	}
	// Another run's round trip later, nothing has been added.
	resultJSON(t, run(t, h, "return (await files.list('spam/**')).length", nil))
	if m := count(); m != n {
		t.Fatalf("%d files appeared after the run ended", m-n)
	}
}

// Runs do not share a memory budget: four runs that each allocate more
// than half of theirs (together more than twice one budget) succeed
// together, while a run that goes over its own budget alone fails.
func TestParallelRunsHaveTheirOwnBudgets(t *testing.T) {
	h, _ := newPool(t, worker.Options{Size: 4})
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			code := `const a = []; for (let i = 0; i < 100000; i++) a.push({i, s: "row " + i}); return a.length`
			if i == 0 {
				code = `return (await files.list()).length`
			}
			res := h.Runner.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{Code: code,
				Limits: hostapi.RunLimits{MemoryBytes: 96 << 20, Timeout: 60 * time.Second}})
			if !res.OK {
				errs <- fmt.Sprintf("run %d: %+v", i, res.Error)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	res := h.Runner.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{
		Code:   `const a = []; for (let i = 0; i < 400000; i++) a.push({i, s: "row " + i}); return a.length`,
		Limits: hostapi.RunLimits{MemoryBytes: 96 << 20, Timeout: 60 * time.Second}})
	wantError(t, res, apierr.ResourceExhausted, "96 MB memory budget")
}

// A worker killed from outside ends its run with a coded error; the pool
// replaces it and the next runs succeed.
func TestKilledWorkerIsReplaced(t *testing.T) {
	h, p := newPool(t, worker.Options{Size: 2})
	started := make(chan struct{})
	h.Registry.Add(hostapi.Op{Name: "files.testSignal", Result: true, Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
		close(started)
		return true, nil
	}})
	done := make(chan *hostapi.RunResult, 1)
	go func() {
		done <- h.Runner.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{Code: `await files.testSignal(); for (;;) {}`,
			Limits: hostapi.RunLimits{Timeout: 20 * time.Second}})
	}()
	<-started
	before := p.PIDs()
	// The busy worker is the one not idle: kill every worker; the idle
	// one is replaced too.
	for _, pid := range before {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	res := <-done
	wantError(t, res, apierr.Internal, "killed")
	waitForWorkers(t, p, p.Size())
	resultJSON(t, run(t, h, "return 1", nil))
	for _, pid := range p.PIDs() {
		for _, old := range before {
			if pid == old {
				t.Fatalf("worker %d survived", pid)
			}
		}
	}
	if st := p.Stats(); st.Crashed < 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// Cancelling the caller's context ends the run at once, also when the VM is
// stuck in a native built-in.
func TestCancelledRunEndsPromptly(t *testing.T) {
	h, p := newPool(t, worker.Options{Size: 2})
	for _, code := range []string{`for (;;) {}`, `return /^(a+)+(?!x)$/.test('a'.repeat(34) + 'b')`} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *hostapi.RunResult, 1)
		go func() {
			done <- h.Runner.Run(ctx, h.Env("default", "s"), hostapi.RunRequest{Code: code, Limits: hostapi.RunLimits{Timeout: 30 * time.Second}})
		}()
		// Let the script get going: wait until no worker is idle.
		waitFor(t, func() bool { return p.Stats().Idle < p.Stats().Workers })
		start := time.Now()
		cancel()
		res := <-done
		if took := time.Since(start); took > 150*time.Millisecond {
			t.Fatalf("%s: cancelled run took %v to end", code, took)
		}
		wantError(t, res, apierr.Timeout, "cancelled")
	}
	waitForWorkers(t, p, p.Size())
}

// The pool grows for concurrent runs, up to Max, and idle workers beyond
// Size retire.
func TestPoolGrowsAndShrinks(t *testing.T) {
	h, p := newPool(t, worker.Options{Size: 2, Max: 5, IdleTimeout: 100 * time.Millisecond})
	release := make(chan struct{})
	var entered sync.WaitGroup
	h.Registry.Add(hostapi.Op{Name: "files.testHold", Result: true, Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
		entered.Done()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return true, nil
	}})
	var wg sync.WaitGroup
	entered.Add(5)
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resultJSON(t, run(t, h, `return await files.testHold()`, nil))
		}()
	}
	entered.Wait()
	if st := p.Stats(); st.Busy != 5 || st.Idle != 0 || st.Workers != 5 {
		t.Fatalf("while 5 run: %+v", st)
	}
	// A sixth run waits for a worker and gets BUSY at its deadline.
	res := h.Runner.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{Code: "return 1", Limits: hostapi.RunLimits{Timeout: 300 * time.Millisecond}})
	wantError(t, res, apierr.Busy, "no sandbox worker became free")
	close(release)
	wg.Wait()
	waitForWorkers(t, p, 2)
}

// waitForWorkers waits until exactly n worker processes are alive, counted
// in /proc (children of this process running the worker), and the pool
// agrees.
func waitForWorkers(t testing.TB, p *worker.Pool, n int) {
	t.Helper()
	waitFor(t, func() bool { return workerProcesses() == n && p.Stats().Workers == n && p.Stats().Idle == n },
		func() string { return fmt.Sprintf("%d processes, stats %+v", workerProcesses(), p.Stats()) })
}

// workerProcesses counts live child processes of this process started in
// worker mode.
func workerProcesses() int {
	n := 0
	self := strconv.Itoa(os.Getpid())
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 2 || f[1] != self || f[0] == "Z" {
			continue
		}
		cmd, _ := os.ReadFile(d + "/cmdline")
		if strings.Contains(string(cmd), "__worker") {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds, for up to 20 s; describe, if given,
// says what was seen instead.
func waitFor(t testing.TB, cond func() bool, describe ...func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			msg := "condition not reached within 20 s"
			for _, d := range describe {
				msg += ": " + d()
			}
			t.Fatal(msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var _ = store.CreateOptions{}

// Runs beyond Running wait for a running one to finish, but never behind
// long ones: a run that finishes nothing for gateDelay lets the next run
// beside it, and a run waiting in a slow host call holds no slot.
func TestRunningGateNeverBlocksBehindLongRuns(t *testing.T) {
	h, p := newPool(t, worker.Options{Size: 3, Running: 1})
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h.Registry.Add(hostapi.Op{Name: "files.testHold", Result: true, Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return true, nil
	}})
	env := h.Env("default", "s")
	// A run waiting in the host: the next run starts at once.
	held := make(chan *hostapi.RunResult, 1)
	go func() {
		held <- h.Runner.Run(context.Background(), env, hostapi.RunRequest{Code: `return await files.testHold()`})
	}()
	<-entered
	waitFor(t, func() bool { return p.Stats().Busy == 1 })
	if res := run(t, h, `return 2`, nil); string(resultJSON(t, res)) != "2" {
		t.Fatalf("beside a held run: %s", resultJSON(t, res))
	}
	// A run spinning on the CPU until its deadline: a short run does not
	// wait for it.
	spin := make(chan *hostapi.RunResult, 1)
	go func() {
		spin <- h.Runner.Run(context.Background(), env, hostapi.RunRequest{Code: `for (;;) {}`, Limits: hostapi.RunLimits{Timeout: 20 * time.Second}})
	}()
	waitFor(t, func() bool { return p.Stats().Busy == 2 })
	if res := run(t, h, `return 3`, nil); string(resultJSON(t, res)) != "3" {
		t.Fatalf("beside a spinning run: %s", resultJSON(t, res))
	}
	select {
	case res := <-spin:
		t.Fatalf("the spinning run ended first: %+v", res)
	default:
	}
	close(release)
	if res := <-held; string(resultJSON(t, res)) != "true" {
		t.Fatalf("held run: %s", resultJSON(t, res))
	}
}

// Slow host calls of one run proceed in parallel: four calls that each
// wait for all four to have started finish only if the host runs them at
// once (the reader hands the channel over when a call takes long).
func TestSlowHostCallsRunInParallel(t *testing.T) {
	h, _ := newPool(t, worker.Options{Size: 2})
	var mu sync.Mutex
	entered := 0
	all := make(chan struct{})
	h.Registry.Add(hostapi.Op{Name: "files.testBarrier", Result: 0, Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
		mu.Lock()
		if entered++; entered == 4 {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return 1, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})
	res := h.Runner.Run(context.Background(), h.Env("default", "s"), hostapi.RunRequest{
		Code:   `const r = await Promise.all([1, 2, 3, 4].map(() => files.testBarrier())); return r.reduce((a, b) => a + b)`,
		Limits: hostapi.RunLimits{Timeout: 20 * time.Second}})
	if got := resultJSON(t, res); got != "4" {
		t.Fatalf("four parallel calls: %s", got)
	}
}
