package table

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// flight is one load or build of a database in progress. A build has two
// phases: the file is loaded into an in-memory DuckDB (then the map is
// known and getMap answers), and the table is written to its on-disk
// database (then every operation can run on it).
//
// A flight works for its callers: it is shared by every call that needs
// the same content, and it stops (its worker interrupted or killed) when
// every one of them has given up before getting its answer — a caller's
// deadline or cancellation ends the ingestion it started. A flight whose
// callers all got their answer (getMap needs only the map) finishes
// writing the database, within IngestTimeout.
type flight struct {
	mapped chan struct{} // closed when meta or err is set
	meta   *tableMeta
	done   chan struct{} // closed when t or err is set
	t      *tableDB
	err    error

	cancel context.CancelFunc
	mu     sync.Mutex
	active int // callers waiting for an answer
}

// join registers a waiting caller.
func (fl *flight) join() {
	fl.mu.Lock()
	fl.active++
	fl.mu.Unlock()
}

// leave unregisters a caller; when the last one leaves without its
// answer, the flight stops.
func (fl *flight) leave(answered bool) {
	fl.mu.Lock()
	fl.active--
	stop := fl.active == 0 && !answered
	fl.mu.Unlock()
	if stop {
		fl.cancel()
	}
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
	e.start()
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
			fctx, cancel := context.WithTimeout(e.ctx, e.opts.IngestTimeout)
			fl = &flight{mapped: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
			e.flights[path] = fl
			e.wg.Add(1)
			go e.fly(fctx, ws, f, sheet, path, fl)
		}
		fl.join()
		e.mu.Unlock()
		wait := fl.done
		if !needDB {
			wait = fl.mapped
		}
		select {
		case <-wait:
		case <-ctx.Done():
			fl.leave(false)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, nil, apierr.Wrap(apierr.Timeout, ctx.Err(), "the time limit ran out while %q was being loaded as a table (loading stopped); allow the run more time, or split the file", f.Name)
			}
			return nil, nil, apierr.Wrap(apierr.Timeout, ctx.Err(), "the call was cancelled while %q was being loaded as a table (loading stopped)", f.Name)
		}
		fl.leave(true)
		if !needDB && fl.meta != nil {
			return fl.meta, nil, nil
		}
		<-fl.done // the map failed, so the flight is over
		// A file changed under the build, or a flight its other callers
		// abandoned just as this one joined: start again.
		if (errors.Is(fl.err, errChanged) || errors.Is(fl.err, errAbandoned) && ctx.Err() == nil) && attempt < 2 {
			continue
		}
		if fl.err != nil {
			return nil, nil, fl.err
		}
		return &fl.t.meta, fl.t, nil
	}
}

var errChanged = errors.New("file changed while it was being loaded")

// errAbandoned is the cause of a flight stopped because its callers left.
var errAbandoned = errors.New("every caller waiting for the table gave up")

var errClosed = apierr.New(apierr.ToolWorkerUnavailable, "the table engine is shutting down")

// fly loads or builds one database, bounded by ctx (IngestTimeout, the
// engine's life, and its callers: see flight).
func (e *engine) fly(ctx context.Context, ws *store.Workspace, f *store.File, sheet sheetSpec, path string, fl *flight) {
	defer e.wg.Done()
	defer fl.cancel()
	var once sync.Once
	publish := func(m *tableMeta) {
		once.Do(func() {
			fl.meta = m
			close(fl.mapped)
		})
	}
	t, err := e.loadOrBuild(ctx, ws, f, sheet, path, publish)
	if err != nil && ctx.Err() != nil {
		err = e.ingestTimeout(ctx, f, err)
	}
	e.mu.Lock()
	if err == nil {
		e.known[path] = t
	}
	delete(e.flights, path)
	e.mu.Unlock()
	fl.t, fl.err = t, err
	once.Do(func() {
		if t != nil {
			fl.meta = &t.meta
		}
		close(fl.mapped)
	})
	close(fl.done)
	if err == nil {
		e.dropStale(ws.Name(), f.ID)
	}
}

// ingestTimeout is the error of a flight whose context ended.
func (e *engine) ingestTimeout(ctx context.Context, f *store.File, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errEngineClosed):
		return errClosed
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return apierr.Wrap(apierr.Timeout, err, "loading %q as a table took longer than %s and was stopped; the file may be too large or too complex — split it or export the sheet as CSV", f.Name, e.opts.IngestTimeout)
	}
	return apierr.Wrap(apierr.Timeout, errAbandoned, "loading %q as a table was stopped: every caller waiting for it gave up", f.Name)
}

// loadOrBuild opens the database at path, or builds it in a worker: the
// file is loaded (holding its read lock) and the map published as soon as
// it is known, then the table is written into a new database file that is
// renamed into place.
func (e *engine) loadOrBuild(ctx context.Context, ws *store.Workspace, f *store.File, sheet sheetSpec, path string, publish func(*tableMeta)) (*tableDB, error) {
	if _, err := os.Stat(path); err == nil {
		var m tableMeta
		err := e.workers.call(ctx, poolKey([]attachment{{Name: "data", Path: path}}), opMeta, metaArgs{Path: path}, nil, &m)
		if err == nil && m.Version == metaVersion && m.SHA256 == f.SHA256 {
			return &tableDB{path: path, meta: m}, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// Unreadable or from an older layout: rebuild it.
		e.forget(path)
		removeDB(path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot create the table cache: %v", err)
	}
	tmp := fmt.Sprintf("%s.tmp-%d-%d", path, os.Getpid(), time.Now().UnixNano())
	defer removeDB(tmp)
	var meta tableMeta
	err := ws.View(ctx, f.ID, func(cur *store.File, body string) error {
		if cur.SHA256 != f.SHA256 {
			return errChanged
		}
		e.builds.Add(1)
		args := ingestArgs{Src: body, Name: cur.Name, MimeType: cur.MimeType, Size: cur.Size, FileID: cur.ID, SHA256: cur.SHA256,
			Sheet: sheet, Out: tmp, Bounds: bounds{MaxColumns: e.opts.MaxColumns, MaxCells: e.opts.MaxCells}}
		return e.workers.call(ctx, "", opIngest, args, publish, &meta)
	})
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot store the table database: %v", err)
	}
	return &tableDB{path: path, meta: meta}, nil
}
