// Package child is the sandbox worker process. Importing it (for its init
// function) lets a binary serve as a worker: started with Arg as its first
// argument, the process turns into a worker inside this package's init and
// never returns to main.
//
// Doing it in an init is deliberate: the worker never runs main's set-up.
// It does not escape every other package's initialiser, though. Go takes
// the first ready package by import path at each step, and goja waits for
// golang.org/x/text, which sorts after most github.com packages; so the
// spreadsheet, schema and PDF libraries initialise first and leave 2.5 MB
// of package data on the worker's heap (see gcPercent). The worker holds
// nothing but its channel: stdin and stdout carry frames
// (runtime/worker/wire), stderr carries a crash report to the parent,
// every other inherited descriptor is closed, and when the parent asks it
// chroots into its empty working directory, drops to an unprivileged user
// and sets no_new_privs.
package child

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/metaclaw/metaclaw/bindings/js/stubs"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/runtime/js/script"
	"github.com/metaclaw/metaclaw/runtime/worker/wire"
)

// Arg is the hidden first argument that starts a binary as a worker.
const Arg = "__worker"

// Exit codes a worker ends with.
const (
	// ExitStuck: the worker reported a run the VM could not unwind from
	// (a native built-in ignoring the interrupt) and exited.
	ExitStuck = 3
	// ExitProtocol: the channel carried something the worker cannot read.
	ExitProtocol = 4
	// ExitSetup: confinement the parent asked for could not be applied.
	ExitSetup = 5
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == Arg {
		// Nobody reads a worker's memory profile.
		runtime.MemProfileRate = 0
		// A worker's live heap is the binary's package data (2.5 MB, all
		// of it marked on every cycle) and one prepared VM; what a run
		// allocates is garbage once it ends. At the default GOGC a cycle
		// came every ~90 trivial runs and collection took a fifth of the
		// worker's CPU; at 200 it comes half as often. The price is the
		// garbage that waits between runs: after 1,600 small runs a
		// worker's anonymous RSS was 17.9 MB against 14.6–15.9 (400 halved
		// the cycles again but left 24–25 MB). During a run the memory
		// limit (exec) makes the collector work before the budget could
		// be reached, so this changes nothing of what a run may use.
		debug.SetGCPercent(gcPercent)
		os.Exit(Main())
	}
}

// gcPercent is the worker's GOGC (see init).
const gcPercent = 200

// maxParentFrame bounds what the worker accepts from its parent (host-call
// results, the API plan).
const maxParentFrame = 1 << 30

// Main runs the worker until its parent closes the channel; it returns the
// process exit code.
func Main() int {
	shared, err := mapChannel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "metaclaw worker:", err)
		return ExitProtocol
	}
	closed := closeInherited()
	in, out, err := channel(shared)
	if err != nil {
		fmt.Fprintln(os.Stderr, "metaclaw worker:", err)
		return ExitProtocol
	}

	kind, payload, err := in.Next()
	if err != nil || kind != wire.KindInit {
		fmt.Fprintln(os.Stderr, "metaclaw worker: expected an init frame from the parent:", err)
		return ExitProtocol
	}
	var ini wire.Init
	if err := ini.Unmarshal(payload); err != nil {
		fmt.Fprintln(os.Stderr, "metaclaw worker:", err)
		return ExitProtocol
	}
	hello := confine(&ini)
	if closed > 0 {
		hello.Confined = strings.TrimPrefix(hello.Confined+", closed "+strconv.Itoa(closed)+" inherited descriptors", ", ")
	}
	hello.PID = os.Getpid()
	if hello.Problem == "" && ini.HeapReserve > 0 {
		// Before Hello: the parent takes the worker's idle size, the
		// base of its data limit, once Hello arrives.
		prepareHeap(ini.HeapReserve)
	}
	if err := out.Send(wire.KindHello, hello.Marshal()); err != nil {
		return ExitProtocol
	}
	if hello.Problem != "" {
		return ExitSetup
	}
	w := &worker{out: out, runs: make(chan *wire.Run, 1)}
	go w.read(in)
	// The main goroutine is locked to the main thread during package
	// initialisation; waking a locked goroutine costs two thread switches,
	// so the VM runs on a goroutine of its own.
	go w.serve()
	select {}
}

// channelMemFD is where the parent passes the memory of the channel's
// rings.
const channelMemFD = 3

// mapChannel maps the rings and closes their descriptor: the mapping is
// all the worker keeps of it.
func mapChannel() (*wire.Shared, error) {
	f := os.NewFile(channelMemFD, "channel-memory")
	if f == nil {
		return nil, errors.New("no channel memory on descriptor 3")
	}
	defer f.Close()
	return wire.MapShared(f)
}

