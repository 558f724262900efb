package wire

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The frames travel through two rings in memory the parent and the worker
// share (one each way); the pipes only wake a reader that sleeps. On this
// kind of machine a system call costs 1.5–2 µs and a wake-up through the
// kernel more than a whole host call, so a host call whose both sides are
// awake (see spinner) makes no system call at all: the sender copies the
// frame into the ring and the reader, polling, sees it within
// nanoseconds.
//
// A ring is a byte stream: the sender writes frames in pieces as room
// frees, so a frame may be longer than the ring. The parent never trusts
// what the worker writes into the shared memory: it keeps its own copy of
// its own position, checks the worker's against it, and reads frames only
// after copying them out.

// RingBytes is the capacity of each ring.
const RingBytes = 256 << 10

// Offsets in a ring's header page; each counter has a cache line.
const (
	offTail    = 0   // bytes written, by the sender
	offHead    = 64  // bytes read, by the reader
	offWaiting = 128 // 1 while the reader sleeps on its pipe
	ringHeader = 4096
	ringSpan   = ringHeader + RingBytes
	sharedSize = 2 * ringSpan
)

// Directions: ToWorker carries the parent's frames, ToParent the worker's.
const (
	ToWorker = 0
	ToParent = 1
)

// ErrRing is a ring whose positions the other side broke.
var ErrRing = errors.New("wire: the shared ring's positions are inconsistent")

// Shared is the memory of a channel's two rings.
type Shared struct {
	mem []byte
}

// NewShared creates the rings in a new memory file, to be handed to the
// worker (MapShared) and closed by the caller afterwards.
func NewShared() (*Shared, *os.File, error) {
	fd, err := unix.MemfdCreate("metaclaw-channel", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), "metaclaw-channel")
	if err := f.Truncate(sharedSize); err != nil {
		f.Close()
		return nil, nil, err
	}
	s, err := MapShared(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return s, f, nil
}

// MapShared maps the rings of a memory file made by NewShared.
func MapShared(f *os.File) (*Shared, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() != sharedSize {
		return nil, fmt.Errorf("wire: the channel memory is %d bytes, not %d", st.Size(), sharedSize)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, sharedSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &Shared{mem: mem}, nil
}

// Unmap releases the mapping; nothing may use the rings afterwards.
func (s *Shared) Unmap() {
	if s.mem != nil {
		unix.Munmap(s.mem)
		s.mem = nil
	}
}

// ring is one direction's view of the shared memory.
type ring struct {
	tail, head, waiting *atomic.Uint64
	data                []byte
}

func (s *Shared) ring(dir int) ring {
	base := dir * ringSpan
	at := func(off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&s.mem[base+off])) }
	return ring{tail: at(offTail), head: at(offHead), waiting: at(offWaiting),
		data: s.mem[base+ringHeader : base+ringSpan : base+ringSpan]}
}

// ringWriter sends a byte stream into a ring; Writer serialises it.
type ringWriter struct {
	r        ring
	tail     uint64          // this side's own count; the shared one is only published
	bell     syscall.RawConn // the pipe that wakes the reader
	bellFile *os.File        // kept open as long as the writer
	closing  *atomic.Bool
	stall    time.Duration // how long waitRoom waits for the reader (0: no limit)
}

// Write copies p into the ring, waiting for room as needed.
func (w *ringWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		used := w.tail - w.r.head.Load()
		if used > RingBytes {
			return written, ErrRing
		}
		if used == RingBytes {
			if err := w.waitRoom(); err != nil {
				return written, err
			}
			continue
		}
		off := int(w.tail % RingBytes)
		n := copy(w.r.data[off:min(len(w.r.data), off+int(RingBytes-used))], p)
		w.tail += uint64(n)
		w.r.tail.Store(w.tail)
		written += n
		p = p[n:]
		w.wake()
	}
	return written, nil
}

// wake rings the reader's bell if it sleeps. Exactly one bell per sleep:
// the reader set the flag, and whoever clears it rings. A full pipe means
// the reader has bells enough.
func (w *ringWriter) wake() {
	if w.r.waiting.Load() == 1 && w.r.waiting.CompareAndSwap(1, 0) {
		b := [1]byte{1}
		w.bell.Write(func(fd uintptr) bool {
			for {
				_, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), 1)
				if e != syscall.EINTR {
					return true // written, full (EAGAIN) or gone: never wait
				}
			}
		})
	}
}

