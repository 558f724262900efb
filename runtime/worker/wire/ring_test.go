package wire

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// channelPair is both ends of one direction of a channel, in one process:
// the shared rings mapped twice, as the parent and the worker map them.
type channelPair struct {
	out        *Writer
	in         *Reader
	bellR      *os.File // the reader's bell
	bellW      *os.File
	sent, recv *Shared
}

func newChannelPair(t *testing.T) *channelPair {
	t.Helper()
	sent, mem, err := NewShared()
	if err != nil {
		t.Fatal(err)
	}
	recv, err := MapShared(mem)
	mem.Close()
	if err != nil {
		t.Fatal(err)
	}
	bellR, bellW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewRingWriter(sent, ToWorker, bellW)
	if err != nil {
		t.Fatal(err)
	}
	c := &channelPair{out: out, in: NewRingReader(recv, ToWorker, bellR, 16<<20), bellR: bellR, bellW: bellW, sent: sent, recv: recv}
	t.Cleanup(func() {
		bellR.Close()
		bellW.Close()
	})
	return c
}

// TestFramesThroughTheRing sends small frames from concurrent senders and
// frames several times the ring's size, with the reader both sleeping on
// its bell and polling: every frame arrives whole and in each sender's
// order.
func TestFramesThroughTheRing(t *testing.T) {
	for _, poll := range []bool{false, true} {
		c := newChannelPair(t)
		big := bytes.Repeat([]byte("0123456789abcdef"), 3*RingBytes/16+7) // 3 rings and a bit
		var wg sync.WaitGroup
		for k := 0; k < 4; k++ {
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				for i := 0; i < 300; i++ {
					c.out.Send(KindCall, []byte{byte(k), byte(i), byte(i >> 8)})
					if i%100 == 0 {
						c.out.Send(KindResult, big)
					}
				}
			}(k)
		}
		next := [4]int{}
		small, large := 0, 0
		for small+large < 4*303 {
			if poll {
				c.in.PollNext(SpinWindow)
			}
			kind, payload, err := c.in.Next()
			if err != nil {
				t.Fatal(err)
			}
			switch kind {
			case KindCall:
				k, i := int(payload[0]), int(payload[1])|int(payload[2])<<8
				if len(payload) != 3 || i != next[k] {
					t.Fatalf("sender %d: frame %d arrived when %d was due", k, i, next[k])
				}
				next[k]++
				small++
			case KindResult:
				if !bytes.Equal(payload, big) {
					t.Fatal("a frame bigger than the ring arrived corrupted")
				}
				large++
			default:
				t.Fatalf("kind %d", kind)
			}
		}
		wg.Wait()
		if small != 1200 || large != 12 {
			t.Fatalf("%d small, %d large frames", small, large)
		}
	}
}

// TestRingReaderWakes: a reader that sleeps is woken by the next
// frame, and a frame written while it was deciding to sleep is not lost.
func TestRingReaderWakes(t *testing.T) {
	c := newChannelPair(t)
	got := make(chan []byte)
	go func() {
		for {
			_, p, err := c.in.Next()
			if err != nil {
				close(got)
				return
			}
			got <- p
		}
	}()
	for i := 0; i < 2000; i++ {
		c.out.Send(KindCall, []byte{byte(i)})
		select {
		case p := <-got:
			if p[0] != byte(i) {
				t.Fatalf("frame %d read as %d", i, p[0])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("frame %d never woke the reader", i)
		}
	}
	// The writer's end of the bell closes: the sleeping reader sees the
	// end of the channel.
	c.bellW.Close()
	if _, ok := <-got; ok {
		t.Fatal("a frame after the end")
	}
}

// TestRingRefusesBrokenPositions: positions the other side corrupts are an
// error on both ends, never a read or write outside the ring.
func TestRingRefusesBrokenPositions(t *testing.T) {
	c := newChannelPair(t)
	if err := c.out.Send(KindCall, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	// The sender claims more than a ring's worth of data.
	c.sent.ring(ToWorker).tail.Store(RingBytes + 100)
	if _, _, err := c.in.Next(); !errors.Is(err, ErrRing) {
		t.Fatalf("reader: %v", err)
	}
	// The reader claims to have read what was never written.
	c2 := newChannelPair(t)
	c2.recv.ring(ToWorker).head.Store(1 << 40)
	if err := c2.out.Send(KindCall, []byte("x")); !errors.Is(err, ErrRing) {
		t.Fatalf("writer: %v", err)
	}
}

// TestRingWriterGivesUp: a writer waiting for room ends when stopped, and
// when the reader's end of the bell is gone.
func TestRingWriterGivesUp(t *testing.T) {
	c := newChannelPair(t)
	done := make(chan error, 1)
	go func() { done <- c.out.Send(KindResult, make([]byte, 2*RingBytes)) }()
	// Once the ring is full the writer waits for room; stop it then.
	for c.sent.ring(ToWorker).tail.Load() < RingBytes {
		runtime.Gosched()
	}
	c.out.Stop()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("stopped writer: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stopped writer still waits for room")
	}
	if err := c.out.Send(KindCall, nil); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("send after stop: %v", err)
	}

	c2 := newChannelPair(t)
	go func() { done <- c2.out.Send(KindResult, make([]byte, 2*RingBytes)) }()
	c2.bellR.Close()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("writer to a gone reader: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a writer waits for room from a reader that is gone")
	}
}

// A writer whose reader takes nothing gives up after its stall, and a
// SendWithin after its own; a reader that takes something in time lets
// the send finish.
func TestRingWriterStalls(t *testing.T) {
	c := newChannelPair(t)
	c.out.SetStall(50 * time.Millisecond)
	start := time.Now()
	if err := c.out.Send(KindResult, make([]byte, 2*RingBytes)); !errors.Is(err, ErrStalled) {
		t.Fatalf("send to a reader that takes nothing: %v", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before its stall", took)
	}
	// Its frame is half written: nothing may follow it.
	if err := c.out.Send(KindCall, nil); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("send after a stall: %v", err)
	}

	c2 := newChannelPair(t)
	if err := c2.out.SendWithin(KindResult, make([]byte, 2*RingBytes), 20*time.Millisecond); !errors.Is(err, ErrStalled) {
		t.Fatalf("SendWithin to a reader that takes nothing: %v", err)
	}

	c3 := newChannelPair(t)
	c3.out.SetStall(time.Minute)
	payload := make([]byte, 3*RingBytes)
	payload[len(payload)-1] = 7
	done := make(chan error, 1)
	go func() { done <- c3.out.Send(KindResult, payload) }()
	kind, got, err := c3.in.Next()
	if err != nil || kind != KindResult || len(got) != len(payload) || got[len(got)-1] != 7 {
		t.Fatalf("frame through a ring three times its size: %v kind %d len %d", err, kind, len(got))
	}
	if err := <-done; err != nil {
		t.Fatalf("send with a reader taking: %v", err)
	}
}