// channel moves the bells off descriptors 0 and 1 onto descriptors of
// their own, non-blocking so that a sleeping reader waits in the network
// poller (a goroutine parked there is woken on the processor of the
// thread that read the bell; a thread blocked in read(2) keeps its
// processor until the runtime's monitor notices). Descriptor 0 is closed
// and descriptor 1 writes to stderr, so stray output cannot reach the
// parent. The os.Stdin and os.Stdout objects stay in place: dropping them
// would let their finalizers close descriptors 0 and 1 at random.
func channel(shared *wire.Shared) (*wire.Reader, *wire.Writer, error) {
	inFD, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, nil, err
	}
	outFD, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, nil, err
	}
	unix.Close(0)
	unix.Dup3(2, 1, 0)
	for _, fd := range []int{inFD, outFD} {
		if err := syscall.SetNonblock(fd, true); err != nil {
			return nil, nil, err
		}
	}
	in := wire.NewRingReader(shared, wire.ToWorker, os.NewFile(uintptr(inFD), "channel-in"), maxParentFrame)
	out, err := wire.NewRingWriter(shared, wire.ToParent, os.NewFile(uintptr(outFD), "channel-out"))
	if err != nil {
		return nil, nil, err
	}
	return in, out, nil
}

// closeInherited closes descriptors above stderr that came through exec:
// the parent's own are close-on-exec, but it may have inherited others
// (from a shell, a supervisor) or a C library may have opened some without
// O_CLOEXEC. Those are exactly the descriptors without FD_CLOEXEC here:
// everything this process opened itself (the Go runtime's epoll and cgroup
// files) has the flag.
func closeInherited() int {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0
	}
	names, _ := dir.Readdirnames(-1)
	self := int(dir.Fd())
	var fds []int
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd <= 2 || fd == self {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		fds = append(fds, fd)
	}
	dir.Close()
	for _, fd := range fds {
		syscall.Close(fd)
	}
	return len(fds)
}

