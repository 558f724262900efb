package main

// Hand-written WebAssembly modules for the CLI's tests: a few hundred
// bytes each, built in microseconds, so that every door can run a module
// without compiling a Go guest. testdata/examples/echo.wasm is echoModule,
// kept equal by TestEchoFixture.

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	. "github.com/metaclaw/metaclaw/runtime/wasm/wasmtest"
)

var (
	fdRead   = Import{Module: "wasi_snapshot_preview1", Name: "fd_read", Params: []byte{I32, I32, I32, I32}, Results: []byte{I32}}
	fdWrite  = Import{Module: "wasi_snapshot_preview1", Name: "fd_write", Params: []byte{I32, I32, I32, I32}, Results: []byte{I32}}
	hostCall = Import{Module: "metaclaw", Name: "call", Params: []byte{I32, I32, I32, I32, I32, I32}, Results: []byte{I64}}
)

const (
	opI32Store byte = 0x36
	opI32Eqz   byte = 0x45
)

// echoLoop copies stdin to stdout in 60,000-byte pieces until stdin ends.
// fdRead and fdWrite are the indexes of the imports. Memory: the read
// iovec at 0 (buffer 1024, length 60000), nread at 16, the write iovec at
// 32 (buffer 1024, length nread), nwritten at 48.
func echoLoop(fdRead, fdWrite uint32) []byte {
	return Cat(
		[]byte{OpBlock, OpBlockVoid, OpLoop, OpBlockVoid},
		I32Const(0), I32Const(0), I32Const(1), I32Const(16), Call(fdRead), []byte{OpDrop},
		// nread == 0: the input has ended
		I32Const(16), []byte{OpI32Load, 2, 0, opI32Eqz, OpBrIf, 1},
		I32Const(36), I32Const(16), []byte{OpI32Load, 2, 0, opI32Store, 2, 0},
		I32Const(1), I32Const(32), I32Const(1), I32Const(48), Call(fdWrite), []byte{OpDrop},
		[]byte{OpBr, 0, OpEnd, OpEnd},
	)
}

var echoData = []Segment{{Offset: 0, Bytes: LE32(1024, 60000)}, {Offset: 32, Bytes: LE32(1024, 0)}}

// echoModule answers with its input: what it reads on stdin it writes to
// stdout, so a run's result is its input.
func echoModule() []byte {
	return Module{
		Imports: []Import{fdRead, fdWrite},
		Funcs:   []Func{{Body: echoLoop(0, 1)}},
		Exports: map[string]uint32{"_start": 2},
		Memory:  Pages(2),
		Data:    echoData,
	}.Bytes()
}

// callThenEchoModule makes one host call (op with the JSON args, its
// response ignored) and then echoes its input.
func callThenEchoModule(op, args string) []byte {
	return Module{
		Imports: []Import{fdRead, fdWrite, hostCall},
		Funcs: []Func{{Body: Cat(
			I32Const(65536), I32Const(int32(len(op))), I32Const(65536+1024), I32Const(int32(len(args))),
			I32Const(65536+8192), I32Const(4096), Call(2), []byte{OpDrop},
			echoLoop(0, 1))}},
		Exports: map[string]uint32{"_start": 3},
		Memory:  Pages(2),
		Data:    append([]Segment{{Offset: 65536, Bytes: []byte(op)}, {Offset: 65536 + 1024, Bytes: []byte(args)}}, echoData...),
	}.Bytes()
}

// trapModule fails at once (unreachable).
func trapModule() []byte {
	return Module{
		Funcs:   []Func{{Body: []byte{OpUnreachable}}},
		Exports: map[string]uint32{"_start": 0},
		Memory:  Pages(1),
	}.Bytes()
}

// TestEchoFixture keeps testdata/examples/echo.wasm (the module of the
// run_script and tool_save examples) equal to echoModule; run with
// METACLAW_UPDATE_FIXTURES=1 to write it again.
func TestEchoFixture(t *testing.T) {
	path := filepath.Join(fixtureDir, "echo.wasm")
	want := echoModule()
	if os.Getenv("METACLAW_UPDATE_FIXTURES") == "1" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s (%d bytes) is not echoModule (%d bytes); run the test with METACLAW_UPDATE_FIXTURES=1", path, len(got), len(want))
	}
}
