// Package js runs agent scripts. Runner runs them in the host process,
// for embedding and unit tests; the sandbox worker pool (runtime/worker),
// which every user-facing path uses, runs them in worker processes. Both
// run the same engine (runtime/js/script) and share what happens on the
// host side of a run, kept here: limits and input, the host calls a script
// makes, the artifact log, and the run result envelope.
package js

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	jsbind "github.com/metaclaw/metaclaw/bindings/js"
	"github.com/metaclaw/metaclaw/bindings/js/stubs"
	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/runtime/js/script"
)

// DefaultMaxCalls is how many host calls one run may have in flight at
// once; the rest wait inside the VM. 10,000 calls under Promise.all cost
// the host 16 goroutines, not 10,000.
const DefaultMaxCalls = 16

// DefaultMaxArgBytes bounds one host call's arguments as JSON.
const DefaultMaxArgBytes = 128 << 20

// Runner runs scripts in the host process. It implements
// hostapi.ScriptRunner. Its memory limit is only the growth of the whole
// process's heap and a native built-in that will not stop ('x'.repeat(2**40))
// can take the process down: user-facing paths use the worker pool.
type Runner struct {
	host  *hostapi.Host
	plans *Plans
}

var _ hostapi.ScriptRunner = (*Runner)(nil)

// New returns a runner for h's registry.
func New(h *hostapi.Host) *Runner { return &Runner{host: h, plans: NewPlans(h.Registry)} }

// Run executes req.Code as the body of an async function.
func (r *Runner) Run(ctx context.Context, env *hostapi.Env, req hostapi.RunRequest) *hostapi.RunResult {
	b, res := Begin(r.host, r.plans, env, req)
	if res != nil {
		return res
	}
	// Host calls, and the runs they start, end with this run: they see
	// its deadline and are cancelled when it ends.
	callCtx, cancel := context.WithDeadline(ctx, b.Start.Add(b.Limits.Timeout))
	calls := NewCalls(callCtx, r.host.Registry, b.Env, b.Plan.Ops)
	run, err := script.New(b.Plan.Stubs)
	var out script.Outcome
	if err != nil {
		out = script.Outcome{Err: apierr.Of(err)}
	} else {
		out = run.Exec(ctx, b.Request, calls, script.Options{WatchMemory: true})
	}
	// The run has ended: no host call may outlive it.
	cancel()
	calls.Wait()
	return b.Finish(out)
}

// Plan is the sandbox API of one registry state: the stubs and the op
// behind each stub.
type Plan struct {
	Version int
	Spec    *stubs.Spec
	Stubs   *stubs.Plan
	Ops     []*hostapi.Op
}

// Plans keeps the Plan of a registry current: ops registered after start
// (tests, embedders) appear in the next run.
type Plans struct {
	reg  *hostapi.Registry
	mu   sync.Mutex
	plan *Plan
	n    int
}

// NewPlans derives plans from reg.
func NewPlans(reg *hostapi.Registry) *Plans { return &Plans{reg: reg} }

// Current returns the plan for the registry as it is now.
func (p *Plans) Current() *Plan {
	n := p.reg.Len()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plan == nil || n != p.n {
		spec, ops := jsbind.Spec(p.reg)
		version := 1
		if p.plan != nil {
			version = p.plan.Version + 1
		}
		p.plan = &Plan{Version: version, Spec: spec, Stubs: stubs.NewPlan(spec), Ops: ops}
		p.n = n
	}
	return p.plan
}

// Begun is a run whose request has been checked and whose host side is
// ready: limits resolved, input encoded, an environment that records the
// run's file changes.
type Begun struct {
	Start   time.Time
	Limits  hostapi.RunLimits
	Request script.Request
	Env     *hostapi.Env
	Plan    *Plan
	arts    *ArtifactLog
}