// confine applies what ini asks for, in the order that keeps each step
// possible: limits, chroot, dropping privileges, no_new_privs, then the
// parent-death signal again (changing credentials clears it).
func confine(ini *wire.Init) wire.Hello {
	var h wire.Hello
	var done []string
	if ini.MaxStack > 0 {
		debug.SetMaxStack(ini.MaxStack)
	}
	if ini.MaxProcs > 0 {
		runtime.GOMAXPROCS(ini.MaxProcs)
	}
	os.Clearenv()
	if ini.Chroot {
		if err := syscall.Chroot("."); err != nil {
			h.Problem = "chroot: " + err.Error()
			return h
		}
		if err := syscall.Chdir("/"); err != nil {
			h.Problem = "chdir: " + err.Error()
			return h
		}
		done = append(done, "chroot")
	}
	if ini.GID >= 0 && ini.UID >= 0 {
		if err := syscall.Setgroups(nil); err != nil {
			h.Problem = "setgroups: " + err.Error()
			return h
		}
		if err := syscall.Setgid(ini.GID); err != nil {
			h.Problem = "setgid: " + err.Error()
			return h
		}
		if err := syscall.Setuid(ini.UID); err != nil {
			h.Problem = "setuid: " + err.Error()
			return h
		}
		done = append(done, "uid "+strconv.Itoa(ini.UID))
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err == nil {
		done = append(done, "no_new_privs")
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err == nil {
		done = append(done, "parent-death signal")
	}
	if ini.ParentPID > 0 && os.Getppid() != ini.ParentPID {
		// The parent died before the signal was armed again.
		os.Exit(0)
	}
	h.Confined = strings.Join(done, ", ")
	return h
}

// worker is the state shared by the reader goroutine and the VM goroutine.
type worker struct {
	out  *wire.Writer
	runs chan *wire.Run

	mu      sync.Mutex
	plan    *stubs.Plan
	version uint64
	current *active
}

// active is the run in progress: its host calls and how to stop it.
type active struct {
	id     uint64
	run    *script.Run
	mu     sync.Mutex
	nextID uint64
	calls  map[uint64]func([]byte, *apierr.Error)
	sent   bool
	// cancel is a Cancel frame that arrived before the VM existed.
	cancel *apierr.Error
}

// read dispatches the parent's frames; the worker exits when the parent
// closes the channel.
func (w *worker) read(in *wire.Reader) {
	for {
		kind, payload, err := in.Next()
		if err != nil {
			os.Exit(0)
		}
		switch kind {
		case wire.KindPlan:
			var m wire.Plan
			var spec stubs.Spec
			if m.Unmarshal(payload) != nil || json.Unmarshal(m.Spec, &spec) != nil {
				fmt.Fprintln(os.Stderr, "metaclaw worker: malformed plan frame")
				os.Exit(ExitProtocol)
			}
			plan := stubs.NewPlan(&spec)
			w.mu.Lock()
			w.plan, w.version = plan, m.Version
			w.mu.Unlock()
		case wire.KindRun:
			var m wire.Run
			if m.Unmarshal(payload) != nil {
				os.Exit(ExitProtocol)
			}
			a := &active{id: m.ID, calls: map[uint64]func([]byte, *apierr.Error){}}
			w.mu.Lock()
			w.current = a
			w.mu.Unlock()
			w.runs <- &m
		case wire.KindReply:
			var m wire.Reply
			if m.Unmarshal(payload) != nil {
				os.Exit(ExitProtocol)
			}
			w.mu.Lock()
			a := w.current
			w.mu.Unlock()
			if a == nil || a.id != m.Run {
				continue
			}
			a.mu.Lock()
			done := a.calls[m.ID]
			delete(a.calls, m.ID)
			a.mu.Unlock()
			if done == nil {
				continue
			}
			if m.Code != "" {
				done(nil, &apierr.Error{Code: apierr.Code(m.Code), Message: m.Message})
			} else {
				done(m.Result, nil)
			}
			if m.Polling {
				// The parent polls for this worker's next call: if the
				// script makes it at once, its answer follows within
				// microseconds.
				in.PollNext(wire.SpinWindow)
			}
		case wire.KindCancel:
			var m wire.Stop
			if m.Unmarshal(payload) != nil {
				os.Exit(ExitProtocol)
			}
			w.mu.Lock()
			a := w.current
			w.mu.Unlock()
			if a == nil || a.id != m.Run {
				continue
			}
			reason := &apierr.Error{Code: apierr.Code(m.Code), Message: m.Message}
			a.mu.Lock()
			r := a.run
			if r == nil {
				a.cancel = reason
			}
			a.mu.Unlock()
			if r != nil {
				r.Stop(reason)
			}
		default:
			fmt.Fprintln(os.Stderr, "metaclaw worker: unknown frame kind", kind)
			os.Exit(ExitProtocol)
		}
	}
}

// serve runs scripts one at a time on a fresh VM each, preparing the next
// VM while it waits.
func (w *worker) serve() {
	var next *script.Run
	var nextVersion uint64
	for {
		if next == nil {
			w.mu.Lock()
			plan, version := w.plan, w.version
			w.mu.Unlock()
			if plan != nil {
				next, _ = script.New(plan)
				nextVersion = version
			}
		}
		m := <-w.runs
		w.mu.Lock()
		plan, version, a := w.plan, w.version, w.current
		w.mu.Unlock()
		if plan == nil || version != m.PlanVersion {
			fmt.Fprintln(os.Stderr, "metaclaw worker: a run arrived for an API plan it does not have")
			os.Exit(ExitProtocol)
		}
		if next == nil || nextVersion != version {
			var err error
			if next, err = script.New(plan); err != nil {
				w.sendResult(a, script.Outcome{Err: apierr.Of(err)}, false)
				next = nil
				continue
			}
		}
		r := next
		next = nil
		w.exec(a, r, m)
	}
}

func (w *worker) exec(a *active, r *script.Run, m *wire.Run) {
	a.mu.Lock()
	a.run = r
	cancelled := a.cancel
	a.mu.Unlock()
	if cancelled != nil {
		w.sendResult(a, script.Outcome{Err: cancelled}, false)
		return
	}
	req := script.Request{Name: m.Name, Code: m.Code, Input: m.Input, Session: m.Session, Limits: script.Limits{
		Timeout: m.Timeout, TimeoutMessage: m.TimeoutMessage, MemoryBytes: m.MemoryBytes, LogBytes: m.LogBytes, ResultBytes: m.ResultBytes,
		MaxCalls: m.MaxCalls, MaxArgBytes: m.MaxArgBytes,
	}}
	wakeMonitor()
	before := script.HeapBytes()
	if m.MemoryBytes > 0 {
		// The Go collector works hardest near this limit, so garbage is
		// collected before it could count against the budget.
		debug.SetMemoryLimit(int64(runtimeBytes()) + m.MemoryBytes)
	}
	out := r.Exec(context.Background(), req, &host{w: w, a: a}, script.Options{
		WatchMemory: true,
		Grace:       m.Grace,
		FlushLogs: func(logs []script.LogEntry) {
			m := wire.Logs{Run: a.id, Logs: wireLogs(logs)}
			w.out.Send(wire.KindLogs, m.Marshal())
		},
		OnStop: func(why *apierr.Error) {
			m := wire.Stop{Run: a.id, Code: string(why.Code), Message: why.Message}
			w.out.Send(wire.KindStopping, m.Marshal())
		},
		OnStuck: func(o script.Outcome) {
			// The VM is inside a native built-in that ignores the
			// interrupt: report the run now and end the process.
			if w.sendResult(a, o, true) {
				os.Exit(ExitStuck)
			}
		},
	})
	w.sendResult(a, out, false)
	debug.SetMemoryLimit(math.MaxInt64)
	if after := script.HeapBytes(); after > before+32<<20 {
		// Give a big run's memory back before the next one starts, so
		// that its budget starts from the same baseline.
		debug.FreeOSMemory()
	}
}

// sendResult sends a run's result once; it reports whether this call sent it.
func (w *worker) sendResult(a *active, o script.Outcome, exiting bool) bool {
	a.mu.Lock()
	if a.sent {
		a.mu.Unlock()
		return false
	}
	a.sent = true
	a.mu.Unlock()
	res := wire.Result{Run: a.id, OK: o.OK, Result: o.Result, Stack: o.Stack, HeapBytes: script.HeapBytes(), Exiting: exiting}
	if o.Err != nil {
		res.Code, res.Message = string(o.Err.Code), o.Err.Message
	}
	res.Logs = wireLogs(o.Logs)
	if err := w.out.Send(wire.KindResult, res.Marshal()); err != nil {
		os.Exit(0)
	}
	return true
}

func wireLogs(logs []script.LogEntry) []wire.Log {
	out := make([]wire.Log, len(logs))
	for i, l := range logs {
		out[i] = wire.Log{Level: l.Level, Message: l.Message}
	}
	return out
}

// host sends a run's host calls to the parent.
type host struct {
	w *worker
	a *active
}

func (h *host) Call(method int, args []byte, done func([]byte, *apierr.Error)) {
	a := h.a
	a.mu.Lock()
	a.nextID++
	id := a.nextID
	a.calls[id] = done
	a.mu.Unlock()
	m := wire.Call{Run: a.id, ID: id, Method: method, Args: args}
	if err := h.w.out.Send(wire.KindCall, m.Marshal()); err != nil {
		os.Exit(0)
	}
}

// prepareHeap maps reserve bytes of heap at once, by allocating them and
// letting them go, and asks for transparent huge pages on them (where the
// machine leaves huge pages to madvise, as Debian does). A run that builds
// a big heap otherwise takes a page fault per 4 KB of it (a fresh worker
// has no heap to reuse), and the runtime maps the heap in pieces as it
// grows, each without the advice. The memory stays untouched until a run
// needs it; when the runtime gives it back, the advice stays. The small
// heap a worker starts with keeps 4 KB pages, so an idle worker stays as
// small. For the 100,000-row write: 160 of the worker's 240 MB in huge
// pages (14 MB without), and a fifth less CPU.
func prepareHeap(reserve int64) {
	b := make([]byte, reserve)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	const huge = 2 << 20
	beg, end := (start+huge-1)&^(huge-1), (start+uintptr(reserve))&^(huge-1)
	unix.Syscall(unix.SYS_MADVISE, beg, end-beg, unix.MADV_HUGEPAGE)
	runtime.KeepAlive(b)
	// Free it and hand it back at once: until then the runtime counts it
	// as in use, and a run's memory limit (set from what the runtime
	// holds) would start that much too high.
	b = nil
	debug.FreeOSMemory()
}

// wakeMonitor makes sure the Go runtime's monitor thread is awake as a run
// starts: it preempts goroutines that run for long, and the monitor of a
// process that was idle sleeps until its next timer (the watchdog's,
// created after it went to sleep, does not wake it). Entering an ordinary
// system call wakes it; the ticking watchdog keeps it awake for the rest
// of the run.
func wakeMonitor() {
	syscall.Syscall(syscall.SYS_GETPPID, 0, 0, 0)
}

// runtimeBytes is the memory the Go runtime holds from the system now.
func runtimeBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	total, released := s[0].Value.Uint64(), s[1].Value.Uint64()
	if released > total {
		return total
	}
	return total - released
}
