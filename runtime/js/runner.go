// Package js runs agent scripts in goja: a fresh VM per run, the registry's
// stubs installed as files.* and tools.*, an event loop that settles host
// calls' promises, and the limits of SPEC 5 (time, memory, console output,
// result size, call depth).
package js

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"

	jsbind "github.com/metaclaw/metaclaw/bindings/js"
	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// maxCallStack bounds JS recursion; deeper recursion throws a RangeError
// inside the script instead of growing the Go stack.
const maxCallStack = 4096

// Runner runs scripts in-process. It implements hostapi.ScriptRunner; a
// process-isolated runner can replace it behind the same interface.
type Runner struct {
	host     *hostapi.Host
	planOnce sync.Once
	plan     *jsbind.Plan
}

// New returns a runner for h's registry.
func New(h *hostapi.Host) *Runner { return &Runner{host: h} }

func (r *Runner) getPlan() *jsbind.Plan {
	r.planOnce.Do(func() { r.plan = jsbind.NewPlan(r.host.Registry) })
	return r.plan
}

// Run executes req.Code as the body of an async function.
func (r *Runner) Run(ctx context.Context, env *hostapi.Env, req hostapi.RunRequest) *hostapi.RunResult {
	start := time.Now()
	lim := r.host.EffectiveLimits(req.Limits)
	ru := &run{runner: r, lim: lim, done: make(chan struct{}), completions: make(chan completion, 64),
		arts: newArtifactLog(), result: &hostapi.RunResult{Logs: []hostapi.LogEntry{}}}
	if env.Depth > lim.MaxDepth {
		ru.fail(apierr.New(apierr.ResourceExhausted, "tool calls are nested %d deep; the limit is %d", env.Depth, lim.MaxDepth), "")
	} else {
		ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
		ru.exec(ctx, env, req)
		cancel()
	}
	close(ru.done)
	ru.result.Files = ru.arts.list()
	ru.result.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	return ru.result
}

// queued is a host call a script made during its current turn.
type queued struct {
	op              *hostapi.Op
	args            map[string]any
	resolve, reject func(any) error
}

type completion struct {
	resolve, reject func(any) error
	value           any
	err             error
}

type run struct {
	runner      *Runner
	lim         hostapi.RunLimits
	vm          *goja.Runtime
	done        chan struct{}
	completions chan completion
	queue       []queued
	inflight    int
	arts        *artifactLog
	result      *hostapi.RunResult
	logBytes    int
	logsCut     bool

	stopMu  sync.Mutex
	stopWhy *apierr.Error // why the VM was interrupted
	memCh   chan struct{}
}

func (ru *run) fail(e *apierr.Error, stack string) {
	ru.result.OK = false
	ru.result.Result = nil
	ru.result.Error = &hostapi.RunError{Code: e.Code, Message: e.Message, Stack: stack}
}

// stop interrupts the VM for reason (first reason wins).
func (ru *run) stop(reason *apierr.Error) {
	ru.stopMu.Lock()
	defer ru.stopMu.Unlock()
	if ru.stopWhy == nil {
		ru.stopWhy = reason
		ru.vm.Interrupt(reason)
	}
}

func (ru *run) stopReason() *apierr.Error {
	ru.stopMu.Lock()
	defer ru.stopMu.Unlock()
	return ru.stopWhy
}

