package wasm_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	"github.com/metaclaw/metaclaw/hostapi/pdf"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/runtime/wasm"
	. "github.com/metaclaw/metaclaw/runtime/wasm/wasmtest"
)

// resultJSON is a successful run's result as compact JSON.
func resultJSON(t testing.TB, res *hostapi.RunResult) string {
	t.Helper()
	if !res.OK {
		t.Fatalf("run failed: %+v", res.Error)
	}
	b, err := json.Marshal(res.Result)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// decode reads a successful run's JSON result into v.
func decode(t testing.TB, res *hostapi.RunResult, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(resultJSON(t, res)), v); err != nil {
		t.Fatal(err)
	}
}

// hostStillRuns proves the runner serves other runs after a bad one.
func hostStillRuns(t *testing.T, env *hostapi.Env) {
	t.Helper()
	if got := resultJSON(t, runMod(t, env, tinyModule(), nil, hostapi.RunLimits{})); got != tinyResult {
		t.Fatalf("tiny module after a failure: %s", got)
	}
}

func TestTinyModule(t *testing.T) {
	env := testEnv(t)
	res := runMod(t, env, tinyModule(), map[string]any{"ignored": true}, hostapi.RunLimits{})
	if got := resultJSON(t, res); got != tinyResult {
		t.Fatalf("result %s, want %s", got, tinyResult)
	}
	if len(res.Logs) != 0 || len(res.Files) != 0 || res.Error != nil {
		t.Fatalf("logs %v, files %v, error %v; want none", res.Logs, res.Files, res.Error)
	}
	if res.DurationMs <= 0 {
		t.Fatalf("duration %v", res.DurationMs)
	}
	// The run result marshals as SPEC 5 says.
	b, _ := json.Marshal(res)
	var shape map[string]any
	json.Unmarshal(b, &shape)
	for _, k := range []string{"ok", "result", "logs", "files", "durationMs"} {
		if _, ok := shape[k]; !ok {
			t.Fatalf("run result %s lacks %q", b, k)
		}
	}
}

func TestBadModules(t *testing.T) {
	env := testEnv(t)
	tiny := tinyModule()
	cases := []struct {
		name  string
		bin   []byte
		code  string
		parts []string
	}{
		{"text", []byte("hello, this is not wasm"), "UNSUPPORTED_FORMAT", []string{"not a WebAssembly module", "GOOS=wasip1"}},
		{"wat", []byte("(module (func $f))"), "UNSUPPORTED_FORMAT", []string{"WebAssembly text"}},
		{"magic only", []byte("\x00asm"), "UNSUPPORTED_FORMAT", []string{"not a WebAssembly module"}},
		{"truncated", tiny[:len(tiny)-7], "FILE_READ_FAILED", []string{"truncated or damaged"}},
		{"garbage after header", append([]byte("\x00asm\x01\x00\x00\x00"), 0xff, 0xff, 0xff), "FILE_READ_FAILED", []string{"could not be read as WebAssembly"}},
		{"component", []byte("\x00asm\x0d\x00\x01\x00\x01\x02\x03"), "UNSUPPORTED_FORMAT", []string{"component"}},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), "UNSUPPORTED_FORMAT", []string{"version 2"}},
		{"unknown import", importModule("env", "launch_missiles"), "UNSUPPORTED_FORMAT", []string{"env.launch_missiles", "emscripten"}},
		{"GOOS=js import", importModule("gojs", "runtime.wasmExit"), "UNSUPPORTED_FORMAT", []string{"GOOS=js", "GOOS=wasip1"}},
		{"unknown metaclaw function", importModule("metaclaw", "format_disk"), "UNSUPPORTED_FORMAT", []string{"metaclaw.format_disk", "call, take, log"}},
		{"old WASI", importModule("wasi_unstable", "fd_write"), "UNSUPPORTED_FORMAT", []string{"snapshot 0"}},
		{"no _start", Module{Funcs: []Func{{}}, Exports: map[string]uint32{"run": 0}}.Bytes(), "UNSUPPORTED_FORMAT", []string{"no _start"}},
		{"_start with results", Module{Funcs: []Func{{Results: []byte{I32}, Body: I32Const(1)}}, Exports: map[string]uint32{"_start": 0}}.Bytes(), "UNSUPPORTED_FORMAT", []string{"returns 1"}},
		// 20000 pages (1.25 GB) is over the pages every module is
		// compiled under (the host maximum, 1 GB): it does not compile.
		{"memory minimum over the cap", memoryModule(20000, nil), "RESOURCE_EXHAUSTED", []string{"more memory than runs here may use", "over limit"}},
		// 5000 pages (312.5 MB) compiles but is over the run's 256 MB.
		{"memory minimum over the run's limit", memoryModule(5000, nil), "RESOURCE_EXHAUSTED", []string{"starts with 312.5 MB", "256 MB"}},
		{"empty", []byte{}, "VALIDATION_FAILED", []string{"no module"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := runMod(t, env, c.bin, nil, hostapi.RunLimits{})
			wantError(t, res, c.code, c.parts...)
			hostStillRuns(t, env)
		})
	}
}

