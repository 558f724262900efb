package worker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/runtime/worker"
	"github.com/metaclaw/metaclaw/runtime/worker/wire"
)

// hostileArg starts this test binary as a worker that follows the protocol
// up to its first run and then attacks its parent through the channel: the
// code a script would need if it ever escaped the VM. Its arguments are the
// attack and a directory to leave its PID in.
const hostileArg = "__hostile_worker"

func init() {
	if len(os.Args) > 3 && os.Args[1] == hostileArg {
		os.Exit(hostileWorker(os.Args[2], os.Args[3]))
	}
}

// The rings' layout, as a worker sees it in the shared memory (wire/ring.go):
// per direction a 4 KB header (the writer's tail at 0, the reader's head at
// 64) and then the data.
const (
	ringHeader = 4096
	ringSpan   = ringHeader + wire.RingBytes
	offHead    = 64
)

func hostileWorker(attack, pidDir string) int {
	os.WriteFile(filepath.Join(pidDir, strconv.Itoa(os.Getpid())), nil, 0o644)
	mem := os.NewFile(3, "channel-memory")
	shared, err := wire.MapShared(mem)
	if err != nil {
		return 1
	}
	raw, err := unix.Mmap(3, 0, 2*ringSpan, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return 1
	}
	in := wire.NewRingReader(shared, wire.ToWorker, os.Stdin, 1<<30)
	out, err := wire.NewRingWriter(shared, wire.ToParent, os.Stdout)
	if err != nil {
		return 1
	}
	if kind, _, err := in.Next(); err != nil || kind != wire.KindInit {
		return 1
	}
	hello := wire.Hello{PID: os.Getpid()}
	if out.Send(wire.KindHello, hello.Marshal()) != nil {
		return 1
	}
	var run wire.Run
	for {
		kind, payload, err := in.Next()
		if err != nil {
			return 1
		}
		if kind == wire.KindRun {
			if run.Unmarshal(payload) != nil {
				return 1
			}
			break
		}
	}

	// The parent's ring: its tail (what this side wrote) and the data.
	up := raw[ringSpan : 2*ringSpan]
	tail := (*atomic.Uint64)(unsafe.Pointer(&up[0]))
	head := (*atomic.Uint64)(unsafe.Pointer(&up[offHead]))
	data := up[ringHeader:]
	bell := func() { os.Stdout.Write([]byte{1}) }
	// put writes bytes into the ring behind the writer's back.
	put := func(b []byte) {
		t := tail.Load()
		for i, c := range b {
			data[(t+uint64(i))%wire.RingBytes] = c
		}
		tail.Store(t + uint64(len(b)))
		bell()
	}
	frame := func(kind byte, payload []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)+1))
		return append(append(b, kind), payload...)
	}
	switch attack {
	case "tail past the ring":
		// Claims more bytes than the ring holds: the parent would read
		// memory it never wrote, or past the mapping.
		tail.Store(head.Load() + wire.RingBytes + 1)
		bell()
	case "tail moved back":
		tail.Store(1)
		bell()
	case "frame claims 4 GB":
		put([]byte{0xff, 0xff, 0xff, 0xff, wire.KindResult})
	case "malformed result":
		put(frame(wire.KindResult, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}))
	case "unknown frame kind":
		put(frame(200, nil))
	case "malformed host call":
		put(frame(wire.KindCall, []byte{0x80}))
	case "bells without frames":
		for i := 0; i < 100000; i++ {
			bell()
		}
	case "result for another run":
		res := wire.Result{Run: run.ID + 1, OK: true, Result: []byte("1")}
		out.Send(wire.KindResult, res.Marshal())
	case "exits mid-run":
		return 0
	case "claims the parent's ring is full":
		claimFull(raw)
	case "calls the host, then stops reading":
		// The parent answers into a ring claimed full: its reply waits
		// for room until the run's end kills this worker.
		claimFull(raw)
		call := wire.Call{Run: run.ID, ID: 1, Method: 0, Args: []byte("[]")}
		out.Send(wire.KindCall, call.Marshal())
	case "answers, then claims the parent's ring is full":
		// The claim comes first: once the parent has the result, it may
		// send the next run at any moment.
		claimFull(raw)
		res := wire.Result{Run: run.ID, OK: true, Result: []byte("1")}
		out.Send(wire.KindResult, res.Marshal())
	}
	// Ignore everything until the parent closes the channel (or kills
	// this process).
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// claimFull makes the parent's writer believe its ring to this worker has
// no room: the reader's position a whole ring behind the writer's.
func claimFull(raw []byte) {
	down := raw[:ringSpan]
	tail := (*atomic.Uint64)(unsafe.Pointer(&down[0]))
	head := (*atomic.Uint64)(unsafe.Pointer(&down[offHead]))
	head.Store(tail.Load() - wire.RingBytes)
}

