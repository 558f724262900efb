package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/runtime/js/script"
	"github.com/metaclaw/metaclaw/runtime/worker/child"
	"github.com/metaclaw/metaclaw/runtime/worker/wire"
)

// proc is one worker process, seen from the pool.
type proc struct {
	pool *Pool
	cmd  *exec.Cmd
	pid  int
	out  *wire.Writer
	in   *wire.Reader

	stdin      *os.File
	shared     *wire.Shared // the channel's rings, unmapped when reaped
	stderr     tail         // the head of what the worker wrote to stderr
	stderrDone chan struct{}

	cg       *cgroup
	budget   int64  // the memory budget the kernel backstops are set for
	dataBase uint64 // VmData when idle, the base of RLIMIT_DATA
	anonBase int64  // anonymous resident memory when started
	statm    kernelFile
	confined string

	planVersion int // the API plan the worker has (pool-owned, under run)
	idleSince   time.Time
	// Under Pool.mu: the top-level run the worker serves, if it is
	// counted in Pool.running, if it has become long, and since when.
	topLevel, counted, long bool
	granted                 time.Time
	slow                    int // slow host calls in flight (under Pool.mu)

	job atomic.Pointer[job]

	mu        sync.Mutex
	killedFor *apierr.Error
	retired   bool
	dead      chan struct{}
}

func (w *proc) isDead() bool {
	select {
	case <-w.dead:
		return true
	default:
		return false
	}
}

// spawnRequest asks the spawner thread to start a worker.
type spawnRequest struct {
	conf  confinement
	reply chan spawnReply
}

type spawnReply struct {
	w   *proc
	err error
}

// spawner starts every worker from one OS thread that never exits: a
// worker's parent-death signal fires when the thread that forked it ends,
// not only when the process does.
func (p *Pool) spawner() {
	runtime.LockOSThread()
	for {
		select {
		case req := <-p.spawns:
			w, err := p.start(req.conf)
			req.reply <- spawnReply{w, err}
		case <-p.closing:
			return
		}
	}
}

