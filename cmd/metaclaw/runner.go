package main

import (
	"context"
	"sync"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/runtime/wasm"
	"github.com/metaclaw/metaclaw/runtime/worker"
)

// Scripts run in sandbox worker processes (runtime/worker): the same
// binary in its hidden worker mode, limited from outside. WebAssembly
// modules run on one wazero runner per host (runtime/wasm), in process:
// wazero bounds their memory and time itself. hostapi.Runners sends each
// run to its runtime.

// setRunners makes h's runner js for scripts and a WebAssembly runner for
// modules, made now (warm) or with the first module, closed with the host.
func setRunners(h *hostapi.Host, js hostapi.ScriptRunner, warmWasm bool) error {
	mods := newLazyWasm(h)
	if warmWasm {
		if _, err := mods.get(); err != nil {
			return err
		}
	}
	h.Runner = hostapi.Runners{JS: js, WASM: mods}
	return nil
}

// startPool gives h a warm pool of size workers (0: one per CPU) serving
// at most max runs at once, closed with the host, and a warm WebAssembly
// runner. serve uses it.
func startPool(h *hostapi.Host, size, max int) error {
	p, err := worker.NewPool(h, worker.Options{Size: size, Max: max, Log: h.Log})
	if err != nil {
		return apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the sandbox workers: %v", err)
	}
	h.OnClose(p.Close)
	return setRunners(h, p, true)
}

// startPoolInBackground is serve's startPool: the server listens without
// waiting for the sandbox workers (the first one execs this binary, which
// maps libvips's ~95 shared libraries and initialises the Go runtime:
// 0.5–2 s of a loaded 2-core machine, BenchmarkServeFirstExtract), nor
// for the WebAssembly runner. The pool starts once after is closed (serve:
// when the PDF engine is ready, which on two cores loads ~25 % sooner
// without worker processes starting beside it), after at most
// poolStartDelay, or with the first script, whichever comes first. A
// script waits for the start as long as its context allows; a start that
// fails is logged, and every script then fails with
// TOOL_WORKER_UNAVAILABLE saying why, while files and tools keep working.
func startPoolInBackground(h *hostapi.Host, size, max int, after <-chan struct{}) {
	p := &startingPool{h: h, size: size, max: max, ready: make(chan struct{})}
	// A host closed before the start stops it from happening; one
	// closed while the pool starts closes it once started.
	h.OnClose(func() error {
		p.once.Do(func() {
			p.err = apierr.New(apierr.ToolWorkerUnavailable, "the host is closing; no script can start")
			close(p.ready)
		})
		<-p.ready
		if p.pool != nil {
			return p.pool.Close()
		}
		return nil
	})
	mods := newLazyWasm(h)
	h.Runner = hostapi.Runners{JS: p, WASM: mods}
	go func() {
		t := time.NewTimer(poolStartDelay)
		defer t.Stop()
		select {
		case <-after:
		case <-t.C:
		}
		p.start()
		mods.get() // warm; a module run meanwhile waits for the same runner
	}()
}

// poolStartDelay bounds how long serve's pool waits for the PDF engine
// (whose first start on a machine compiles pdfium: 10 s or more).
const poolStartDelay = 2 * time.Second

// startingPool is a sandbox pool started on demand: ready is closed once
// pool or err is set.
type startingPool struct {
	h         *hostapi.Host
	size, max int
	once      sync.Once
	ready     chan struct{}
	pool      *worker.Pool
	err       error
}

// start starts the pool unless it is started (or the host closed).
func (p *startingPool) start() {
	p.once.Do(func() {
		go func() {
			defer close(p.ready)
			pool, err := worker.NewPool(p.h, worker.Options{Size: p.size, Max: p.max, Log: p.h.Log})
			if err != nil {
				p.err = apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the sandbox workers: %v", err)
				p.h.Log.Error("sandbox workers did not start; scripts will fail until the server restarts", "error", err)
				return
			}
			p.pool = pool
		}()
	})
}

