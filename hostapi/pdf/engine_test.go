package pdf

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
)

// TestRegisterStartsNothing: registering the operations neither starts
// pdfium nor touches the cache directory; the first PDF call does.
func TestRegisterStartsNothing(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	e := newTestEnvOpts(t, hostapi.Config{DataDir: t.TempDir()}, Options{CacheDir: cache})
	a := mustArea(t, e.h)
	a.text.mu.Lock()
	boot := a.text.boot
	a.text.mu.Unlock()
	if boot != nil {
		t.Fatal("Register started the PDF engine")
	}
	if _, err := os.Stat(cache); !os.IsNotExist(err) {
		t.Fatalf("Register touched the cache directory: %v", err)
	}
	// Operations that do not need pdfium do not start it either.
	e.upload("a.pdf", textPDF(t, [][]string{{"x"}}))
	e.mustTool("pdf_info", map[string]any{"id": "a.pdf"})
	if a.text.boot != nil {
		t.Fatal("pdf_info started the PDF engine")
	}
}

func mustArea(t testing.TB, h *hostapi.Host) *area {
	t.Helper()
	v, ok := areas.Load(h)
	if !ok {
		t.Fatal("host has no PDF area")
	}
	return v.(*area)
}

// TestWarm: Warm readies the engine of a fresh data directory from the
// user's cache; the first extraction then needs no start.
func TestWarm(t *testing.T) {
	e := newTestEnv(t)
	if err := Warm(context.Background(), e.h); err != nil {
		t.Fatal(err)
	}
	a := mustArea(t, e.h)
	b := a.text.start()
	select {
	case <-b.done:
	default:
		t.Fatal("the engine is not ready after Warm returned")
	}
	if b != a.text.start() {
		t.Fatal("a ready engine was started again")
	}
	e.upload("a.pdf", textPDF(t, [][]string{{"warm start"}}))
	if got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "a.pdf"})); !reflect.DeepEqual(got, []string{"warm start"}) {
		t.Fatalf("text = %q", got)
	}
	// Warm on a host without the PDF operations says so.
	other := hosttest.New(t, hostapi.Config{})
	if err := Warm(context.Background(), other); apierr.CodeOf(err) != apierr.Internal {
		t.Fatalf("Warm without PDF operations: %v", err)
	}
}

// TestStartIsShared: callers that arrive while the engine starts wait for
// that start; a caller whose time runs out first gets TIMEOUT and the
// start carries on for the others.
func TestStartIsShared(t *testing.T) {
	e := newTestEnv(t)
	a := mustArea(t, e.h)
	first := a.text.start()
	if again := a.text.start(); again != first {
		t.Fatal("a second start began while the first was running")
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	select {
	case <-first.done:
		t.Skip("the engine started before the impatient caller could ask")
	default:
	}
	if _, err := a.text.get(gone); apierr.CodeOf(err) != apierr.Timeout || !strings.Contains(err.Error(), "still starting") {
		t.Fatalf("an impatient caller got %v", err)
	}
	e.upload("a.pdf", textPDF(t, [][]string{{"shared"}}))
	if got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "a.pdf"})); !reflect.DeepEqual(got, []string{"shared"}) {
		t.Fatalf("text = %q", got)
	}
	if a.text.start() != first {
		t.Fatal("the engine was started twice")
	}
}

// TestCloseWhileStarting: a host that closes while pdfium loads leaves no
// engine behind, and later calls get BUSY rather than a new start.
func TestCloseWhileStarting(t *testing.T) {
	e := newTestEnv(t)
	a := mustArea(t, e.h)
	b := a.text.start()
	if err := e.h.Close(); err != nil {
		t.Fatal(err)
	}
	<-b.done
	if b.pool != nil || apierr.CodeOf(b.err) != apierr.Busy {
		// The start may have finished before Close: then Close closed it.
		if b.err != nil || b.pool == nil {
			t.Fatalf("after close: pool %v, err %v", b.pool, b.err)
		}
	}
	if err := a.text.warm(context.Background()); apierr.CodeOf(err) != apierr.Busy {
		t.Fatalf("warm after close: %v", err)
	}
	if _, ok := areas.Load(e.h); ok {
		t.Fatal("a closed host is still listed for Warm")
	}
}