// start forks and execs a worker with confinement c. It runs on the
// spawner thread.
func (p *Pool) start(c confinement) (w *proc, err error) {
	// Every descriptor opened here is closed if the worker does not start;
	// the child's ends are closed in the parent once it has.
	var opened []*os.File
	var shared *wire.Shared
	defer func() {
		if err != nil {
			for _, f := range opened {
				f.Close()
			}
			if shared != nil {
				shared.Unmap()
			}
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			opened = append(opened, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		return nil, err
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		return nil, err
	}
	shared, mem, err := wire.NewShared()
	if err != nil {
		return nil, err
	}
	opened = append(opened, mem)
	out, err := wire.NewRingWriter(shared, wire.ToWorker, stdinW)
	if err != nil {
		return nil, err
	}
	// A worker that stops reading (and claims its ring full) cannot hold
	// a send, and with it a run, its slot and the caller.
	out.SetStall(sendStall)
	cmd := exec.Command(p.cmd[0], p.cmd[1:]...)
	cmd.Env = []string{}
	cmd.Dir = c.root
	// The frames go through the rings in mem (descriptor 3); the pipes
	// wake a side that sleeps and tell each side when the other is gone.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	cmd.ExtraFiles = []*os.File{mem}
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: c.cloneflags}
	if c.userns {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for _, f := range []*os.File{stdinR, stdoutW, stderrW, mem} {
		f.Close()
	}
	w = &proc{pool: p, cmd: cmd, pid: cmd.Process.Pid, stdin: stdinW, shared: shared,
		out: out, in: wire.NewRingReader(shared, wire.ToParent, stdoutR, p.maxWorkerFrame()),
		stderrDone: make(chan struct{}), dead: make(chan struct{})}
	go func() {
		w.stderr.fill(stderrR)
		stderrR.Close()
		close(w.stderrDone)
	}()
	return w, nil
}

// maxWorkerFrame bounds a frame from a worker: the largest host-call
// arguments or the largest result with its logs.
func (p *Pool) maxWorkerFrame() int {
	m := p.h.Config.MaxLimits
	return max(jsrt.DefaultMaxArgBytes, m.ResultBytes+4*m.LogBytes) + 1<<20
}

// heapReserveMax bounds the heap a worker maps for its runs as it starts
// (wire.Init.HeapReserve): the default budget, up to this.
const heapReserveMax = 512 << 20

// handshakeTimeout bounds a worker's start (exec, loading, Init, Hello).
const handshakeTimeout = 20 * time.Second

// spawnWith starts a worker with confinement c and waits for its Hello.
func (p *Pool) spawnWith(c confinement) (*proc, error) {
	reply := make(chan spawnReply, 1)
	select {
	case p.spawns <- spawnRequest{conf: c, reply: reply}:
	case <-p.closing:
		return nil, errors.New("the pool is closed")
	}
	r := <-reply
	if r.err != nil {
		return nil, r.err
	}
	w := r.w
	p.spawned.Add(1)
	budget := p.h.Config.Limits.MemoryBytes
	if c.cgroups != nil {
		cg, err := c.cgroups.add(w.pid, budget+p.opts.MemoryOverhead)
		if err != nil {
			p.opts.Log.Warn("sandbox worker: no cgroup memory limit", "err", err)
		}
		w.cg = cg
	}
	// Until the first run sets it from the worker's own size, a generous
	// data limit that still stops a runaway allocation.
	reserve := min(budget, heapReserveMax)
	setRlimitData(w.pid, uint64(4*(budget+p.opts.MemoryOverhead)+reserve))
	w.budget = budget

	// One processor. With two, every host call's reply readied the VM's
	// goroutine on the other processor and woke a thread for it: 2.4–2.9
	// thread switches per call in the worker against 1.1–1.2 with one,
	// and a round trip 20–40 % slower. What one processor gives up: the
	// worker's own watchdog cannot run while the VM is inside one long
	// native copy (a memmove is not a point where the Go scheduler can
	// preempt it), so such a run is ended from outside: the pool kills
	// the worker KillAfter past the deadline or when its memory, read
	// from /proc and the cgroup, passes the budget (TestBadInputOverHTTP).
	ini := wire.Init{ParentPID: os.Getpid(), Chroot: c.chroot, UID: c.uid, GID: c.gid,
		MaxStack: 64 << 20, MaxProcs: 1, HeapReserve: reserve}
	hello, err := w.handshake(&ini)
	if err != nil {
		w.abort()
		msg := err.Error()
		if t := w.stderr.String(); t != "" {
			msg += ": " + firstLine(t)
		}
		return nil, errors.New(msg)
	}
	w.confined = hello.Confined
	w.budget = -1
	w.dataBase = vmData(w.pid)
	w.anonBase = w.anonRSS()
	w.setBudget(budget)
	p.reapers.Add(1)
	go w.read()
	return w, nil
}

func (w *proc) handshake(ini *wire.Init) (*wire.Hello, error) {
	type answer struct {
		h   *wire.Hello
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		if err := w.out.Send(wire.KindInit, ini.Marshal()); err != nil {
			ch <- answer{err: fmt.Errorf("the worker did not take its init frame: %w", err)}
			return
		}
		kind, payload, err := w.in.Next()
		if err != nil {
			ch <- answer{err: fmt.Errorf("the worker did not answer (is %s a metaclaw binary?): %w", w.cmd.Path, err)}
			return
		}
		var h wire.Hello
		if kind != wire.KindHello || h.Unmarshal(payload) != nil {
			ch <- answer{err: errors.New("the worker answered with something other than hello")}
			return
		}
		if h.Problem != "" {
			ch <- answer{err: errors.New("the worker could not confine itself: " + h.Problem)}
			return
		}
		ch <- answer{h: &h}
	}()
	t := time.NewTimer(handshakeTimeout)
	defer t.Stop()
	select {
	case a := <-ch:
		return a.h, a.err
	case <-t.C:
		// The exchange uses the rings: it must be over before the
		// caller unmaps them.
		w.out.Stop()
		syscall.Kill(-w.pid, syscall.SIGKILL)
		<-ch
		return nil, errors.New("the worker did not answer within " + handshakeTimeout.String())
	}
}

// abort kills a worker that never joined the pool.
func (w *proc) abort() {
	syscall.Kill(-w.pid, syscall.SIGKILL)
	w.cmd.Wait()
	w.out.Close() // before the bell's descriptor closes
	w.stdin.Close()
	w.shared.Unmap()
	<-w.stderrDone
	if w.cg != nil {
		w.cg.remove()
	}
	w.statm.close()
}

// setBudget points the kernel's backstops at a run's memory budget: the
// cgroup limit at budget + overhead, RLIMIT_DATA (which counts every
// private writable mapping, thread stacks included) further out.
func (w *proc) setBudget(budget int64) {
	if budget == w.budget && w.dataBase != 0 {
		return
	}
	over := w.pool.opts.MemoryOverhead
	if w.cg != nil {
		if err := w.cg.setLimit(budget + over); err != nil {
			// Lowering fails while the worker still holds more: the
			// heap watchdog enforces the budget, the old limit stays.
			w.pool.opts.Log.Debug("sandbox worker: cgroup limit unchanged", "err", err)
		}
	}
	setRlimitData(w.pid, w.dataBase+uint64(budget+budget/2+over))
	w.budget = budget
}

// vmData reads a process's VmData (private writable mappings) in bytes.
func vmData(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmData:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// job is one run on a worker, seen from the pool.
type job struct {
	id       uint64
	w        *proc
	ctx      context.Context
	calls    *jsrt.Calls
	maxCalls int32
	budget   int64
	limits   script.Limits

	inflight atomic.Int32
	done     chan jobEnd
	stopping chan struct{}

	mu       sync.Mutex
	ended    bool
	stopWhy  *apierr.Error
	logs     []script.LogEntry // streamed so far
	logBytes int
}

type jobEnd struct {
	out     script.Outcome
	healthy bool
}

// grace is how long a worker's VM has to unwind after it stopped a run
// before the worker reports the run itself and exits.
const grace = 20 * time.Millisecond

// run sends a run to the worker and waits for its end. ctx is the
// caller's (its end cancels the run); callCtx is the one the run's host
// calls see. The outcome's logs are those the worker streamed during the
// run followed by those in its result.
func (w *proc) run(ctx, callCtx context.Context, b *jsrt.Begun, calls *jsrt.Calls, deadline time.Time, byCaller bool) (script.Outcome, bool) {
	j := &job{id: w.pool.runSeq.Add(1), w: w, ctx: callCtx, calls: calls, maxCalls: int32(b.Request.Limits.MaxCalls),
		budget: b.Limits.MemoryBytes, limits: b.Request.Limits, done: make(chan jobEnd, 1), stopping: make(chan struct{})}
	out, healthy := w.runJob(ctx, j, b, deadline, byCaller)
	j.mu.Lock()
	out.Logs = append(j.logs, out.Logs...)
	j.mu.Unlock()
	return out, healthy
}

func (w *proc) runJob(ctx context.Context, j *job, b *jsrt.Begun, deadline time.Time, byCaller bool) (script.Outcome, bool) {
	p := w.pool
	if w.planVersion != b.Plan.Version {
		m := wire.Plan{Version: uint64(b.Plan.Version), Spec: p.spec(b.Plan)}
		if err := w.out.SendWithin(wire.KindPlan, m.Marshal(), w.startStall(deadline)); err != nil {
			return w.sendFailed(err), false
		}
		w.planVersion = b.Plan.Version
	}
	w.setBudget(b.Limits.MemoryBytes)
	w.job.Store(j)
	defer j.end()

	timeoutErr := timeoutError(b.Limits.Timeout)
	if byCaller {
		timeoutErr = apierr.New(apierr.Timeout, "the time limit of the calling run ran out")
	}
	remaining := time.Until(deadline)
	if remaining <= 0 {
		return script.Outcome{Err: timeoutErr}, true
	}
	lim := b.Request.Limits
	m := wire.Run{ID: j.id, PlanVersion: uint64(b.Plan.Version), Name: b.Request.Name, Code: b.Request.Code,
		Input: b.Request.Input, Session: b.Request.Session, Timeout: remaining, TimeoutMessage: timeoutErr.Message,
		MemoryBytes: lim.MemoryBytes, LogBytes: lim.LogBytes, ResultBytes: lim.ResultBytes, MaxCalls: lim.MaxCalls,
		MaxArgBytes: lim.MaxArgBytes, Grace: grace}
	if err := w.out.SendWithin(wire.KindRun, m.Marshal(), w.startStall(deadline)); err != nil {
		return w.sendFailed(err), false
	}
	kill := time.NewTimer(remaining + p.opts.KillAfter)
	defer kill.Stop()
	rearm := func() {
		kill.Reset(p.opts.KillAfter)
	}
	// The worker's memory is watched from here too (see overBudget),
	// every few milliseconds while the run lasts. A run over before the
	// first look cannot have touched hundreds of megabytes.
	pressureTick := time.NewTicker(pressurePoll)
	defer pressureTick.Stop()
	pressure := pressureTick.C
	started := time.Now()
	ctxDone := ctx.Done()
	stopping := j.stopping
	for {
		select {
		case e := <-j.done:
			if w.cg != nil && time.Since(started) >= pressurePoll/2 {
				// A run that reached the limit and got by is not the
				// next run's fault.
				w.cg.atLimit()
			}
			return e.out, e.healthy
		case <-pressure:
			if w.overBudget(j.budget) {
				reason := script.MemoryError(j.budget)
				j.noteStop(reason)
				w.kill(reason)
				return script.Outcome{Err: reason}, false
			}
		case <-stopping:
			stopping = nil
			rearm()
		case <-ctxDone:
			ctxDone = nil
			reason := apierr.New(apierr.Timeout, "the run was cancelled: its caller stopped waiting")
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				reason = apierr.New(apierr.Timeout, "the time limit of the calling run ran out")
			}
			j.noteStop(reason)
			c := wire.Stop{Run: j.id, Code: string(reason.Code), Message: reason.Message}
			// Not from this loop: a worker that stopped reading would
			// hold the send, and the kill below with it, until the
			// stall gives up. The kill stops the send.
			go w.send(wire.KindCancel, c.Marshal())
			rearm()
		case <-kill.C:
			reason := j.reason()
			if reason == nil {
				reason = timeoutErr
			}
			w.kill(reason)
			return script.Outcome{Err: reason}, false
		}
	}
}

// timeoutErrors holds the timeout error of each time limit seen: runs
// mostly share a few limits, and formatting the message was 1 % of a
// trivial run's host CPU. Each run gets its own copy.
var timeoutErrors sync.Map // time.Duration → *apierr.Error

func timeoutError(d time.Duration) *apierr.Error {
	e, ok := timeoutErrors.Load(d)
	if !ok {
		e, _ = timeoutErrors.LoadOrStore(d, script.TimeoutError(d))
	}
	c := *e.(*apierr.Error)
	return &c
}

// pressurePoll is how often the pool looks at a running worker's memory.
const pressurePoll = 10 * time.Millisecond

// overBudget reports whether a running worker's memory, as the kernel
// counts it, is past what a run with this budget may use: its anonymous
// resident memory grown by more than budget + half the overhead since it
// started, or its cgroup's limit reached with its anonymous memory past
// the budget. (The cgroup also counts the file pages the worker faults
// in, charged to it when it is the first to read them: a worker of a
// freshly written binary reaches the limit by reading its own code, and
// the kernel then reclaims those pages, which is not the run's doing. Nor
// is a huge page it could not have: that is a failure at the limit too.)
// The worker's own heap watchdog normally stops a run long before; but a
// script inside one huge native copy (a 200 MB string concatenation)
// holds up the worker's whole Go runtime while the copy runs (a
// collection waits for it to reach a safe point, and every goroutine, the
// watchdog too, waits for the collection), and on a busy machine that
// copy takes seconds of page faults. Seen from outside, the worker's
// memory grows all the same.
func (w *proc) overBudget(budget int64) bool {
	atLimit := w.cg != nil && w.cg.atLimit()
	if budget <= 0 {
		return atLimit
	}
	grown := w.anonRSS() - w.anonBase
	return grown > budget+w.pool.opts.MemoryOverhead/2 || (atLimit && grown > budget)
}

// anonRSS is a process's anonymous resident memory in bytes (resident
// minus file-backed and shared pages, from /proc/PID/statm), or 0 when it
// cannot be read.
func (w *proc) anonRSS() int64 {
	b, err := w.statm.read("/proc/" + strconv.Itoa(w.pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0
	}
	resident, _ := strconv.ParseInt(f[1], 10, 64)
	shared, _ := strconv.ParseInt(f[2], 10, 64)
	return (resident - shared) * int64(os.Getpagesize())
}

// sendStall is how long a frame to a worker waits for room in its ring
// before the worker counts as having stopped reading. An honest worker
// drains the ring within milliseconds, its reader running at least every
// 10 ms however busy its VM keeps it.
const sendStall = 5 * time.Second

// startStall bounds the sends that start a run: the run's end is due at its
// deadline, and the worker's reading then has KillAfter, as a stuck VM
// has.
func (w *proc) startStall(deadline time.Time) time.Duration {
	return min(sendStall, time.Until(deadline)+w.pool.opts.KillAfter)
}

// sendFailed is the outcome of a run whose frame could not be sent: a
// worker that stopped reading is killed; one that is gone was lost.
func (w *proc) sendFailed(err error) script.Outcome {
	if errors.Is(err, wire.ErrStalled) {
		reason := stalled()
		w.kill(reason)
		return script.Outcome{Err: reason}
	}
	return w.lost()
}

// stalled is why a worker that stopped reading was killed.
func stalled() *apierr.Error {
	return apierr.New(apierr.Internal, "the sandbox worker stopped reading its channel; the run was stopped")
}

// send sends a frame that the run does not wait on (a cancel, a host
// call's reply); a worker that stopped reading is killed.
func (w *proc) send(kind byte, payload []byte) {
	if errors.Is(w.out.Send(kind, payload), wire.ErrStalled) {
		w.kill(stalled())
	}
}

// lost is the outcome of a run whose worker vanished before it started.
func (w *proc) lost() script.Outcome {
	return script.Outcome{Err: unavailable("the sandbox worker exited before the run started; retry")}
}

// end marks the job over: later host calls from the worker are ignored.
func (j *job) end() {
	j.mu.Lock()
	j.ended = true
	j.mu.Unlock()
	j.w.job.CompareAndSwap(j, nil)
}

func (j *job) noteStop(reason *apierr.Error) {
	j.mu.Lock()
	first := j.stopWhy == nil
	if first {
		j.stopWhy = reason
	}
	j.mu.Unlock()
	if first {
		close(j.stopping)
	}
}

func (j *job) reason() *apierr.Error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stopWhy
}

// A reader goroutine runs a host call itself, where its frame was read,
// and hands the reading to a new goroutine once the call has taken
// longer than a tick of the pool's inline watch (1–2 ms). Running a call
// inline saves waking a thread per call (half the host's thread switches
// on this path); handing over keeps slow calls of a Promise.all running
// in parallel. One watch serves every worker: a timer per call woke the
// runtime's poller thread on every call (8 % of the host's CPU per call).
const inlineTick = time.Millisecond

type inlineWatch struct {
	mu      sync.Mutex
	calls   map[*inlineCall]struct{}
	running bool
}

type inlineCall struct {
	start    time.Time
	handOver func()
}

func (iw *inlineWatch) add(c *inlineCall) {
	iw.mu.Lock()
	if iw.calls == nil {
		iw.calls = map[*inlineCall]struct{}{}
	}
	iw.calls[c] = struct{}{}
	if !iw.running {
		iw.running = true
		go iw.watch()
	}
	iw.mu.Unlock()
}

func (iw *inlineWatch) remove(c *inlineCall) {
	iw.mu.Lock()
	delete(iw.calls, c)
	iw.mu.Unlock()
}

// watch hands over the calls that have run longer than a tick; it stops
// after 100 ticks without calls.
func (iw *inlineWatch) watch() {
	t := time.NewTicker(inlineTick)
	defer t.Stop()
	quiet := 0
	var due []*inlineCall
	for now := range t.C {
		iw.mu.Lock()
		if len(iw.calls) == 0 {
			if quiet++; quiet >= 100 {
				iw.running = false
				iw.mu.Unlock()
				return
			}
		} else {
			quiet = 0
		}
		due = due[:0]
		for c := range iw.calls {
			if now.Sub(c.start) >= inlineTick {
				delete(iw.calls, c)
				due = append(due, c)
			}
		}
		iw.mu.Unlock()
		for _, c := range due {
			c.handOver()
		}
	}
}

// serveCall runs a host call the worker asked for and sends the reply. It
// reports whether the reading was handed to a new goroutine meanwhile, in
// which case the caller must stop reading.
func (w *proc) serveCall(j *job, m *wire.Call) (handedOver bool) {
	if j.inflight.Add(1) > j.maxCalls {
		w.kill(apierr.New(apierr.Internal, "the sandbox worker broke its protocol (more than %d host calls at once); the run was stopped", j.maxCalls))
		return false
	}
	j.mu.Lock()
	if j.ended {
		j.mu.Unlock()
		return false
	}
	finished := j.calls.Begin()
	j.mu.Unlock()
	defer finished()

	var mu sync.Mutex
	done := false
	c := &inlineCall{start: time.Now(), handOver: func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			handedOver = true
			w.pool.slowCall(w, 1)
			go w.read()
		}
	}}
	w.pool.inline.add(c)
	res, err := j.calls.Invoke(m.Method, m.Args)
	w.pool.inline.remove(c)
	mu.Lock()
	done = true
	if handedOver {
		w.pool.slowCall(w, -1)
	}
	mu.Unlock()
	j.inflight.Add(-1)
	if j.ctx.Err() == nil { // else the run is over and nobody awaits the answer
		r := wire.Reply{Run: j.id, ID: m.ID, Result: res}
		if err != nil {
			r.Code, r.Message, r.Result = string(err.Code), err.Message, nil
		}
		// handedOver no longer changes: when this goroutine still
		// reads, it polls for the worker's next call, which a script
		// awaiting its calls one by one makes within microseconds.
		r.Polling = !handedOver && w.in.PollNext(wire.SpinWindow)
		w.send(wire.KindReply, r.Marshal())
	}
	return handedOver
}

