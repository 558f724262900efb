// Package worker runs agent scripts in sandbox worker processes: the
// metaclaw binary started again in a hidden worker mode (runtime/worker/child),
// one script at a time per worker, a fresh VM per run, kept warm in a pool.
//
// A worker holds nothing but its channel to the host (two rings in shared
// memory, with its stdin and stdout as the bells that wake a sleeping
// side: runtime/worker/wire; stderr carries crash reports): no store, no database handle, no token, no
// other descriptor, an empty environment and an empty working directory (a
// chroot where the machine permits), no network where a network namespace
// is permitted. Host calls travel over the channel as JSON and run in the
// host with the run's workspace, session, limits and artifact log.
//
// Limits are enforced from outside the VM: the worker's own heap is watched
// inside it (accurate now that the process is the run's alone), the kernel
// backstops memory (a per-worker cgroup memory limit where the cgroup v1
// memory controller is writable, and RLIMIT_DATA everywhere), a VM stuck in
// a native built-in after its deadline is reported by the worker and the
// worker killed 100 ms later, and a worker that dies or misbehaves is
// reaped and replaced without touching any other run.
//
// Wiring it into a host is one line:
//
//	pool, err := worker.NewPool(h, worker.Options{})
//	h.Runner = pool
//	defer pool.Close()
package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/runtime/js/script"
	"github.com/metaclaw/metaclaw/runtime/worker/child"
)

// Options configure a Pool; zero values take the defaults.
type Options struct {
	// Size is how many workers are kept warm (default: the number of
	// CPUs, at least 2). More start when concurrent runs need them; idle
	// workers beyond Size retire after IdleTimeout; workers that die are
	// replaced.
	Size int
	// Max caps the workers serving top-level runs at once (default 64, the
	// server's concurrent-run cap); the pool grows to it on demand. A run
	// that finds every worker busy waits for one until its own deadline,
	// then fails with BUSY.
	Max int
	// Running caps the short top-level runs executing at once (default:
	// the number of CPUs, at least 2); further runs wait for one of them
	// to finish. A run stops counting once it has run for gateDelay (a
	// long run, timesliced by the kernel beside the others) or while it
	// waits in a slow host call. Sixteen trivial runs at once on two
	// cores cost each worker 2–4× the CPU of two at a time (every
	// process's runtime wakes, spins and collects on its own), so letting
	// a burst of short runs queue for a moment is faster for every run in
	// it, and nothing ever waits behind a long run for more than gateDelay.
	Running int
	// MaxNested caps the workers that one run's nested runs (tools.call of
	// a saved tool, run_script from a script) hold at once (default 8).
	// Nested runs do not count against Max, so a pool full of runs that
	// call tools cannot deadlock; further nested runs wait for their turn.
	MaxNested int
	// IdleTimeout retires workers beyond Size that have been idle this
	// long (default 30 s).
	IdleTimeout time.Duration
	// Command is the worker executable and its arguments (default: this
	// process's executable with the hidden worker argument). Any binary
	// that imports runtime/worker (or runtime/worker/child) serves.
	Command []string
	// MemoryOverhead is added to a run's memory budget for the kernel's
	// hard limit on the worker (default 128 MB): the worker's own runtime
	// and the VM's bookkeeping beyond what the heap watchdog counts.
	MemoryOverhead int64
	// MaxCalls is how many host calls one run may have in flight (default
	// 16); the rest wait in the worker.
	MaxCalls int
	// KillAfter is how long after a run's deadline (or a stop for memory
	// or cancellation) a worker whose VM has not unwound is killed
	// (default 60 ms, so that the run ends within 100 ms of its limit on a
	// busy machine too; the worker itself reports a VM stuck in a native
	// built-in after 20 ms).
	KillAfter time.Duration
	// Isolation chooses how far workers are confined (default Auto).
	Isolation Isolation
	// Log receives the one line saying which confinement applies, and
	// worker crashes.
	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.Size <= 0 {
		o.Size = max(runtime.NumCPU(), 2)
	}
	if o.Max <= 0 {
		o.Max = 64
	}
	if o.Size > o.Max {
		o.Size = o.Max
	}
	if o.MaxNested <= 0 {
		o.MaxNested = 8
	}
	if o.Running <= 0 {
		o.Running = max(runtime.NumCPU(), 2)
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 30 * time.Second
	}
	if o.MemoryOverhead <= 0 {
		o.MemoryOverhead = 128 << 20
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = jsrt.DefaultMaxCalls
	}
	if o.KillAfter <= 0 {
		o.KillAfter = 60 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Pool runs scripts in worker processes. It implements hostapi.ScriptRunner.
type Pool struct {
	h     *hostapi.Host
	opts  Options
	plans *jsrt.Plans
	conf  confinement
	cmd   []string

	spawns chan spawnRequest

	mu          sync.Mutex
	idle        []*proc // most recently used last
	procs       map[*proc]bool
	starting    int
	busy        int // workers serving top-level runs
	running     int // of those, the short ones not in a slow host call (see Options.Running)
	inline      inlineWatch
	gateWatched bool // watchGate runs
	waiters     []*waiter
	closed      bool
	closing     chan struct{}
	reapers     sync.WaitGroup
	starts      sync.WaitGroup // background starts in progress

	specMu      sync.Mutex
	specVersion int
	specJSON    []byte

	runSeq  atomic.Uint64
	spawned atomic.Int64
	crashed atomic.Int64
}

var _ hostapi.ScriptRunner = (*Pool)(nil)

// NewPool starts a pool of sandbox workers for h and waits until the first
// one answers, so that a binary that cannot serve as a worker, or a
// machine that forbids it, is an error here rather than at the first run.
func NewPool(h *hostapi.Host, opts Options) (*Pool, error) {
	opts.defaults()
	p := &Pool{h: h, opts: opts, plans: jsrt.NewPlans(h.Registry), procs: map[*proc]bool{},
		closing: make(chan struct{}), spawns: make(chan spawnRequest)}
	p.cmd = opts.Command
	if len(p.cmd) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("sandbox workers: finding this executable: %w", err)
		}
		p.cmd = []string{exe, child.Arg}
	}
	root, err := newRoot()
	if err != nil {
		return nil, fmt.Errorf("sandbox workers: making their empty root directory: %w", err)
	}
	p.conf = confinement{root: root, uid: -1, gid: -1}
	memory := "memory backstop: RLIMIT_DATA"
	if opts.Isolation == Auto {
		if cg, err := openCgroups(); err == nil {
			p.conf.cgroups = cg
			memory = "memory backstop: a cgroup v1 memory limit per worker (" + cg.dir + ") and RLIMIT_DATA"
		} else {
			memory += " (no per-worker cgroup: " + err.Error() + ")"
		}
	}
	go p.spawner()
	first, conf, err := p.probe()
	if err != nil {
		p.shutdown()
		return nil, err
	}
	p.conf = conf
	p.opts.Log.Info("sandbox workers: "+conf.describe(memory), "confined", first.confined, "size", opts.Size, "max", opts.Max)
	p.mu.Lock()
	p.procs[first] = true
	p.idle = append(p.idle, first)
	p.mu.Unlock()
	p.fill()
	go p.janitor()
	return p, nil
}