func (p *startingPool) Run(ctx context.Context, env *hostapi.Env, req hostapi.RunRequest) *hostapi.RunResult {
	p.start()
	select {
	case <-p.ready:
	case <-ctx.Done():
		return runError(apierr.Wrap(apierr.Timeout, ctx.Err(), "the sandbox workers were still starting when the run's time ran out; retry"))
	}
	if p.err != nil {
		return runError(p.err)
	}
	return p.pool.Run(ctx, env, req)
}

var _ hostapi.ScriptRunner = (*startingPool)(nil)

// runError is the result of a run that could not start.
func runError(err error) *hostapi.RunResult {
	e := apierr.Of(err)
	return &hostapi.RunResult{Error: &hostapi.RunError{Code: e.Code, Message: e.Message}, Logs: []hostapi.LogEntry{}, Files: []hostapi.Artifact{}}
}

// lazyWasm is the WebAssembly runtime of a host: its wazero runner is
// made by the first module run or check (a command that runs no module
// never pays for it), and closes with the host.
type lazyWasm struct {
	h      *hostapi.Host
	mu     sync.Mutex
	r      *wasm.HostRunner
	closed bool
}

func newLazyWasm(h *hostapi.Host) *lazyWasm {
	l := &lazyWasm{h: h}
	// The runner closes itself with the host (wasm.New registers it);
	// this only stops one being made once the host is closing.
	h.OnClose(func() error {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		return nil
	})
	return l
}

func (l *lazyWasm) get() (*wasm.HostRunner, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, apierr.New(apierr.ToolWorkerUnavailable, "the host is closing; no module can start")
	}
	if l.r == nil {
		r, err := wasm.New(l.h, wasm.Options{})
		if err != nil {
			return nil, apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the WebAssembly runtime: %v", err)
		}
		l.r = r.ForHost()
	}
	return l.r, nil
}

func (l *lazyWasm) Run(ctx context.Context, env *hostapi.Env, req hostapi.RunRequest) *hostapi.RunResult {
	r, err := l.get()
	if err != nil {
		e := apierr.Of(err)
		return &hostapi.RunResult{Error: &hostapi.RunError{Code: e.Code, Message: e.Message}, Logs: []hostapi.LogEntry{}, Files: []hostapi.Artifact{}}
	}
	return r.Run(ctx, env, req)
}

func (l *lazyWasm) Check(ctx context.Context, env *hostapi.Env, req hostapi.RunRequest) error {
	r, err := l.get()
	if err != nil {
		return err
	}
	return r.Check(ctx, env, req)
}

var (
	_ hostapi.ScriptRunner  = (*lazyWasm)(nil)
	_ hostapi.ModuleChecker = (*lazyWasm)(nil)
)

// lazyPool is the runner of commands that may never run a script (run,
// tool, files, and mcp, whose client may only list and read files): the
// pool starts with the first script, and closes with the host.
type lazyPool struct {
	h    *hostapi.Host
	size int
	once sync.Once
	pool *worker.Pool
	err  error
}

// newLazyPool makes h's runners a pool of size warm workers (0: one per
// CPU) started by the first script, and a WebAssembly runner made by the
// first module.
func newLazyPool(h *hostapi.Host, size int) *lazyPool {
	l := &lazyPool{h: h, size: size}
	setRunners(h, l, false) // nothing to fail: nothing starts yet
	h.OnClose(func() error {
		l.once.Do(func() {}) // no pool after this
		if l.pool != nil {
			return l.pool.Close()
		}
		return nil
	})
	return l
}

func (l *lazyPool) Run(ctx context.Context, env *hostapi.Env, req hostapi.RunRequest) *hostapi.RunResult {
	l.once.Do(func() {
		l.pool, l.err = worker.NewPool(l.h, worker.Options{Size: l.size, Log: l.h.Log})
	})
	if l.pool == nil {
		err := l.err
		if err == nil {
			err = apierr.New(apierr.ToolWorkerUnavailable, "the host is closing; no script can start")
		}
		e := apierr.Of(apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start a sandbox worker: %v", err))
		return &hostapi.RunResult{Error: &hostapi.RunError{Code: e.Code, Message: e.Message}, Logs: []hostapi.LogEntry{}, Files: []hostapi.Artifact{}}
	}
	return l.pool.Run(ctx, env, req)
}

var _ hostapi.ScriptRunner = (*lazyPool)(nil)