func TestInfiniteLoopTimesOut(t *testing.T) {
	env := testEnv(t)
	start := time.Now()
	res := runMod(t, env, loopModule(), nil, hostapi.RunLimits{Timeout: 200 * time.Millisecond})
	wantError(t, res, "TIMEOUT", "200ms time limit")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the loop ran %v past a 200 ms limit", d)
	}
	hostStillRuns(t, env)
}

func TestGoSpinTimesOut(t *testing.T) {
	env := testEnv(t)
	res := runMod(t, env, probe(t), map[string]any{"mode": "spin"}, hostapi.RunLimits{Timeout: 300 * time.Millisecond})
	wantError(t, res, "TIMEOUT", "time limit")
	hostStillRuns(t, env)
}

func TestSleep(t *testing.T) {
	env := testEnv(t)
	res := runMod(t, env, probe(t), map[string]any{"mode": "sleep", "n": 20}, hostapi.RunLimits{})
	if got := resultJSON(t, res); got != `"slept"` {
		t.Fatalf("result %s", got)
	}
	// A long sleep ends with the run's deadline, not the sleep's.
	start := time.Now()
	res = runMod(t, env, probe(t), map[string]any{"mode": "sleep", "n": 600_000}, hostapi.RunLimits{Timeout: 300 * time.Millisecond})
	wantError(t, res, "TIMEOUT")
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("a sleeping module held its run for %v", d)
	}
}

func TestMemoryGrowthStopsAtTheLimit(t *testing.T) {
	env := testEnv(t)
	res := runMod(t, env, growModule(), nil, hostapi.RunLimits{MemoryBytes: 8 << 20})
	wantError(t, res, "RESOURCE_EXHAUSTED", "ran out of memory", "8 MB")
	res = runMod(t, env, probe(t), map[string]any{"mode": "alloc", "n": 400}, hostapi.RunLimits{})
	wantError(t, res, "RESOURCE_EXHAUSTED", "ran out of memory", "256 MB")
	// Within the limit the same program succeeds.
	if got := resultJSON(t, runMod(t, env, probe(t), map[string]any{"mode": "alloc", "n": 20}, hostapi.RunLimits{})); got != "20" {
		t.Fatalf("20 MB allocation: %s", got)
	}
	hostStillRuns(t, env)
}

// TestCompiledMemoryCap proves the cap set when modules are compiled: a
// host whose largest run memory is 4 MB compiles every module under 64
// pages, so a module declaring more does not compile, and a module that
// grows stops at 4 MB even when its run asks for more.
func TestCompiledMemoryCap(t *testing.T) {
	lim, maxLim := hostapi.DefaultLimits(), hostapi.DefaultMaxLimits()
	lim.MemoryBytes, maxLim.MemoryBytes = 4<<20, 4<<20
	h := hosttest.New(t, hostapi.Config{Limits: lim, MaxLimits: maxLim})
	r, err := wasm.New(h, wasm.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if r.MemoryLimitPages() != 64 {
		t.Fatalf("modules compile under %d pages, want 64", r.MemoryLimitPages())
	}
	env := h.Env("default", "s")
	res := r.Run(context.Background(), env, wasm.Request{Module: memoryModule(65, nil)})
	wantError(t, res, "RESOURCE_EXHAUSTED", "over limit of 64 pages")
	// A declared maximum over the cap is lowered to the cap (wazero's
	// rule): the module runs, and its memory still stops at 4 MB.
	if got := resultJSON(t, r.Run(context.Background(), env, wasm.Request{Module: memoryModule(1, Pages(65))})); got != "null" {
		t.Fatalf("a module declaring 65 pages at most: %s", got)
	}
	for _, bin := range [][]byte{growModule(), growModuleMax(Pages(1 << 16))} {
		res = r.Run(context.Background(), env, wasm.Request{Module: bin, Limits: hostapi.RunLimits{MemoryBytes: 1 << 30}})
		wantError(t, res, "RESOURCE_EXHAUSTED", "ran out of memory", "4 MB")
	}
	res = r.Run(context.Background(), env, wasm.Request{Module: tinyModule()})
	if got := resultJSON(t, res); got != tinyResult {
		t.Fatalf("tiny module: %s", got)
	}
}

func TestStdoutFlood(t *testing.T) {
	env := testEnv(t)
	start := time.Now()
	res := runMod(t, env, stdoutFloodModule(), nil, hostapi.RunLimits{Timeout: time.Minute})
	wantError(t, res, "RESOURCE_EXHAUSTED", "more than 10 MB to stdout")
	// 1 GB from a Go program: stopped at the limit, long before a GB.
	res = runMod(t, env, probe(t), map[string]any{"mode": "stdout", "n": 1024}, hostapi.RunLimits{Timeout: time.Minute})
	wantError(t, res, "RESOURCE_EXHAUSTED", "more than 10 MB to stdout")
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("stdout floods took %v", d)
	}
	// A smaller result limit holds too.
	res = runMod(t, env, probe(t), map[string]any{"mode": "stdout", "n": 2}, hostapi.RunLimits{ResultBytes: 1 << 20})
	wantError(t, res, "RESOURCE_EXHAUSTED", "more than 1 MB to stdout")
	hostStillRuns(t, env)
}

