package pdf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// textEngine owns the pdfium WebAssembly runtime of one host: text
// extraction, page rendering, and reading PDFs that pdfcpu rejects.
//
// Compiling pdfium.wasm (5 MB) to machine code takes 8–15 s on a small
// machine, so the compiled code is cached on disk by wazero, keyed by the
// module's content hash, the wazero version and the CPU's features, in a
// directory shared by every data directory and process of the user
// (DefaultCacheDir). With that cache warm, starting the engine takes
// about 200 ms of CPU; with it cold, the first start compiles.
//
// The engine starts on first use, or earlier through Warm (the server
// calls it when it starts). Starting runs in the background exactly once:
// callers that need the engine meanwhile wait for that one start, as long
// as their context allows, instead of each paying for a compile.
type textEngine struct {
	cacheDirs []string // tried in order; the first usable one holds the cache
	log       *slog.Logger

	mu     sync.Mutex
	boot   *engineBoot // the current or last start; nil before the first
	closed bool
}

// engineBoot is one attempt to start the engine. done is closed when it
// ends; then pool is set, or err says why not.
type engineBoot struct {
	done  chan struct{}
	pool  pdfium.Pool
	cache wazero.CompilationCache
	err   error
}

func newTextEngine(log *slog.Logger, cacheDirs ...string) *textEngine {
	if log == nil {
		log = slog.Default()
	}
	var dirs []string
	for _, d := range cacheDirs {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return &textEngine{cacheDirs: dirs, log: log}
}

// DefaultCacheDir is where compiled WebAssembly is cached unless the host
// is told otherwise: $METACLAW_CACHE_DIR/wazero when that is set, else
// the user's cache directory ($XDG_CACHE_HOME or ~/.cache on Linux) under
// metaclaw/wazero; "" when there is no such directory. The entries are
// machine code keyed by content hash, so every data directory and every
// metaclaw process of the user shares them.
func DefaultCacheDir() string {
	if d := os.Getenv("METACLAW_CACHE_DIR"); d != "" {
		return filepath.Join(d, "wazero")
	}
	if d, err := os.UserCacheDir(); err == nil && d != "" {
		return filepath.Join(d, "metaclaw", "wazero")
	}
	return ""
}

// wasmMemoryPages caps each pdfium instance's linear memory (64 KiB pages):
// 1 GiB is ample for a 50 MB document and bounds what a hostile one costs.
const wasmMemoryPages = 16384

// instances is how many pdfium instances may work at once.
func instances() int {
	n := runtime.GOMAXPROCS(0)
	return min(max(n, 2), 4)
}

// start begins starting the engine unless it is running or starting, and
// returns the attempt to wait for. A failed attempt is retried by the next
// caller.
func (e *textEngine) start() *engineBoot {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		b := &engineBoot{done: make(chan struct{}), err: errShutDown()}
		close(b.done)
		return b
	}
	if b := e.boot; b != nil {
		select {
		case <-b.done:
			if b.err == nil {
				return b
			}
		default:
			return b
		}
	}
	b := &engineBoot{done: make(chan struct{})}
	e.boot = b
	go e.run(b)
	return b
}

func errShutDown() error {
	return apierr.New(apierr.Busy, "the host is shutting down; retry on the restarted host")
}

// run starts the engine for attempt b: it adopts a preloaded engine for
// the same cache directory when there is one (Preload), else opens one.
func (e *textEngine) run(b *engineBoot) {
	var pool pdfium.Pool
	var cache wazero.CompilationCache
	var err error
	if pre := takePreloaded(e.cacheDirs); pre != nil {
		<-pre.done
		pool, cache, err = pre.pool, pre.cache, pre.err
	}
	if pool == nil {
		pool, cache, err = e.openExercised()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	defer close(b.done)
	if e.closed {
		// The host closed while pdfium was compiling; nobody will close
		// this pool but us.
		if pool != nil {
			pool.Close()
			cache.Close(context.Background())
		}
		b.err = errShutDown()
		return
	}
	if err != nil {
		b.err = apierr.Wrap(apierr.Internal, err, "could not start the PDF engine (pdfium): %v", err)
		return
	}
	b.pool, b.cache = pool, cache
}

// openExercised opens the engine and runs a blank page through it.
func (e *textEngine) openExercised() (pdfium.Pool, wazero.CompilationCache, error) {
	pool, cache, err := e.open()
	if err != nil {
		return nil, nil, err
	}
	if err := exercise(pool); err != nil {
		pool.Close()
		cache.Close(context.Background())
		return nil, nil, err
	}
	return pool, cache, nil
}

// preloaded is an engine started by Preload, until a host's PDF area
// adopts it.
var preloaded struct {
	sync.Mutex
	dir  string
	boot *engineBoot
}

// Preload starts the PDF engine for the default cache directory before
// any host exists, so that a process that is about to serve (and spends
// its first ~80 ms opening the host) has pdfium loading meanwhile. The
// first host whose PDF area uses that directory adopts it; the result is
// the same as without Preload, only sooner. Call it at most once per
// process, and only where a host follows (serve).
func Preload(log *slog.Logger) {
	dir := DefaultCacheDir()
	if dir == "" {
		return
	}
	e := newTextEngine(log, dir)
	b := &engineBoot{done: make(chan struct{})}
	preloaded.Lock()
	if preloaded.boot != nil {
		preloaded.Unlock()
		return
	}
	preloaded.dir, preloaded.boot = dir, b
	preloaded.Unlock()
	go func() {
		defer close(b.done)
		b.pool, b.cache, b.err = e.openExercised()
	}()
}

// takePreloaded hands over the preloaded engine when it was started for
// the first of dirs (the one an engine would use when it can).
func takePreloaded(dirs []string) *engineBoot {
	preloaded.Lock()
	defer preloaded.Unlock()
	b := preloaded.boot
	if b == nil || len(dirs) == 0 || dirs[0] != preloaded.dir {
		return nil
	}
	preloaded.boot = nil
	return b
}

// open compiles (or loads from the cache) pdfium and starts its pool.
func (e *textEngine) open() (pdfium.Pool, wazero.CompilationCache, error) {
	cache, dir := e.compilationCache()
	rc := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(wasmMemoryPages)
	release, _ := precompile(cache, rc, dir)
	defer release()
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
		return nil, nil, err
	}
	return pool, cache, nil
}