func (ru *run) exec(ctx context.Context, parent *hostapi.Env, req hostapi.RunRequest) {
	env := *parent
	env.Record = func(f store.File, action string) {
		ru.arts.record(f, action)
		if parent.Record != nil {
			parent.Record(f, action)
		}
	}
	name := req.Name
	if name == "" {
		name = "script.js"
	}
	prog, err := goja.Compile(name, "(async function() {\n"+req.Code+"\n})()", false)
	if err != nil {
		ru.fail(apierr.New(apierr.ValidationFailed, "the script does not parse: %s", shiftLines(err.Error())), "")
		return
	}
	vm := goja.New()
	ru.vm = vm
	vm.SetMaxCallStackSize(maxCallStack)
	err = ru.runner.getPlan().Install(vm, func(op *hostapi.Op, args map[string]any) goja.Value {
		p, resolve, reject := vm.NewPromise()
		ru.queue = append(ru.queue, queued{op, args, resolve, reject})
		return vm.ToValue(p)
	})
	if err != nil {
		ru.fail(apierr.Of(err), "")
		return
	}
	input, err := hostapi.Canonical(req.Input, nil)
	if err != nil {
		ru.fail(apierr.New(apierr.ValidationFailed, "input: %s", apierr.Of(err).Message), "")
		return
	}
	vm.Set("input", jsbind.ToJS(vm, input))
	sess := vm.NewObject()
	sess.Set("id", env.Session)
	vm.Set("session", sess)
	vm.Set("console", ru.console())

	stopWatch := ru.watch(ctx)
	defer stopWatch()

	v, err := vm.RunProgram(prog)
	if err != nil {
		ru.failFrom(err)
		return
	}
	promise, ok := v.Export().(*goja.Promise)
	if !ok {
		ru.fail(apierr.New(apierr.Internal, "the script wrapper did not return a promise"), "")
		return
	}
	registry := ru.runner.host.Registry
	for promise.State() == goja.PromiseStatePending {
		// Host calls the last JS turn made are queued. A lone call with
		// nothing else in flight runs right here, saving a goroutine
		// hand-off; several calls (Promise.all) run in parallel.
		if len(ru.queue) == 1 && ru.inflight == 0 {
			q := ru.queue[0]
			ru.queue = ru.queue[:0]
			v, err := registry.Invoke(ctx, &env, q.op, q.args)
			if err := ru.settle(completion{q.resolve, q.reject, v, err}); err != nil {
				ru.failFrom(err)
				return
			}
			continue
		}
		for _, q := range ru.queue {
			ru.inflight++
			go func(q queued) {
				v, err := registry.Invoke(ctx, &env, q.op, q.args)
				select {
				case ru.completions <- completion{q.resolve, q.reject, v, err}:
				case <-ru.done:
				}
			}(q)
		}
		ru.queue = ru.queue[:0]
		if ru.inflight == 0 {
			ru.fail(apierr.New(apierr.ValidationFailed, "the script awaits a promise that can never settle (no host call is in flight; timers are not available)"), "")
			return
		}
		select {
		case c := <-ru.completions:
			ru.inflight--
			if err := ru.settle(c); err != nil {
				ru.failFrom(err)
				return
			}
		case <-ctx.Done():
			ru.stop(timeoutError(ru.lim.Timeout))
			ru.fail(ru.stopReason(), "")
			return
		case <-ru.memExceeded():
			ru.fail(ru.stopReason(), "")
			return
		}
	}
	if promise.State() == goja.PromiseStateRejected {
		ru.failValue(promise.Result())
		return
	}
	ru.finish(promise.Result())
}

// settle resolves or rejects a host call's promise on the VM goroutine,
// which also runs the script up to its next await.
func (ru *run) settle(c completion) error {
	if c.err != nil {
		return c.reject(jsbind.ThrowError(ru.vm, apierr.Of(c.err)))
	}
	return c.resolve(jsbind.ToJS(ru.vm, c.value))
}

// memExceeded is closed by the watchdog when the memory budget is gone.
func (ru *run) memExceeded() <-chan struct{} {
	ru.stopMu.Lock()
	defer ru.stopMu.Unlock()
	if ru.memCh == nil {
		ru.memCh = make(chan struct{})
	}
	return ru.memCh
}

func timeoutError(d time.Duration) *apierr.Error {
	return apierr.New(apierr.Timeout, "the script ran longer than its %s time limit; do less per run or raise timeout_ms", d)
}

// finish serialises the script's return value.
func (ru *run) finish(v goja.Value) {
	if v == nil || goja.IsUndefined(v) {
		ru.result.OK = true
		ru.result.Result = json.RawMessage("null")
		return
	}
	stringify, _ := goja.AssertFunction(ru.vm.Get("JSON").ToObject(ru.vm).Get("stringify"))
	s, err := stringify(goja.Undefined(), v)
	if err != nil {
		ru.fail(apierr.New(apierr.ValidationFailed, "the script's return value is not JSON-serialisable: %v", err), "")
		return
	}
	if goja.IsUndefined(s) {
		ru.result.OK = true
		ru.result.Result = json.RawMessage("null")
		return
	}
	out := s.String()
	if len(out) > ru.lim.ResultBytes {
		ru.fail(apierr.New(apierr.ResourceExhausted, "the script's result is %d bytes; the limit is %d: return less (write big results to a file)", len(out), ru.lim.ResultBytes), "")
		return
	}
	ru.result.OK = true
	ru.result.Result = json.RawMessage(out)
}