// finish checks a worker's result before it becomes the run's: the
// worker is not trusted to respect the limits it was given.
func (j *job) finish(m *wire.Result) {
	out := script.Outcome{OK: m.OK, Stack: m.Stack}
	healthy := true
	if m.OK {
		switch {
		case len(m.Result) > j.limits.ResultBytes:
			out = script.Outcome{Err: apierr.New(apierr.ResourceExhausted, "the script's result is more than %s; the limit is %s: return less (write big results to a file)",
				script.HumanSize(j.limits.ResultBytes), script.HumanSize(j.limits.ResultBytes))}
		case !json.Valid(m.Result):
			out = script.Outcome{Err: apierr.New(apierr.Internal, "the sandbox worker sent a result that is not JSON")}
			healthy = false
		default:
			out.Result = m.Result
		}
	} else {
		code := apierr.Code(m.Code)
		if !knownCode(code) {
			code, healthy = apierr.Internal, false
		}
		out.Err = &apierr.Error{Code: code, Message: m.Message}
	}
	out.Logs = j.checkLogs(m.Logs)
	if m.Exiting || m.HeapBytes > uint64(64<<20) {
		// The worker could not give a big run's memory back: retire it.
		healthy = false
	}
	j.deliver(jobEnd{out: out, healthy: healthy})
}

