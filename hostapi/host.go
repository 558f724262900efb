package hostapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Config is everything a Host is built from.
type Config struct {
	DataDir          string
	MaxFileSize      int64
	MaxWorkspaceSize int64
	// WorkspaceQuotas overrides MaxWorkspaceSize for the workspaces it names.
	WorkspaceQuotas map[string]int64
	// MaxToolSize bounds one saved tool (code + schema); 0 is the store's default.
	MaxToolSize int64
	// EventHistory is how many change events are kept for resuming
	// subscribers; 0 is the store's default.
	EventHistory int
	// Backend, when set, keeps bodies, metadata, events, leases, quota and
	// saved tools somewhere shared (NATS JetStream) instead of the data
	// directory's SQLite and disk; the data directory then holds caches.
	Backend *store.Backend
	// AllowPrivateDownloads lets files.download reach loopback and private
	// addresses (local testing only; SPEC 8).
	AllowPrivateDownloads bool
	// MaxImagePixels caps decoded image size (default 100 megapixels).
	MaxImagePixels int64
	// Run limits: defaults for a run, and the maxima a caller may ask for.
	Limits    RunLimits
	MaxLimits RunLimits
	Log       *slog.Logger
}

// RunLimits bound one script run (SPEC 5).
type RunLimits struct {
	Timeout     time.Duration
	MemoryBytes int64
	LogBytes    int
	ResultBytes int
	MaxDepth    int
}

// DefaultLimits are SPEC 5's defaults.
func DefaultLimits() RunLimits {
	return RunLimits{Timeout: 30 * time.Second, MemoryBytes: 256 << 20, LogBytes: 1 << 20, ResultBytes: 10 << 20, MaxDepth: 8}
}

// DefaultMaxLimits are the server maxima a caller may raise limits to.
func DefaultMaxLimits() RunLimits {
	return RunLimits{Timeout: 10 * time.Minute, MemoryBytes: 1 << 30, LogBytes: 8 << 20, ResultBytes: 64 << 20, MaxDepth: 8}
}

// Host is one running metaclaw: its store, its registry and the sandbox
// runner that scripts and saved tools execute on.
type Host struct {
	Config   Config
	Store    *store.Store
	Registry *Registry
	Log      *slog.Logger
	// Runner runs scripts for run_script and tools.call; set by whoever
	// builds the Host (it lives in the runtime layer, above hostapi).
	Runner ScriptRunner

	closeMu sync.Mutex
	closers []func() error
	blanks  map[string]Blank
}

// NewHost opens the store in cfg.DataDir and returns a Host with an empty
// registry; format packages then register their operations into it.
func NewHost(cfg Config) (*Host, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	if cfg.Limits == (RunLimits{}) {
		cfg.Limits = DefaultLimits()
	}
	if cfg.MaxLimits == (RunLimits{}) {
		cfg.MaxLimits = DefaultMaxLimits()
	}
	if cfg.MaxImagePixels <= 0 {
		cfg.MaxImagePixels = 100_000_000
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	st, err := store.Open(store.Config{Dir: cfg.DataDir, MaxFileSize: cfg.MaxFileSize, MaxWorkspaceSize: cfg.MaxWorkspaceSize,
		WorkspaceQuotas: cfg.WorkspaceQuotas, MaxToolSize: cfg.MaxToolSize, EventHistory: cfg.EventHistory, Backend: cfg.Backend})
	if err != nil {
		return nil, err
	}
	return &Host{Config: cfg, Store: st, Registry: NewRegistry(), Log: cfg.Log}, nil
}

// OnClose registers fn to run when the Host closes (last registered, first run).
func (h *Host) OnClose(fn func() error) {
	h.closeMu.Lock()
	h.closers = append(h.closers, fn)
	h.closeMu.Unlock()
}

// Close releases everything the Host and its packages hold.
func (h *Host) Close() error {
	h.closeMu.Lock()
	closers := h.closers
	h.closers = nil
	h.closeMu.Unlock()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i]())
	}
	errs = append(errs, h.Store.Close())
	return errors.Join(errs...)
}

// Env returns a calling environment for workspace ws and session.
func (h *Host) Env(ws, session string) *Env {
	return &Env{Host: h, WS: h.Store.Workspace(ws), Session: session}
}

// ScriptRunner runs a script or module in a sandbox.
type ScriptRunner interface {
	Run(ctx context.Context, env *Env, req RunRequest) *RunResult
}

// RunRequest is one script run (POST /api/run, run_script, tools.call).
type RunRequest struct {
	Code  string `json:"code,omitempty"`
	Input any    `json:"input,omitempty"`
	// Name labels the run in stack traces ("script.js", a tool's name).
	Name string `json:"-"`
	// Limits override the host defaults, clamped to the host maxima.
	Limits RunLimits `json:"-"`
	// Wasm is a WebAssembly module's bytes, or WasmRef a workspace file
	// holding one: the run executes that module instead of Code.
	Wasm    []byte `json:"-"`
	WasmRef string `json:"-"`
}

