package table

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// flight is one load or build of a database in progress. A build has two
// phases: the file is loaded into an in-memory DuckDB (then the map is
// known and getMap answers), and the table is written to its on-disk
// database (then every operation can run on it).
type flight struct {
	mapped chan struct{} // closed when meta or err is set
	meta   *tableMeta
	done   chan struct{} // closed when t or err is set
	t      *tableDB
	err    error
}

// ensure returns the table database of ref's current content, building it
// on first use. Concurrent first calls on the same content build it once.
func (e *engine) ensure(ctx context.Context, ws *store.Workspace, ref string, sheet sheetSpec) (*tableDB, error) {
	_, t, err := e.await(ctx, ws, ref, sheet, true)
	return t, err
}

// ensureMap returns the metadata of ref's current content as soon as it is
// known, without waiting for the database to be written.
func (e *engine) ensureMap(ctx context.Context, ws *store.Workspace, ref string, sheet sheetSpec) (*tableMeta, error) {
	m, _, err := e.await(ctx, ws, ref, sheet, false)
	return m, err
}

func (e *engine) await(ctx context.Context, ws *store.Workspace, ref string, sheet sheetSpec, needDB bool) (*tableMeta, *tableDB, error) {
	e.watch(ws.Name())
	for attempt := 0; ; attempt++ {
		f, err := ws.Resolve(ctx, ref)
		if err != nil {
			return nil, nil, err
		}
		if maxFile, _ := e.host.Store.Limits(); maxFile > 0 && f.Size > maxFile {
			return nil, nil, apierr.New(apierr.TooLarge, "file %q is %d bytes, over the %d-byte file size limit; split it or filter it before loading it as a table", f.Name, f.Size, maxFile)
		}
		path := e.dbPath(ws.Name(), f.ID, f.SHA256, sheet)
		e.mu.Lock()
		if t := e.known[path]; t != nil {
			e.mu.Unlock()
			return &t.meta, t, nil
		}
		if e.closed {
			e.mu.Unlock()
			return nil, nil, errClosed
		}
		fl := e.flights[path]
		if fl == nil {
			fl = &flight{mapped: make(chan struct{}), done: make(chan struct{})}
			e.flights[path] = fl
			e.wg.Add(1)
			go e.fly(ws, f, sheet, path, fl)
		}
		e.mu.Unlock()
		wait := fl.done
		if !needDB {
			wait = fl.mapped
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, nil, apierr.Wrap(apierr.Timeout, ctx.Err(), "the table for %q is still being prepared; call again in a moment", f.Name)
		}
		if !needDB && fl.meta != nil {
			return fl.meta, nil, nil
		}
		<-fl.done // the map failed, so the flight is over
		if errors.Is(fl.err, errChanged) && attempt < 2 {
			continue
		}
		if fl.err != nil {
			return nil, nil, fl.err
		}
		return &fl.t.meta, fl.t, nil
	}
}

var errChanged = errors.New("file changed while it was being loaded")

var errClosed = apierr.New(apierr.ToolWorkerUnavailable, "the table engine is shutting down")

// fly loads or builds one database, detached from any caller's context so
// that a caller giving up does not waste the work others wait for.
func (e *engine) fly(ws *store.Workspace, f *store.File, sheet sheetSpec, path string, fl *flight) {
	defer e.wg.Done()
	ctx, cancel := context.WithTimeout(e.ctx, e.opts.IngestTimeout)
	defer cancel()
	mapped := false
	publish := func(m *tableMeta) {
		fl.meta = m
		mapped = true
		close(fl.mapped)
	}
	t, err := e.loadOrBuild(ctx, ws, f, sheet, path, publish)
	e.mu.Lock()
	if err == nil {
		e.known[path] = t
	}
	delete(e.flights, path)
	e.mu.Unlock()
	fl.t, fl.err = t, err
	if !mapped {
		if t != nil {
			fl.meta = &t.meta
		}
		close(fl.mapped)
	}
	close(fl.done)
	if err == nil {
		e.dropStale(ws.Name(), f.ID)
	}
}