// deliver delivers how the job ended; only the first delivery counts (a
// worker that sends two results, or dies after sending one, cannot block
// its reader).
func (j *job) deliver(e jobEnd) {
	select {
	case j.done <- e:
	default:
	}
}

// checkLogs admits a worker's console entries within the run's budget
// (plus slack for the truncation notice) and with known levels.
func (j *job) checkLogs(logs []wire.Log) []script.LogEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []script.LogEntry
	for _, l := range logs {
		j.logBytes += len(l.Message) + len(l.Level) + 24
		if j.logBytes > j.limits.LogBytes+64<<10 {
			break
		}
		level := l.Level
		switch level {
		case "log", "info", "warn", "error", "debug":
		default:
			level = "log"
		}
		out = append(out, script.LogEntry{Level: level, Message: l.Message})
	}
	return out
}

// addLogs keeps a batch the worker streamed during the run.
func (j *job) addLogs(logs []wire.Log) {
	checked := j.checkLogs(logs)
	j.mu.Lock()
	j.logs = append(j.logs, checked...)
	j.mu.Unlock()
}

func knownCode(c apierr.Code) bool {
	switch c {
	case apierr.ValidationFailed, apierr.NotFound, apierr.AlreadyExists, apierr.TooLarge,
		apierr.UnsupportedFormat, apierr.QuotaExceeded, apierr.SandboxViolation, apierr.Unauthorized, apierr.Timeout,
		apierr.ResourceExhausted, apierr.Busy, apierr.FileReadFailed, apierr.FileWriteFailed, apierr.ToolWorkerUnavailable, apierr.Internal:
		return true
	}
	return false
}

