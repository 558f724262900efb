package pdf

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// textEngine owns the pdfium WebAssembly runtime of one host. It starts on
// first use: compiling pdfium.wasm takes seconds, so the compiled code is
// cached on disk (wazero's compilation cache) and later processes start in
// about a hundred milliseconds.
type textEngine struct {
	cacheDir string

	mu     sync.Mutex
	pool   pdfium.Pool
	cache  wazero.CompilationCache
	closed bool
}

func newTextEngine(cacheDir string) *textEngine {
	return &textEngine{cacheDir: cacheDir}
}

// wasmMemoryPages caps each pdfium instance's linear memory (64 KiB pages):
// 1 GiB is ample for a 50 MB document and bounds what a hostile one costs.
const wasmMemoryPages = 16384

// instances is how many pdfium instances may extract at once.
func instances() int {
	n := runtime.GOMAXPROCS(0)
	return min(max(n, 2), 4)
}

func (e *textEngine) get() (pdfium.Pool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, apierr.New(apierr.Busy, "the host is shutting down; retry on the restarted host")
	}
	if e.pool != nil {
		return e.pool, nil
	}
	var cache wazero.CompilationCache
	if err := os.MkdirAll(e.cacheDir, 0o755); err == nil {
		cache, err = wazero.NewCompilationCacheWithDir(e.cacheDir)
		if err != nil {
			cache = nil
		}
	}
	if cache == nil {
		// An unwritable cache directory costs start-up time, not correctness.
		cache = wazero.NewCompilationCache()
	}
	rc := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(wasmMemoryPages)
	pool, err := webassembly.Init(webassembly.Config{
		MinIdle:       1,
		MaxIdle:       instances(),
		MaxTotal:      instances(),
		ReuseWorkers:  true,
		RuntimeConfig: rc,
		// No directory is mounted: documents are handed over as bytes.
		FSConfig: wazero.NewFSConfig(),
		Stdout:   io.Discard,
		Stderr:   io.Discard,
	})
	if err != nil {
		cache.Close(context.Background())
		return nil, apierr.Wrap(apierr.Internal, err, "could not start the PDF text engine: %v", err)
	}
	e.pool, e.cache = pool, cache
	return pool, nil
}

func (e *textEngine) close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	var errs []error
	if e.pool != nil {
		errs = append(errs, e.pool.Close())
		e.pool = nil
	}
	if e.cache != nil {
		errs = append(errs, e.cache.Close(context.Background()))
		e.cache = nil
	}
	return errors.Join(errs...)
}

// withInstance runs fn on a pdfium instance. When ctx ends first the
// instance is killed, which aborts the running WebAssembly call, and the
// pool replaces it.
func (e *textEngine) withInstance(ctx context.Context, name string, fn func(inst pdfium.Pdfium) error) (err error) {
	pool, err := e.get()
	if err != nil {
		return err
	}
	inst, err := pool.GetInstanceWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return apierr.Wrap(apierr.Timeout, ctx.Err(), "no PDF text engine became free in time; retry, or raise the time limit")
		}
		return apierr.Wrap(apierr.Internal, err, "could not get a PDF text engine: %v", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = inst.Kill() })
	defer func() {
		if p := recover(); p != nil {
			err = apierr.New(apierr.FileReadFailed, "%q could not be read: the text engine failed on it (%v); the file may be damaged", name, p)
		}
		if err != nil && ctx.Err() != nil {
			err = apierr.Wrap(apierr.Timeout, ctx.Err(), "extracting text from %q ran out of time; ask for fewer pages with {pages: [...]} or raise the time limit", name)
		}
		if !stop() {
			return // killed at the deadline; the pool replaces it
		}
		// An instance that failed inside pdfium (a trap, a damaged page)
		// may hold broken state: replace it rather than reuse it.
		if err == nil || apierr.Is(err, apierr.ValidationFailed) || apierr.Is(err, apierr.UnsupportedFormat) {
			_ = inst.Close()
		} else {
			_ = inst.Kill()
		}
	}()
	return fn(inst)
}

func pdfiumOpenError(name string, err error) error {
	return apierr.Wrap(apierr.FileReadFailed, err, "%q could not be opened for text extraction (%v); the file may be truncated or damaged", name, err)
}