func TestHostCallFloodTimesOut(t *testing.T) {
	env := testEnv(t)
	res := runMod(t, env, callFloodModule(), nil, hostapi.RunLimits{Timeout: 300 * time.Millisecond})
	wantError(t, res, "TIMEOUT", "time limit")
	hostStillRuns(t, env)
}

func TestABIPointersOutOfBounds(t *testing.T) {
	env := testEnv(t)
	name := []Segment{{Offset: 0, Bytes: []byte("file_list")}, {Offset: 16, Bytes: []byte("{}")}}
	cases := []struct {
		name  string
		bin   []byte
		parts []string
	}{
		{"name", callModule(true, name, 65530, 9, 16, 2, 100, 100), []string{"metaclaw.call", "the operation name", "[65530, 65539)", "65536 bytes"}},
		{"args", callModule(true, name, 0, 9, -16, 100, 100, 100), []string{"the arguments", "outside"}},
		{"output", callModule(true, name, 0, 9, 16, 2, 65000, 4096), []string{"the output buffer", "outside"}},
		{"huge length", callModule(true, name, 0, -1, 16, 2, 100, 100), []string{"the operation name", "outside"}},
		{"no memory", callModule(false, nil, 0, 9, 16, 2, 100, 100), []string{"no memory"}},
		{"log", Module{Imports: []Import{hostLog}, Funcs: []Func{{Body: Cat(I32Const(2), I32Const(65535), I32Const(2), Call(0))}},
			Exports: map[string]uint32{"_start": 1}, Memory: Pages(1)}.Bytes(), []string{"metaclaw.log", "the message", "outside"}},
		{"take", Module{Imports: []Import{hostTake}, Funcs: []Func{{Body: Cat(I32Const(70000), I32Const(8), Call(0), []byte{OpDrop})}},
			Exports: map[string]uint32{"_start": 1}, Memory: Pages(1)}.Bytes(), []string{"metaclaw.take", "the output buffer", "outside"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := runMod(t, env, c.bin, nil, hostapi.RunLimits{})
			wantError(t, res, "VALIDATION_FAILED", c.parts...)
			hostStillRuns(t, env)
		})
	}
}

// TestABIOperationNotCalledOnBadPointer: a call whose output buffer is out
// of bounds stops the module before the operation runs.
func TestABIOperationNotCalledOnBadPointer(t *testing.T) {
	env := testEnv(t)
	op := "file_write_text"
	args := `{"id":"never.txt","content":"x"}`
	bin := callModule(true, []Segment{{Offset: 0, Bytes: []byte(op)}, {Offset: 64, Bytes: []byte(args)}}, 0, int32(len(op)), 64, int32(len(args)), 65530, 100)
	res := runMod(t, env, bin, nil, hostapi.RunLimits{})
	wantError(t, res, "VALIDATION_FAILED", "the output buffer")
	if _, err := env.WS.Resolve(context.Background(), "never.txt"); !strings.Contains(fmt.Sprint(err), "NOT_FOUND") {
		t.Fatalf("the operation ran anyway: %v", err)
	}
	if len(res.Files) != 0 {
		t.Fatalf("files %v", res.Files)
	}
}

