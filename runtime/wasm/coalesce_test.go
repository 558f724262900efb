package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	abi "github.com/metaclaw/metaclaw/bindings/wasm"
	"github.com/metaclaw/metaclaw/runtime/wasm/wasmtest"
)

// dataSegments counts a module's data segments.
func dataSegments(t *testing.T, bin []byte) int {
	t.Helper()
	pos := 8
	for pos < len(bin) {
		id := bin[pos]
		size, n := binary.Uvarint(bin[pos+1:])
		if id == 11 {
			c, _ := binary.Uvarint(bin[pos+1+n:])
			return int(c)
		}
		pos += 1 + n + int(size)
	}
	return 0
}

// memoryAfterInstantiation is the module's memory once its data is in,
// before any code runs (on the interpreter: no code runs, so none need be
// compiled).
func memoryAfterInstantiation(t *testing.T, bin []byte) []byte {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	if err := abi.Instantiate(ctx, rt); err != nil {
		t.Fatal(err)
	}
	mod, err := rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	b, _ := mod.Memory().Read(0, mod.Memory().Size())
	return bytes.Clone(b)
}

func segmentsModule(segs ...wasmtest.Segment) []byte {
	return wasmtest.Module{Funcs: []wasmtest.Func{{}}, Exports: map[string]uint32{"_start": 0}, Memory: wasmtest.Pages(2), Data: segs}.Bytes()
}

func TestCoalesceData(t *testing.T) {
	bin := segmentsModule(
		wasmtest.Segment{Offset: 0, Bytes: []byte("ab")},
		wasmtest.Segment{Offset: 10, Bytes: []byte("cd")},
		wasmtest.Segment{Offset: 12, Bytes: []byte("ef")},
		wasmtest.Segment{Offset: 10000, Bytes: []byte("gh")},
		wasmtest.Segment{Offset: 100000, Bytes: []byte("ij")},
	)
	out := coalesceData(bin)
	if got := dataSegments(t, out); got != 3 {
		t.Fatalf("%d segments after coalescing, want 3", got)
	}
	if !bytes.Equal(memoryAfterInstantiation(t, bin), memoryAfterInstantiation(t, out)) {
		t.Fatal("coalescing changed the memory a module starts with")
	}
	// Out of order but apart: merged all the same.
	bin = segmentsModule(
		wasmtest.Segment{Offset: 100, Bytes: []byte("late")},
		wasmtest.Segment{Offset: 0, Bytes: []byte("early")},
		wasmtest.Segment{Offset: 50, Bytes: []byte("middle")},
	)
	out = coalesceData(bin)
	if got := dataSegments(t, out); got != 1 {
		t.Fatalf("%d segments after coalescing, want 3", got)
	}
	if !bytes.Equal(memoryAfterInstantiation(t, bin), memoryAfterInstantiation(t, out)) {
		t.Fatal("coalescing changed the memory a module starts with")
	}
	// What must stay as it is.
	for name, keep := range map[string][]byte{
		"overlapping":              segmentsModule(wasmtest.Segment{Offset: 0, Bytes: []byte("abcd")}, wasmtest.Segment{Offset: 2, Bytes: []byte("xy")}),
		"overlapping out of order": segmentsModule(wasmtest.Segment{Offset: 10, Bytes: []byte("ab")}, wasmtest.Segment{Offset: 0, Bytes: []byte("xyzxyzxyzxyz")}),
		"one segment":              segmentsModule(wasmtest.Segment{Offset: 10, Bytes: []byte("ab")}),
		"far apart":                segmentsModule(wasmtest.Segment{Offset: 0, Bytes: []byte("ab")}, wasmtest.Segment{Offset: 90000, Bytes: []byte("xy")}),
		"data count":               withDataCount(segmentsModule(wasmtest.Segment{Offset: 0, Bytes: []byte("ab")}, wasmtest.Segment{Offset: 4, Bytes: []byte("xy")})),
		"truncated":                bin[:len(bin)-3],
		"not wasm":                 []byte("\x00asm\x01\x00\x00\x00\x0b\xff"),
	} {
		if got := coalesceData(keep); !bytes.Equal(got, keep) {
			t.Errorf("%s: the module was rewritten", name)
		}
	}
}

// withDataCount inserts a DataCount section before the code section.
func withDataCount(bin []byte) []byte {
	pos := 8
	for pos < len(bin) {
		id := bin[pos]
		size, n := binary.Uvarint(bin[pos+1:])
		if id == 10 {
			out := append(bytes.Clone(bin[:pos]), 12, 1, 2)
			return append(out, bin[pos:]...)
		}
		pos += 1 + n + int(size)
	}
	return bin
}

// TestCoalesceGoModule: a Go module's 50 000-odd segments become a few
// hundred, and it starts with the same memory.
func TestCoalesceGoModule(t *testing.T) {
	bin := wasmtest.BuildGo(t, "testdata/probe")[0]
	out := coalesceData(bin)
	before, after := dataSegments(t, bin), dataSegments(t, out)
	if before < 10000 || after > before/20 {
		t.Fatalf("%d segments became %d", before, after)
	}
	if !bytes.Equal(memoryAfterInstantiation(t, bin), memoryAfterInstantiation(t, out)) {
		t.Fatal("coalescing changed the memory the Go module starts with")
	}
	t.Logf("%d data segments became %d; the module grew from %d to %d bytes", before, after, len(bin), len(out))
}

func TestSleb32(t *testing.T) {
	for _, v := range []int32{0, 1, -1, 63, 64, -64, -65, 1 << 20, -1 << 31, 1<<31 - 1} {
		b := appendSleb32(nil, v)
		got, n := sleb32(b)
		if got != v || n != len(b) {
			t.Fatalf("%d: %v → %d, %d", v, b, got, n)
		}
	}
	if _, n := sleb32([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01}); n > 0 {
		t.Fatal("a six-byte i32 was read")
	}
}