// TestCacheDirFallback: an unusable cache directory is skipped for the
// next one in line.
func TestCacheDirFallback(t *testing.T) {
	dir := t.TempDir()
	notADir := filepath.Join(dir, "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(dir, "next")
	eng := newTextEngine(nil, notADir, "", next)
	cache, dir := eng.compilationCache()
	if dir != next {
		t.Fatalf("cache in %q, want %q", dir, next)
	}
	defer cache.Close(context.Background())
	entries, err := os.ReadDir(next)
	if err != nil || len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "wazero-") {
		t.Fatalf("the fallback directory holds %v (%v)", entries, err)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("METACLAW_CACHE_DIR", "/srv/mc-cache")
	if got := DefaultCacheDir(); got != "/srv/mc-cache/wazero" {
		t.Fatalf("with METACLAW_CACHE_DIR: %q", got)
	}
	t.Setenv("METACLAW_CACHE_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "/home/u/.xdg-cache")
	if got := DefaultCacheDir(); got != "/home/u/.xdg-cache/metaclaw/wazero" {
		t.Fatalf("with XDG_CACHE_HOME: %q", got)
	}
}

// TestPrecompileMarker: the first start on a cache directory compiles (or
// loads) pdfium itself and leaves a marker naming the module and the
// wazero version; later starts see it and leave the work to go-pdfium,
// which then loads the machine code from the cache.
func TestPrecompileMarker(t *testing.T) {
	if !strings.Contains(markerName(), "-wazero-"+wazeroVersion()+"-") || !strings.HasSuffix(markerName(), "-"+runtime.GOARCH+".compiled") {
		t.Fatalf("marker name %q does not name the wazero version and architecture", markerName())
	}
	cache, err := wazero.NewCompilationCacheWithDir(testCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close(context.Background())
	rc := wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(true).WithMemoryLimitPages(wasmMemoryPages)
	dir := t.TempDir() // where the marker goes; the machine code stays in testCacheDir
	release, ran := precompile(cache, rc, dir)
	release()
	if !ran {
		t.Fatal("the first start skipped the compile")
	}
	if _, err := os.Stat(filepath.Join(dir, markerName())); err != nil {
		t.Fatalf("no marker after the first start: %v", err)
	}
	release, ran = precompile(cache, rc, dir)
	release()
	if ran {
		t.Fatal("a start with the marker in place compiled again")
	}
	// A cache in memory has no marker: every process compiles.
	if release, ran = precompile(cache, rc, ""); !ran {
		t.Fatal("a cache in memory skipped the compile")
	}
	release()
}

// A preloaded engine (serve starts pdfium before it opens the host) is
// adopted by the first host that uses its cache directory: no second
// start, and text comes out of it.
func TestPreloadIsAdopted(t *testing.T) {
	if DefaultCacheDir() == "" || testCacheDir() != DefaultCacheDir() {
		t.Skip("no user cache directory to preload from")
	}
	Preload(nil)
	preloaded.Lock()
	pre := preloaded.boot
	preloaded.Unlock()
	if pre == nil {
		t.Fatal("Preload started nothing")
	}
	e := newTestEnvOpts(t, hostapi.Config{DataDir: t.TempDir()}, Options{})
	if err := Warm(context.Background(), e.h); err != nil {
		t.Fatal(err)
	}
	preloaded.Lock()
	left := preloaded.boot
	preloaded.Unlock()
	a, _ := areas.Load(e.h)
	if left != nil || pre.err != nil || a.(*area).text.boot.pool != pre.pool {
		t.Fatalf("the host did not adopt the preloaded engine (left %v, err %v)", left != nil, pre.err)
	}
	e.upload("a.pdf", textPDF(t, [][]string{{"preloaded"}}))
	if got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "a.pdf"})); !reflect.DeepEqual(got, []string{"preloaded"}) {
		t.Fatalf("text %q", got)
	}
}
