package image

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// engine is libvips for this process. libvips keeps global state that can be
// started once and shut down once — it cannot be restarted — so the engine
// is process-wide rather than per Host: every Host that registers the image
// operations retains it, the first image call starts libvips (host start-up
// stays fast for the many commands that never touch an image), and the
// last Host to close shuts libvips down.
type engine struct {
	mu      sync.Mutex
	hosts   int
	started bool
	stopped bool
	err     error
	// slots bounds the image operations running at once; each one also
	// runs on at most vipsThreads libvips worker threads, so CPU and memory
	// stay bounded however many scripts call in parallel.
	slots chan struct{}
	log   *slog.Logger
}

var libvips = &engine{}

// vipsThreads is libvips' worker count per operation.
func vipsThreads() int { return min(max(runtime.NumCPU(), 1), 4) }

// retain records one more Host using the engine.
func (e *engine) retain(log *slog.Logger) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hosts++
	if e.log == nil && log != nil {
		e.log = log
	}
}

// release is the Host's close hook. When the last Host closes, libvips is
// shut down once the operations still running have finished. A test binary
// builds and closes many Hosts one after another and libvips could not be
// started again, so there libvips stays up until the process ends (its
// operation cache is off, so it holds nothing between calls).
func (e *engine) release() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hosts > 0 {
		e.hosts--
	}
	if e.hosts > 0 || !e.started || e.stopped {
		return nil
	}
	if testing.Testing() {
		return nil
	}
	return e.shutdownLocked()
}

// shutdownLocked waits (a bounded time) for running operations, then shuts
// libvips down for good. e.mu is held.
func (e *engine) shutdownLocked() error {
	deadline := time.After(10 * time.Second)
	for i := 0; i < cap(e.slots); i++ {
		select {
		case e.slots <- struct{}{}:
		case <-deadline:
			// An operation is stuck in libvips; shutting down under it
			// would crash the process, which is about to end anyway.
			return apierr.New(apierr.Busy, "image operations were still running when the host closed; libvips was left running")
		}
	}
	vips.Shutdown()
	e.stopped = true
	return nil
}

// Warm starts libvips now rather than on the first image call; a server
// calls it in the background when it starts. It returns libvips' start-up
// error, if any, or ctx's when ctx ends first.
func Warm(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- libvips.start() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return apierr.From(ctx.Err())
	}
}

// acquire starts libvips on first use and takes an operation slot; the
// returned function gives the slot back. Waiting for a slot respects ctx.
func (e *engine) acquire(ctx context.Context) (func(), error) {
	if err := e.start(); err != nil {
		return nil, err
	}
	select {
	case e.slots <- struct{}{}:
		return func() { <-e.slots }, nil
	case <-ctx.Done():
		return nil, apierr.From(ctx.Err())
	}
}

func (e *engine) start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return apierr.New(apierr.Internal, "the image engine (libvips) was shut down when the host closed and cannot restart in this process; restart metaclaw")
	}
	if e.started || e.err != nil {
		return e.err
	}
	log := e.log
	if log == nil {
		log = slog.Default()
	}
	// govips logs through Go's log package by default; libvips' warnings
	// (a JPEG with extra bytes, a missing profile) are details for the
	// host's log, never for stdout, which carries the CLI's JSON.
	vips.LoggingSettings(func(domain string, level vips.LogLevel, msg string) {
		lv := slog.LevelDebug
		if level == vips.LogLevelError || level == vips.LogLevelCritical {
			lv = slog.LevelWarn
		}
		log.Log(context.Background(), lv, "libvips", "domain", domain, "message", msg)
	}, vips.LogLevelWarning)
	// libvips loads its optional modules (ImageMagick, poppler, OpenSlide,
	// HEIF, JPEG XL and the libraries they pull in) from $VIPSHOME/lib at
	// start-up: 100–300 ms and 6 MB for loaders no operation uses, since
	// only the five formats sniffFormat admits ever reach libvips. Under
	// /dev/null no directory can exist, so the search finds nothing (and
	// nobody can plant a module there). An operator's VIPSHOME is kept.
	if _, set := os.LookupEnv("VIPSHOME"); !set {
		os.Setenv("VIPSHOME", "/dev/null")
	}
	err := vips.Startup(&vips.Config{
		ConcurrencyLevel: vipsThreads(),
		// No operation cache: every call works on a different file, and
		// a cache would only keep decoded pixels alive between calls.
		MaxCacheSize:  0,
		MaxCacheMem:   0,
		MaxCacheFiles: 0,
	})
	if err != nil {
		e.err = apierr.Wrap(apierr.Internal, err, "cannot start the image engine (libvips): %v", err)
		return e.err
	}
	e.slots = make(chan struct{}, max(2, vipsThreads()))
	e.started = true
	return nil
}
