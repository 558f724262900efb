package wasm

import (
	"bytes"

	"github.com/tetratelabs/wazero/experimental"
)

// budget is one run's linear memory allocator: it grows the memory like
// wazero's own (a Go slice, capacity doubling) but never past the run's
// memory limit, and notes when a module asked for more.
//
// Two limits hold a module's memory. The runtime compiles every module
// under the host's largest allowed memory (RuntimeConfig
// WithMemoryLimitPages, fixed when a module is compiled: a module that
// declares more does not compile). The run's own limit, which a caller
// may set lower, is this allocator's: a memory.grow past it fails in the
// guest (-1), as WebAssembly specifies, and the run that then fails is
// reported as out of memory rather than as a crash.
type budget struct {
	limit   uint64
	buf     []byte
	sized   bool   // the initial size was allocated
	size    uint64 // the memory's size, kept after Free
	refused bool   // a grow past the limit was refused
	asked   uint64 // the largest size asked for
}

// Allocate implements experimental.MemoryAllocator.
func (m *budget) Allocate(_, _ uint64) experimental.LinearMemory { return m }

// Reallocate implements experimental.LinearMemory.
func (m *budget) Reallocate(size uint64) []byte {
	m.asked = max(m.asked, size)
	// The first call sizes the memory's declared minimum, which the
	// runner has checked against the limit before instantiating; wazero
	// requires that one to succeed.
	if size > m.limit && m.sized {
		m.refused = true
		return nil
	}
	m.sized = true
	m.size = size
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	newCap := max(size, min(2*uint64(cap(m.buf)), m.limit))
	nb := make([]byte, size, newCap)
	copy(nb, m.buf)
	m.buf = nb
	return m.buf
}

// exhausted tells whether a module that failed did so for want of memory:
// a grow this allocator refused; or the memory within reach of the cap it
// was compiled under (a grow past that cap fails before any allocator is
// asked); or the out-of-memory message of Go's or Rust's runtime on
// stderr.
func (m *budget) exhausted(capBytes uint64, stderr []byte) bool {
	if m.refused {
		return true
	}
	if m.size <= capBytes && capBytes-m.size < min(capBytes/4, 16<<20) {
		return true
	}
	return bytes.Contains(stderr, []byte("out of memory")) || bytes.Contains(stderr, []byte("memory allocation of"))
}

// Free implements experimental.LinearMemory.
func (m *budget) Free() { m.buf = nil }
