package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"

	abi "github.com/metaclaw/metaclaw/bindings/wasm"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// compiled is one module in the in-memory cache: compiled once (machine
// code from the disk cache when another run or process compiled it
// before), then instantiated by every run of the same bytes.
type compiled struct {
	key      string // sha256 of the bytes, hex
	size     int
	ready    chan struct{} // closed when mod or err is set
	mod      wazero.CompiledModule
	minPages uint32 // the memory the module declares it starts with
	err      error

	refs    int    // runs using or waiting for it
	lastUse uint64 // for evicting the least recently used
	evicted bool   // out of the cache; closed when the last run lets go
}

// moduleCache holds compiled modules by content hash, at most max of them.
type moduleCache struct {
	rt       wazero.Runtime
	provided map[string]map[string]bool // import module → functions the host provides
	max      int
	compiles chan struct{} // bounds compilations running at once

	mu    sync.Mutex
	byKey map[string]*compiled
	tick  uint64
}

// get returns the compiled module whose sha256 is key, compiling it from
// the bytes fetch returns when no run has compiled it yet (fetch is called
// at most once per compilation, by the run that starts it). Runs of the
// same module wait for one compilation; when ctx ends first the
// compilation carries on and its result is cached for the next run. The
// caller releases what it gets.
func (c *moduleCache) get(ctx context.Context, key string, fetch func() ([]byte, error)) (*compiled, error) {
	c.mu.Lock()
	e := c.byKey[key]
	if e == nil {
		e = &compiled{key: key, ready: make(chan struct{})}
		c.byKey[key] = e
		e.refs++
		c.mu.Unlock()
		bin, err := fetch()
		if err != nil {
			c.finish(e, nil, err)
		} else {
			e.size = len(bin)
			go c.compile(e, bin)
		}
	} else {
		e.refs++
		c.mu.Unlock()
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		c.release(e)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, apierr.New(apierr.Timeout, "compiling the module took longer than the run's time limit; "+
				"it goes on compiling and is cached, so run it again in a few seconds (or raise timeout_ms)")
		}
		return nil, apierr.From(context.Cause(ctx))
	}
	if e.err != nil {
		c.release(e)
		return nil, e.err
	}
	c.mu.Lock()
	c.tick++
	e.lastUse = c.tick
	c.mu.Unlock()
	return e, nil
}

// compile turns bin into machine code (or loads it from the disk cache) and
// checks that the module can run here.
func (c *moduleCache) compile(e *compiled, bin []byte) {
	c.compiles <- struct{}{}
	defer func() { <-c.compiles }()
	ctx := experimental.WithCompilationWorkers(context.Background(), runtime.GOMAXPROCS(0))
	mod, err := c.rt.CompileModule(ctx, coalesceData(bin))
	if err != nil {
		c.finish(e, nil, compileError(err, len(bin)))
		return
	}
	if err := c.check(mod); err != nil {
		mod.Close(context.Background())
		c.finish(e, nil, err)
		return
	}
	e.minPages = declaredMinPages(bin)
	c.finish(e, mod, nil)
}

// finish publishes a compilation's outcome. Failures are not cached: the
// next run of the same bytes tries again (and fails the same way quickly,
// as a bad module fails early).
func (c *moduleCache) finish(e *compiled, mod wazero.CompiledModule, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.mod, e.err = mod, err
	close(e.ready)
	if err != nil {
		delete(c.byKey, e.key)
	} else {
		c.evict()
	}
}

// evict drops the least recently used compiled modules beyond max; one a
// run still uses closes when that run lets go of it.
func (c *moduleCache) evict() {
	var ready []*compiled
	for _, e := range c.byKey {
		select {
		case <-e.ready:
			ready = append(ready, e)
		default:
		}
	}
	if len(ready) <= c.max {
		return
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].lastUse < ready[j].lastUse })
	for _, e := range ready[:len(ready)-c.max] {
		delete(c.byKey, e.key)
		e.evicted = true
		if e.refs == 0 {
			e.mod.Close(context.Background())
		}
	}
}

func (c *moduleCache) release(e *compiled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.refs == 0 && e.evicted && e.mod != nil {
		e.mod.Close(context.Background())
	}
}

// close drops every cached module (the runtime closes their code).
func (c *moduleCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byKey = map[string]*compiled{}
}

