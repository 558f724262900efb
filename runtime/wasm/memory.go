package wasm

import (
	"bytes"
	"sync"

	"github.com/tetratelabs/wazero/experimental"
)

// budget is one run's linear memory allocator: it never grows the memory
// past the run's limit, and notes when a module asked for more.
//
// Two limits hold a module's memory. The runtime compiles every module
// under the host's largest allowed memory (RuntimeConfig
// WithMemoryLimitPages, fixed when a module is compiled: a module that
// declares more does not compile). The run's own limit, which a caller
// may set lower, is this allocator's: a memory.grow past it fails in the
// guest (-1), as WebAssembly specifies, and the run that then fails is
// reported as out of memory rather than as a crash.
//
// Where the platform allows (reserve), the memory is a range of address
// space reserved up to the limit and made usable as it grows: growing
// neither copies nor zeroes (fresh pages are zero), and nothing of it
// lives on the Go heap. Elsewhere it is a Go slice grown like wazero's own.
type budget struct {
	limit   uint64
	pool    *regionPool
	region  *region // the reserved range, when there is one
	tried   bool    // a reservation was tried
	buf     []byte  // the slice-backed memory otherwise
	sized   bool    // the initial size was allocated
	size    uint64  // the memory's size, kept after it is released
	refused bool    // a grow past the limit was refused
	asked   uint64  // the largest size asked for
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
	first := !m.sized
	m.sized = true
	if !m.tried {
		m.tried = true
		m.region = m.pool.get(max(m.limit, size))
	}
	if r := m.region; r != nil {
		if size > r.committed {
			if err := commit(r.mem[r.committed:size]); err != nil {
				if !first {
					// The machine is out of memory, if not the run.
					m.refused = true
					return nil
				}
				r.free()
				m.region = nil
				return m.grow(size)
			}
			r.committed = size
		}
		m.size = size
		return r.mem[:size:size]
	}
	return m.grow(size)
}

// grow is Reallocate on a Go slice: capacity doubling, within the limit.
func (m *budget) grow(size uint64) []byte {
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

// Free implements experimental.LinearMemory. wazero frees a module's
// memory when the module closes, which may happen on another goroutine
// (the host closing) while the guest still runs; the reserved range is
// therefore released by release, once the run's goroutine is out of the
// module.
func (m *budget) Free() { m.buf = nil }

// release gives the reserved range back; the module must not run anymore.
func (m *budget) release() {
	if m.region != nil {
		m.pool.put(m.region)
		m.region = nil
	}
	m.buf = nil
}

// region is a reserved range of address space whose first committed bytes
// are usable.
type region struct {
	mem       []byte
	committed uint64
}

func (r *region) free() { unreserve(r.mem) }

// regionPool keeps a few released memories for the next runs. Touching a
// fresh page costs a page fault, and a Go module touches megabytes as it
// starts; a reused memory is cleared instead (its pages stay resident),
// which is several times cheaper. Only memories that stayed small are
// kept, so the pool holds at most max × maxPooledBytes.
type regionPool struct {
	mu    sync.Mutex
	free  []*region
	max   int
	close bool
}

// maxPooledBytes is the most memory a run may have used for its memory to
// be kept for another: clearing more costs more than faulting it in anew.
const maxPooledBytes = 16 << 20

// get returns a pooled region of n bytes, or a new reservation, or nil
// where the platform has none.
func (p *regionPool) get(n uint64) *region {
	p.mu.Lock()
	for i, r := range p.free {
		if uint64(len(r.mem)) == n {
			p.free = append(p.free[:i], p.free[i+1:]...)
			p.mu.Unlock()
			return r
		}
	}
	p.mu.Unlock()
	mem, err := reserve(n)
	if err != nil {
		return nil
	}
	return &region{mem: mem}
}

// put clears r for another run and keeps it, or releases it.
func (p *regionPool) put(r *region) {
	if r.committed > maxPooledBytes {
		r.free()
		return
	}
	// Nothing of one run may reach the next.
	clear(r.mem[:r.committed])
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.close || len(p.free) >= p.max {
		r.free()
		return
	}
	p.free = append(p.free, r)
}

// drain releases every pooled region, for good.
func (p *regionPool) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.close = true
	for _, r := range p.free {
		r.free()
	}
	p.free = nil
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
