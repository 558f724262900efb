package wire

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"
)

func TestMessagesRoundTrip(t *testing.T) {
	type msg interface {
		Marshal() []byte
		Unmarshal([]byte) error
	}
	cases := []struct{ in, out msg }{
		{&Init{ParentPID: 42, Chroot: true, UID: 65534, GID: -1, MaxStack: 64 << 20, MaxProcs: 1, HeapReserve: 256 << 20}, &Init{}},
		{&Hello{PID: 7, Confined: "chroot, uid 65534", Problem: ""}, &Hello{}},
		{&Plan{Version: 3, Spec: []byte(`{"methods":[]}`)}, &Plan{}},
		{&Run{ID: 9, PlanVersion: 3, Name: "s.js", Code: "return 1", Input: []byte(`{"a":1}`), Session: "s", Timeout: time.Second,
			TimeoutMessage: "too long", MemoryBytes: 1 << 28, LogBytes: 1 << 20, ResultBytes: 10 << 20, MaxCalls: 16, MaxArgBytes: 1 << 27, Grace: 30 * time.Millisecond}, &Run{}},
		{&Call{Run: 9, ID: 1, Method: 12, Args: []byte(`{"id":"a.txt"}`)}, &Call{}},
		{&Reply{Run: 9, ID: 1, Code: "NOT_FOUND", Message: "no such file"}, &Reply{}},
		{&Reply{Run: 9, ID: 2, Result: []byte(`[1,2]`)}, &Reply{}},
		{&Stop{Run: 9, Code: "TIMEOUT", Message: "late"}, &Stop{}},
		{&Logs{Run: 9, Logs: []Log{{"log", "a"}, {"warn", ""}}}, &Logs{}},
		{&Result{Run: 9, OK: true, Result: []byte(`"x"`), Logs: []Log{{"info", "é"}}, HeapBytes: 1 << 20, Exiting: true}, &Result{}},
		{&Result{Run: 10, Code: "VALIDATION_FAILED", Message: "bad", Stack: "at script.js:1"}, &Result{}},
	}
	for _, c := range cases {
		b := c.in.Marshal()
		if err := c.out.Unmarshal(b); err != nil {
			t.Fatalf("%T: %v", c.in, err)
		}
		if !reflect.DeepEqual(normalize(c.in), normalize(c.out)) {
			t.Fatalf("%T:\n in  %+v\n out %+v", c.in, c.in, c.out)
		}
		// Every truncation of a payload is refused, never read as something else.
		for i := 0; i < len(b); i++ {
			if err := c.out.Unmarshal(b[:i]); err == nil {
				t.Fatalf("%T: a payload cut at %d of %d bytes was accepted", c.in, i, len(b))
			}
		}
	}
}

// normalize makes empty and nil byte slices compare equal.
func normalize(m any) any {
	v := reflect.ValueOf(m).Elem()
	out := reflect.New(v.Type()).Elem()
	out.Set(v)
	for i := 0; i < out.NumField(); i++ {
		f := out.Field(i)
		if f.Kind() == reflect.Slice && f.Len() == 0 {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return out.Interface()
}

func TestFramesOverAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	big := bytes.Repeat([]byte("0123456789"), 1<<20) // larger than the pipe's buffer
	out := NewWriter(w)
	in := NewReader(r, 16<<20)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer w.Close()
		// Concurrent senders: frames never interleave.
		var inner sync.WaitGroup
		for k := 0; k < 4; k++ {
			inner.Add(1)
			go func(k int) {
				defer inner.Done()
				for i := 0; i < 50; i++ {
					out.Send(KindCall, []byte{byte(k), byte(i)})
				}
				out.Send(KindResult, big)
			}(k)
		}
		inner.Wait()
	}()
	small, large := 0, 0
	for {
		kind, payload, err := in.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch kind {
		case KindCall:
			if len(payload) != 2 {
				t.Fatalf("small frame of %d bytes", len(payload))
			}
			small++
		case KindResult:
			if !bytes.Equal(payload, big) {
				t.Fatal("big frame corrupted")
			}
			large++
		default:
			t.Fatalf("kind %d", kind)
		}
	}
	wg.Wait()
	if small != 200 || large != 4 {
		t.Fatalf("%d small, %d large frames", small, large)
	}
}

func TestReaderRefusesOversizedAndTruncatedFrames(t *testing.T) {
	var buf bytes.Buffer
	NewWriter(&buf).Send(KindCall, make([]byte, 100))
	if _, _, err := NewReader(bytes.NewReader(buf.Bytes()), 99).Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	if _, _, err := NewReader(bytes.NewReader(buf.Bytes()[:50]), 1000).Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
	if _, _, err := NewReader(bytes.NewReader([]byte{0, 0, 0, 0, 1}), 1000).Next(); err == nil {
		t.Fatal("a zero-length frame was accepted")
	}
}

// BenchmarkCallFrame is the codec's share of a host call: a Call frame
// and its Reply, encoded and decoded.
func BenchmarkCallFrame(b *testing.B) {
	args := []byte(`{"id":"reports/q3.xlsx","sheet":"Sales","range":"A1:D50"}`)
	result := []byte(`[[1,"a",true,null],[2,"b",false,3.5]]`)
	for i := 0; i < b.N; i++ {
		c := Call{Run: 7, ID: uint64(i), Method: 12, Args: args}
		var c2 Call
		c2.Unmarshal(c.Marshal())
		r := Reply{Run: 7, ID: uint64(i), Result: result}
		var r2 Reply
		r2.Unmarshal(r.Marshal())
	}
}
