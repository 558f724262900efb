package worker_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	"github.com/metaclaw/metaclaw/runtime/worker"
)

// newPool opens a host on a fresh data directory with a worker pool as its
// runner; the test binary itself serves as the worker executable (it
// imports runtime/worker, whose init turns it into a worker when started
// with the hidden argument).
func newPool(t testing.TB, opts worker.Options) (*hostapi.Host, *worker.Pool) {
	t.Helper()
	h, _, err := host.Open(hostapi.Config{DataDir: t.TempDir(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Log == nil {
		opts.Log = quiet
	}
	if opts.IdleTimeout == 0 {
		// Tests check that the pool returns to its size: let extra idle
		// workers retire quickly.
		opts.IdleTimeout = 100 * time.Millisecond
	}
	p, err := worker.NewPool(h, opts)
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	h.Runner = p
	t.Cleanup(func() {
		p.Close()
		h.Close()
	})
	return h, p
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
