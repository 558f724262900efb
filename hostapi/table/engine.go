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
	// IngestTimeout bounds building one table database.
	IngestTimeout time.Duration
	// MemoryLimit and Threads are DuckDB's memory_limit and threads for
	// every instance (each query instance, each build).
	MemoryLimit int64
	Threads     int
	// MaxInstances is how many locked query instances stay open.
	MaxInstances int
	// ChunkSize is the number of rows per map chunk.
	ChunkSize int
	// DefaultWindow is the query window when window_rows is omitted.
	DefaultWindow int64
}

func defaultOptions() options {
	return options{
		QueryTimeout:  30 * time.Second,
		IngestTimeout: 5 * time.Minute,
		MemoryLimit:   512 << 20,
		Threads:       min(runtime.NumCPU(), 4),
		MaxInstances:  6,
		ChunkSize:     500,
		DefaultWindow: 100,
	}
}

// engine owns the per-file DuckDB databases under cache/tabular and the
// locked instances that run SQL on them.
type engine struct {
	host *hostapi.Host
	dir  string
	opts options

	mu      sync.Mutex
	known   map[string]*tableDB // database path → loaded metadata
	flights map[string]*flight  // database path → build in progress
	watched map[string]bool     // workspaces whose events are followed
	closed  bool                // no new flights or watchers once set

	pool *pool
	// builds counts databases built (not loaded) by this engine.
	builds atomic.Int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
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
	ctx, cancel := context.WithCancel(context.Background())
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
	e.pool = newPool(e)
	return e
}

func (e *engine) close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	return e.pool.closeAll()
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