// read serves a worker's frames until it exits, then reaps it. Exactly
// one goroutine reads at a time; serveCall may hand the reading over.
func (w *proc) read() {
	for {
		kind, payload, err := w.in.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				w.kill(apierr.New(apierr.Internal, "the sandbox worker broke its protocol (%v); the run was stopped", err))
			}
			break
		}
		j := w.job.Load()
		switch kind {
		case wire.KindCall:
			var m wire.Call
			if m.Unmarshal(payload) != nil {
				w.kill(apierr.New(apierr.Internal, "the sandbox worker sent a malformed host call"))
				continue
			}
			if j != nil && j.id == m.Run && w.serveCall(j, &m) {
				return
			}
		case wire.KindStopping:
			var m wire.Stop
			if m.Unmarshal(payload) == nil && j != nil && j.id == m.Run && knownCode(apierr.Code(m.Code)) {
				j.noteStop(&apierr.Error{Code: apierr.Code(m.Code), Message: m.Message})
			}
		case wire.KindLogs:
			var m wire.Logs
			if m.Unmarshal(payload) != nil {
				w.kill(apierr.New(apierr.Internal, "the sandbox worker sent malformed logs"))
				continue
			}
			if j != nil && j.id == m.Run {
				j.addLogs(m.Logs)
			}
		case wire.KindResult:
			var m wire.Result
			if err := m.Unmarshal(payload); err != nil {
				w.kill(apierr.New(apierr.Internal, "the sandbox worker sent a malformed result"))
				continue
			}
			if j != nil && j.id == m.Run {
				j.finish(&m)
			}
		default:
			w.kill(apierr.New(apierr.Internal, "the sandbox worker broke its protocol (frame kind %d)", kind))
		}
	}
	w.reap()
}

