package wasm

import (
	"bytes"
	"encoding/binary"
	"sort"
)

// coalesceData rewrites a module's data section into fewer, larger active
// segments when that cannot change what instantiation writes, and returns
// bin unchanged otherwise.
//
// Why: Go's linker splits a program's data at every run of zeros, so a Go
// module of a few MB carries some 50 000 data segments, and wazero
// evaluates each segment's offset expression on every instantiation —
// about half the cost of starting a Go module whose code is compiled.
// Merged across gaps of zeros (memory starts zeroed), the same bytes land
// in the same places from a few hundred segments.
//
// It only acts on the plain case: every segment active in memory 0 at an
// i32.const offset, no two segments overlapping, and no
// DataCount section (without which no instruction may name a segment,
// so renumbering them is invisible).
func coalesceData(bin []byte) []byte {
	type section struct {
		id         byte
		start, end int // the payload
		head       int // where the section, id included, starts
	}
	var secs []section
	pos := 8
	for pos < len(bin) {
		head := pos
		id := bin[pos]
		size, n := binary.Uvarint(bin[pos+1:])
		if n <= 0 || size > uint64(len(bin)-(pos+1+n)) {
			return bin
		}
		start := pos + 1 + n
		secs = append(secs, section{id: id, start: start, end: start + int(size), head: head})
		pos = start + int(size)
	}
	data := -1
	for i, s := range secs {
		switch s.id {
		case 12: // DataCount: segments may be named by memory.init or data.drop.
			return bin
		case 11:
			data = i
		}
	}
	if data < 0 {
		return bin
	}
	type segment struct {
		offset uint32
		init   []byte
	}
	p := bin[secs[data].start:secs[data].end]
	count, n := binary.Uvarint(p)
	if n <= 0 || count < 2 {
		return bin
	}
	p = p[n:]
	segs := make([]segment, 0, count)
	for i := uint64(0); i < count; i++ {
		// flag 0, i32.const offset, end, the bytes.
		if len(p) < 2 || p[0] != 0 || p[1] != 0x41 {
			return bin
		}
		off, n := sleb32(p[2:])
		if n <= 0 || 2+n >= len(p) || p[2+n] != 0x0b {
			return bin
		}
		p = p[3+n:]
		size, m := binary.Uvarint(p)
		if m <= 0 || size > uint64(len(p)-m) {
			return bin
		}
		segs = append(segs, segment{uint32(off), p[m : m+int(size)]})
		p = p[m+int(size):]
	}
	if len(p) != 0 {
		return bin
	}
	// Segments that never overlap write the same memory in any order (Go
	// emits its data and read-only data as two ascending runs).
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].offset < segs[j].offset })
	for i := 1; i < len(segs); i++ {
		if uint64(segs[i-1].offset)+uint64(len(segs[i-1].init)) > uint64(segs[i].offset) {
			return bin // overlapping: the order of writes matters; keep it
		}
	}

	// Merge across gaps of up to maxGap zeros: a gap costs its zeros in
	// the copy, a segment its offset expression.
	const maxGap = 4 << 10
	var merged []segment
	for _, s := range segs {
		if k := len(merged) - 1; k >= 0 {
			m := &merged[k]
			end := m.offset + uint32(len(m.init))
			if gap := s.offset - end; gap <= maxGap {
				m.init = append(m.init, make([]byte, gap)...)
				m.init = append(m.init, s.init...)
				continue
			}
		}
		merged = append(merged, segment{s.offset, bytes.Clone(s.init)})
	}
	if len(merged) == len(segs) {
		return bin
	}

	var payload []byte
	payload = binary.AppendUvarint(payload, uint64(len(merged)))
	for _, s := range merged {
		payload = append(payload, 0, 0x41)
		payload = appendSleb32(payload, int32(s.offset))
		payload = append(payload, 0x0b)
		payload = binary.AppendUvarint(payload, uint64(len(s.init)))
		payload = append(payload, s.init...)
	}
	out := make([]byte, 0, len(bin)+len(payload)-(secs[data].end-secs[data].start))
	out = append(out, bin[:secs[data].head]...)
	out = append(out, 11)
	out = binary.AppendUvarint(out, uint64(len(payload)))
	out = append(out, payload...)
	out = append(out, bin[secs[data].end:]...)
	return out
}

// sleb32 reads a signed LEB128 i32; n <= 0 when it is not one.
func sleb32(b []byte) (int32, int) {
	var v int64
	var shift uint
	for i := 0; i < len(b) && i < 5; i++ {
		c := b[i]
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			if v < -1<<31 || v > 1<<31-1 {
				return 0, 0
			}
			return int32(v), i + 1
		}
	}
	return 0, 0
}

func appendSleb32(b []byte, v int32) []byte {
	x := int64(v)
	for {
		c := byte(x & 0x7f)
		x >>= 7
		if (x == 0 && c&0x40 == 0) || (x == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