// TestABITake: a response bigger than the guest's buffer comes back whole
// through take, with no SDK involved.
func TestABITake(t *testing.T) {
	env := testEnv(t)
	long := strings.Repeat("0123456789", 30)
	hosttest.Upload(t, env.WS, "long.txt", []byte(long+"\n"), false)
	res := runMod(t, env, callEchoModule("file_read_text", `{"id":"long.txt"}`), nil, hostapi.RunLimits{})
	var got struct {
		Content    string `json:"content"`
		TotalLines int    `json:"total_lines"`
	}
	decode(t, res, &got)
	if got.Content != long+"\n" || got.TotalLines != 1 {
		t.Fatalf("read back %+v", got)
	}
	// A short response fits the 64-byte buffer at once.
	res = runMod(t, env, callEchoModule("files.lineCount", `{"id":"long.txt"}`), nil, hostapi.RunLimits{})
	if got := resultJSON(t, res); got != "1" {
		t.Fatalf("lineCount through the JS name: %s", got)
	}
	// An error comes back as {code, message}.
	res = runMod(t, env, callEchoModule("file_read_text", `{"id":"missing.txt"}`), nil, hostapi.RunLimits{})
	var e struct{ Code, Message string }
	decode(t, res, &e)
	if e.Code != "NOT_FOUND" || !strings.Contains(e.Message, "missing.txt") {
		t.Fatalf("error %+v", e)
	}
}

func TestABIInvalidArguments(t *testing.T) {
	env := testEnv(t)
	bin := probe(t)
	cases := []struct {
		op, raw, code, part string
	}{
		{"file_list", "{not json", "VALIDATION_FAILED", "not valid JSON"},
		{"file_list", "[1,2]", "VALIDATION_FAILED", "must be a JSON object"},
		{"file_list", `{"pattern": 5}`, "VALIDATION_FAILED", `argument "pattern"`},
		{"file_read_text", `{}`, "VALIDATION_FAILED", "missing required argument"},
		{"file_read_text", `{"id":"x","start_line":1e400}`, "VALIDATION_FAILED", ""},
		{"no_such_tool", `{}`, "NOT_FOUND", "no tool named"},
		{"files.noSuchMethod", `{}`, "NOT_FOUND", ""},
		{"", `{}`, "NOT_FOUND", "no operation named"},
	}
	for _, c := range cases {
		res := runMod(t, env, bin, map[string]any{"mode": "raw", "op": c.op, "raw": c.raw}, hostapi.RunLimits{})
		var got struct {
			Result json.RawMessage
			Error  *struct{ Code, Message string }
		}
		decode(t, res, &got)
		if got.Error == nil || got.Error.Code != c.code || !strings.Contains(got.Error.Message, c.part) {
			t.Fatalf("%s %s: got %+v %s; want %s mentioning %q", c.op, c.raw, got.Error, got.Result, c.code, c.part)
		}
	}
}

func TestTypedHelpers(t *testing.T) {
	env := testEnv(t)
	res := runMod(t, env, probe(t), map[string]any{"mode": "typed", "id": "notes/typed.txt"}, hostapi.RunLimits{})
	var got struct {
		Text  string `json:"text"`
		Total int    `json:"total"`
		Hits  []struct {
			Line    int    `json:"line"`
			Content string `json:"content"`
		} `json:"hits"`
		Count       int    `json:"count"`
		Listed      int    `json:"listed"`
		Size        int    `json:"size"`
		Mime        string `json:"mime"`
		MissingCode string `json:"missing_code"`
		MissingIs   bool   `json:"missing_is"`
	}
	decode(t, res, &got)
	if got.Text != "alpha\ninserted\nbeta\ngamma\n" || got.Total != 4 || got.Count != 4 || got.Listed != 1 || got.Size != len(got.Text) {
		t.Fatalf("typed helpers read %+v", got)
	}
	if len(got.Hits) != 2 || got.Hits[0].Line != 1 || got.Hits[0].Content != "alpha" || got.Hits[1].Line != 4 || got.Hits[1].Content != "gamma" {
		t.Fatalf("search hits %+v", got.Hits)
	}
	if !strings.HasPrefix(got.Mime, "text/plain") || got.MissingCode != "NOT_FOUND" || !got.MissingIs {
		t.Fatalf("mime %q, missing %q %v", got.Mime, got.MissingCode, got.MissingIs)
	}
	// The run reports the file it created, once, as created.
	if len(res.Files) != 1 || res.Files[0].Name != "notes/typed.txt" || res.Files[0].Action != "created" {
		t.Fatalf("files %+v", res.Files)
	}
	body, err := env.WS.Open(context.Background(), "notes/typed.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	if body.Meta.SourceSessionID != env.Session {
		t.Fatalf("the file's session is %q, want %q", body.Meta.SourceSessionID, env.Session)
	}
}