// check refuses modules that cannot run here, with a message that says
// how to build one that can: imports the host does not provide, an
// imported memory, no _start.
func (c *moduleCache) check(mod wazero.CompiledModule) error {
	var missing []string
	modules := map[string]bool{}
	for _, f := range mod.ImportedFunctions() {
		m, name, _ := f.Import()
		if !c.provided[m][name] {
			missing = append(missing, m+"."+name)
			modules[m] = true
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		list := missing
		if len(list) > 5 {
			list = append(list[:5:5], fmt.Sprintf("and %d more", len(missing)-5))
		}
		hint := "a module may import WASI preview 1 (wasi_snapshot_preview1) and metaclaw (call, take, log)"
		switch {
		case modules["gojs"] || modules["go"]:
			hint = "it was built for GOOS=js; build it with GOOS=wasip1 GOARCH=wasm"
		case modules["wasi_unstable"]:
			hint = "it targets WASI snapshot 0; build it for WASI preview 1 (wasm32-wasip1)"
		case modules["env"]:
			hint = "it expects a JavaScript or emscripten environment; build it for WASI preview 1 (wasm32-wasip1), where " + hint
		}
		return apierr.New(apierr.UnsupportedFormat, "the module imports %s, which this host does not provide: %s", strings.Join(list, ", "), hint)
	}
	for _, m := range mod.ImportedMemories() {
		mn, name, _ := m.Import()
		return apierr.New(apierr.UnsupportedFormat, "the module imports its memory (%s.%s); build it to define and export its own memory (a WASI command does)", mn, name)
	}
	start, ok := mod.ExportedFunctions()["_start"]
	if !ok {
		return apierr.New(apierr.UnsupportedFormat, "the module exports no _start function: it is a library (reactor), not a command; build a program with a main function for WASI preview 1 (GOOS=wasip1 go build, cargo build --target wasm32-wasip1)")
	}
	if len(start.ParamTypes()) != 0 || len(start.ResultTypes()) != 0 {
		return apierr.New(apierr.UnsupportedFormat, "the module's _start takes %d arguments and returns %d values; a WASI command's _start takes and returns nothing",
			len(start.ParamTypes()), len(start.ResultTypes()))
	}
	return nil
}

// providedImports lists the functions of the host modules instantiated in rt.
func providedImports(rt wazero.Runtime, names ...string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, n := range names {
		fns := map[string]bool{}
		if m := rt.Module(n); m != nil {
			for name := range m.ExportedFunctionDefinitions() {
				fns[name] = true
			}
		}
		out[n] = fns
	}
	return out
}

var (
	wasmMagic     = []byte{0, 'a', 's', 'm'}
	wasmVersion1  = []byte{1, 0, 0, 0}
	componentMark = []byte{0x0d, 0x00, 0x01, 0x00}
)

// sniff refuses bytes that are not a core WebAssembly module before the
// compiler sees them, with a message for each common mistake.
func sniff(bin []byte) error {
	if len(bin) < 8 || !bytes.Equal(bin[:4], wasmMagic) {
		what := "it does not start with the bytes \\0asm"
		if len(bin) == 0 {
			what = "it is empty"
		} else if bytes.HasPrefix(bin, []byte("(module")) || bytes.HasPrefix(bytes.TrimSpace(bin), []byte("(module")) {
			what = "it is WebAssembly text (.wat); assemble it to binary first (wat2wasm)"
		}
		return apierr.New(apierr.UnsupportedFormat, "not a WebAssembly module: %s; build one with GOOS=wasip1 GOARCH=wasm go build (or cargo build --target wasm32-wasip1)", what)
	}
	switch v := bin[4:8]; {
	case bytes.Equal(v, wasmVersion1):
		return nil
	case bytes.Equal(v, componentMark):
		return apierr.New(apierr.UnsupportedFormat, "this is a WebAssembly component (the component model, WASI preview 2); build a core module for WASI preview 1 (wasm32-wasip1)")
	default:
		return apierr.New(apierr.UnsupportedFormat, "WebAssembly binary version %d is not supported; build a version 1 module for WASI preview 1", binary.LittleEndian.Uint32(v))
	}
}

// compileError codes a compilation failure.
func compileError(err error, size int) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "over limit of"):
		return apierr.Wrap(apierr.ResourceExhausted, err, "the module declares more memory than runs here may use (%s); build it with a smaller memory maximum", clipString(msg, 300))
	case strings.Contains(msg, "feature") && (strings.Contains(msg, "disabled") || strings.Contains(msg, "not enabled")):
		return apierr.Wrap(apierr.UnsupportedFormat, err, "the module uses a WebAssembly feature this host does not enable (%s); build it for plain wasm32-wasip1", clipString(msg, 300))
	}
	return apierr.Wrap(apierr.FileReadFailed, err, "the %d-byte module could not be read as WebAssembly (%s); it may be truncated or damaged: build it again", size, clipString(msg, 300))
}

// declaredMinPages reads the minimum of the module's own memory from its
// memory section (0 when it defines none). The compiler has validated the
// bytes; out-of-range reads still end the scan safely.
func declaredMinPages(bin []byte) uint32 {
	r := bytes.NewReader(bin[8:])
	for r.Len() > 0 {
		id, err := r.ReadByte()
		if err != nil {
			return 0
		}
		size, err := binary.ReadUvarint(r)
		if err != nil || size > uint64(r.Len()) {
			return 0
		}
		if id != 5 { // the memory section
			r.Seek(int64(size), io.SeekCurrent)
			continue
		}
		count, err := binary.ReadUvarint(r)
		if err != nil || count == 0 {
			return 0
		}
		if _, err := r.ReadByte(); err != nil { // limits flags
			return 0
		}
		minPages, err := binary.ReadUvarint(r)
		if err != nil || minPages > 1<<16 {
			return 0
		}
		return uint32(minPages)
	}
	return 0
}

// moduleKey is the cache key of module bytes.
func moduleKey(bin []byte) string {
	sum := sha256.Sum256(bin)
	return hex.EncodeToString(sum[:])
}

// importModules are the host modules a guest may import from.
var importModules = []string{"wasi_snapshot_preview1", abi.ModuleName}
