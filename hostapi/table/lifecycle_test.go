package table

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

func (th *testHost) dbOf(ref string) string {
	th.t.Helper()
	f, err := th.env.WS.Resolve(context.Background(), ref)
	if err != nil {
		th.t.Fatal(err)
	}
	return th.e.dbPath(th.env.WS.Name(), f.ID, f.SHA256, sheetSpec{})
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func waitGone(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for exists(p) {
		if time.Now().After(deadline) {
			t.Fatalf("%s was not removed", p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitExists(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !exists(p) {
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func modTime(t *testing.T, p string) time.Time {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.ModTime()
}

// One database per file content under cache/tabular: created on first use,
// reused across calls and restarts, rebuilt when the file changes, removed
// when it changes or is deleted.
func TestDatabaseLifecycle(t *testing.T) {
	dir := t.TempDir()
	th := openTestHost(t, dir)
	uploadRecords(th, "life.csv", genRecords(100))
	db1 := th.dbOf("life.csv")
	if filepath.Dir(filepath.Dir(db1)) != filepath.Join(th.h.Store.CacheDir(), "tabular") {
		t.Fatalf("database outside cache/tabular: %s", db1)
	}
	if exists(db1) {
		t.Fatal("created before first use")
	}
	th.call("table_get_map", map[string]any{"path": "life.csv"})
	waitExists(t, db1) // getMap answers once the map is known; the database follows
	if th.e.builds.Load() != 1 {
		t.Fatalf("first use: exists %v, builds %d", exists(db1), th.e.builds.Load())
	}
	mt := modTime(t, db1)
	th.call("table_describe", map[string]any{"path": "life.csv"})
	th.call("table_query", map[string]any{"path": "life.csv", "query": "SELECT 1"})
	if th.e.builds.Load() != 1 || !modTime(t, db1).Equal(mt) {
		t.Fatal("reuse rebuilt the database")
	}

	// Restart: the database on disk is used as it is.
	th.h.Close()
	th = openTestHost(t, dir)
	m := th.call("table_get_map", map[string]any{"path": "life.csv"})
	if th.e.builds.Load() != 0 || !modTime(t, db1).Equal(mt) || num(t, m["row_count"]) != 100 {
		t.Fatalf("after restart: builds %d, map %v", th.e.builds.Load(), m["row_count"])
	}

	// Changed file: a new database for the new content, the old one gone.
	uploadRecords(th, "life.csv", genRecords(150))
	db2 := th.dbOf("life.csv")
	m = th.call("table_get_map", map[string]any{"path": "life.csv"})
	waitExists(t, db2)
	if db2 == db1 || num(t, m["row_count"]) != 150 {
		t.Fatalf("after change: %v", m["row_count"])
	}
	waitGone(t, db1)

	// A change with no table call afterwards: the change event removes it.
	uploadRecords(th, "life.csv", genRecords(160))
	waitGone(t, db2)

	// Rename keeps the content's database.
	th.call("table_describe", map[string]any{"path": "life.csv"})
	db3 := th.dbOf("life.csv")
	builds := th.e.builds.Load()
	if _, err := th.env.WS.Rename(context.Background(), "life.csv", "renamed.csv"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	th.call("table_get_map", map[string]any{"path": "renamed.csv"})
	if !exists(db3) || th.e.builds.Load() != builds {
		t.Fatal("rename rebuilt or removed the database")
	}

	// Delete: the database goes with the file.
	if err := th.env.WS.Delete(context.Background(), "renamed.csv"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, db3)
}

// Concurrent first calls on the same file build its database once.
func TestConcurrentFirstCalls(t *testing.T) {
	th := newTestHost(t)
	uploadRecords(th, "c.csv", genRecords(3000))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			tool := []string{"table_get_map", "table_describe", "table_stats", "table_query"}[i%4]
			args := map[string]any{"path": "c.csv"}
			if tool == "table_query" {
				args["query"] = "SELECT count(*) FROM data"
			}
			_, err := th.h.Registry.CallTool(context.Background(), th.env, tool, args)
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := th.e.builds.Load(); n != 1 {
		t.Fatalf("built %d times", n)
	}
}

// Files deleted or changed while no host ran lose their databases at the
// next start; unfinished builds left by a crash are cleaned up; a damaged
// database is rebuilt.
func TestSweepAtStart(t *testing.T) {
	dir := t.TempDir()
	th := openTestHost(t, dir)
	uploadRecords(th, "gone.csv", genRecords(10))
	uploadRecords(th, "kept.csv", genRecords(10))
	uploadRecords(th, "broken.csv", genRecords(10))
	for _, n := range []string{"gone.csv", "kept.csv", "broken.csv"} {
		th.call("table_describe", map[string]any{"path": n})
	}
	gone, kept, broken := th.dbOf("gone.csv"), th.dbOf("kept.csv"), th.dbOf("broken.csv")
	oldTmp := kept + ".tmp-1-1"
	newTmp := kept + ".tmp-1-2"
	th.h.Close()

	// Another process (a plain store, no table engine) deletes a file.
	h, err := hostapi.NewHost(hostapi.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Store.Workspace("default").Delete(context.Background(), "gone.csv"); err != nil {
		t.Fatal(err)
	}
	h.Close()
	os.WriteFile(oldTmp, []byte("partial"), 0o640)
	os.WriteFile(newTmp, []byte("partial"), 0o640)
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(oldTmp, old, old)
	os.WriteFile(broken, []byte("this is not a duckdb database"), 0o640)

	// The sweep runs SweepAfter the start when no table call starts it.
	th = openTestHost(t, dir, func(_ *hostapi.Config, o *options) { o.SweepAfter = 10 * time.Millisecond })
	waitGone(t, gone)
	waitGone(t, oldTmp)
	if !exists(kept) || !exists(newTmp) {
		t.Fatal("the sweep removed too much")
	}
	m := th.call("table_get_map", map[string]any{"path": "broken.csv"})
	if num(t, m["row_count"]) != 10 || th.e.builds.Load() != 1 {
		t.Fatalf("damaged database not rebuilt: %v", m)
	}
	th.call("table_get_map", map[string]any{"path": "kept.csv"})
	if th.e.builds.Load() != 1 {
		t.Fatal("an intact database was rebuilt")
	}
}

// A workspace's tables are invisible from another workspace.
func TestWorkspaceIsolation(t *testing.T) {
	th := newTestHost(t)
	uploadRecords(th, "w.csv", genRecords(5))
	th.call("table_get_map", map[string]any{"path": "w.csv"})
	other := th.h.Env("other", "s2")
	if _, err := other.WS.Create(context.Background(), store.CreateOptions{Name: "mine.csv"}, bytes.NewReader([]byte("a\n1\n"))); err != nil {
		t.Fatal(err)
	}
	_, err := th.h.Registry.CallTool(context.Background(), other, "table_get_map", map[string]any{"path": "w.csv"})
	if err == nil {
		t.Fatal("another workspace read the file")
	}
	_, err = th.h.Registry.CallTool(context.Background(), other, "table_query", map[string]any{"path": "mine.csv", "query": "SELECT 1", "tables": map[string]any{"x": "w.csv"}})
	if err == nil {
		t.Fatal("another workspace joined the file")
	}
}
