// Package wasm runs WebAssembly modules on wazero: WASI preview 1 command
// modules whose stdin is the run's JSON input, whose stdout is its result
// and whose stderr lines are its logs, with the host's operations behind
// the metaclaw import module (bindings/wasm). A run has no preopened
// directory, no network, no arguments and no environment; its limits are
// the host's run limits (SPEC 5): time (the module is stopped when the
// deadline passes), linear memory, result size, log size and the nesting
// depth of tool calls. A run's result has the shape of a script's
// (hostapi.RunResult).
//
// Compiled modules are cached twice: as machine code on disk, keyed by
// content hash in a directory shared by every data directory and process
// of the user (DefaultCacheDir), and as compiled modules in memory, so a
// module that ran once instantiates in microseconds.
package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	abi "github.com/metaclaw/metaclaw/bindings/wasm"
	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Options configure a Runner. Zero values are the defaults.
type Options struct {
	// CacheDir holds compiled machine code. Empty: DefaultCacheDir(), then
	// the data directory's cache/wazero when that one is unusable, then a
	// cache in memory.
	CacheDir string
	// MaxCompiled bounds the compiled modules kept in memory (default 32).
	MaxCompiled int
	// MaxConcurrent bounds the runs executing at once (default twice the
	// CPUs, at least 4), so that many runs cannot each take their full
	// memory at the same moment. A run beyond it waits for a slot within
	// its time limit (BUSY after). Runs nested in a run (a module calling a
	// saved WASM tool) do not wait: their parent holds a slot.
	MaxConcurrent int
	// MaxModuleBytes bounds a module's size (default 64 MB).
	MaxModuleBytes int
}

// Request is one module run.
type Request struct {
	// Module is the module's bytes; or
	Module []byte
	// Ref names a workspace file (id or name) holding the module.
	Ref string
	// Input is the JSON value the module reads from stdin (null when nil).
	Input any
	// Limits override the host defaults, clamped to the host maxima.
	Limits hostapi.RunLimits
}

// maxArgBytes bounds the argument JSON of one host call: a file at the
// default 50 MB limit, base64-encoded, with room to spare.
const maxArgBytes = 96 << 20

// minCallResultBytes is the least a host call may return, whatever the
// run's result limit: the largest answers operations give (a table query
// window carries up to 64 MB of rows) must reach the module whole.
const minCallResultBytes = 64 << 20

// Runner runs modules for one host. It is safe for concurrent use.
type Runner struct {
	host     *hostapi.Host
	rt       wazero.Runtime
	cache    wazero.CompilationCache
	cacheDir string
	pages    uint32 // the memory every module is compiled under
	base     wazero.ModuleConfig
	mods     *moduleCache
	memories *regionPool
	slots    chan struct{}
	maxBytes int

	closeOnce sync.Once
	closeErr  error
}

// New returns a runner for h. It compiles nothing: modules compile on
// their first run (or Check). The host closes the runner when it closes.
func New(h *hostapi.Host, o Options) (*Runner, error) {
	ctx := context.Background()
	maxMem := h.Config.MaxLimits.MemoryBytes
	if maxMem <= 0 {
		maxMem = hostapi.DefaultMaxLimits().MemoryBytes
	}
	pages := uint32(min((maxMem+wasmPage-1)/wasmPage, 1<<16))
	dirs := []string{o.CacheDir}
	if o.CacheDir == "" {
		dirs = []string{DefaultCacheDir(), filepath.Join(h.Store.CacheDir(), "wazero")}
	}
	cache, dir := openCache(h, dirs)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(pages).
		WithCloseOnContextDone(true))
	fail := func(err error) (*Runner, error) {
		rt.Close(ctx)
		cache.Close(ctx)
		return nil, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return fail(fmt.Errorf("wasm: WASI: %w", err))
	}
	if err := abi.Instantiate(ctx, rt); err != nil {
		return fail(fmt.Errorf("wasm: the %s host module: %w", abi.ModuleName, err))
	}
	if o.MaxCompiled <= 0 {
		o.MaxCompiled = 32
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = max(4, 2*runtime.GOMAXPROCS(0))
	}
	if o.MaxModuleBytes <= 0 {
		o.MaxModuleBytes = 64 << 20
	}
	r := &Runner{
		host: h, rt: rt, cache: cache, cacheDir: dir, pages: pages,
		// What every run shares: no name (runs of one module overlap), no
		// arguments, environment or directories (none are given), the
		// real clocks WASI offers, and random bytes from the OS.
		base: wazero.NewModuleConfig().WithName("").
			WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader),
		mods: &moduleCache{rt: rt, provided: providedImports(rt, importModules...), max: o.MaxCompiled,
			compiles: make(chan struct{}, 2), byKey: map[string]*compiled{}},
		memories: &regionPool{max: 4},
		slots:    make(chan struct{}, o.MaxConcurrent),
		maxBytes: o.MaxModuleBytes,
	}
	h.OnClose(r.Close)
	return r, nil
}

