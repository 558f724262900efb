package table

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
)

// options bound the engine; Register uses defaultOptions.
type options struct {
	// QueryTimeout bounds every statement on user data unless the
	// caller's context ends sooner.
	QueryTimeout time.Duration
	// IngestTimeout bounds building one table database (and writing one
	// export).
	IngestTimeout time.Duration
	// MemoryLimit and Threads are DuckDB's memory_limit and threads for
	// every instance (each query instance, each build).
	MemoryLimit int64
	Threads     int
	// DataHeadroom is what a worker may allocate beyond MemoryLimit
	// (RLIMIT_DATA = its size at start + MemoryLimit + DataHeadroom): the
	// vectors and strings DuckDB keeps outside its buffer manager, Go's
	// own heap (results, excelize), thread stacks.
	DataHeadroom int64
	// MaxWorkers caps the SQL worker processes; a call finding them all
	// busy waits for one until its deadline (BUSY). The engine's memory is
	// bounded by MaxWorkers × (MemoryLimit + DataHeadroom + a worker's
	// size at start).
	MaxWorkers int
	// KillAfter is how long after its deadline (or cancellation) a worker
	// that has not stopped is killed.
	KillAfter time.Duration
	// RecycleAbove retires a worker whose resident memory after a call
	// exceeds its size at start by this much, returning it to the system.
	RecycleAbove int64
	// IdleTimeout retires workers beyond the first that sat idle this long.
	IdleTimeout time.Duration
	// SpawnTimeout bounds a worker's start.
	SpawnTimeout time.Duration
	// MaxInstances is how many locked query instances a worker keeps open.
	MaxInstances int
	// MaxColumns and MaxCells bound one ingestion whatever the file
	// declares (see bounds).
	MaxColumns int
	MaxCells   int64
	// ChunkSize is the number of rows per map chunk.
	ChunkSize int
	// DefaultWindow is the query window when window_rows is omitted.
	DefaultWindow int64
	// SweepAfter is when, after start-up, the cache sweep runs if no
	// table call has started it before.
	SweepAfter time.Duration
}

func defaultOptions() options {
	return options{
		QueryTimeout:  30 * time.Second,
		IngestTimeout: 5 * time.Minute,
		MemoryLimit:   512 << 20,
		Threads:       min(runtime.NumCPU(), 4),
		DataHeadroom:  384 << 20,
		MaxWorkers:    3,
		KillAfter:     500 * time.Millisecond,
		RecycleAbove:  768 << 20,
		IdleTimeout:   30 * time.Second,
		SpawnTimeout:  30 * time.Second,
		MaxInstances:  6,
		MaxColumns:    4096,
		MaxCells:      50_000_000,
		ChunkSize:     500,
		DefaultWindow: 100,
		SweepAfter:    time.Minute,
	}
}

// engine owns the per-file DuckDB databases under cache/tabular and the
// SQL workers that build and query them (worker.go).
type engine struct {
	host *hostapi.Host
	dir  string
	opts options

	mu      sync.Mutex
	known   map[string]*tableDB // database path → loaded metadata
	flights map[string]*flight  // database path → build in progress
	watched map[string]bool     // workspaces whose events are followed
	closed  bool                // no new flights or watchers once set
	started bool                // the sweep and the janitor run

	workers *workerPool
	// builds counts databases built (not loaded) by this engine.
	builds atomic.Int64

	ctx       context.Context // cancelled with errEngineClosed by close
	cancel    context.CancelCauseFunc
	wg        sync.WaitGroup
	sweepTime *time.Timer
}

// tableDB is one ingested table: a DuckDB file holding table "data" and
// the metadata getMap reports.
type tableDB struct {
	path string
	meta tableMeta
}

// tableMeta is stored inside each database (table _metaclaw_meta) so that
// a database found on disk after a restart is complete on its own.
type tableMeta struct {
	Version            int       `json:"version"`
	FileID             string    `json:"fileId"`
	SHA256             string    `json:"sha256"`
	Format             string    `json:"format"`
	FormatInferred     bool      `json:"formatInferred"`
	Sheet              string    `json:"sheet,omitempty"`
	Sheets             []string  `json:"sheets,omitempty"`
	Delimiter          string    `json:"delimiter"`
	QuoteChar          string    `json:"quoteChar"`
	Newline            string    `json:"newline,omitempty"`
	DecimalSeparator   string    `json:"decimalSeparator"`
	Encoding           string    `json:"encoding"`
	EncodingConfidence float64   `json:"encodingConfidence"`
	HasHeader          bool      `json:"hasHeader"`
	RowCount           int64     `json:"rowCount"`
	Columns            []colMeta `json:"columns"`
	Warnings           []string  `json:"warnings"`
}

