// Package wire is the channel between the sandbox worker pool and a worker
// process: length-prefixed frames through two rings in shared memory, one
// each way, with the worker's stdin and stdout as bells that wake a
// sleeping reader (ring.go). Readers and writers over plain pipes or
// buffers remain for tests and tools.
//
// A frame is a 4-byte big-endian length, a kind byte and a payload. The
// payloads are a small hand-written binary encoding (unsigned varints and
// length-prefixed byte strings), chosen over JSON and gob after measuring:
// a trivial run's frames encode and decode in well under a microsecond and
// need no reflection. Values that cross the channel (host-call arguments,
// results, the run's input and result) are JSON text carried as opaque
// byte strings, so the registry decodes them exactly as it decodes every
// other door's JSON.
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Frame kinds. The parent sends Init once, Plan when the API changes, Run
// per script, Reply per host call and Cancel when a run must end early.
// The worker sends Hello once, Call per host call, Logs as console output
// accumulates, Stopping when it is stopping a run on its own (time,
// memory) and Result per run.
const (
	KindInit   byte = 1
	KindPlan   byte = 2
	KindRun    byte = 3
	KindReply  byte = 4
	KindCancel byte = 5

	KindHello    byte = 16
	KindCall     byte = 17
	KindStopping byte = 18
	KindResult   byte = 19
	KindLogs     byte = 20
)

const headerLen = 5

// ErrStalled is returned by a Send whose reader stopped taking frames (see
// Writer.SetStall).
var ErrStalled = errors.New("wire: the reader stopped taking frames")

// ErrTooLarge is returned for a frame longer than the reader accepts.
var ErrTooLarge = errors.New("wire: frame too large")

// Writer writes whole frames; it is safe for concurrent use.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	buf     []byte
	closing atomic.Bool
}

// NewWriter writes frames to w. A non-blocking *os.File is written with
// raw system calls (raw.go).
func NewWriter(w io.Writer) *Writer { return &Writer{w: raw(w).(io.Writer)} }

// NewRingWriter writes frames into the ring of s going in direction dir,
// waking its reader through the pipe bell (ring.go).
func NewRingWriter(s *Shared, dir int, bell *os.File) (*Writer, error) {
	// Through the file's RawConn, not bell.Fd(): Fd would make the
	// descriptor blocking (a bell must never block), and a bare descriptor
	// number could be closed and reused by another file meanwhile.
	rc, err := bell.SyscallConn()
	if err != nil {
		return nil, err
	}
	w := &Writer{}
	w.w = &ringWriter{r: s.ring(dir), bell: rc, bellFile: bell, closing: &w.closing}
	return w, nil
}

// Close makes every Send from now on fail, and ends a Send that waits for
// room in a ring; it waits for a Send in progress to return.
func (w *Writer) Close() {
	w.closing.Store(true)
	w.mu.Lock()
	w.w = closedWriter{}
	w.mu.Unlock()
}

// Stop makes a Send waiting for room in a ring give up, and every Send
// from now on fail, without waiting.
func (w *Writer) Stop() { w.closing.Store(true) }

// SetStall makes a Send into a ring give up with ErrStalled when its reader
// has taken nothing for d (0, the default: wait as long as it takes); the
// writer is then stopped (see Stop), since its frame may be half written.
// Call it before the first Send.
func (w *Writer) SetStall(d time.Duration) {
	if rw, ok := w.w.(*ringWriter); ok {
		rw.stall = d
	}
}

type closedWriter struct{}

func (closedWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

// smallFrame is the size up to which a frame is copied into one buffer
// and written with one system call.
const smallFrame = 64 << 10

// Send writes one frame.
func (w *Writer) Send(kind byte, payload []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.send(kind, payload)
}

// SendWithin is Send with its own stall limit (see SetStall): a frame that
// must be taken before a deadline.
func (w *Writer) SendWithin(kind byte, payload []byte, stall time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rw, ok := w.w.(*ringWriter); ok {
		saved := rw.stall
		rw.stall = max(stall, time.Nanosecond)
		defer func() { rw.stall = saved }()
	}
	return w.send(kind, payload)
}

func (w *Writer) send(kind byte, payload []byte) error {
	if w.closing.Load() {
		return os.ErrClosed
	}
	if len(payload) <= smallFrame {
		w.buf = appendHeader(w.buf[:0], kind, len(payload))
		w.buf = append(w.buf, payload...)
		_, err := w.w.Write(w.buf)
		return err
	}
	var hdr [headerLen]byte
	if _, err := w.w.Write(appendHeader(hdr[:0], kind, len(payload))); err != nil {
		return err
	}
	_, err := w.w.Write(payload)
	return err
}

func appendHeader(b []byte, kind byte, n int) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(n+1))
	return append(b, kind)
}

