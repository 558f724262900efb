package table

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Lifecycle of the table databases (seed 001): one per file content,
// created on first use, kept across calls and restarts while the file is
// unchanged, removed when it changes or is deleted. Three mechanisms keep
// cache/tabular in step with the store:
//   - a build that finishes removes the file's databases of other contents;
//   - a subscription to each workspace's change events removes the
//     databases of deleted and changed files as it happens;
//   - a sweep at start-up removes what changed while no host was running,
//     and leftovers of interrupted builds.

// watch follows the change events of workspace ws (once per workspace).
func (e *engine) watch(ws string) {
	e.mu.Lock()
	if e.watched[ws] || e.closed {
		e.mu.Unlock()
		return
	}
	e.watched[ws] = true
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		bus := e.host.Store.Bus()
		var last uint64
		for {
			events, cancel := bus.Subscribe(ws, last)
			for open := true; open; {
				select {
				case <-e.ctx.Done():
					cancel()
					return
				case ev, ok := <-events:
					if !ok {
						open = false // too slow: resubscribe from the last event seen
						break
					}
					last = ev.Seq
					if ev.Type != store.EventDeleted && ev.Type != store.EventModified {
						continue
					}
					if id, _ := ev.Data["id"].(string); id != "" {
						e.dropStale(ws, id)
					}
				}
			}
			cancel()
		}
	}()
}

// staleTemp is how old an unfinished build's file must be before the sweep
// deletes it (a build in progress is never that old).
const staleTemp = time.Hour

// sweep checks every database under cache/tabular against the store and
// starts following the workspaces that have any.
func (e *engine) sweep() {
	// Exports still being written when a host stopped.
	if ents, err := os.ReadDir(e.exportDir()); err == nil {
		for _, ent := range ents {
			if info, err := ent.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
				os.Remove(filepath.Join(e.exportDir(), ent.Name()))
			}
		}
	}
	dirs, err := os.ReadDir(e.dir)
	if err != nil {
		return
	}
	for _, d := range dirs {
		if !d.IsDir() || !strings.HasPrefix(d.Name(), "ws-") {
			continue
		}
		name, err := hex.DecodeString(strings.TrimPrefix(d.Name(), "ws-"))
		if err != nil {
			continue
		}
		ws := string(name)
		e.watch(ws)
		dir := filepath.Join(e.dir, d.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		ids := map[string]bool{}
		for _, ent := range entries {
			n := ent.Name()
			if e.ctx.Err() != nil {
				return
			}
			if strings.Contains(n, ".duckdb.tmp-") {
				if info, err := ent.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
					os.RemoveAll(filepath.Join(dir, n))
				}
				continue
			}
			if strings.HasSuffix(n, ".duckdb") && len(n) > 36 && n[36] == '-' {
				ids[n[:36]] = true
			}
		}
		for id := range ids {
			e.dropStale(ws, id)
		}
	}
}

// removeDB deletes a database file and DuckDB's companions of it.
func removeDB(path string) {
	os.Remove(path)
	os.Remove(path + ".wal")
	os.RemoveAll(path + ".tmp")
	os.RemoveAll(path + ".spill")
}

// dropStale removes the databases of file id that do not belong to its
// current content: all of them when the file is gone, the ones of older
// contents when it changed. The store is asked, so that a build finishing
// late never deletes the database of a newer content.
func (e *engine) dropStale(ws, id string) {
	keep := ""
	if f, err := e.host.Store.Workspace(ws).Resolve(e.ctx, id); err == nil {
		keep = id + "-" + f.SHA256[:min(len(f.SHA256), 32)]
	} else if !apierr.Is(err, apierr.NotFound) {
		return // the store is unavailable (closing); try another time
	}
	matches, _ := filepath.Glob(filepath.Join(e.wsDir(ws), id+"-*.duckdb"))
	for _, m := range matches {
		if keep != "" && strings.HasPrefix(filepath.Base(m), keep) {
			continue
		}
		e.forget(m)
		removeDB(m)
	}
}

// forget drops path's metadata and has the workers close their instances
// of it.
func (e *engine) forget(path string) {
	e.mu.Lock()
	delete(e.known, path)
	e.mu.Unlock()
	e.workers.drop(path)
}