func TestArtifactsReachTheParent(t *testing.T) {
	env := testEnv(t)
	var mu sync.Mutex
	var seen []string
	parent := *env
	parent.Record = func(f store.File, action string) {
		mu.Lock()
		seen = append(seen, action+" "+f.Name)
		mu.Unlock()
	}
	res := runMod(t, &parent, probe(t), map[string]any{"mode": "typed", "id": "p.txt"}, hostapi.RunLimits{})
	if !res.OK {
		t.Fatal(res.Error)
	}
	if len(seen) < 2 || seen[0] != "created p.txt" || seen[1] != "modified p.txt" {
		t.Fatalf("the parent saw %v", seen)
	}
}

func TestLogs(t *testing.T) {
	env := testEnv(t)
	res := runMod(t, env, probe(t), map[string]any{"mode": "log"}, hostapi.RunLimits{})
	if got := resultJSON(t, res); got != `"logged"` {
		t.Fatalf("result %s", got)
	}
	want := []hostapi.LogEntry{
		{Level: "info", Message: "info entry"}, {Level: "warn", Message: "warn entry"}, {Level: "error", Message: "error entry"},
		{Level: "debug", Message: "debug entry"}, {Level: "log", Message: "formatted 42"},
		{Level: "log", Message: "stderr line one"}, {Level: "log", Message: "stderr line two"}, {Level: "log", Message: "stderr without newline"},
	}
	if fmt.Sprint(res.Logs) != fmt.Sprint(want) {
		t.Fatalf("logs\n%v\nwant\n%v", res.Logs, want)
	}
	// A level the ABI does not know is "log".
	res = runMod(t, env, logModule(99, "odd level", 0), nil, hostapi.RunLimits{})
	if !res.OK || len(res.Logs) != 1 || res.Logs[0] != (hostapi.LogEntry{Level: "log", Message: "odd level"}) {
		t.Fatalf("odd level: %+v %+v", res.Logs, res.Error)
	}
}

func TestLogLimit(t *testing.T) {
	env := testEnv(t)
	res := runMod(t, env, probe(t), map[string]any{"mode": "spam", "n": 3}, hostapi.RunLimits{LogBytes: 64 << 10})
	if got := resultJSON(t, res); got != `"spammed"` {
		t.Fatalf("result %s", got)
	}
	last := res.Logs[len(res.Logs)-1]
	if last.Level != "warn" || !strings.Contains(last.Message, "truncated") || !strings.Contains(last.Message, "64 KB") {
		t.Fatalf("last log %+v", last)
	}
	total := 0
	for _, l := range res.Logs[:len(res.Logs)-1] {
		total += len(l.Message)
		if l.Message != strings.Repeat("y", 1023) {
			t.Fatalf("log line %q", l.Message)
		}
	}
	if total > 64<<10 || total < 60<<10 {
		t.Fatalf("%d bytes of logs kept under a 64 KB limit", total)
	}
}

