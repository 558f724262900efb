// Package script runs one agent script in a fresh goja VM: the sandbox API
// installed from a stubs.Plan, an event loop that starts host calls (at
// most Limits.MaxCalls at a time) and settles their promises, captured
// console output, and the limits that can be enforced inside the VM (time,
// heap growth, console and result size).
//
// It is shared by the in-process runner (runtime/js) and the sandbox worker
// process (runtime/worker/child). It does not import the registry: host
// calls leave through a Host as JSON and their results come back as JSON.
// The run's outcome is plain Go data; the result is JSON written by Go from
// the VM's values, never by the script's own JSON object.
package script

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"

	"github.com/metaclaw/metaclaw/bindings/js/stubs"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// MaxCallStack bounds JS recursion; deeper recursion is RESOURCE_EXHAUSTED.
const MaxCallStack = 4096

// Limits bound one run from inside the VM.
type Limits struct {
	Timeout time.Duration
	// TimeoutMessage, when set, is what a TIMEOUT says (a worker is given
	// the time left of its run's limit, and the limit's own wording).
	TimeoutMessage string
	// MemoryBytes is the heap growth the run may cause (watched only when
	// Options.WatchMemory is set).
	MemoryBytes int64
	// LogBytes bounds the console output as it appears in the run result:
	// every entry costs its message (JSON-escaped), its level and the
	// envelope around them, so a flood of empty lines is bounded too.
	LogBytes    int
	ResultBytes int
	// MaxCalls is how many host calls may be in flight at once; more wait
	// in the VM until one finishes.
	MaxCalls int
	// MaxArgBytes bounds one host call's arguments as JSON.
	MaxArgBytes int
}

// Request is one run.
type Request struct {
	Name    string // labels stack traces: "script.js", "my_tool.js"
	Code    string
	Input   []byte // JSON; empty means null
	Session string
	Limits  Limits
}

// LogEntry is one captured console line.
type LogEntry struct {
	Level   string
	Message string
}

// Outcome is how a run ended.
type Outcome struct {
	OK     bool
	Result []byte // JSON text of the returned value when OK
	Logs   []LogEntry
	Err    *apierr.Error
	Stack  string
}

// Host carries host calls out of the VM. Call must not block for long; it
// reports the call's end through done, from any goroutine, exactly once.
type Host interface {
	Call(method int, args []byte, done func(result []byte, err *apierr.Error))
}

// Options tune how a run is watched.
type Options struct {
	// WatchMemory stops the run when the process's Go heap has grown by
	// more than Limits.MemoryBytes since it started. In a worker process
	// the heap is the run's alone; in the host it is an approximation.
	WatchMemory bool
	// Grace is how long a stopped VM has to unwind before OnStuck is
	// called (goja cannot interrupt native built-ins).
	Grace time.Duration
	// OnStuck is told the outcome when the VM did not unwind in time; a
	// worker process reports it and exits.
	OnStuck func(Outcome)
	// OnStop is told why the run is being stopped (time, memory), as soon
	// as it is; a worker tells its parent, in case it dies unwinding.
	OnStop func(*apierr.Error)
	// FlushLogs, when set, is handed console entries as they accumulate
	// (every 16 KB), on the VM goroutine; the outcome then carries only
	// the entries not yet flushed. A worker streams its logs to the parent
	// this way, so that a run that is killed still has them.
	FlushLogs func([]LogEntry)
}

// Run is one prepared VM; it runs one script once.
type Run struct {
	vm      *goja.Runtime
	sandbox *stubs.Sandbox
	// errorCtor is the intrinsic Error constructor, taken before any script.
	errorCtor goja.Value

	req  Request
	host Host

	completions chan completion
	queue       []*pending
	inflight    int

	logMu     sync.Mutex
	logs      []LogEntry
	logBytes  int
	logsCut   bool
	logEnc    *stubs.Encoder
	flushed   int // entries already handed to FlushLogs
	unflushed int // bytes of entries not yet flushed
	flushLogs func([]LogEntry)

	stopMu  sync.Mutex
	stopWhy *apierr.Error
	stopCh  chan struct{}
	stopped bool
}

type pending struct {
	method          int
	args            []byte
	resolve, reject func(any) error
}

type completion struct {
	p      *pending
	result []byte
	err    *apierr.Error
}

