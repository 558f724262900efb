package wasmtest

import (
	"encoding/binary"
	"sort"
)

// Value types and a few opcodes, for writing function bodies by hand.
const (
	I32 byte = 0x7f
	I64 byte = 0x7e

	OpUnreachable byte = 0x00
	OpBlock       byte = 0x02
	OpLoop        byte = 0x03
	OpEnd         byte = 0x0b
	OpBr          byte = 0x0c
	OpBrIf        byte = 0x0d
	OpCall        byte = 0x10
	OpDrop        byte = 0x1a
	OpLocalGet    byte = 0x20
	OpLocalSet    byte = 0x21
	OpI32Load     byte = 0x28
	OpMemoryGrow  byte = 0x40
	OpI32Const    byte = 0x41
	OpI32Eq       byte = 0x46
	OpBlockVoid   byte = 0x40 // the empty block type after block/loop
)

// Func is a function defined by a module.
type Func struct {
	Params, Results []byte
	Locals          []byte // one value type per local
	Body            []byte // instructions, without the final end
}

// Import is an imported function.
type Import struct {
	Module, Name    string
	Params, Results []byte
}

// Segment is an active data segment of memory 0.
type Segment struct {
	Offset uint32
	Bytes  []byte
}

// Module is a core WebAssembly module small enough to write by hand: the
// tests' tiny, looping, memory-hungry and ABI-abusing modules.
type Module struct {
	Imports []Import
	Funcs   []Func
	// Exports name functions by index (imports first, then Funcs).
	Exports map[string]uint32
	// Memory, when set, defines memory 0 with this minimum (pages), and
	// MemoryMax a maximum; it is exported as "memory".
	Memory    *uint32
	MemoryMax *uint32
	Data      []Segment
}

// Pages is a helper for Module.Memory.
func Pages(n uint32) *uint32 { return &n }

// I32Const encodes i32.const v.
func I32Const(v int32) []byte { return append([]byte{OpI32Const}, sleb(int64(v))...) }

// Call encodes call f.
func Call(f uint32) []byte { return append([]byte{OpCall}, uleb(uint64(f))...) }

// Cat joins instruction sequences.
func Cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Bytes encodes the module.
func (m Module) Bytes() []byte {
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	var types [][]byte
	for _, im := range m.Imports {
		types = append(types, funcType(im.Params, im.Results))
	}
	for _, f := range m.Funcs {
		types = append(types, funcType(f.Params, f.Results))
	}
	if len(types) > 0 {
		out = append(out, section(1, vec(types))...)
	}
	if len(m.Imports) > 0 {
		var imps [][]byte
		for i, im := range m.Imports {
			imps = append(imps, Cat(name(im.Module), name(im.Name), []byte{0}, uleb(uint64(i))))
		}
		out = append(out, section(2, vec(imps))...)
	}
	if len(m.Funcs) > 0 {
		var idx [][]byte
		for i := range m.Funcs {
			idx = append(idx, uleb(uint64(len(m.Imports)+i)))
		}
		out = append(out, section(3, vec(idx))...)
	}
	if m.Memory != nil {
		lim := append([]byte{0}, uleb(uint64(*m.Memory))...)
		if m.MemoryMax != nil {
			lim = Cat([]byte{1}, uleb(uint64(*m.Memory)), uleb(uint64(*m.MemoryMax)))
		}
		out = append(out, section(5, vec([][]byte{lim}))...)
	}
	var exps [][]byte
	names := make([]string, 0, len(m.Exports))
	for n := range m.Exports {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		exps = append(exps, Cat(name(n), []byte{0}, uleb(uint64(m.Exports[n]))))
	}
	if m.Memory != nil {
		exps = append(exps, Cat(name("memory"), []byte{2, 0}))
	}
	if len(exps) > 0 {
		out = append(out, section(7, vec(exps))...)
	}
	if len(m.Funcs) > 0 {
		var codes [][]byte
		for _, f := range m.Funcs {
			var locals [][]byte
			for _, t := range f.Locals {
				locals = append(locals, []byte{1, t})
			}
			body := Cat(vec(locals), f.Body, []byte{OpEnd})
			codes = append(codes, Cat(uleb(uint64(len(body))), body))
		}
		out = append(out, section(10, vec(codes))...)
	}
	if len(m.Data) > 0 {
		var segs [][]byte
		for _, d := range m.Data {
			segs = append(segs, Cat([]byte{0}, I32Const(int32(d.Offset)), []byte{OpEnd}, uleb(uint64(len(d.Bytes))), d.Bytes))
		}
		out = append(out, section(11, vec(segs))...)
	}
	return out
}

func funcType(params, results []byte) []byte {
	return Cat([]byte{0x60}, uleb(uint64(len(params))), params, uleb(uint64(len(results))), results)
}

func section(id byte, payload []byte) []byte {
	return Cat([]byte{id}, uleb(uint64(len(payload))), payload)
}

func vec(items [][]byte) []byte {
	out := uleb(uint64(len(items)))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func name(s string) []byte { return Cat(uleb(uint64(len(s))), []byte(s)) }

func uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func sleb(v int64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// LE32 is v as 4 little-endian bytes, for data segments (an iovec).
func LE32(vs ...uint32) []byte {
	var out []byte
	for _, v := range vs {
		out = binary.LittleEndian.AppendUint32(out, v)
	}
	return out
}