func TestFailures(t *testing.T) {
	env := testEnv(t)
	bin := probe(t)
	res := runMod(t, env, bin, map[string]any{"mode": "panic"}, hostapi.RunLimits{})
	wantError(t, res, "VALIDATION_FAILED", "exited with status 2", "panic: boom from the probe")
	if !strings.Contains(res.Error.Stack, "goroutine 1") {
		t.Fatalf("stack %q", res.Error.Stack)
	}
	res = runMod(t, env, bin, map[string]any{"mode": "exit", "n": 3}, hostapi.RunLimits{})
	wantError(t, res, "VALIDATION_FAILED", "exited with status 3: about to exit")
	res = runMod(t, env, exitModule(7), nil, hostapi.RunLimits{})
	wantError(t, res, "VALIDATION_FAILED", "exited with status 7")
	if got := resultJSON(t, runMod(t, env, exitModule(0), nil, hostapi.RunLimits{})); got != "null" {
		t.Fatalf("exit 0 without output: %s", got)
	}
	// A host error the module hands on keeps its code and the module's words.
	res = runMod(t, env, bin, map[string]any{"mode": "fail", "id": "ghost.txt"}, hostapi.RunLimits{})
	wantError(t, res, "NOT_FOUND", "probe could not look at ghost.txt", "ghost.txt")
	res = runMod(t, env, bin, map[string]any{"mode": "nonsense"}, hostapi.RunLimits{})
	wantError(t, res, "VALIDATION_FAILED", "unknown mode nonsense")
	// Input that does not fit the module's type.
	res = runMod(t, env, bin, []any{1, 2}, hostapi.RunLimits{})
	wantError(t, res, "VALIDATION_FAILED", "the input does not fit")
	// Traps.
	res = runMod(t, env, oobLoadModule(), nil, hostapi.RunLimits{})
	wantError(t, res, "VALIDATION_FAILED", "the module trapped", "out of bounds memory access")
	res = runMod(t, env, recursionModule(), nil, hostapi.RunLimits{})
	wantError(t, res, "RESOURCE_EXHAUSTED", "call stack")
	res = runMod(t, env, growModule(), nil, hostapi.RunLimits{})
	wantError(t, res, "RESOURCE_EXHAUSTED", "ran out of memory")
	hostStillRuns(t, env)
}

func TestInputAndResults(t *testing.T) {
	env := testEnv(t)
	bin := probe(t)
	in := map[string]any{"mode": "echo", "text": "<b>ünïcödé</b> & \"quotes\"", "n": int64(1) << 52}
	var got struct {
		Text string `json:"text"`
		N    int64  `json:"n"`
	}
	decode(t, runMod(t, env, bin, in, hostapi.RunLimits{}), &got)
	if got.Text != in["text"] || got.N != 1<<52 {
		t.Fatalf("echo %+v", got)
	}
	// Text that is not JSON is the result as a string, less its newline.
	res := runMod(t, env, bin, map[string]any{"mode": "text", "text": "hello world\n"}, hostapi.RunLimits{})
	if res.Result != "hello world" {
		t.Fatalf("text result %#v", res.Result)
	}
	res = runMod(t, env, bin, map[string]any{"mode": "text", "text": "  [1, 2.5, \"x\"]\n"}, hostapi.RunLimits{})
	if got := resultJSON(t, res); got != `[1,2.5,"x"]` {
		t.Fatalf("JSON result %s", got)
	}
	// An input the decoder refuses never reaches the module.
	res = runMod(t, env, bin, map[string]any{"n": json.Number("12345678901234567890123")}, hostapi.RunLimits{})
	wantError(t, res, "VALIDATION_FAILED", "input")
}

func TestSandbox(t *testing.T) {
	env := testEnv(t)
	var got struct {
		Args     []string `json:"args"`
		Env      []string `json:"env"`
		Readdir  bool     `json:"readdir"`
		Readfile bool     `json:"readfile"`
		Dial     bool     `json:"dial"`
		Year     int      `json:"year"`
	}
	decode(t, runMod(t, env, probe(t), map[string]any{"mode": "sandbox"}, hostapi.RunLimits{}), &got)
	if len(got.Args) != 0 || len(got.Env) != 0 || !got.Readdir || !got.Readfile || !got.Dial {
		t.Fatalf("the module saw %+v", got)
	}
	if got.Year < 2025 {
		t.Fatalf("the module's clock says %d", got.Year)
	}
}

func TestDepthLimit(t *testing.T) {
	env := *testEnv(t)
	env.Depth = 9
	wantError(t, runMod(t, &env, tinyModule(), nil, hostapi.RunLimits{}), "RESOURCE_EXHAUSTED", "nested 9 deep")
}