// probe starts the first worker with the strongest confinement the
// machine permits, falling back step by step.
func (p *Pool) probe() (*proc, confinement, error) {
	var errs []string
	for _, c := range p.conf.attempts(p.opts.Isolation) {
		w, err := p.spawnWith(c)
		if err == nil {
			return w, c, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, confinement{}, fmt.Errorf("sandbox workers cannot start (%s): %s", p.cmd[0], joinErrs(errs))
}

func joinErrs(errs []string) string {
	out := ""
	for i, e := range errs {
		if i > 0 {
			out += "; then: "
		}
		out += e
	}
	return out
}

// Stats describe the pool's workers.
type Stats struct {
	Workers int   // processes alive (idle, busy or starting)
	Idle    int   // waiting for a run
	Busy    int   // running a script
	Spawned int64 // started since the pool began
	Crashed int64 // died other than by retirement
}

// Stats reports the pool's state.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Workers: len(p.procs) + p.starting, Idle: len(p.idle), Busy: len(p.procs) - len(p.idle),
		Spawned: p.spawned.Load(), Crashed: p.crashed.Load()}
}

// Size is the number of workers kept warm.
func (p *Pool) Size() int { return p.opts.Size }

// Close stops every worker and removes the pool's cgroups and directory.
// Runs in progress end with TOOL_WORKER_UNAVAILABLE.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	for _, w := range p.waiters {
		w.ch <- acquired{err: unavailable("the sandbox pool is shutting down")}
	}
	p.waiters = nil
	procs := make([]*proc, 0, len(p.procs))
	for w := range p.procs {
		procs = append(procs, w)
	}
	p.idle = nil
	p.mu.Unlock()
	for _, w := range procs {
		w.kill(unavailable("the sandbox pool is shutting down"))
	}
	p.starts.Wait()
	p.reapers.Wait()
	p.shutdown()
	return nil
}