// reap waits for the process, works out why it died, ends its run with
// that, and lets the pool replace it.
func (w *proc) reap() {
	defer w.pool.reapers.Done()
	syscall.Kill(-w.pid, syscall.SIGKILL)
	waitErr := w.cmd.Wait()
	// This goroutine was the rings' only reader; Close waits for a send
	// in progress and fails those after it, so nothing touches them (or
	// the bell, closed next) now.
	w.out.Close()
	w.stdin.Close()
	w.shared.Unmap()
	<-w.stderrDone
	w.mu.Lock()
	killedFor, retired := w.killedFor, w.retired
	w.mu.Unlock()
	j := w.job.Load()
	var why *apierr.Error
	switch {
	case killedFor != nil:
		why = killedFor
	case j != nil && j.reason() != nil:
		why = j.reason()
	default:
		why = w.deathCause(waitErr, j)
	}
	if w.cg != nil {
		w.cg.remove()
	}
	w.statm.close()
	close(w.dead)
	if j != nil {
		j.deliver(jobEnd{out: script.Outcome{Err: why}, healthy: false})
	}
	stuck := false
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) && ee.ExitCode() == child.ExitStuck {
		stuck = true // it reported its run, then exited as it should
	}
	switch {
	case retired || killedFor != nil || stuck:
	case why.Code == apierr.ResourceExhausted:
		// The kernel stopped a script that asked for too much at once:
		// the script's fault, not the worker's.
		w.pool.opts.Log.Debug("sandbox worker stopped by a memory limit", "pid", w.pid, "cause", why.Message)
	default:
		w.pool.crashed.Add(1)
		w.pool.opts.Log.Warn("sandbox worker died", "pid", w.pid, "status", fmt.Sprint(waitErr), "cause", why.Message, "stderr", firstLines(w.stderr.String(), 20))
	}
	w.pool.gone(w)
}