// New prepares a VM with plan's API and a console. A worker prepares the
// next run's VM while it waits for work.
func New(plan *stubs.Plan) (*Run, error) {
	vm := goja.New()
	vm.SetMaxCallStackSize(MaxCallStack)
	r := &Run{vm: vm, errorCtor: vm.Get("Error"), stopCh: make(chan struct{})}
	// goja's own global for wrapped Go errors is not JavaScript and has no
	// use here.
	vm.GlobalObject().Delete("GoError")
	sb, err := plan.Install(vm, r.call, stubs.Options{Stopped: r.isStopped})
	if err != nil {
		return nil, err
	}
	r.sandbox = sb
	if err := vm.Set("console", r.newConsole()); err != nil {
		return nil, err
	}
	return r, nil
}

// Exec runs req on the prepared VM. It returns when the script's promise
// has settled or the run was stopped; host calls still in flight are the
// host's to cancel.
func (r *Run) Exec(ctx context.Context, req Request, host Host, opts Options) (out Outcome) {
	r.req, r.host = req, host
	r.flushLogs = opts.FlushLogs
	if req.Limits.MaxCalls <= 0 {
		req.Limits.MaxCalls = 16
		r.req.Limits.MaxCalls = 16
	}
	r.completions = make(chan completion, req.Limits.MaxCalls)
	r.sandbox.SetMaxArgBytes(req.Limits.MaxArgBytes)
	defer func() {
		// goja turns script errors into exceptions, but a bug in a native
		// built-in panics with a Go error: the run fails, the process
		// carries on.
		if p := recover(); p != nil {
			if ie, ok := p.(*goja.InterruptedError); ok {
				out = r.outcomeFrom(ie)
			} else {
				out = r.failed(apierr.New(apierr.Internal, "the script engine failed: %v", p), "")
			}
		}
		out.Logs = r.snapshotLogs()
	}()

	name := req.Name
	if name == "" {
		name = "script.js"
	}
	prog, err := Compile(name, req.Code)
	if err != nil {
		return r.failed(apierr.New(apierr.ValidationFailed, "the script does not parse: %s", ShiftLines(err.Error())), "")
	}
	input := goja.Null()
	if len(req.Input) > 0 {
		v, err := stubs.Decode(r.vm, req.Input)
		if err != nil {
			return r.failed(apierr.New(apierr.ValidationFailed, "input: %v", err), "")
		}
		input = v
	}
	r.vm.Set("input", input)
	sess := r.vm.NewObject()
	sess.Set("id", req.Session)
	r.vm.Set("session", sess)

	stopWatch := r.watch(ctx, opts)
	defer stopWatch()

	v, err := r.vm.RunProgram(prog)
	if err != nil {
		return r.outcomeFrom(err)
	}
	promise, ok := v.Export().(*goja.Promise)
	if !ok {
		return r.failed(apierr.New(apierr.Internal, "the script wrapper did not return a promise"), "")
	}
	for promise.State() == goja.PromiseStatePending {
		if r.inflight == 0 {
			return r.failed(apierr.New(apierr.ValidationFailed, "the script awaits a promise that can never settle (no host call is in flight; timers are not available)"), "")
		}
		select {
		case c := <-r.completions:
			r.inflight--
			if err := r.settle(c); err != nil {
				return r.outcomeFrom(err)
			}
		case <-r.stopCh:
			return r.failed(r.stopReason(), "")
		}
		if why := r.stopReason(); why != nil {
			return r.failed(why, "")
		}
	}
	if promise.State() == goja.PromiseStateRejected {
		return r.failValue(promise.Result())
	}
	return r.finish(promise.Result())
}

// call is the stubs' CallFunc: it starts the host call now when fewer
// than MaxCalls are in flight, or queues it.
func (r *Run) call(method int, args []byte) goja.Value {
	p, resolve, reject := r.vm.NewPromise()
	q := &pending{method: method, args: args, resolve: resolve, reject: reject}
	if r.inflight < r.req.Limits.MaxCalls {
		r.start(q)
	} else {
		r.queue = append(r.queue, q)
	}
	return r.vm.ToValue(p)
}

func (r *Run) start(q *pending) {
	r.inflight++
	ch := r.completions
	r.host.Call(q.method, q.args, func(result []byte, err *apierr.Error) {
		ch <- completion{p: q, result: result, err: err}
	})
	q.args = nil
}