// Begin checks req and prepares its host side, with the API of plans. A
// request that cannot run (nested too deeply, input that is not JSON)
// returns its result at once.
func Begin(h *hostapi.Host, plans *Plans, env *hostapi.Env, req hostapi.RunRequest) (*Begun, *hostapi.RunResult) {
	b := &Begun{Start: time.Now(), Limits: h.EffectiveLimits(req.Limits), arts: NewArtifactLog()}
	if env.Depth > b.Limits.MaxDepth {
		return nil, b.Finish(script.Outcome{Err: apierr.New(apierr.ResourceExhausted,
			"tool calls are nested %d deep; the limit is %d", env.Depth, b.Limits.MaxDepth)})
	}
	var input []byte
	if req.Input != nil {
		canon, err := hostapi.Canonical(req.Input, nil)
		if err != nil {
			return nil, b.Finish(script.Outcome{Err: apierr.New(apierr.ValidationFailed, "input: %s", apierr.Of(err).Message)})
		}
		input, err = json.Marshal(canon)
		if err != nil {
			return nil, b.Finish(script.Outcome{Err: apierr.New(apierr.ValidationFailed, "input: %v", err)})
		}
	}
	child := *env
	parent := env.Record
	arts := b.arts
	child.Record = func(f store.File, action string) {
		arts.Record(f, action)
		if parent != nil {
			parent(f, action)
		}
	}
	b.Env = &child
	b.Plan = plans.Current()
	name := req.Name
	if name == "" {
		name = "script.js"
	}
	b.Request = script.Request{
		Name: name, Code: req.Code, Input: input, Session: env.Session,
		Limits: script.Limits{
			Timeout: b.Limits.Timeout, MemoryBytes: b.Limits.MemoryBytes,
			LogBytes: b.Limits.LogBytes, ResultBytes: b.Limits.ResultBytes,
			MaxCalls: DefaultMaxCalls, MaxArgBytes: DefaultMaxArgBytes,
		},
	}
	return b, nil
}

// Finish builds the run result (SPEC 5) from the outcome: the result JSON
// as written by Go, the logs, the error, and every file the run changed.
// Call it after the run's host calls have ended.
func (b *Begun) Finish(out script.Outcome) *hostapi.RunResult {
	res := &hostapi.RunResult{OK: out.OK, Logs: make([]hostapi.LogEntry, len(out.Logs)), Files: b.arts.List()}
	for i, l := range out.Logs {
		res.Logs[i] = hostapi.LogEntry{Level: l.Level, Message: l.Message}
	}
	if out.OK {
		res.Result = json.RawMessage(out.Result)
	} else {
		e := out.Err
		if e == nil {
			e = apierr.New(apierr.Internal, "the run ended without a result")
		}
		res.Error = &hostapi.RunError{Code: e.Code, Message: e.Message, Stack: out.Stack}
	}
	res.DurationMs = float64(time.Since(b.Start).Microseconds()) / 1000
	return res
}

// Calls runs a script's host calls against the registry, each in its own
// goroutine (the engine bounds how many are in flight), with the run's
// context and environment.
type Calls struct {
	ctx context.Context
	reg *hostapi.Registry
	env *hostapi.Env
	ops []*hostapi.Op
	wg  sync.WaitGroup
}

// NewCalls returns the host side of a run's calls.
func NewCalls(ctx context.Context, reg *hostapi.Registry, env *hostapi.Env, ops []*hostapi.Op) *Calls {
	return &Calls{ctx: ctx, reg: reg, env: env, ops: ops}
}

// Call implements script.Host.
func (c *Calls) Call(method int, args []byte, done func([]byte, *apierr.Error)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		done(c.Invoke(method, args))
	}()
}

// Invoke runs one call now: the op's handler through the registry (which
// decodes and validates the arguments; fastArgs reads the JSON), and its
// result as the camelCase JSON a script receives.
func (c *Calls) Invoke(method int, args []byte) ([]byte, *apierr.Error) {
	if method < 0 || method >= len(c.ops) {
		return nil, apierr.New(apierr.Internal, "host call to unknown method %d", method)
	}
	var res any
	var err error
	if parsed, ok := fastArgs(args); ok {
		res, err = c.reg.Invoke(c.ctx, c.env, c.ops[method], parsed)
	} else {
		res, err = c.reg.InvokeJSON(c.ctx, c.env, c.ops[method], args)
	}
	if err != nil {
		return nil, apierr.Of(err)
	}
	return jsbind.EncodeResult(res), nil
}

// Begin counts a host call the caller runs itself; call the returned
// function when it has returned.
func (c *Calls) Begin() (done func()) {
	c.wg.Add(1)
	return c.wg.Done
}

// Go runs f as one of the run's host calls (waited for by Wait).
func (c *Calls) Go(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// Wait blocks until every host call of the run has returned.
func (c *Calls) Wait() { c.wg.Wait() }