type colMeta struct {
	Name    string `json:"name"`
	SQLType string `json:"sqlType"`
}

// metaVersion changes when the database layout changes; older databases
// are rebuilt.
const metaVersion = 1

func newEngine(h *hostapi.Host, opts options) *engine {
	ctx, cancel := context.WithCancelCause(context.Background())
	e := &engine{
		host:    h,
		dir:     filepath.Join(h.Store.CacheDir(), "tabular"),
		opts:    opts,
		known:   map[string]*tableDB{},
		flights: map[string]*flight{},
		watched: map[string]bool{},
		ctx:     ctx,
		cancel:  cancel,
	}
	e.workers = newWorkerPool(e)
	// Nothing starts at registration (a CLI listing files pays nothing
	// for the table engine): the sweep and the janitor start with the
	// first table call, or SweepAfter later in a long-running host.
	e.sweepTime = time.AfterFunc(opts.SweepAfter, e.start)
	return e
}

// start begins the engine's background work once: the cache sweep and
// the worker janitor. Workers themselves start on demand.
func (e *engine) start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.closed {
		return
	}
	e.started = true
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		e.sweep()
	}()
	go func() {
		defer e.wg.Done()
		e.workers.runJanitor(e.ctx)
	}()
}

// closeWait bounds how long close waits for flights to unwind after their
// workers are gone.
const closeWait = 5 * time.Second

// close stops everything the engine runs, within closeWait: calls and
// builds in flight are cancelled (their workers interrupted, then killed).
func (e *engine) close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.sweepTime.Stop()
	e.cancel(errEngineClosed)
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(e.opts.KillAfter + 100*time.Millisecond):
		// Workers that ignored the interrupt: kill them so that their
		// callers return.
		e.workers.closeAll()
		select {
		case <-done:
		case <-time.After(closeWait):
			e.host.Log.Warn("table engine: background work still running at shutdown")
		}
	}
	e.workers.closeAll()
	return nil
}

// sheetSpec is how a caller named a workbook sheet: "" (the first sheet),
// a name, or a 1-based index.
type sheetSpec struct {
	Name  string
	Index int
}

func (s sheetSpec) isDefault() bool { return s.Name == "" && s.Index == 0 }

func (s sheetSpec) key() string {
	switch {
	case s.Index > 0:
		return "i:" + strconv.Itoa(s.Index)
	case s.Name != "":
		return "n:" + s.Name
	}
	return ""
}

func (s sheetSpec) String() string {
	if s.Index > 0 {
		return strconv.Itoa(s.Index)
	}
	return s.Name
}

// sheetArg reads the optional "sheet" argument (name or 1-based index).
func sheetArg(a hostapi.Args, name string) sheetSpec {
	switch v := a.Raw(name).(type) {
	case string:
		return sheetSpec{Name: strings.TrimSpace(v)}
	case nil:
		return sheetSpec{}
	default:
		if n, ok := a.Int(name); ok {
			return sheetSpec{Index: int(n)}
		}
	}
	return sheetSpec{}
}

// wsDir is the cache folder of one workspace: its name hex-encoded, so
// that no workspace name can escape the cache directory.
func (e *engine) wsDir(ws string) string {
	return filepath.Join(e.dir, "ws-"+hex.EncodeToString([]byte(ws)))
}

// dbPath names the database of one file content (and sheet):
// <file id>-<sha256 prefix>[-<sheet hash>].duckdb. The file id lets a
// delete or a change find every database of the file; the hash keeps a
// changed file from ever reading a stale database.
func (e *engine) dbPath(ws, id, sha string, sheet sheetSpec) string {
	name := id + "-" + sha[:min(len(sha), 32)]
	if k := sheet.key(); k != "" {
		h := sha256.Sum256([]byte(k))
		name += "-s" + hex.EncodeToString(h[:6])
	}
	return filepath.Join(e.wsDir(ws), name+".duckdb")
}
