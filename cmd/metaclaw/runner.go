package main

import (
	"context"
	"sync"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/runtime/worker"
)

// Scripts run in sandbox worker processes (runtime/worker): the same
// binary in its hidden worker mode, limited from outside.

// startPool gives h a warm pool of size workers (0: one per CPU) serving
// at most max runs at once, closed with the host. serve and mcp use it.
func startPool(h *hostapi.Host, size, max int) error {
	p, err := worker.NewPool(h, worker.Options{Size: size, Max: max, Log: h.Log})
	if err != nil {
		return apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the sandbox workers: %v", err)
	}
	h.Runner = p
	h.OnClose(p.Close)
	return nil
}

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

// newLazyPool makes h's runner a pool of size warm workers (0: one per
// CPU) started by the first script.
func newLazyPool(h *hostapi.Host, size int) *lazyPool {
	l := &lazyPool{h: h, size: size}
	h.Runner = l
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