func (p *Pool) shutdown() {
	if p.conf.cgroups != nil {
		p.conf.cgroups.close()
	}
	if p.conf.root != "" {
		os.Remove(p.conf.root)
	}
}

func unavailable(msg string) *apierr.Error {
	return apierr.New(apierr.ToolWorkerUnavailable, "%s", msg)
}

// treeKey marks the context of a run's host calls, so that the runs they
// start (nested tools) are known to be nested and share their tree's
// allowance of workers.
type treeKey struct{}

type tree struct{ slots chan struct{} }

// Run runs req in a worker. It returns when the run has ended everywhere:
// its result is in, or its worker is dead; its host calls have returned;
// its worker is back in the pool or gone.
func (p *Pool) Run(ctx context.Context, env *hostapi.Env, req hostapi.RunRequest) *hostapi.RunResult {
	b, res := jsrt.Begin(p.h, p.plans, env, req)
	if res != nil {
		return res
	}
	b.Request.Limits.MaxCalls = p.opts.MaxCalls
	deadline := b.Start.Add(b.Limits.Timeout)
	byCaller := false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, byCaller = d, true
	}
	t, nested := ctx.Value(treeKey{}).(*tree)
	if nested {
		select {
		case t.slots <- struct{}{}:
			defer func() { <-t.slots }()
		case <-ctx.Done():
			return b.Finish(script.Outcome{Err: apierr.Of(ctx.Err())})
		case <-time.After(time.Until(deadline)):
			err := apierr.New(apierr.Busy, "this run's nested runs already use %d sandbox workers; call fewer tools at once", p.opts.MaxNested)
			if byCaller {
				err = apierr.New(apierr.Timeout, "the time limit of the calling run ran out while this run waited for a sandbox worker")
			}
			return b.Finish(script.Outcome{Err: err})
		}
	} else {
		t = &tree{slots: make(chan struct{}, p.opts.MaxNested)}
	}
	w, err := p.acquire(ctx, deadline, !nested)
	if err != nil {
		if err.Code == apierr.Busy && byCaller {
			err = apierr.New(apierr.Timeout, "the time limit of the calling run ran out while this run waited for a sandbox worker")
		}
		return b.Finish(script.Outcome{Err: err})
	}
	// Host calls, and the runs they start, end with this run: they see
	// its deadline, and they are cancelled when it ends.
	callCtx, cancel := context.WithDeadline(context.WithValue(ctx, treeKey{}, t), deadline)
	calls := jsrt.NewCalls(callCtx, p.h.Registry, b.Env, b.Plan.Ops)
	out, healthy := w.run(ctx, callCtx, b, calls, deadline, byCaller)
	cancel()
	calls.Wait()
	p.release(w, healthy, !nested)
	return b.Finish(out)
}

type acquired struct {
	w   *proc
	err *apierr.Error
}

type waiter struct {
	ch       chan acquired
	topLevel bool
	gated    bool // waits for a short run to finish (see Options.Running)
	since    time.Time
}

// acquire takes an idle worker, starts one when the pool may grow, or
// waits for one until deadline.
func (p *Pool) acquire(ctx context.Context, deadline time.Time, topLevel bool) (*proc, *apierr.Error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, unavailable("the sandbox pool is shut down")
	}
	gated := topLevel && p.running >= p.opts.Running
	if !gated && (!topLevel || p.busy < p.opts.Max) {
		if w := p.popIdle(); w != nil {
			p.grantLocked(w, topLevel)
			p.mu.Unlock()
			return w, nil
		}
	}
	wt := &waiter{ch: make(chan acquired, 1), topLevel: topLevel, gated: gated, since: time.Now()}
	p.waiters = append(p.waiters, wt)
	if gated && !p.gateWatched {
		p.gateWatched = true
		go p.watchGate()
	}
	// Below its size the pool starts a worker at once, and so does a
	// nested run (its caller holds a worker and waits for it). Beyond its
	// size it grows only for a run that has waited growDelay: most runs
	// take well under a millisecond, so a busy worker is usually free again
	// long before a new one could start, and one started anyway would
	// retire unused (a burst of short runs would start and retire workers
	// without end, each start costing more CPU than thousands of runs).
	var grow <-chan time.Time
	if !gated && p.mayGrowLocked(topLevel) {
		if !topLevel || len(p.procs)+p.starting < p.opts.Size {
			p.startLocked()
		} else {
			t := time.NewTimer(growDelay)
			defer t.Stop()
			grow = t.C
		}
	}
	p.mu.Unlock()

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case a := <-wt.ch:
			return a.w, a.err
		case <-grow:
			grow = nil
			p.mu.Lock()
			if p.isWaiting(wt) && p.mayGrowLocked(topLevel) {
				p.startLocked()
			}
			p.mu.Unlock()
		case <-ctx.Done():
			p.abandon(wt)
			return nil, apierr.Of(ctx.Err())
		case <-timer.C:
			p.abandon(wt)
			return nil, apierr.New(apierr.Busy, "no sandbox worker became free before this run's time limit (%d runs hold one, at most %d may); retry shortly", p.busyNow(), p.opts.Max)
		}
	}
}