// waitRoom waits until the reader has taken something. A ring fills only
// with a frame bigger than it (a reader that is awake drains it as fast
// as it is filled) or with a reader that stopped reading, so the writer
// polls, then sleeps in growing steps, rather than have the reader ring
// back.
func (w *ringWriter) waitRoom() error {
	start := time.Now()
	sleep := 20 * time.Microsecond
	for {
		if w.closing.Load() {
			return os.ErrClosed
		}
		if w.tail-w.r.head.Load() < RingBytes {
			return nil
		}
		// The reader took nothing since the wait began (anything it takes
		// makes room).
		if w.stall > 0 && time.Since(start) >= w.stall {
			// The frame may be half written: nothing may follow it.
			w.closing.Store(true)
			return ErrStalled
		}
		if time.Since(start) < 200*time.Microsecond {
			runtime.Gosched()
			continue
		}
		// A reader that is gone has closed its end of the bell.
		gone := false
		err := w.bell.Control(func(fd uintptr) {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			n, _ := unix.Poll(pfd, 0)
			gone = n > 0 && pfd[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
		})
		if err != nil {
			return err
		}
		if gone {
			return syscall.EPIPE
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, time.Millisecond)
	}
}

// ringReader reads the byte stream of a ring.
type ringReader struct {
	r    ring
	head uint64 // this side's own count; the shared one is only published
	bell *rawFile
	buf  [64]byte
	spin spinner
}

func (r *ringReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, err := r.take(b)
		if n > 0 || err != nil {
			r.spin.done(n > 0)
			return n, err
		}
		if r.spin.again() {
			continue
		}
		// Sleep: say so, then look once more, so that a frame written
		// meanwhile is either seen here or rings the bell.
		r.r.waiting.Store(1)
		if r.r.tail.Load() != r.head {
			// Whoever clears the flag rings; a bell rung for nothing
			// wakes the next sleep once, harmlessly.
			r.r.waiting.CompareAndSwap(1, 0)
			continue
		}
		if _, err := r.bell.Read(r.buf[:]); err != nil {
			r.spin.done(false)
			return 0, err
		}
	}
}

// take copies what the ring holds, up to len(b).
func (r *ringReader) take(b []byte) (int, error) {
	avail := r.r.tail.Load() - r.head
	if avail == 0 {
		return 0, nil
	}
	if avail > RingBytes {
		return 0, ErrRing
	}
	off := int(r.head % RingBytes)
	n := copy(b, r.r.data[off:min(len(r.r.data), off+int(avail))])
	r.head += uint64(n)
	r.r.head.Store(r.head)
	return n, nil
}

// A round trip through sleeping readers wakes a thread on each side, and
// on this kind of machine a wake-up through the kernel costs more than the
// whole host call (a pipe round trip between two C processes: 26 µs
// across cores). Where a frame is expected within microseconds — the
// parent's next call from a worker it has just answered, the worker's
// answer to a call the parent polls for — the reader polls its ring for a
// short window before it sleeps, as an adaptive mutex spins before it
// sleeps. Polling yields the processor to runnable goroutines between
// attempts; at most CPUs − 1 readers of a process poll at once (none on
// one CPU), and a reader whose windows keep expiring stops polling,
// trying again every 16th wait with a window four times as long.
type spinner struct {
	window time.Duration // armed for the next wait, holding a slot
	start  time.Time     // when this wait began polling
	misses int           // windows in a row that expired
	waits  int
}

// maxSpinners is how many readers of this process may poll at once.
var maxSpinners = int32(runtime.NumCPU() - 1)

var spinners atomic.Int32

// arm lets the next wait poll for up to d, if a slot is free and polling
// has been paying off; it reports whether it did.
func (s *spinner) arm(d time.Duration) bool {
	if s.window > 0 {
		return true
	}
	if maxSpinners <= 0 || d <= 0 {
		return false
	}
	s.waits++
	if s.misses >= 4 {
		// Polling stopped paying: try again now and then, with a window
		// long enough for a peer that sleeps to wake and answer (once
		// both sides poll again, the short window is enough).
		if s.waits%16 != 0 {
			return false
		}
		d *= 4
	}
	if spinners.Add(1) > maxSpinners {
		spinners.Add(-1)
		return false
	}
	s.window = d
	return true
}

// again reports whether to retry a read that would block.
func (s *spinner) again() bool {
	if s.window <= 0 {
		return false
	}
	if s.start.IsZero() {
		s.start = time.Now()
	} else if time.Since(s.start) >= s.window {
		s.misses++
		s.release()
		return false
	}
	runtime.Gosched()
	return true
}

// done ends a read: whether it read anything.
func (s *spinner) done(read bool) {
	if s.window <= 0 {
		return
	}
	if read && !s.start.IsZero() {
		if time.Since(s.start) <= s.window/2 {
			s.misses = 0
		} else {
			// Late: the peer was not running (the cores are busy), and
			// polling took the processor a sleeping reader would have
			// left to it.
			s.misses++
		}
	}
	s.release()
}

func (s *spinner) release() {
	s.start = time.Time{}
	s.window = 0
	spinners.Add(-1)
}
