package loadtest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	"github.com/metaclaw/metaclaw/runtime/worker"
	"github.com/metaclaw/metaclaw/server"
	"github.com/metaclaw/metaclaw/server/client"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// site is a server as `metaclaw serve` runs it: every operation area,
// scripts in sandbox worker processes, listening on a random loopback
// port.
type site struct {
	h   *hostapi.Host
	url string
	c   *client.Client
}

func startSite(tb testing.TB, cfg func(*server.Config)) *site {
	tb.Helper()
	dir := tb.TempDir()
	h, parts, err := host.Open(hostapi.Config{DataDir: dir, Log: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	pool, err := worker.NewPool(h, worker.Options{Size: 2, Log: quiet})
	if err != nil {
		h.Close()
		tb.Fatal(err)
	}
	h.OnClose(pool.Close)
	h.Runner = pool
	sc := server.Config{Host: h, Tools: parts.Tools, Log: quiet}
	if cfg != nil {
		cfg(&sc)
	}
	srv, err := server.New(sc)
	if err != nil {
		h.Close()
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	c, err := client.New(url, "")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, context.Canceled) {
				tb.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Error("the server did not stop within 30 s of its context")
		}
		h.Close()
	})
	return &site{h: h, url: url, c: c}
}

// upload puts a local file into the site's workspace under name.
func (s *site) upload(tb testing.TB, path, name string) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if _, err := s.c.Upload(context.Background(), f, client.UploadOptions{Name: name, Filename: filepath.Base(name), Overwrite: true, Size: st.Size()}); err != nil {
		tb.Fatalf("upload %s: %v", name, err)
	}
}