func TestModuleFromWorkspaceFile(t *testing.T) {
	env := testEnv(t)
	r := sharedRunner(t)
	ctx := context.Background()
	hosttest.Upload(t, env.WS, "mods/probe.wasm", probe(t), false)
	hosttest.Upload(t, env.WS, "notes.txt", []byte("just text\n"), false)
	hosttest.Upload(t, env.WS, "lines.txt", []byte("one\ntwo\nthree\n"), false)
	res := r.Run(ctx, env, wasm.Request{Ref: "/mods/probe.wasm", Input: map[string]any{"mode": "lines", "id": "lines.txt", "n": 2}})
	var got struct {
		Content    string `json:"content"`
		TotalLines int    `json:"total_lines"`
	}
	decode(t, res, &got)
	if got.Content != "one\ntwo\n" || got.TotalLines != 3 {
		t.Fatalf("lines %+v", got)
	}
	if err := r.Check(ctx, env, wasm.Request{Ref: "mods/probe.wasm"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req   wasm.Request
		code  string
		parts []string
	}{
		{wasm.Request{Ref: "missing.wasm"}, "NOT_FOUND", []string{"missing.wasm"}},
		{wasm.Request{Ref: "notes.txt"}, "UNSUPPORTED_FORMAT", []string{`"notes.txt"`, "not a WebAssembly module"}},
		{wasm.Request{Ref: "notes.txt", Module: tinyModule()}, "VALIDATION_FAILED", []string{"not both"}},
		{wasm.Request{}, "VALIDATION_FAILED", []string{"no module"}},
	} {
		wantError(t, r.Run(ctx, env, c.req), c.code, c.parts...)
		err := r.Check(ctx, env, c.req)
		if e := fmt.Sprint(err); !strings.Contains(e, c.code) {
			t.Fatalf("Check(%+v) = %v, want %s", c.req, err, c.code)
		}
	}
}

func TestConcurrentRunsAreIndependent(t *testing.T) {
	env := testEnv(t)
	hosttest.Upload(t, env.WS, "c.txt", []byte("a\nb\nc\nd\n"), false)
	bin := probe(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var res *hostapi.RunResult
			switch i % 4 {
			case 0:
				res = runMod(t, env, loopModule(), nil, hostapi.RunLimits{Timeout: 300 * time.Millisecond})
				if res.OK || res.Error.Code != "TIMEOUT" {
					errs <- fmt.Errorf("loop %d: %+v", i, res.Error)
				}
				return
			case 1:
				res = runMod(t, env, growModule(), nil, hostapi.RunLimits{MemoryBytes: 16 << 20})
				if res.OK || res.Error.Code != "RESOURCE_EXHAUSTED" {
					errs <- fmt.Errorf("grow %d: %+v", i, res.Error)
				}
				return
			}
			res = runMod(t, env, bin, map[string]any{"mode": "lines", "id": "c.txt", "n": 3}, hostapi.RunLimits{})
			b, _ := json.Marshal(res.Result)
			if !res.OK || !strings.Contains(string(b), `"content":"a\nb\nc\n"`) {
				errs <- fmt.Errorf("lines %d: %s %+v", i, b, res.Error)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCompilationCacheOnDisk(t *testing.T) {
	dir := t.TempDir()
	entries := func() []string {
		var names []string
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				names = append(names, strings.TrimPrefix(p, dir))
			}
			return nil
		})
		return names
	}
	var first []string
	for i := 0; i < 2; i++ {
		// Two hosts on two data directories share one cache directory:
		// the second finds the machine code the first wrote.
		h := hosttest.New(t, hostapi.Config{})
		r, err := wasm.New(h, wasm.Options{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if r.CacheDir() != dir {
			t.Fatalf("cache dir %q", r.CacheDir())
		}
		if got := resultJSON(t, r.Run(context.Background(), h.Env("default", ""), wasm.Request{Module: tinyModule()})); got != tinyResult {
			t.Fatal(got)
		}
		names := entries()
		if len(names) != 1 || !strings.Contains(names[0], "wazero-") {
			t.Fatalf("after run %d the cache holds %v, want one entry", i, names)
		}
		if i == 0 {
			first = names
		} else if names[0] != first[0] {
			t.Fatalf("the second host wrote %v beside %v", names, first)
		}
		h.Close()
	}
}

func TestCacheDirDefaults(t *testing.T) {
	// The PDF engine and modules share one cache directory.
	if got, pdfDir := wasm.DefaultCacheDir(), pdf.DefaultCacheDir(); got != pdfDir || got == "" {
		t.Fatalf("DefaultCacheDir %q, the PDF engine's %q", got, pdfDir)
	}
	t.Setenv("METACLAW_CACHE_DIR", "/somewhere/else")
	if got, pdfDir := wasm.DefaultCacheDir(), pdf.DefaultCacheDir(); got != "/somewhere/else/wazero" || got != pdfDir {
		t.Fatalf("DefaultCacheDir %q, the PDF engine's %q", got, pdfDir)
	}
	// An unusable directory (here a file) leaves a cache in memory; runs work.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o600)
	h := hosttest.New(t, hostapi.Config{})
	r, err := wasm.New(h, wasm.Options{CacheDir: file})
	if err != nil {
		t.Fatal(err)
	}
	if r.CacheDir() != "" {
		t.Fatalf("cache dir %q", r.CacheDir())
	}
	if got := resultJSON(t, r.Run(context.Background(), h.Env("", ""), wasm.Request{Module: tinyModule()})); got != tinyResult {
		t.Fatal(got)
	}
}

// TestCompileOutlivesItsRun: a run whose time runs out while its module
// compiles says so; the compilation finishes anyway and the next run
// finds it.
func TestCompileOutlivesItsRun(t *testing.T) {
	h := hosttest.New(t, hostapi.Config{})
	r, err := wasm.New(h, wasm.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	env := h.Env("", "")
	bin := bulkyModule()
	res := r.Run(context.Background(), env, wasm.Request{Module: bin, Limits: hostapi.RunLimits{Timeout: time.Millisecond}})
	wantError(t, res, "TIMEOUT", "compiling the module", "run it again")
	if err := r.Check(context.Background(), env, wasm.Request{Module: bin}); err != nil {
		t.Fatal(err)
	}
	if got := resultJSON(t, r.Run(context.Background(), env, wasm.Request{Module: bin})); got != "null" {
		t.Fatalf("result %s", got)
	}
}

func TestModuleArg(t *testing.T) {
	bin := tinyModule()
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		s := enc.EncodeToString(bin)
		req, err := wasm.ModuleArg(s[:20] + "\n" + s[20:])
		if err != nil || !bytes.Equal(req.Module, bin) || req.Ref != "" {
			t.Fatalf("%q: %+v %v", s, req, err)
		}
	}
	for _, ref := range []string{"mods/tool.wasm", "0b6c6f5e-59c4-4bd4-9a4b-5d3a4f7f2b10", "/abs.wasm"} {
		if req, err := wasm.ModuleArg(ref); err != nil || req.Ref != ref || req.Module != nil {
			t.Fatalf("%q: %+v %v", ref, req, err)
		}
	}
	for _, bad := range []string{"", "  ", "AGFzbQ!!!"} {
		if _, err := wasm.ModuleArg(bad); !strings.Contains(fmt.Sprint(err), "VALIDATION_FAILED") {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	// What a caller sends runs.
	req, _ := wasm.ModuleArg(base64.StdEncoding.EncodeToString(bin))
	if got := resultJSON(t, sharedRunner(t).Run(context.Background(), testEnv(t), req)); got != tinyResult {
		t.Fatal(got)
	}
}

// TestMemoryDoesNotLeakBetweenRuns: memories are reused from run to run;
// what one run wrote is zero for the next, in its first page and in pages
// it grew.
func TestMemoryDoesNotLeakBetweenRuns(t *testing.T) {
	env := testEnv(t)
	// grow 10 pages, then store 0x41414141 at 60000 and in page 10 (or,
	// reading, trap unless both are zero).
	module := func(write bool) []byte {
		body := Cat(I32Const(10), []byte{OpMemoryGrow, 0, OpDrop})
		for _, addr := range []int32{60000, 10*65536 + 8} {
			if write {
				body = Cat(body, I32Const(addr), I32Const(0x41414141), []byte{0x36, 2, 0})
			} else {
				body = Cat(body, I32Const(addr), []byte{OpI32Load, 2, 0, 0x45 /* i32.eqz */, 0x04, OpBlockVoid, 0x05 /* else */, OpUnreachable, OpEnd})
			}
		}
		return Module{Funcs: []Func{{Body: body}}, Exports: map[string]uint32{"_start": 0}, Memory: Pages(1)}.Bytes()
	}
	writer, reader := module(true), module(false)
	for i := 0; i < 6; i++ {
		if got := resultJSON(t, runMod(t, env, writer, nil, hostapi.RunLimits{})); got != "null" {
			t.Fatalf("writer: %s", got)
		}
		res := runMod(t, env, reader, nil, hostapi.RunLimits{})
		if !res.OK {
			t.Fatalf("run %d found what the run before it wrote: %+v", i, res.Error)
		}
	}
	// The reader does trap on memory that is not zero: the check works.
	both := Module{Funcs: []Func{{Body: Cat(I32Const(60000), I32Const(1), []byte{0x36, 2, 0}, I32Const(60000), []byte{OpI32Load, 2, 0, 0x45, 0x04, OpBlockVoid, 0x05, OpUnreachable, OpEnd})}},
		Exports: map[string]uint32{"_start": 0}, Memory: Pages(1)}.Bytes()
	wantError(t, runMod(t, env, both, nil, hostapi.RunLimits{}), "VALIDATION_FAILED", "unreachable")
}