// Reader reads frames.
type Reader struct {
	r    *bufio.Reader
	spin *spinner
	max  int
}

// NewReader reads frames from r, refusing payloads longer than max bytes.
// A non-blocking *os.File is read with raw system calls (raw.go).
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{r: bufio.NewReaderSize(raw(r).(io.Reader), 64<<10), max: max}
}

// NewRingReader reads frames from the ring of s coming in direction dir,
// sleeping on the pipe bell when it is empty (ring.go).
func NewRingReader(s *Shared, dir int, bell *os.File, max int) *Reader {
	rr := &ringReader{r: s.ring(dir), bell: newRawFile(bell)}
	return &Reader{r: bufio.NewReaderSize(rr, 64<<10), spin: &rr.spin, max: max}
}

// SpinWindow is how long a reader polls for a frame expected at once: a
// host call's turnaround on either side, with room for a scheduling delay,
// and about what a sleep and a wake-up cost. Measured with the other core
// idle, the overhead of a host call was 12 µs polling 30 or 60 µs and 14
// µs polling 200; with the other core busy (polling cannot pay), 200 µs
// cost 7 µs more than not polling, 30–60 µs about nothing.
const SpinWindow = 50 * time.Microsecond

// PollNext lets the next read poll for up to d before it sleeps, when a
// frame is expected that soon and a polling slot is free (see spinner);
// it reports whether it will. Only the goroutine that reads may call it.
func (r *Reader) PollNext(d time.Duration) bool {
	return r.spin != nil && r.spin.arm(d)
}

// SetMax changes the longest payload accepted.
func (r *Reader) SetMax(max int) { r.max = max }

// Next reads one frame. The payload is newly allocated and the caller's.
func (r *Reader) Next() (kind byte, payload []byte, err error) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(r.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:4])) - 1
	if n < 0 {
		return 0, nil, fmt.Errorf("wire: malformed frame header")
	}
	if n > r.max {
		return 0, nil, fmt.Errorf("%w: %d bytes (the limit is %d)", ErrTooLarge, n, r.max)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r.r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[4], payload, nil
}

// Enc builds a payload.
type Enc struct{ B []byte }

// Uint appends an unsigned varint.
func (e *Enc) Uint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// Int appends a signed varint.
func (e *Enc) Int(v int64) { e.B = binary.AppendVarint(e.B, v) }

// Bool appends a boolean.
func (e *Enc) Bool(v bool) {
	if v {
		e.B = append(e.B, 1)
	} else {
		e.B = append(e.B, 0)
	}
}

// Bytes appends a length-prefixed byte string.
func (e *Enc) Bytes(b []byte) {
	e.Uint(uint64(len(b)))
	e.B = append(e.B, b...)
}

// String appends a length-prefixed string.
func (e *Enc) String(s string) {
	e.Uint(uint64(len(s)))
	e.B = append(e.B, s...)
}

// Dec reads a payload; the first error sticks and later reads return zero
// values.
type Dec struct {
	B   []byte
	Err error
}

func (d *Dec) fail() {
	if d.Err == nil {
		d.Err = errors.New("wire: malformed payload")
	}
	d.B = nil
}

// Uint reads an unsigned varint.
func (d *Dec) Uint() uint64 {
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Int reads a signed varint.
func (d *Dec) Int() int64 {
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Bool reads a boolean.
func (d *Dec) Bool() bool {
	if len(d.B) < 1 {
		d.fail()
		return false
	}
	v := d.B[0] != 0
	d.B = d.B[1:]
	return v
}

// Bytes reads a length-prefixed byte string; it aliases the payload.
func (d *Dec) Bytes() []byte {
	n := d.Uint()
	if d.Err != nil || n > uint64(len(d.B)) {
		d.fail()
		return nil
	}
	b := d.B[:n:n]
	d.B = d.B[n:]
	return b
}

// String reads a length-prefixed string.
func (d *Dec) String() string { return string(d.Bytes()) }