// deathCause explains an exit the pool did not ask for.
func (w *proc) deathCause(waitErr error, j *job) *apierr.Error {
	budget := w.budget
	if j != nil {
		budget = j.budget
	}
	tail := w.stderr.String()
	var ee *exec.ExitError
	status := "exited"
	if errors.As(waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = fmt.Sprintf("was killed (signal %d, %s)", int(ws.Signal()), ws.Signal())
			if ws.Signal() == syscall.SIGKILL && w.cg != nil && w.cg.oomKilled() {
				return script.MemoryError(budget)
			}
		} else {
			status = "exited with status " + strconv.Itoa(ee.ExitCode())
		}
	}
	switch {
	case strings.Contains(tail, "out of memory") || strings.Contains(tail, "cannot allocate memory"):
		return apierr.New(apierr.ResourceExhausted, "the script asked for more memory at once than its %d MB budget allows; process data in smaller pieces", budget>>20)
	case strings.Contains(tail, "stack exceeds") || strings.Contains(tail, "stack overflow"):
		return apierr.New(apierr.ResourceExhausted, "the script's recursion exhausted the stack; recurse less deeply")
	}
	msg := "the sandbox worker " + status + " during the run"
	if line := fatalLine(tail); line != "" {
		msg += " (" + line + ")"
	}
	return apierr.New(apierr.Internal, "%s; the run was stopped and the worker replaced", msg)
}

