// Package hosttest builds real hosts for the format packages' tests: a
// store in a temp directory, the areas under test registered, closed when
// the test ends.
package hosttest

import (
	"bytes"
	"context"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// New opens a host on cfg (a temp data directory when cfg.DataDir is
// empty) and registers areas into it.
func New(t testing.TB, cfg hostapi.Config, areas ...func(*hostapi.Host) error) *hostapi.Host {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	h, err := hostapi.NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	for _, register := range areas {
		if err := register(h); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// Upload stores data as an uploaded file; overwrite replaces a file of the
// same name instead of failing.
func Upload(t testing.TB, ws *store.Workspace, name string, data []byte, overwrite bool) *store.File {
	t.Helper()
	f, err := ws.Create(context.Background(), store.CreateOptions{Name: name, Source: store.SourceUpload, Overwrite: overwrite}, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return f
}
