package pdf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	_ "unsafe" // go:linkname

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"

	_ "github.com/klippa-app/go-pdfium/webassembly" // defines the module below
)

// embeddedPdfium is pdfium.wasm as go-pdfium embeds it. go-pdfium compiles
// it itself, on one goroutine, with no way to ask for more; precompile
// uses the bytes to compile on every core first. (Should go-pdfium rename
// the variable, the build fails at link time rather than silently.)
//
//go:linkname embeddedPdfium github.com/klippa-app/go-pdfium/webassembly.pdfiumWasm
var embeddedPdfium []byte

// precompile compiles pdfium into cache with one wazero compilation worker
// per core (wazero's experimental.WithCompilationWorkers), so that the
// compile go-pdfium starts next finds the machine code in cache: a cold
// start takes less wall time wherever more than one core is free
// (BenchmarkReadyColdCache). It does nothing when dir's marker says an
// earlier process did it for this module and this wazero: loading from
// the cache is fast, and decoding the 5 MB module twice is not free (were
// the cache emptied behind the marker's back, go-pdfium compiles on one
// core, slower but correct). dir is the cache's directory ("" for a cache
// in memory). release closes the compiled module once go-pdfium holds its
// own reference; ran says whether a compile (or a load) happened here.
func precompile(cache wazero.CompilationCache, rc wazero.RuntimeConfig, dir string) (release func(), ran bool) {
	if len(embeddedPdfium) == 0 {
		return func() {}, false
	}
	marker := ""
	if dir != "" {
		marker = filepath.Join(dir, markerName())
		if _, err := os.Stat(marker); err == nil {
			return func() {}, false
		}
	}
	ctx := experimental.WithCompilationWorkers(context.Background(), runtime.GOMAXPROCS(0))
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	cm, err := rt.CompileModule(ctx, embeddedPdfium)
	if err != nil {
		rt.Close(ctx)
		return func() {}, true // go-pdfium's own compile will report it
	}
	if marker != "" {
		// CompileModule returns once the machine code is in the cache's
		// directory, so the marker never announces a missing entry.
		_ = os.WriteFile(marker, nil, 0o600)
	}
	return func() {
		cm.Close(ctx)
		rt.Close(ctx)
	}, true
}

// markerName names the file that says pdfium's machine code is cached:
// the module's hash, the wazero version (whose cache entries live in a
// directory of their own) and the CPU architecture.
var markerName = sync.OnceValue(func() string {
	sum := sha256.Sum256(embeddedPdfium)
	return "pdfium-" + hex.EncodeToString(sum[:8]) + "-wazero-" + wazeroVersion() + "-" + runtime.GOARCH + ".compiled"
})

// wazeroVersion is the wazero version as wazero itself names its cache
// directory: the module version the build recorded, or "dev" where the
// build recorded none (test binaries).
func wazeroVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/tetratelabs/wazero" && m.Version != "" && m.Version != "(devel)" {
				return m.Version
			}
		}
	}
	return "dev"
}