// gateDelay is how long a top-level run counts as short (see
// Options.Running). Well above what a trivial run takes on a busy
// machine: at 5 ms, runs stalled by the machine's own noise counted as
// long, more ran at once, and the pool grew for them (16 workers
// instead of 2, twice the CPU per run).
const gateDelay = 25 * time.Millisecond

// watchGate runs while runs wait at the gate: every gateDelay it stops
// counting the runs that have become long and admits waiting runs in
// their place. One watch serves the pool (a timer per waiting run woke
// the runtime's poller thread for each).
func (p *Pool) watchGate() {
	t := time.NewTicker(gateDelay)
	defer t.Stop()
	for now := range t.C {
		p.mu.Lock()
		gated := false
		for _, w := range p.waiters {
			gated = gated || w.gated
		}
		if !gated || p.closed {
			p.gateWatched = false
			p.mu.Unlock()
			return
		}
		for w := range p.procs {
			if w.counted && now.Sub(w.granted) >= gateDelay {
				w.counted, w.long = false, true
				p.running--
			}
		}
		p.admitLocked()
		// No idle worker for a run that may run: start one once it has
		// waited growDelay.
		for _, wt := range p.waiters {
			if wt.topLevel {
				if p.running < p.opts.Running && now.Sub(wt.since) >= growDelay && p.starting < p.pendingTopLevel() && p.mayGrowLocked(true) {
					p.startLocked()
				}
				break
			}
		}
		p.mu.Unlock()
	}
}

// grantLocked gives w to a run.
func (p *Pool) grantLocked(w *proc, topLevel bool) {
	if topLevel {
		p.busy++
		p.running++
		w.topLevel, w.counted, w.long, w.granted = true, true, false, time.Now()
	}
}

// slowCall notes that w's run entered (+1) or left (-1) a slow host call:
// a run waiting for the host does not hold a running slot.
func (p *Pool) slowCall(w *proc, delta int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.slow += delta
	switch {
	case delta > 0 && w.slow == 1 && w.counted:
		w.counted = false
		p.running--
		p.admitLocked()
	case delta < 0 && w.slow == 0 && w.topLevel && !w.long && !w.counted:
		w.counted = true
		p.running++
	}
}

// admitLocked gives waiting top-level runs an idle worker while fewer
// than Running short runs run.
func (p *Pool) admitLocked() {
	for p.running < p.opts.Running && p.busy < p.opts.Max {
		var wt *waiter
		for _, x := range p.waiters {
			if x.topLevel {
				wt = x
				break
			}
		}
		if wt == nil {
			return
		}
		w := p.popIdle()
		if w == nil {
			return // watchGate or the waiter's grow timer starts one
		}
		p.removeWaiterLocked(wt)
		p.grantLocked(w, true)
		wt.ch <- acquired{w: w}
	}
}

