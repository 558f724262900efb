package wasm_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/runtime/wasm"
	. "github.com/metaclaw/metaclaw/runtime/wasm/wasmtest"
)

// Hand-written modules: small, built in microseconds, each doing one
// thing a test needs (and some things no compiler would emit).

var (
	fdWrite  = Import{Module: "wasi_snapshot_preview1", Name: "fd_write", Params: []byte{I32, I32, I32, I32}, Results: []byte{I32}}
	procExit = Import{Module: "wasi_snapshot_preview1", Name: "proc_exit", Params: []byte{I32}}
	hostCall = Import{Module: "metaclaw", Name: "call", Params: []byte{I32, I32, I32, I32, I32, I32}, Results: []byte{I64}}
	hostTake = Import{Module: "metaclaw", Name: "take", Params: []byte{I32, I32}, Results: []byte{I32}}
	hostLog  = Import{Module: "metaclaw", Name: "log", Params: []byte{I32, I32, I32}}
)

// tinyResult is what tinyModule writes.
const tinyResult = `{"ok":true}`

// tinyModule writes tinyResult to stdout: the smallest useful command.
func tinyModule() []byte {
	return Module{
		Imports: []Import{fdWrite},
		Funcs:   []Func{{Body: Cat(I32Const(1), I32Const(0), I32Const(1), I32Const(8), Call(0), []byte{OpDrop})}},
		Exports: map[string]uint32{"_start": 1},
		Memory:  Pages(1),
		Data:    []Segment{{Offset: 0, Bytes: LE32(16, uint32(len(tinyResult)))}, {Offset: 16, Bytes: []byte(tinyResult)}},
	}.Bytes()
}

// loopModule never returns.
func loopModule() []byte {
	return Module{
		Funcs:   []Func{{Body: []byte{OpLoop, OpBlockVoid, OpBr, 0, OpEnd}}},
		Exports: map[string]uint32{"_start": 0},
		Memory:  Pages(1),
	}.Bytes()
}

// growModule grows its memory 1 MB at a time until a grow fails, then
// traps, as a program whose allocator gives up would.
func growModule() []byte { return growModuleMax(nil) }

// growModuleMax is growModule with a declared maximum memory.
func growModuleMax(maxPages *uint32) []byte {
	return Module{
		Funcs: []Func{{Body: Cat(
			[]byte{OpBlock, OpBlockVoid, OpLoop, OpBlockVoid},
			I32Const(16), []byte{OpMemoryGrow, 0}, I32Const(-1), []byte{OpI32Eq, OpBrIf, 1, OpBr, 0},
			[]byte{OpEnd, OpEnd, OpUnreachable})}},
		Exports:   map[string]uint32{"_start": 0},
		Memory:    Pages(1),
		MemoryMax: maxPages,
	}.Bytes()
}

// stdoutFloodModule writes 64 KB to stdout forever.
func stdoutFloodModule() []byte {
	return Module{
		Imports: []Import{fdWrite},
		Funcs: []Func{{Body: Cat([]byte{OpLoop, OpBlockVoid},
			I32Const(1), I32Const(0), I32Const(1), I32Const(8), Call(0), []byte{OpDrop, OpBr, 0, OpEnd})}},
		Exports: map[string]uint32{"_start": 1},
		Memory:  Pages(2),
		Data:    []Segment{{Offset: 0, Bytes: LE32(16, 64<<10)}},
	}.Bytes()
}

// exitModule exits with code.
func exitModule(code int32) []byte {
	return Module{
		Imports: []Import{procExit},
		Funcs:   []Func{{Body: Cat(I32Const(code), Call(0))}},
		Exports: map[string]uint32{"_start": 1},
		Memory:  Pages(1),
	}.Bytes()
}

// callModule makes one metaclaw.call with the given pointers and lengths
// and writes the response status and length nowhere: the test looks at
// the run's error.
func callModule(withMemory bool, data []Segment, namePtr, nameLen, argsPtr, argsLen, outPtr, outCap int32) []byte {
	m := Module{
		Imports: []Import{hostCall},
		Funcs: []Func{{Body: Cat(I32Const(namePtr), I32Const(nameLen), I32Const(argsPtr), I32Const(argsLen),
			I32Const(outPtr), I32Const(outCap), Call(0), []byte{OpDrop})}},
		Exports: map[string]uint32{"_start": 1},
		Data:    data,
	}
	if withMemory {
		m.Memory = Pages(1)
	}
	return m.Bytes()
}

// callEchoModule calls the operation named at 1024 with the arguments at
// 2048 into a 64-byte buffer at 4096; when the response is longer it takes
// it into the buffer at 8192, and writes the response to stdout either way.
// It answers the question "does a response that does not fit come back
// whole through take?" without any SDK.
func callEchoModule(name, args string) []byte {
	// locals: 0 = call's i64, 1 = length, 2 = where the response is
	return Module{
		Imports: []Import{hostCall, hostTake, fdWrite},
		Funcs: []Func{{Locals: []byte{I64, I32, I32}, Body: Cat(
			I32Const(1024), I32Const(int32(len(name))), I32Const(2048), I32Const(int32(len(args))), I32Const(4096), I32Const(64), Call(0),
			[]byte{OpLocalSet, 0},
			// length = (i32.wrap_i64 local0)
			[]byte{OpLocalGet, 0, 0xa7, OpLocalSet, 1},
			I32Const(4096), []byte{OpLocalSet, 2},
			// if length > 64: take(8192, length); where = 8192
			[]byte{OpLocalGet, 1}, I32Const(64), []byte{0x4b /* i32.gt_u */, 0x04 /* if */, OpBlockVoid},
			I32Const(8192), []byte{OpLocalGet, 1}, Call(1), []byte{OpDrop},
			I32Const(8192), []byte{OpLocalSet, 2},
			[]byte{OpEnd},
			// iovec at 0 = (where, length); fd_write(1, 0, 1, 8)
			I32Const(0), []byte{OpLocalGet, 2, 0x36 /* i32.store */, 2, 0},
			I32Const(4), []byte{OpLocalGet, 1, 0x36, 2, 0},
			I32Const(1), I32Const(0), I32Const(1), I32Const(8), Call(2), []byte{OpDrop},
		)}},
		Exports: map[string]uint32{"_start": 3},
		Memory:  Pages(4),
		Data:    []Segment{{Offset: 1024, Bytes: []byte(name)}, {Offset: 2048, Bytes: []byte(args)}},
	}.Bytes()
}