// IsWasm reports whether req runs a WebAssembly module.
func (req RunRequest) IsWasm() bool { return len(req.Wasm) > 0 || req.WasmRef != "" }

// Runners sends each run to the runtime it needs: scripts to JS, modules to
// WASM. Either may be nil on a host without that runtime.
type Runners struct {
	JS, WASM ScriptRunner
}

// Run implements ScriptRunner.
func (r Runners) Run(ctx context.Context, env *Env, req RunRequest) *RunResult {
	rt, what := r.JS, "JavaScript"
	if req.IsWasm() {
		rt, what = r.WASM, "WebAssembly"
	}
	if rt == nil {
		return &RunResult{Logs: []LogEntry{}, Files: []Artifact{},
			Error: &RunError{Code: apierr.ToolWorkerUnavailable, Message: "this host has no " + what + " runtime configured"}}
	}
	return rt.Run(ctx, env, req)
}

// Check implements ModuleChecker when the WASM runtime does.
func (r Runners) Check(ctx context.Context, env *Env, req RunRequest) error {
	if c, ok := r.WASM.(ModuleChecker); ok && req.IsWasm() {
		return c.Check(ctx, env, req)
	}
	return nil
}

// ModuleChecker is implemented by runners that can check a module without
// running it (tools.save checks a WASM tool when it is saved).
type ModuleChecker interface {
	Check(ctx context.Context, env *Env, req RunRequest) error
}

// RunResult is SPEC 5's run result.
type RunResult struct {
	OK         bool       `json:"ok"`
	Result     any        `json:"result"`
	Logs       []LogEntry `json:"logs"`
	Error      *RunError  `json:"error,omitempty"`
	Files      []Artifact `json:"files"`
	DurationMs float64    `json:"durationMs"`
}

// LogEntry is one captured console line.
type LogEntry struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// RunError is how a failed run reports its error.
type RunError struct {
	Code    apierr.Code `json:"code"`
	Message string      `json:"message"`
	Stack   string      `json:"stack,omitempty"`
}

// Artifact is a file a run created, modified or deleted (seed 002).
type Artifact struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Action   string `json:"action"`
	IconType string `json:"iconType"`
}

// EffectiveLimits fills unset fields of l with the host defaults (and
// fields the host's configuration leaves unset with SPEC 5's defaults) and
// clamps every field to the host maxima.
func (h *Host) EffectiveLimits(l RunLimits) RunLimits {
	d, m := h.Config.Limits, h.Config.MaxLimits
	spec := DefaultLimits()
	pick := func(v, def, max int64) int64 {
		if v <= 0 {
			v = def
		}
		if max > 0 && v > max {
			v = max
		}
		return v
	}
	or := func(v, def int64) int64 {
		if v <= 0 {
			return def
		}
		return v
	}
	return RunLimits{
		Timeout:     time.Duration(pick(int64(l.Timeout), or(int64(d.Timeout), int64(spec.Timeout)), int64(m.Timeout))),
		MemoryBytes: pick(l.MemoryBytes, or(d.MemoryBytes, spec.MemoryBytes), m.MemoryBytes),
		LogBytes:    int(pick(int64(l.LogBytes), or(int64(d.LogBytes), int64(spec.LogBytes)), int64(m.LogBytes))),
		ResultBytes: int(pick(int64(l.ResultBytes), or(int64(d.ResultBytes), int64(spec.ResultBytes)), int64(m.ResultBytes))),
		MaxDepth:    int(pick(int64(l.MaxDepth), or(int64(d.MaxDepth), int64(spec.MaxDepth)), int64(m.MaxDepth))),
	}
}

// Blank writes the empty document of a format (a workbook with one sheet,
// a one-page PDF) for files.create of a name with that extension.
type Blank func(w io.Writer) error

// AddBlank registers how to make an empty file for names ending in ext
// (".xlsx"); format packages call it when they register.
func (h *Host) AddBlank(ext string, make Blank) {
	h.closeMu.Lock()
	defer h.closeMu.Unlock()
	if h.blanks == nil {
		h.blanks = map[string]Blank{}
	}
	h.blanks[strings.ToLower(ext)] = make
}

// BlankFor returns the maker of an empty file for name's extension, or nil
// when an empty file of that type is just zero bytes (text).
func (h *Host) BlankFor(name string) Blank {
	h.closeMu.Lock()
	defer h.closeMu.Unlock()
	return h.blanks[strings.ToLower(path.Ext(name))]
}