// settle resolves or rejects a finished call's promise, which runs the
// script up to its next await, then starts a queued call in its place.
func (r *Run) settle(c completion) error {
	if len(r.queue) > 0 && r.stopReason() == nil {
		next := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		r.start(next)
	}
	if c.err != nil {
		return c.p.reject(r.sandbox.Error(c.err))
	}
	v, err := stubs.Decode(r.vm, c.result)
	if err != nil {
		return c.p.reject(r.sandbox.Error(apierr.New(apierr.Internal, "the host's answer could not be read: %v", err)))
	}
	return c.p.resolve(v)
}

// stop interrupts the VM for reason; the first reason wins.
func (r *Run) stop(reason *apierr.Error) {
	r.stopMu.Lock()
	defer r.stopMu.Unlock()
	if r.stopWhy == nil {
		r.stopWhy = reason
		r.stopped = true
		r.vm.Interrupt(reason)
		close(r.stopCh)
	}
}

// Stop ends the run from another goroutine (a worker told to cancel).
func (r *Run) Stop(reason *apierr.Error) { r.stop(reason) }

func (r *Run) stopReason() *apierr.Error {
	r.stopMu.Lock()
	defer r.stopMu.Unlock()
	return r.stopWhy
}

func (r *Run) isStopped() bool {
	r.stopMu.Lock()
	defer r.stopMu.Unlock()
	return r.stopped
}

// TimeoutError is the error of a run that ran out of time.
func TimeoutError(d time.Duration) *apierr.Error {
	return apierr.New(apierr.Timeout, "the script ran longer than its %s time limit; do less per run or raise timeout_ms", d)
}

// MemoryError is the error of a run that went over its memory budget.
func MemoryError(budget int64) *apierr.Error {
	return apierr.New(apierr.ResourceExhausted, "the script used more than its %d MB memory budget; process data in smaller pieces (read ranges, page through rows) or raise the budget", budget>>20)
}

// ctxError names why ctx ended.
func ctxError(ctx context.Context) *apierr.Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return apierr.New(apierr.Timeout, "the time limit of the calling run ran out")
	}
	return apierr.New(apierr.Timeout, "the run was cancelled: its caller stopped waiting")
}

// watch stops the run at its deadline, when ctx ends, or when the heap has
// grown past the memory budget; after a stop it gives the VM opts.Grace to
// unwind before calling opts.OnStuck.
func (r *Run) watch(ctx context.Context, opts Options) func() {
	done := make(chan struct{})
	lim := r.req.Limits
	timeout := lim.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.NewTimer(timeout)
	var tick <-chan time.Time
	var ticker *time.Ticker
	var base uint64
	if opts.WatchMemory && lim.MemoryBytes > 0 {
		base = HeapBytes()
		ticker = time.NewTicker(time.Millisecond)
		tick = ticker.C
	}
	go func() {
		defer deadline.Stop()
		if ticker != nil {
			defer ticker.Stop()
		}
	watching:
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				r.stop(ctxError(ctx))
				break watching
			case <-deadline.C:
				if lim.TimeoutMessage != "" {
					r.stop(apierr.New(apierr.Timeout, "%s", lim.TimeoutMessage))
				} else {
					r.stop(TimeoutError(timeout))
				}
				break watching
			case <-tick:
				if h := HeapBytes(); h > base && h-base > uint64(lim.MemoryBytes) {
					r.stop(MemoryError(lim.MemoryBytes))
					break watching
				}
			}
		}
		if opts.OnStop != nil {
			opts.OnStop(r.stopReason())
		}
		if opts.OnStuck == nil {
			return
		}
		grace := time.NewTimer(opts.Grace)
		defer grace.Stop()
		select {
		case <-done:
		case <-grace.C:
			opts.OnStuck(Outcome{Err: r.stopReason(), Logs: r.snapshotLogs()})
		}
	}()
	return func() { close(done) }
}

// HeapBytes reads the Go heap's object bytes without stopping the world.
func HeapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func (r *Run) failed(e *apierr.Error, stack string) Outcome {
	return Outcome{Err: e, Stack: stack}
}

// outcomeFrom turns a goja error (exception or interrupt) into an outcome.
func (r *Run) outcomeFrom(err error) Outcome {
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if why, ok := ie.Value().(*apierr.Error); ok {
			return r.failed(why, "")
		}
		return r.failed(apierr.New(apierr.Timeout, "the script was interrupted"), "")
	}
	if why := r.stopReason(); why != nil {
		return r.failed(why, "")
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return r.failed(stackError(), "")
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		return r.failValue(ex.Value())
	}
	return r.failed(apierr.Of(err), "")
}