const wasmPage = 64 << 10

// openCache opens the first usable compilation cache directory: one that
// exists or can be made, and can be written (wazero fails a compilation
// whose machine code it cannot store). Without one, compiled code is
// cached in memory only.
func openCache(h *hostapi.Host, dirs []string) (wazero.CompilationCache, string) {
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		err := os.MkdirAll(dir, 0o700)
		if err == nil {
			var f *os.File
			if f, err = os.CreateTemp(dir, ".probe-*"); err == nil {
				f.Close()
				os.Remove(f.Name())
			}
		}
		var cache wazero.CompilationCache
		if err == nil {
			cache, err = wazero.NewCompilationCacheWithDir(dir)
		}
		if err == nil {
			return cache, dir
		}
		h.Log.Warn("wasm: cannot use the compilation cache directory", "dir", dir, "error", err)
	}
	h.Log.Warn("wasm: no usable compilation cache directory; modules are compiled again by every process")
	return wazero.NewCompilationCache(), ""
}

// CacheDir is the directory holding compiled machine code ("" when the
// cache is in memory only).
func (r *Runner) CacheDir() string { return r.cacheDir }

// MemoryLimitPages is the memory every module is compiled under, in 64 KiB
// pages: the host's largest allowed run memory.
func (r *Runner) MemoryLimitPages() uint32 { return r.pages }

// Close stops every run and releases compiled code.
func (r *Runner) Close() error {
	r.closeOnce.Do(func() {
		ctx := context.Background()
		r.mods.close()
		r.closeErr = errors.Join(r.rt.Close(ctx), r.cache.Close(ctx))
		r.memories.drain()
	})
	return r.closeErr
}

// Check loads and compiles req's module and checks that it can run here
// (its imports, its _start, its memory), without running it: what
// tools.save({wasm}) should do before it saves a tool. The compiled code
// stays cached for the runs that follow.
func (r *Runner) Check(ctx context.Context, env *hostapi.Env, req Request) error {
	e, err := r.load(ctx, env, req)
	if err != nil {
		return err
	}
	defer r.mods.release(e)
	lim := r.host.EffectiveLimits(req.Limits)
	return memoryFits(e, lim)
}

// inRunKey marks the context of host calls made by a running module.
type inRunKey struct{}

// Run runs req's module and returns its result; it never returns nil and
// never panics. Every failure is in the result's error, coded (SPEC 7).
func (r *Runner) Run(ctx context.Context, env *hostapi.Env, req Request) (res *hostapi.RunResult) {
	start := time.Now()
	lim := r.host.EffectiveLimits(req.Limits)
	res = &hostapi.RunResult{Logs: []hostapi.LogEntry{}, Files: []hostapi.Artifact{}}
	arts := newArtifactLog()
	defer func() {
		if p := recover(); p != nil {
			r.host.Log.Error("wasm: run panicked", "panic", fmt.Sprint(p))
			fail(res, apierr.New(apierr.Internal, "the run failed unexpectedly (%v); this is a bug in the host", p), "")
		}
		res.Files = arts.list()
		res.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	}()
	if env.Depth > lim.MaxDepth {
		fail(res, apierr.New(apierr.ResourceExhausted, "tool calls are nested %d deep; the limit is %d", env.Depth, lim.MaxDepth), "")
		return res
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, lim.Timeout, apierr.New(apierr.Timeout,
		"the module ran longer than its %s time limit; do less per run or raise timeout_ms", lim.Timeout))
	defer stop()

	release, err := r.acquire(ctx)
	if err != nil {
		fail(res, apierr.Of(err), "")
		return res
	}
	defer release()
	e, err := r.load(ctx, env, req)
	if err != nil {
		fail(res, apierr.Of(err), "")
		return res
	}
	defer r.mods.release(e)
	if err := memoryFits(e, lim); err != nil {
		fail(res, apierr.Of(err), "")
		return res
	}
	input, err := encodeInput(req.Input)
	if err != nil {
		fail(res, apierr.Of(err), "")
		return res
	}
	r.exec(ctx, cancel, env, lim, e, input, res, arts)
	return res
}