// kill ends the worker at once; reason (when not nil and the first) is
// what its run ends with.
func (w *proc) kill(reason *apierr.Error) {
	w.mu.Lock()
	if w.killedFor == nil && reason != nil {
		w.killedFor = reason
	}
	if w.killedFor == nil {
		w.retired = true
	}
	w.mu.Unlock()
	// A send waiting for room in the ring gives up: the worker will not
	// read again.
	w.out.Stop()
	syscall.Kill(-w.pid, syscall.SIGKILL)
}

// retire asks an idle worker to exit by closing its channel.
func (w *proc) retire() {
	w.mu.Lock()
	w.retired = true
	w.mu.Unlock()
	w.out.Close() // no frame goes to a retiring worker
	w.stdin.Close()
	go func() {
		select {
		case <-w.dead:
		case <-time.After(2 * time.Second):
			syscall.Kill(-w.pid, syscall.SIGKILL)
		}
	}()
}

// tail keeps the first few KB a worker wrote to stderr (a Go crash names
// its cause first) and drains the rest.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 8 << 10

func (t *tail) fill(r io.Reader) {
	b := make([]byte, 4096)
	for {
		n, err := r.Read(b)
		if n > 0 {
			t.mu.Lock()
			if room := tailMax - len(t.buf); room > 0 {
				t.buf = append(t.buf, b[:min(n, room)]...)
			}
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// fatalLine picks the line that names a Go runtime failure.
func fatalLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