func stackError() *apierr.Error {
	return apierr.New(apierr.ResourceExhausted, "maximum call stack size exceeded (%d frames); unbounded recursion?", MaxCallStack)
}

// failValue reports a rejection reason: a host error keeps its code; any
// other exception the script raised is VALIDATION_FAILED (the script, the
// caller's input, is at fault), with its stack. The reason is read with
// the VM's property access, guarded: its getters may throw or loop.
func (r *Run) failValue(reason goja.Value) (out Outcome) {
	if why := r.stopReason(); why != nil {
		return r.failed(why, "")
	}
	code := apierr.ValidationFailed
	msg, stack := "", ""
	ex := r.vm.Try(func() {
		msg = "the script threw " + r.plain(reason)
		obj, ok := reason.(*goja.Object)
		if !ok {
			return
		}
		coded := false
		if c := obj.Get("code"); c != nil && !goja.IsUndefined(c) && goja.IsString(c) {
			if s := c.String(); knownCodes[s] {
				code, coded = apierr.Code(s), true
			}
		}
		if m := obj.Get("message"); m != nil && !goja.IsUndefined(m) {
			msg = r.plain(m)
			// A host error keeps its message; the script's own error
			// says what it is (TypeError: …).
			if n := obj.Get("name"); n != nil && !goja.IsUndefined(n) && !coded {
				msg = r.plain(n) + ": " + msg
			}
		}
		if st := obj.Get("stack"); st != nil && goja.IsString(st) {
			stack = ShiftLines(st.String())
		}
	})
	if ex != nil {
		msg = "the script threw a value that cannot be read"
	}
	if strings.Contains(msg, "Maximum call stack size exceeded") {
		code = apierr.ResourceExhausted
	}
	if len(msg) > 64<<10 {
		msg = msg[:64<<10] + "…"
	}
	if len(stack) > 64<<10 {
		stack = stack[:64<<10] + "…"
	}
	return r.failed(&apierr.Error{Code: code, Message: msg}, stack)
}

// plain renders a primitive as text; objects render through the log
// encoder (never through their own toString, which may be hostile).
func (r *Run) plain(v goja.Value) string {
	if v == nil {
		return "undefined"
	}
	if _, ok := v.(*goja.Object); !ok {
		s := v.String()
		if len(s) > 64<<10 {
			s = s[:64<<10] + "…"
		}
		return s
	}
	enc := stubs.NewEncoder(r.vm, stubs.ForLog, 64<<10)
	if _, err := enc.Encode(v, "the value", nil); err != nil {
		return "an object"
	}
	return string(enc.Bytes())
}

// finish writes the script's return value as the run's result.
func (r *Run) finish(v goja.Value) Outcome {
	enc := stubs.NewEncoder(r.vm, stubs.ForResult, r.req.Limits.ResultBytes)
	enc.SetStop(r.isStopped)
	limit := r.req.Limits.ResultBytes
	enc.SetTooBig(func(int) *apierr.Error {
		return apierr.New(apierr.ResourceExhausted, "the script's result is more than %s; the limit is %s: return less (write big results to a file)", HumanSize(limit), HumanSize(limit))
	})
	wrote, err := enc.Encode(v, "the result", nil)
	if why := r.stopReason(); why != nil {
		return r.failed(why, "")
	}
	if err != nil {
		if err.Code == apierr.ValidationFailed {
			err = &apierr.Error{Code: err.Code, Message: "the script's return value is not JSON-serialisable: " + err.Message}
		}
		return r.failed(err, "")
	}
	if !wrote {
		return Outcome{OK: true, Result: []byte("null")}
	}
	return Outcome{OK: true, Result: enc.Take()}
}

// HumanSize prints a byte count the way limits are spoken of.
func HumanSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

var knownCodes = map[string]bool{}

func init() {
	for _, c := range []apierr.Code{apierr.ValidationFailed, apierr.NotFound, apierr.AlreadyExists, apierr.TooLarge,
		apierr.UnsupportedFormat, apierr.QuotaExceeded, apierr.SandboxViolation, apierr.Unauthorized, apierr.Timeout,
		apierr.ResourceExhausted, apierr.Busy, apierr.FileReadFailed, apierr.FileWriteFailed, apierr.ToolWorkerUnavailable, apierr.Internal} {
		knownCodes[string(c)] = true
	}
}
