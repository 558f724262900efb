package table

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// attachment names one table database inside a query instance: the file
// of the call is "data", files given in `tables` take their given names.
type attachment struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// srcAlias is the catalog a database is attached under; views with the
// table names point into it.
func srcAlias(i int) string { return fmt.Sprintf("_src%d", i) }

// instance is an in-memory DuckDB that attached some table databases
// read-only and then locked itself down (sandbox.go) before any SQL of a
// caller runs on it. Instances are cached: opening one costs ~10 ms.
type instance struct {
	key    string
	db     *sql.DB
	paths  []string
	files  []os.FileInfo // the attached files when they were opened
	refs   int
	doomed bool
	used   time.Time
}

// pool caches a worker's instances, keyed by what they attached.
type pool struct {
	cfg    workerConfig
	mu     sync.Mutex
	m      map[string]*instance
	closed bool
}

func newPool(cfg workerConfig) *pool { return &pool{cfg: cfg, m: map[string]*instance{}} }

// fresh reports whether every file inst attached is still the one it
// opened (a database the host deleted and built again is another file).
func (inst *instance) fresh() bool {
	for i, p := range inst.paths {
		st, err := os.Stat(p)
		if err != nil || !os.SameFile(st, inst.files[i]) {
			return false
		}
	}
	return true
}

func poolKey(atts []attachment) string {
	parts := make([]string, len(atts))
	for i, a := range atts {
		parts[i] = a.Name + "\x00" + a.Path
	}
	sort.Strings(parts)
	return strings.Join(parts, "\x01")
}

// acquire returns an instance with exactly atts attached; release it when
// done.
func (p *pool) acquire(ctx context.Context, atts []attachment) (*instance, error) {
	key := poolKey(atts)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, apierr.New(apierr.ToolWorkerUnavailable, "the table engine is shutting down")
	}
	if inst := p.m[key]; inst != nil {
		if inst.fresh() {
			inst.refs++
			inst.used = time.Now()
			p.mu.Unlock()
			return inst, nil
		}
		delete(p.m, key)
		inst.doomed = true
		if inst.refs == 0 {
			inst.db.Close()
		}
	}
	p.mu.Unlock()

	inst, err := p.open(ctx, atts)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		inst.db.Close()
		return nil, apierr.New(apierr.ToolWorkerUnavailable, "the table engine is shutting down")
	}
	if other := p.m[key]; other != nil {
		inst.db.Close()
		other.refs++
		other.used = time.Now()
		return other, nil
	}
	inst.key, inst.refs, inst.used = key, 1, time.Now()
	p.m[key] = inst
	p.trimLocked()
	return inst, nil
}

func (p *pool) release(inst *instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	inst.refs--
	if inst.doomed && inst.refs == 0 {
		inst.db.Close()
		return
	}
	p.trimLocked()
}

// discard closes inst once it is idle and never hands it out again (used
// when it misbehaved).
func (p *pool) discard(inst *instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[inst.key] == inst {
		delete(p.m, inst.key)
	}
	inst.doomed = true
}

// trimLocked closes the least recently used idle instances beyond the cap.
func (p *pool) trimLocked() {
	for len(p.m) > p.cfg.MaxInstances {
		var victim *instance
		for _, inst := range p.m {
			if inst.refs == 0 && (victim == nil || inst.used.Before(victim.used)) {
				victim = inst
			}
		}
		if victim == nil {
			return // all busy; they are trimmed on release
		}
		delete(p.m, victim.key)
		victim.db.Close()
	}
}

// evictPath closes every instance that attached path (once idle), before
// the database file is deleted or replaced.
func (p *pool) evictPath(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, inst := range p.m {
		for _, ip := range inst.paths {
			if ip == path {
				delete(p.m, key)
				inst.doomed = true
				if inst.refs == 0 {
					inst.db.Close()
				}
				break
			}
		}
	}
}

func (p *pool) closeAll() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for key, inst := range p.m {
		delete(p.m, key)
		inst.doomed = true
		if inst.refs == 0 {
			inst.db.Close()
		}
	}
	return nil
}

// open builds a locked instance: in-memory DuckDB, the databases attached
// READ_ONLY, a view per table name, then the lockdown of sandbox.go.
func (p *pool) open(ctx context.Context, atts []attachment) (*instance, error) {
	dsn := fmt.Sprintf("?threads=%d&memory_limit=%dMB&autoinstall_known_extensions=false&autoload_known_extensions=false",
		p.cfg.Threads, p.cfg.MemoryLimit>>20)
	conn, err := duckdb.NewConnector(dsn, nil)
	if err != nil {
		return nil, apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the SQL engine: %v", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	inst := &instance{db: db}
	var setup []string
	for i, a := range atts {
		st, err := os.Stat(a.Path)
		if err != nil {
			db.Close()
			return nil, apierr.Wrap(apierr.FileReadFailed, err, "the table database is missing; call again to rebuild it")
		}
		inst.paths = append(inst.paths, a.Path)
		inst.files = append(inst.files, st)
		setup = append(setup,
			fmt.Sprintf("ATTACH %s AS %s (READ_ONLY)", sqlString(a.Path), srcAlias(i)),
			fmt.Sprintf("CREATE VIEW memory.main.%s AS SELECT * FROM %s.main.data", quoteIdent(a.Name), srcAlias(i)))
	}
	setup = append(setup, lockdown...)
	for _, s := range setup {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.Close()
			if ctx.Err() != nil {
				return nil, apierr.Wrap(apierr.Timeout, err, "the time limit ran out while opening the table")
			}
			return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot open the table database: %v", firstLine(err.Error()))
		}
	}
	return inst, nil
}

// sqlString quotes s as an SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// quoteIdent quotes s as an SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