// compilationCache opens the first usable cache directory. An unusable
// one (read-only home, no home at all) costs start-up time, not
// correctness: the last resort is a cache in memory.
func (e *textEngine) compilationCache() (wazero.CompilationCache, string) {
	for _, dir := range e.cacheDirs {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			e.log.Warn("pdf: cannot use the compilation cache directory", "dir", dir, "error", err)
			continue
		}
		cache, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			e.log.Warn("pdf: cannot use the compilation cache directory", "dir", dir, "error", err)
			continue
		}
		return cache, dir
	}
	e.log.Warn("pdf: no usable compilation cache directory; pdfium is compiled again by every process")
	return wazero.NewCompilationCache(), ""
}

// exercise runs one small document through a fresh instance, so that the
// first real request finds pdfium's code paged in and its fonts loaded.
func exercise(pool pdfium.Pool) error {
	inst, err := pool.GetInstanceWithContext(context.Background())
	if err != nil {
		return err
	}
	defer inst.Close()
	var blank bytes.Buffer
	if err := writeBlank(&blank); err != nil {
		return err
	}
	doc, err := openDocument(inst, "blank.pdf", blank.Bytes())
	if err != nil {
		return err
	}
	defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: doc.Document})
	_, err = pageText(inst, doc.Document, 0)
	return err
}

// get returns the running pool, starting the engine or waiting for its
// start as long as ctx allows.
func (e *textEngine) get(ctx context.Context) (pdfium.Pool, error) {
	b := e.start()
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, apierr.Wrap(apierr.Timeout, ctx.Err(),
			"the PDF engine is still starting (pdfium is compiled once per machine and user, which takes a few seconds; later starts take well under a second); retry shortly or raise the time limit")
	}
	if b.err != nil {
		return nil, b.err
	}
	return b.pool, nil
}

// warm starts the engine and waits until it is ready or ctx ends.
func (e *textEngine) warm(ctx context.Context) error {
	_, err := e.get(ctx)
	return err
}

func (e *textEngine) close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	b := e.boot
	e.boot = nil
	if b == nil || b.pool == nil {
		// Never started, failed, or still starting: run closes what a
		// start still in flight opens.
		return nil
	}
	return errors.Join(b.pool.Close(), b.cache.Close(context.Background()))
}

// withInstance runs fn on a pdfium instance. When ctx ends first the
// instance is killed, which aborts the running WebAssembly call, and the
// pool replaces it.
func (e *textEngine) withInstance(ctx context.Context, name string, fn func(inst pdfium.Pdfium) error) (err error) {
	pool, err := e.get(ctx)
	if err != nil {
		return err
	}
	inst, err := pool.GetInstanceWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return apierr.Wrap(apierr.Timeout, ctx.Err(), "no PDF engine instance became free in time; retry, or raise the time limit")
		}
		return apierr.Wrap(apierr.Internal, err, "could not get a PDF engine instance: %v", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = inst.Kill() })
	defer func() {
		if p := recover(); p != nil {
			err = apierr.New(apierr.FileReadFailed, "%q could not be read: the PDF engine failed on it (%v); the file may be damaged", name, p)
		}
		if err != nil && ctx.Err() != nil {
			err = apierr.Wrap(apierr.Timeout, ctx.Err(), "reading %q ran out of time; ask for fewer pages or raise the time limit", name)
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
	return apierr.Wrap(apierr.FileReadFailed, err, "%q could not be opened by the PDF engine (%v); the file may be truncated or damaged", name, err)
}