// exec instantiates the module, which runs its _start, and turns what
// happened into res.
func (r *Runner) exec(ctx context.Context, cancel context.CancelCauseFunc, parent *hostapi.Env, lim hostapi.RunLimits,
	e *compiled, input []byte, res *hostapi.RunResult, arts *artifactLog) {
	env := *parent
	env.Record = func(f store.File, action string) {
		arts.record(f, action)
		if parent.Record != nil {
			parent.Record(f, action)
		}
	}
	logs := &logWriter{logs: &res.Logs, limit: lim.LogBytes}
	out := &resultWriter{limit: lim.ResultBytes, over: func() {
		cancel(apierr.New(apierr.ResourceExhausted, "the module wrote more than %s to stdout, the run's result limit; "+
			"return less, or write big output to a file (files.writeText) and return its name", humanSize(lim.ResultBytes)))
	}}
	caller := &abi.Caller{Env: &env, MaxArgs: maxArgBytes, MaxResult: max(lim.ResultBytes, minCallResultBytes), Log: logs.add}
	mem := &budget{limit: uint64(lim.MemoryBytes), pool: r.memories}

	mctx := context.WithValue(ctx, inRunKey{}, true)
	mctx = abi.WithCaller(mctx, caller)
	mctx = experimental.WithMemoryAllocator(mctx, mem)
	cfg := r.base.WithStdin(bytes.NewReader(input)).WithStdout(out).WithStderr(logs).WithNanosleep(sleeper(ctx))
	mod, err := r.rt.InstantiateModule(mctx, e.mod, cfg)
	if mod != nil {
		mod.Close(context.Background())
	}
	// The module is closed and this goroutine, the only one that ran it,
	// is out of it: its memory can go.
	mem.release()
	logs.flush()

	switch {
	case caller.Fault() != nil:
		fail(res, caller.Fault(), "")
	case err == nil:
		res.OK = true
		res.Result = result(out.buf.Bytes())
	case isCoded(context.Cause(ctx)):
		fail(res, apierr.Of(context.Cause(ctx)), "")
	case ctx.Err() != nil:
		fail(res, apierr.Of(ctx.Err()), "")
	case mem.exhausted(uint64(r.pages)*wasmPage, logs.tail):
		limit := min(uint64(lim.MemoryBytes), uint64(r.pages)*wasmPage)
		used := fmt.Sprintf("it reached %s", humanSize(int(mem.size)))
		if mem.refused {
			used = fmt.Sprintf("it asked for %s", humanSize(int(min(mem.asked, 1<<40))))
		}
		fail(res, apierr.New(apierr.ResourceExhausted, "the module ran out of memory: %s, and the run's limit is %s; "+
			"use less memory (stream through files instead of loading them whole) or ask for a higher limit",
			used, humanSize(int(limit))), "")
	default:
		var exit *sys.ExitError
		if errors.As(err, &exit) {
			e, stack := exitError(exit.ExitCode(), out.buf.Bytes(), logs)
			fail(res, e, stack)
			return
		}
		e, stack := trapError(err)
		fail(res, e, stack)
	}
}

func isCoded(err error) bool {
	var e *apierr.Error
	return errors.As(err, &e)
}

func fail(res *hostapi.RunResult, e *apierr.Error, stack string) {
	res.OK = false
	res.Result = nil
	res.Error = &hostapi.RunError{Code: e.Code, Message: e.Message, Stack: stack}
}

// result reads stdout: JSON when it is JSON, else the text without its
// final newline; null when the module wrote nothing.
func result(stdout []byte) any {
	trimmed := bytes.TrimSpace(stdout)
	if len(trimmed) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(trimmed) {
		return json.RawMessage(bytes.Clone(trimmed))
	}
	text := bytes.TrimSuffix(stdout, []byte("\n"))
	text = bytes.TrimSuffix(text, []byte("\r"))
	return string(bytes.ToValidUTF8(text, []byte("\uFFFD")))
}

// exitError explains a non-zero exit: the coded error the module reported
// ({"error":{code,message}} as the last line of stdout, what the guest
// SDK's Fail writes), else the reason stderr gives.
func exitError(code uint32, stdout []byte, logs *logWriter) (*apierr.Error, string) {
	if e := reportedError(stdout); e != nil {
		return e, ""
	}
	line, stack := logs.failure()
	msg := fmt.Sprintf("the module exited with status %d", code)
	if line != "" {
		msg += ": " + clipString(line, 500)
	}
	return apierr.New(apierr.ValidationFailed, "%s", msg), stack
}

func reportedError(stdout []byte) *apierr.Error {
	text := bytes.TrimRight(stdout, " \t\r\n")
	last := text[bytes.LastIndexByte(text, '\n')+1:]
	var env struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(last, &env) != nil || env.Error == nil || !knownCode(env.Error.Code) {
		return nil
	}
	return &apierr.Error{Code: apierr.Code(env.Error.Code), Message: env.Error.Message}
}

func knownCode(c string) bool {
	return apierr.Code(c).HTTPStatus() != 500 || c == string(apierr.Internal)
}