// callFloodModule calls an operation that does not exist, forever.
func callFloodModule() []byte {
	return Module{
		Imports: []Import{hostCall},
		Funcs: []Func{{Body: Cat([]byte{OpLoop, OpBlockVoid},
			I32Const(64), I32Const(4), I32Const(0), I32Const(0), I32Const(128), I32Const(128), Call(0), []byte{OpDrop, OpBr, 0, OpEnd})}},
		Exports: map[string]uint32{"_start": 1},
		Memory:  Pages(1),
		Data:    []Segment{{Offset: 64, Bytes: []byte("nope")}},
	}.Bytes()
}

// logModule logs the message at 0 with level.
func logModule(level int32, msg string, ptr int32) []byte {
	return Module{
		Imports: []Import{hostLog},
		Funcs:   []Func{{Body: Cat(I32Const(level), I32Const(ptr), I32Const(int32(len(msg))), Call(0))}},
		Exports: map[string]uint32{"_start": 1},
		Memory:  Pages(1),
		Data:    []Segment{{Offset: 0, Bytes: []byte(msg)}},
	}.Bytes()
}

// recursionModule recurses without end.
func recursionModule() []byte {
	return Module{
		Funcs:   []Func{{Body: Call(1)}, {Body: Call(1)}},
		Exports: map[string]uint32{"_start": 0},
	}.Bytes()
}

// oobLoadModule reads past the end of its memory.
func oobLoadModule() []byte {
	return Module{
		Funcs:   []Func{{Body: Cat(I32Const(-8), []byte{OpI32Load, 2, 0, OpDrop})}},
		Exports: map[string]uint32{"_start": 0},
		Memory:  Pages(1),
	}.Bytes()
}

// memoryModule declares a memory of min pages (and max, when given) and
// does nothing.
func memoryModule(minPages uint32, maxPages *uint32) []byte {
	return Module{
		Funcs:     []Func{{}},
		Exports:   map[string]uint32{"_start": 0},
		Memory:    Pages(minPages),
		MemoryMax: maxPages,
	}.Bytes()
}

// bulkyModule has thousands of functions: it takes the compiler far
// longer than a millisecond, though it does nothing.
func bulkyModule() []byte {
	body := Cat(I32Const(1), I32Const(2), []byte{0x6a /* i32.add */, OpDrop})
	for len(body) < 400 {
		body = append(body, body...)
	}
	m := Module{Exports: map[string]uint32{"_start": 0}, Memory: Pages(1)}
	for i := 0; i < 3000; i++ {
		m.Funcs = append(m.Funcs, Func{Body: body})
	}
	return m.Bytes()
}

// importModule imports mod.name, which the host does not provide.
func importModule(mod, name string) []byte {
	return Module{
		Imports: []Import{{Module: mod, Name: name}},
		Funcs:   []Func{{Body: Call(0)}},
		Exports: map[string]uint32{"_start": 1},
		Memory:  Pages(1),
	}.Bytes()
}

// testEnv is a workspace of the test's own on the shared host.
func testEnv(t testing.TB) *hostapi.Env {
	t.Helper()
	h := sharedHost(t)
	ws := "t-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return h.Env(ws, "session-"+t.Name())
}

// runMod runs bin on the shared runner with input and limits. Runs that do
// not test the time limit get two minutes: the tests run beside others on
// small machines, and a slow run is not what they check.
func runMod(t testing.TB, env *hostapi.Env, bin []byte, input any, lim hostapi.RunLimits) *hostapi.RunResult {
	t.Helper()
	if lim.Timeout == 0 {
		lim.Timeout = 2 * time.Minute
	}
	return sharedRunner(t).Run(context.Background(), env, wasm.Request{Module: bin, Input: input, Limits: lim})
}

var probeCompiled sync.Once

// probe is the Go guest of testdata/probe, compiled by the shared runner
// (with no deadline: a cold compilation on a busy machine takes seconds).
func probe(t testing.TB) []byte {
	t.Helper()
	bin := BuildGo(t, "testdata/probe")[0]
	probeCompiled.Do(func() {
		if err := sharedRunner(t).Check(context.Background(), sharedHost(t).Env("", ""), wasm.Request{Module: bin}); err != nil {
			t.Fatal(err)
		}
	})
	return bin
}

// wantError requires res to have failed with code and a message holding
// every part.
func wantError(t testing.TB, res *hostapi.RunResult, code string, parts ...string) {
	t.Helper()
	if res.OK || res.Error == nil {
		t.Fatalf("run succeeded with %v; want %s", res.Result, code)
	}
	if string(res.Error.Code) != code {
		t.Fatalf("error %s: %s; want %s", res.Error.Code, res.Error.Message, code)
	}
	for _, p := range parts {
		if !strings.Contains(res.Error.Message, p) {
			t.Fatalf("error message %q does not mention %q", res.Error.Message, p)
		}
	}
	if res.Result != nil {
		t.Fatalf("a failed run has result %v", res.Result)
	}
}
