package main

import (
	"context"
	"os"
	"os/signal"
)

// backend is what the files, run, tool and tools commands act on: the data
// directory (localBackend) or, with --server, a running `metaclaw serve`
// (remoteBackend). The commands parse arguments, draw progress bars and
// format output once; a backend only does the operation.
type backend interface {
	fileBackend
	toolBackend
	Close() error
}

// backend opens the side the command acts on. Errors are coded (a bad
// --server URL, a data directory that will not open).
func (g *globals) backend() (backend, error) {
	if g.server != "" {
		r, err := g.remote()
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	h, _, err := g.openHost()
	if err != nil {
		return nil, err
	}
	return &localBackend{h: h, env: h.Env(g.workspace, g.session), close: func() error { return g.closeHost(h) }}, nil
}

// withBackend runs f on the backend with a context that Ctrl-C cancels, so
// that an interrupted transfer or run stops cleanly (a partial download is
// removed, the store is closed) instead of the process dying mid-write. A
// backend that will not open is a coded error, printed as JSON with jsonOut.
func (g *globals) withBackend(jsonOut bool, f func(ctx context.Context, b backend) error) error {
	b, err := g.backend()
	if err != nil {
		return fail(g, err, jsonOut)
	}
	defer b.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return f(ctx, b)
}