// trapError explains a trap (unreachable, an out-of-bounds access, a stack
// overflow): the module's fault, with wazero's wasm stack trace.
func trapError(err error) (*apierr.Error, string) {
	msg := err.Error()
	// "module[] function[_start] failed: wasm error: unreachable\nwasm stack trace: …"
	if i := strings.Index(msg, "failed: "); i >= 0 && strings.HasPrefix(msg, "module[") {
		msg = msg[i+len("failed: "):]
	}
	first, stack, _ := strings.Cut(msg, "\n")
	if strings.Contains(first, "stack overflow") {
		return apierr.New(apierr.ResourceExhausted, "the module overflowed its call stack (%s); unbounded recursion?", first), stack
	}
	return apierr.New(apierr.ValidationFailed, "the module trapped: %s", clipString(first, 500)), stack
}

// memoryFits refuses a module that starts with more memory than the run
// may use, before any memory is allocated.
func memoryFits(e *compiled, lim hostapi.RunLimits) error {
	if need := uint64(e.minPages) * wasmPage; need > uint64(lim.MemoryBytes) {
		return apierr.New(apierr.ResourceExhausted, "the module starts with %s of memory, more than the run's limit of %s; build it with a smaller initial memory or ask for a higher limit",
			humanSize(int(need)), humanSize(int(lim.MemoryBytes)))
	}
	return nil
}

// encodeInput writes the run's input as the JSON the module reads.
func encodeInput(v any) ([]byte, error) {
	canon, err := hostapi.Canonical(v, nil)
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "input: %s", apierr.Of(err).Message)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(canon); err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "input: %v", err)
	}
	return b.Bytes(), nil
}

// sleeper is WASI's sleep (poll_oneoff on a clock): a real pause that ends
// early when the run does, so that a sleeping module meets its deadline.
func sleeper(ctx context.Context) sys.Nanosleep {
	return func(ns int64) {
		if ns <= 0 {
			return
		}
		t := time.NewTimer(time.Duration(ns))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// acquire waits for a run slot within ctx. A run nested in a module's
// host call takes none: its parent holds one, and waiting could deadlock.
func (r *Runner) acquire(ctx context.Context) (func(), error) {
	if ctx.Value(inRunKey{}) != nil {
		return func() {}, nil
	}
	release := func() { <-r.slots }
	select {
	case r.slots <- struct{}{}:
		return release, nil
	default:
	}
	select {
	case r.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, apierr.New(apierr.Busy, "all %d WebAssembly run slots stayed busy for the run's whole time limit; retry in a moment", cap(r.slots))
	}
}

// load finds req's module, compiled.
func (r *Runner) load(ctx context.Context, env *hostapi.Env, req Request) (*compiled, error) {
	switch {
	case req.Module != nil && req.Ref != "":
		return nil, apierr.New(apierr.ValidationFailed, "give the module either as bytes or as a workspace file, not both")
	case req.Ref != "":
		rd, err := env.WS.Open(ctx, req.Ref)
		if err != nil {
			return nil, err
		}
		defer rd.Close()
		name := rd.Meta.Name
		if rd.Meta.Size > int64(r.maxBytes) {
			return nil, apierr.New(apierr.TooLarge, "%q is %s; a module may be at most %s", name, humanSize(int(rd.Meta.Size)), humanSize(r.maxBytes))
		}
		e, err := r.mods.get(ctx, rd.Meta.SHA256, func() ([]byte, error) {
			bin, err := io.ReadAll(io.LimitReader(rd, int64(r.maxBytes)+1))
			if err != nil {
				return nil, apierr.Wrap(apierr.FileReadFailed, err, "%q could not be read: %v", name, err)
			}
			if err := sniff(bin); err != nil {
				return nil, err
			}
			if moduleKey(bin) != rd.Meta.SHA256 {
				return nil, apierr.New(apierr.FileReadFailed, "%q does not match its recorded checksum; run `metaclaw fsck`", name)
			}
			return bin, nil
		})
		if err != nil {
			if c := apierr.CodeOf(err); c == apierr.UnsupportedFormat || c == apierr.FileReadFailed {
				return nil, &apierr.Error{Code: c, Message: fmt.Sprintf("%q: %s", name, apierr.Of(err).Message)}
			}
			return nil, err
		}
		return e, nil
	case len(req.Module) > 0:
		if len(req.Module) > r.maxBytes {
			return nil, apierr.New(apierr.TooLarge, "the module is %s; a module may be at most %s", humanSize(len(req.Module)), humanSize(r.maxBytes))
		}
		if err := sniff(req.Module); err != nil {
			return nil, err
		}
		return r.mods.get(ctx, moduleKey(req.Module), func() ([]byte, error) { return req.Module, nil })
	}
	return nil, apierr.New(apierr.ValidationFailed, "no module to run: give its bytes or the name of a workspace .wasm file")
}