// failFrom turns a goja error (exception or interrupt) into the run's error.
func (ru *run) failFrom(err error) {
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if why, ok := ie.Value().(*apierr.Error); ok {
			ru.fail(why, "")
			return
		}
		ru.fail(apierr.New(apierr.Timeout, "the script was interrupted"), "")
		return
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		if why := ru.stopReason(); why != nil {
			ru.fail(why, "")
			return
		}
		ru.failValue(ex.Value())
		return
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		ru.fail(apierr.New(apierr.ResourceExhausted, "maximum call stack size exceeded (%d frames); unbounded recursion?", maxCallStack), "")
		return
	}
	ru.fail(apierr.Of(err), "")
}

// failValue reports a rejection reason: a host error keeps its code; any
// other exception the script raised is VALIDATION_FAILED (the script, the
// caller's input, is at fault), with its stack.
func (ru *run) failValue(reason goja.Value) {
	if why := ru.stopReason(); why != nil {
		ru.fail(why, "")
		return
	}
	code := apierr.ValidationFailed
	msg := "the script threw " + safeString(reason)
	stack := ""
	if obj, ok := reason.(*goja.Object); ok {
		if c := obj.Get("code"); c != nil && !goja.IsUndefined(c) {
			if s := c.String(); isKnownCode(s) {
				code = apierr.Code(s)
			}
		}
		if m := obj.Get("message"); m != nil && !goja.IsUndefined(m) {
			msg = m.String()
			if n := obj.Get("name"); n != nil && !goja.IsUndefined(n) && code == apierr.ValidationFailed {
				msg = n.String() + ": " + msg
			}
		}
		if st := obj.Get("stack"); st != nil && !goja.IsUndefined(st) {
			stack = shiftLines(st.String())
		}
		if strings.Contains(msg, "Maximum call stack size exceeded") {
			code = apierr.ResourceExhausted
		}
	}
	ru.fail(&apierr.Error{Code: code, Message: msg}, stack)
}

func safeString(v goja.Value) (s string) {
	defer func() {
		if recover() != nil {
			s = "a value that cannot be printed"
		}
	}()
	if v == nil {
		return "undefined"
	}
	return v.String()
}

var knownCodes = map[string]bool{}

func init() {
	for _, c := range []apierr.Code{apierr.ValidationFailed, apierr.NotFound, apierr.AlreadyExists, apierr.TooLarge,
		apierr.UnsupportedFormat, apierr.QuotaExceeded, apierr.SandboxViolation, apierr.Unauthorized, apierr.Timeout,
		apierr.ResourceExhausted, apierr.Busy, apierr.FileReadFailed, apierr.FileWriteFailed, apierr.ToolWorkerUnavailable, apierr.Internal} {
		knownCodes[string(c)] = true
	}
}

func isKnownCode(s string) bool { return knownCodes[s] }

// shiftLines corrects line numbers in messages for the one-line wrapper the
// script body is compiled inside.
func shiftLines(s string) string {
	s = parseLineRef.ReplaceAllStringFunc(s, func(m string) string {
		var line, col int
		if n, _ := fmt.Sscanf(m, "Line %d:%d", &line, &col); n == 2 && line > 1 {
			return fmt.Sprintf("line %d column %d:", line-1, col)
		}
		return m
	})
	return lineRef.ReplaceAllStringFunc(s, func(m string) string {
		var name string
		var line, col int
		if n, _ := fmt.Sscanf(strings.ReplaceAll(m, ":", " "), "%s %d %d", &name, &line, &col); n == 3 && line > 1 {
			return fmt.Sprintf("%s:%d:%d", name, line-1, col)
		}
		return m
	})
}

var (
	lineRef      = regexp.MustCompile(`[\w.-]+:\d+:\d+`)
	parseLineRef = regexp.MustCompile(`Line \d+:\d+`)
)

// heapBytes reads the live heap size without stopping the world.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// watch interrupts the VM when the deadline passes or when the Go heap has
// grown by more than the run's memory budget since the run started. goja has
// no per-VM accounting, so heap growth is the budget's proxy; it does not
// catch a single native call that allocates hugely ('x'.repeat(2**40)),
// which needs process isolation.
func (ru *run) watch(ctx context.Context) func() {
	stop := make(chan struct{})
	base := heapBytes()
	budget := uint64(ru.lim.MemoryBytes)
	ru.memExceeded() // make sure the channel exists before the loop selects on it
	go func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				ru.stop(timeoutError(ru.lim.Timeout))
				return
			case <-t.C:
				if h := heapBytes(); h > base && h-base > budget {
					ru.stop(apierr.New(apierr.ResourceExhausted, "the script used more than its %d MB memory budget", budget>>20))
					ru.stopMu.Lock()
					close(ru.memCh)
					ru.stopMu.Unlock()
					return
				}
			}
		}
	}()
	return func() { close(stop) }
}