// A worker that breaks the channel's protocol, its rings' positions or its
// frames ends its run with a coded error at once (or, when it merely stays
// silent, at the run's deadline), is killed and reaped, and leaves the
// host serving: what a script that escaped goja could do to its parent.
func TestHostileWorkerCannotHurtTheHost(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const limitMs = 1500
	cases := []struct {
		attack string
		code   apierr.Code
		// quick: the run ends well before its deadline (the breach is
		// seen); otherwise at the deadline.
		quick bool
	}{
		{"tail past the ring", apierr.Internal, true},
		{"tail moved back", apierr.Internal, true},
		{"frame claims 4 GB", apierr.Internal, true},
		{"malformed result", apierr.Internal, true},
		{"unknown frame kind", apierr.Internal, true},
		{"malformed host call", apierr.Internal, true},
		{"exits mid-run", apierr.Internal, true},
		{"bells without frames", apierr.Timeout, false},
		{"result for another run", apierr.Timeout, false},
		{"calls the host, then stops reading", apierr.Timeout, false},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.attack, func(t *testing.T) {
			pids := t.TempDir()
			s := newServer(t, hostapi.RunLimits{Timeout: limitMs * time.Millisecond},
				worker.Options{Size: 1, Command: []string{exe, hostileArg, c.attack, pids}})
			// Timed from a warm worker: its start is the pool's, not the run's.
			waitFor(t, func() bool { return s.p.Stats().Idle > 0 })
			start := time.Now()
			status, res, err := s.post(ctx, "return 1", limitMs)
			took := time.Since(start)
			if err != nil || status != 200 {
				t.Fatalf("status %d, %v", status, err)
			}
			if res.OK || res.Error == nil || res.Error.Code != c.code {
				t.Fatalf("want %s, got ok=%v %+v", c.code, res.OK, res.Error)
			}
			if c.quick && took > limitMs*time.Millisecond/2 {
				t.Errorf("the breach took %v to end the run", took)
			}
			if !c.quick && took > (limitMs+400)*time.Millisecond {
				t.Errorf("the run ended after %v (limit %d ms)", took, limitMs)
			}
			// The worker that ran it is killed and reaped (a breach seen
			// on the channel ends the run once the process is waited for;
			// a silent worker is killed as its run ends, and reaped
			// just after).
			pid := firstPID(t, pids)
			gone := func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }
			if c.quick && !gone() {
				t.Errorf("hostile worker %d is still there after its run", pid)
			}
			waitFor(t, gone, func() string { return fmt.Sprintf("hostile worker %d is still there", pid) })
			t.Logf("%-36s %s after %v: %s", c.attack, res.Error.Code, took.Round(time.Millisecond), firstLine(res.Error.Message))
		})
	}
	// The host serves on: a pool of real workers in this same process.
	s := newServer(t, hostapi.RunLimits{}, worker.Options{Size: 1})
	if _, res, err := s.post(ctx, "return 6 * 7", 0); err != nil || !res.OK || string(mustJSON(res.Result)) != "42" {
		t.Fatalf("after the attacks: %v %+v", err, res)
	}
}

// A worker that stops reading and claims its ring is full cannot hold the
// parent: a run whose client goes away, which the parent cancels by
// sending a frame into that ring, still ends, its worker is killed and its
// slot is free.
func TestWorkerThatStopsReadingCannotHoldItsRun(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const limitMs = 1500
	pids := t.TempDir()
	s := newServer(t, hostapi.RunLimits{Timeout: limitMs * time.Millisecond},
		worker.Options{Size: 1, Command: []string{exe, hostileArg, "claims the parent's ring is full", pids}})
	waitFor(t, func() bool { return s.p.Stats().Idle > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, _, err := s.post(ctx, "return 1", limitMs); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the client gave up, yet: %v", err)
	}
	pid := firstPID(t, pids)
	start := time.Now()
	waitFor(t, func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) && s.p.Stats().Busy == 0 },
		func() string { return fmt.Sprintf("worker %d, stats %+v", pid, s.p.Stats()) })
	t.Logf("worker %d gone and the slot free %v after the client left", pid, time.Since(start).Round(time.Millisecond))

	// A worker that answers its first run and then stops reading: the
	// next run's frame cannot be sent, and the run ends by its deadline
	// (+ KillAfter) with the worker killed.
	pids = t.TempDir()
	s = newServer(t, hostapi.RunLimits{Timeout: limitMs * time.Millisecond},
		worker.Options{Size: 1, Command: []string{exe, hostileArg, "answers, then claims the parent's ring is full", pids}})
	waitFor(t, func() bool { return s.p.Stats().Idle > 0 })
	if _, res, err := s.post(context.Background(), "return 1", limitMs); err != nil || !res.OK || string(mustJSON(res.Result)) != "1" {
		t.Fatalf("first run: %v %+v", err, res)
	}
	start = time.Now()
	_, res, err := s.post(context.Background(), "return 1", limitMs)
	took := time.Since(start)
	if err != nil || res.OK || res.Error == nil || res.Error.Code != apierr.Internal || !strings.Contains(res.Error.Message, "stopped reading") {
		t.Fatalf("second run: %v %+v %+v", err, res, res.Error)
	}
	if took > (limitMs+400)*time.Millisecond {
		t.Errorf("the second run ended after %v (limit %d ms)", took, limitMs)
	}
	pid = firstPID(t, pids)
	waitFor(t, func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) && s.p.Stats().Busy == 0 },
		func() string { return fmt.Sprintf("worker %d, stats %+v", pid, s.p.Stats()) })
	t.Logf("a worker that stopped reading between runs: %s after %v", res.Error.Code, took.Round(time.Millisecond))
}

// firstPID is the first hostile worker a pool started: each leaves its
// PID in dir.
func firstPID(t *testing.T, dir string) int {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	first := 0
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && (first == 0 || pid < first) {
			first = pid
		}
	}
	if first == 0 {
		t.Fatal("no hostile worker started")
	}
	return first
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