// loadOrBuild opens the database at path, or builds it: load the file into
// an in-memory DuckDB (holding the file's read lock), publish the map, then
// write the table into a new database file and rename it into place.
func (e *engine) loadOrBuild(ctx context.Context, ws *store.Workspace, f *store.File, sheet sheetSpec, path string, publish func(*tableMeta)) (*tableDB, error) {
	if _, err := os.Stat(path); err == nil {
		t, err := e.load(ctx, path)
		if err == nil && t.meta.Version == metaVersion && t.meta.SHA256 == f.SHA256 {
			return t, nil
		}
		// Unreadable or from an older layout: rebuild it.
		e.pool.evictPath(path)
		removeDB(path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot create the table cache: %v", err)
	}
	tmp := fmt.Sprintf("%s.tmp-%d-%d", path, os.Getpid(), time.Now().UnixNano())
	defer removeDB(tmp)
	db, err := e.ingestDB(tmp)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var meta *tableMeta
	err = ws.View(ctx, f.ID, func(cur *store.File, body string) error {
		if cur.SHA256 != f.SHA256 {
			return errChanged
		}
		m, err := e.build(ctx, db, cur, body, tmp, sheet)
		meta = m
		return err
	})
	if err == nil {
		meta.Version, meta.FileID, meta.SHA256 = metaVersion, f.ID, f.SHA256
		publish(meta)
		err = persist(ctx, db, meta, tmp)
	}
	if err == nil {
		if rerr := os.Rename(tmp, path); rerr != nil {
			err = apierr.Wrap(apierr.FileWriteFailed, rerr, "cannot store the table database: %v", rerr)
		}
	}
	if err != nil {
		if ctx.Err() != nil && apierr.CodeOf(err) != apierr.Timeout {
			return nil, apierr.Wrap(apierr.Timeout, err, "loading %q as a table took longer than %s; the file may be too complex", f.Name, e.opts.IngestTimeout)
		}
		return nil, err
	}
	return &tableDB{path: path, meta: *meta}, nil
}

// ingestDB opens the in-memory DuckDB a build loads the file into. It runs
// only SQL this package writes, on paths the store gave it; it may spill
// to a folder beside the database being built.
func (e *engine) ingestDB(tmp string) (*sql.DB, error) {
	dsn := fmt.Sprintf("?threads=%d&memory_limit=%dMB&autoinstall_known_extensions=false&autoload_known_extensions=false",
		e.opts.Threads, e.opts.MemoryLimit>>20)
	db, err := sql.Open("duckdb", dsn)
	if err != nil {
		return nil, apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the SQL engine: %v", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("SET temp_directory = " + sqlString(tmp+".spill")); err != nil {
		db.Close()
		return nil, apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the SQL engine: %v", err)
	}
	return db, nil
}

// build loads the body at src into table data of db.
func (e *engine) build(ctx context.Context, db *sql.DB, f *store.File, src, scratch string, sheet sheetSpec) (*tableMeta, error) {
	e.builds.Add(1)
	if isWorkbook(f) {
		return e.ingestWorkbook(ctx, db, f, src, sheet)
	}
	if !sheet.isDefault() {
		return nil, apierr.New(apierr.ValidationFailed, "sheet %q was given but %q is not an xlsx workbook; omit sheet for text tables", sheet.String(), f.Name)
	}
	return e.ingestText(ctx, db, f, src, scratch)
}

// persist writes table data and the metadata from the in-memory db into a
// new database file at path (insertion order, and so file order, kept).
func persist(ctx context.Context, db *sql.DB, meta *tableMeta, path string) error {
	raw, err := json.Marshal(meta)
	if err != nil {
		return apierr.Wrap(apierr.Internal, err, "encoding the table metadata failed: %v", err)
	}
	for _, s := range []string{
		"ATTACH " + sqlString(path) + " AS out",
		"CREATE TABLE out.main.data AS SELECT * FROM memory.main.data",
		"CREATE TABLE out.main._metaclaw_meta (k VARCHAR PRIMARY KEY, v VARCHAR)",
		"INSERT INTO out.main._metaclaw_meta VALUES ('meta', " + sqlString(string(raw)) + ")",
		"CHECKPOINT out",
		"DETACH out",
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			if ctx.Err() != nil {
				return apierr.Wrap(apierr.Timeout, err, "storing the table ran out of time")
			}
			return apierr.Wrap(apierr.FileWriteFailed, err, "storing the table database failed: %v", err)
		}
	}
	return nil
}

// load reads the metadata of an existing database.
func (e *engine) load(ctx context.Context, path string) (*tableDB, error) {
	inst, err := e.pool.acquire(ctx, []attachment{{Name: "data", Path: path}})
	if err != nil {
		return nil, err
	}
	defer e.pool.release(inst)
	var raw string
	if err := inst.db.QueryRowContext(ctx, `SELECT v FROM `+srcAlias(0)+`.main._metaclaw_meta WHERE k = 'meta'`).Scan(&raw); err != nil {
		return nil, err
	}
	var m tableMeta
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, err
	}
	return &tableDB{path: path, meta: m}, nil
}