// removeWaiterLocked withdraws wt; false when it was no longer waiting
// (a worker or an error was handed to it).
func (p *Pool) removeWaiterLocked(wt *waiter) bool {
	for i, w := range p.waiters {
		if w == wt {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// growDelay is how long a run waits for a busy worker before the pool,
// already at its size, starts another for it. A worker's start costs
// 100–250 ms of CPU (exec, the shared libraries, the runtime, the first
// VM): at 10 ms, a burst of runs at a cold start grew the pool to 16
// workers whose starts took the CPU the runs needed.
const growDelay = 200 * time.Millisecond

// mayGrowLocked reports whether a waiter of this kind may have a worker
// started for it: the concurrent-run cap allows it and fewer workers are
// starting than runs wait.
func (p *Pool) mayGrowLocked(topLevel bool) bool {
	return !p.closed && (!topLevel || p.busy+p.pendingTopLevel() <= p.opts.Max) && p.starting < p.wantStarting()
}

// isWaiting reports whether wt still waits for a worker.
func (p *Pool) isWaiting(wt *waiter) bool {
	for _, w := range p.waiters {
		if w == wt {
			return true
		}
	}
	return false
}

func (p *Pool) busyNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy
}

// pendingTopLevel counts top-level waiters.
func (p *Pool) pendingTopLevel() int {
	n := 0
	for _, w := range p.waiters {
		if w.topLevel {
			n++
		}
	}
	return n
}

// wantStarting is how many workers should be starting for the waiters.
func (p *Pool) wantStarting() int { return len(p.waiters) }

// abandon withdraws a waiter; a worker handed to it meanwhile goes back.
func (p *Pool) abandon(wt *waiter) {
	p.mu.Lock()
	removed := p.removeWaiterLocked(wt)
	p.mu.Unlock()
	if removed {
		return
	}
	if a := <-wt.ch; a.w != nil {
		p.release(a.w, true, wt.topLevel)
	}
}

func (p *Pool) popIdle() *proc {
	for len(p.idle) > 0 {
		w := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !w.isDead() {
			return w
		}
	}
	return nil
}

// release returns a worker after a run: to a waiter, to the idle list,
// or, when the run left it unusable, to the reaper.
func (p *Pool) release(w *proc, healthy, topLevel bool) {
	p.mu.Lock()
	if topLevel {
		p.busy--
		if w.counted {
			p.running--
		}
		w.topLevel, w.counted, w.long = false, false, false
	}
	if !healthy || p.closed || w.isDead() {
		p.admitLocked()
		p.mu.Unlock()
		w.kill(nil)
		return
	}
	w.idleSince = time.Now()
	p.handOrIdleLocked(w)
	p.mu.Unlock()
}

// handOrIdleLocked gives w to the first waiter that may take it, else
// makes it idle.
func (p *Pool) handOrIdleLocked(w *proc) {
	for i, wt := range p.waiters {
		if wt.topLevel && (p.busy >= p.opts.Max || p.running >= p.opts.Running) {
			continue
		}
		p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
		p.grantLocked(w, wt.topLevel)
		wt.ch <- acquired{w: w}
		return
	}
	p.idle = append(p.idle, w)
	p.admitLocked()
}

// startLocked starts one worker in the background.
func (p *Pool) startLocked() {
	p.starting++
	p.starts.Add(1)
	go func() {
		defer p.starts.Done()
		w, err := p.spawnWith(p.conf)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.starting--
		if err != nil {
			if !p.closed {
				p.opts.Log.Error("sandbox worker failed to start", "err", err)
			}
			if len(p.waiters) > 0 && p.starting < len(p.waiters) {
				wt := p.waiters[0]
				p.waiters = p.waiters[1:]
				wt.ch <- acquired{err: unavailable("a sandbox worker could not start: " + err.Error())}
			}
			return
		}
		if p.closed {
			go w.kill(nil)
			return
		}
		p.procs[w] = true
		w.idleSince = time.Now()
		p.handOrIdleLocked(w)
	}()
}

// fill starts workers until Size are alive.
func (p *Pool) fill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && len(p.procs)+p.starting < p.opts.Size {
		p.startLocked()
	}
}

// gone forgets a dead worker and keeps the pool at its size.
func (p *Pool) gone(w *proc) {
	p.mu.Lock()
	delete(p.procs, w)
	for i, x := range p.idle {
		if x == w {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
	p.fill()
}

// janitor retires workers beyond Size that have been idle too long.
func (p *Pool) janitor() {
	tick := max(p.opts.IdleTimeout/4, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.closing:
			return
		case <-t.C:
		}
		var retire []*proc
		p.mu.Lock()
		// idle is ordered by last use: the oldest are first.
		for len(p.idle) > 0 && len(p.procs)-len(retire) > p.opts.Size {
			w := p.idle[0]
			if time.Since(w.idleSince) < p.opts.IdleTimeout {
				break
			}
			p.idle = p.idle[1:]
			retire = append(retire, w)
		}
		p.mu.Unlock()
		for _, w := range retire {
			w.retire()
		}
	}
}

// spec returns the JSON of plan's stubs spec, cached per version.
func (p *Pool) spec(plan *jsrt.Plan) []byte {
	p.specMu.Lock()
	defer p.specMu.Unlock()
	if p.specVersion != plan.Version || p.specJSON == nil {
		b, _ := json.Marshal(plan.Spec)
		p.specJSON, p.specVersion = b, plan.Version
	}
	return p.specJSON
}

// PIDs lists the worker processes alive now.
func (p *Pool) PIDs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, 0, len(p.procs))
	for w := range p.procs {
		if !w.isDead() {
			out = append(out, w.pid)
		}
	}
	return out
}
