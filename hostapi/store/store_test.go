package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func openTest(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func create(t testing.TB, w *Workspace, name, body string) *File {
	t.Helper()
	f, err := w.Create(context.Background(), CreateOptions{Name: name}, strings.NewReader(body))
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return f
}

func readAll(t testing.TB, w *Workspace, ref string) string {
	t.Helper()
	r, err := w.Open(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

func sum(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func TestCreateResolveListDelete(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	f := create(t, w, "/reports/q3.csv", "a,b\n1,2\n")
	if f.Name != "reports/q3.csv" || f.Size != 8 || f.SHA256 != sum("a,b\n1,2\n") || f.MimeType != "text/csv" || f.Source != SourceCreated {
		t.Fatalf("metadata: %+v", f)
	}
	for _, ref := range []string{f.ID, strings.ToUpper(f.ID), "reports/q3.csv", "/reports/q3.csv"} {
		g, err := w.Resolve(ctx, ref)
		if err != nil || g.ID != f.ID {
			t.Fatalf("resolve %q: %v %v", ref, g, err)
		}
	}
	create(t, w, "notes.md", "# hi\n")
	create(t, w, "deep/a/b.csv", "x\n")
	for pattern, want := range map[string]string{
		"":           "deep/a/b.csv,notes.md,reports/q3.csv",
		"*.csv":      "deep/a/b.csv,reports/q3.csv",
		"reports/*":  "reports/q3.csv",
		"**/*.csv":   "deep/a/b.csv,reports/q3.csv",
		"deep/**":    "deep/a/b.csv",
		"*.{md,txt}": "notes.md",
		"[n]otes.md": "notes.md",
	} {
		fs, err := w.List(ctx, pattern)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range fs {
			names = append(names, f.Name)
		}
		if got := strings.Join(names, ","); got != want {
			t.Errorf("List(%q) = %s, want %s", pattern, got, want)
		}
	}
	if _, err := w.Create(ctx, CreateOptions{Name: "notes.md"}, strings.NewReader("x")); apierr.CodeOf(err) != apierr.AlreadyExists {
		t.Fatalf("duplicate name: %v", err)
	}
	if err := w.Delete(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Resolve(ctx, f.ID); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.filesDir, f.DiskPath)); !os.IsNotExist(err) {
		t.Fatal("body left behind after delete")
	}
	// Another workspace sees nothing.
	other, _ := s.Workspace("other").List(ctx, "")
	if len(other) != 0 {
		t.Fatalf("workspace leak: %v", other)
	}
	if _, err := s.Workspace("other").Resolve(ctx, "notes.md"); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("workspace leak: %v", err)
	}
}

func TestBadNames(t *testing.T) {
	w := openTest(t, Config{}).Workspace("default")
	for _, n := range []string{"", "/", "a/../b", "../x", "a//b", "a/", "a\x00b", "a\nb", `a\b`, strings.Repeat("x", 300)} {
		if _, err := w.Create(context.Background(), CreateOptions{Name: n}, strings.NewReader("x")); apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Errorf("name %q: %v", n, err)
		}
	}
}

func TestMIMEDetection(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"data.csv", []byte("a,b\n1,2\n"), "text/csv"},
		{"data.tsv", []byte("a\tb\n1\t2\n"), "text/tab-separated-values"},
		{"x.md", []byte("# title\n"), "text/markdown"},
		{"x.json", []byte(`{"a":1}`), "application/json"},
		{"s.js", []byte("return 1\n"), "text/javascript"},
		{"fake.csv", png, "image/png"},
		{"noext", []byte("hello"), "text/plain"},
		{"pic.png", png, "image/png"},
		{"empty.txt", nil, "text/plain"},
	}
	for _, c := range cases {
		if got := DetectMIME(c.body, c.name); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestModifyBackupRevert(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	events, cancel := s.Bus().Subscribe("default", 0)
	defer cancel()
	f := create(t, w, "a.txt", "v1")
	if f.HasBackup {
		t.Fatal("new file has a backup")
	}
	write := func(body string) *File {
		g, err := w.Modify(ctx, "a.txt", func(cur *File, p string, out io.Writer) error {
			_, err := io.WriteString(out, body)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := write("v2")
	if !g.HasBackup || g.ID != f.ID || g.SHA256 != sum("v2") {
		t.Fatalf("after modify: %+v", g)
	}
	write("v3")
	if got := readAll(t, w, "a.txt"); got != "v3" {
		t.Fatalf("body %q", got)
	}
	r, err := w.Revert(ctx, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, w, "a.txt"); got != "v1" || r.HasBackup || r.SHA256 != sum("v1") {
		t.Fatalf("revert restored %q (%+v); want the body before the first modification", got, r)
	}
	if _, err := w.Revert(ctx, "a.txt"); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("second revert: %v", err)
	}
	// A failing modification changes nothing.
	_, err = w.Modify(ctx, "a.txt", func(cur *File, p string, out io.Writer) error {
		io.WriteString(out, "half")
		return apierr.New(apierr.UnsupportedFormat, "nope")
	})
	if apierr.CodeOf(err) != apierr.UnsupportedFormat || readAll(t, w, "a.txt") != "v1" {
		t.Fatalf("failed modify: %v", err)
	}
	// Events: created, modified×3 (v2, v3, revert).
	var types []string
	timeout := time.After(time.Second)
	for len(types) < 4 {
		select {
		case e := <-events:
			types = append(types, e.Type)
			if e.Data["id"] != f.ID {
				t.Fatalf("event for another file: %+v", e)
			}
		case <-timeout:
			t.Fatalf("events: %v", types)
		}
	}
	if strings.Join(types, ",") != "file:created,file:modified,file:modified,file:modified" {
		t.Fatalf("events: %v", types)
	}
	// Replay from a sequence number.
	replay, cancel2 := s.Bus().Subscribe("default", 2)
	defer cancel2()
	if e := <-replay; e.Seq != 3 {
		t.Fatalf("replay started at %d", e.Seq)
	}
	checkClean(t, s)
}

func TestSizeAndQuotaLimits(t *testing.T) {
	s := openTest(t, Config{MaxFileSize: 1000, MaxWorkspaceSize: 2500})
	w := s.Workspace("default")
	ctx := context.Background()
	if _, err := w.Create(ctx, CreateOptions{Name: "big"}, bytes.NewReader(make([]byte, 1001))); apierr.CodeOf(err) != apierr.TooLarge {
		t.Fatalf("per-file limit: %v", err)
	}
	create(t, w, "a", strings.Repeat("a", 1000))
	create(t, w, "b", strings.Repeat("b", 1000))
	if _, err := w.Create(ctx, CreateOptions{Name: "c"}, bytes.NewReader(make([]byte, 600))); apierr.CodeOf(err) != apierr.QuotaExceeded {
		t.Fatalf("quota: %v", err)
	}
	// A modification needs room for the new body while the old one stays
	// as the backup: with 2,000 of 2,500 bytes used, rewriting "a" is over.
	_, err := w.Modify(ctx, "a", func(_ *File, _ string, out io.Writer) error {
		_, err := out.Write(make([]byte, 600))
		return err
	})
	if apierr.CodeOf(err) != apierr.QuotaExceeded || readAll(t, w, "a") != strings.Repeat("a", 1000) {
		t.Fatalf("rewrite past the quota: %v", err)
	}
	// Growing a file past the per-file limit fails and keeps the old body.
	o := s.Workspace("grow")
	create(t, o, "a", strings.Repeat("a", 1000))
	_, err = o.Modify(ctx, "a", func(_ *File, _ string, out io.Writer) error {
		_, err := out.Write(make([]byte, 1000))
		if err != nil {
			return err
		}
		_, err = out.Write(make([]byte, 1))
		return err
	})
	if apierr.CodeOf(err) != apierr.TooLarge {
		t.Fatalf("grow past file limit: %v", err)
	}
	if readAll(t, o, "a") != strings.Repeat("a", 1000) {
		t.Fatal("failed write changed the file")
	}
	// Other workspaces have their own quota.
	create(t, s.Workspace("other"), "c", strings.Repeat("c", 1000))
	checkClean(t, s)
	if s.reserved["default"] != 0 || s.reserved["other"] != 0 || s.reserved["grow"] != 0 {
		t.Fatalf("reservations leaked: %v", s.reserved)
	}
}

func TestConcurrentWritersNeverExceedQuota(t *testing.T) {
	s := openTest(t, Config{MaxFileSize: 100_000, MaxWorkspaceSize: 1_000_000})
	w := s.Workspace("default")
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := w.Create(context.Background(), CreateOptions{Name: fmt.Sprintf("f%02d", i)}, &slowReader{n: 90_000})
			if err == nil {
				ok.Add(1)
			} else if apierr.CodeOf(err) != apierr.QuotaExceeded {
				t.Errorf("unexpected: %v", err)
			}
		}(i)
	}
	wg.Wait()
	used, _, _ := w.Usage()
	if used > 1_000_000 || ok.Load() == 0 || used != ok.Load()*90_000 {
		t.Fatalf("used %d bytes with %d files; quota is 1,000,000", used, ok.Load())
	}
	// Nothing stays reserved: the rest of the quota is usable, not a byte more.
	free := 1_000_000 - used
	for free > 0 {
		n := min(free, 100_000)
		if _, err := w.Create(context.Background(), CreateOptions{Name: fmt.Sprintf("fill%d", free)}, bytes.NewReader(make([]byte, n))); err != nil {
			t.Fatalf("filling the free quota: %v", err)
		}
		free -= n
	}
	if _, err := w.Create(context.Background(), CreateOptions{Name: "one-more"}, strings.NewReader("x")); apierr.CodeOf(err) != apierr.QuotaExceeded {
		t.Fatalf("one byte over: %v", err)
	}
	checkClean(t, s)
}

// slowReader yields n bytes in small chunks so that writers interleave.
type slowReader struct{ n int }

func (r *slowReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), 7000, r.n)
	r.n -= k
	time.Sleep(100 * time.Microsecond)
	return k, nil
}

func TestModifyIsSerialisedPerFile(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	create(t, w, "log.txt", "")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 25; j++ {
				_, err := w.Modify(context.Background(), "log.txt", func(_ *File, cur string, out io.Writer) error {
					b, err := os.ReadFile(cur)
					if err != nil {
						return err
					}
					out.Write(b)
					_, err = fmt.Fprintf(out, "%d-%d\n", i, j)
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}
		}(i)
	}
	wg.Wait()
	if n := strings.Count(readAll(t, w, "log.txt"), "\n"); n != 200 {
		t.Fatalf("lost updates: %d lines, want 200", n)
	}
	checkClean(t, s)
}

func TestCopyRename(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	f := create(t, w, "a.csv", "x,y\n")
	c, err := w.Copy(ctx, "a.csv", "b.csv", false)
	if err != nil || c.ID == f.ID || c.Source != SourceDerived || readAll(t, w, "b.csv") != "x,y\n" {
		t.Fatalf("copy: %+v %v", c, err)
	}
	if _, err := w.Copy(ctx, "a.csv", "b.csv", false); apierr.CodeOf(err) != apierr.AlreadyExists {
		t.Fatalf("copy onto existing: %v", err)
	}
	r, err := w.Rename(ctx, f.ID, "dir/c.csv")
	if err != nil || r.ID != f.ID || r.Name != "dir/c.csv" {
		t.Fatalf("rename: %+v %v", r, err)
	}
	if _, err := w.Rename(ctx, "dir/c.csv", "b.csv"); apierr.CodeOf(err) != apierr.AlreadyExists {
		t.Fatalf("rename onto existing: %v", err)
	}
	if _, err := w.Rename(ctx, "missing", "z"); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("rename missing: %v", err)
	}
	// Overwrite keeps the id and makes a backup.
	o, err := w.Create(ctx, CreateOptions{Name: "b.csv", Overwrite: true}, strings.NewReader("new\n"))
	if err != nil || o.ID != c.ID || !o.HasBackup || readAll(t, w, "b.csv") != "new\n" {
		t.Fatalf("overwrite: %+v %v", o, err)
	}
	checkClean(t, s)
}

func TestFsckFindsAndRepairs(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	a := create(t, w, "a.txt", "aaa")
	b := create(t, w, "b.txt", "bbb")
	w.Modify(ctx, "b.txt", func(_ *File, _ string, out io.Writer) error { _, err := io.WriteString(out, "bbb2"); return err })
	b, _ = w.Resolve(ctx, b.ID)
	os.WriteFile(filepath.Join(s.filesDir, "orphan"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(s.tmpRoot, "body-1"), []byte("x"), 0o600)
	os.Remove(filepath.Join(s.filesDir, b.DiskPath)) // lost body; backup exists
	os.WriteFile(filepath.Join(s.filesDir, a.DiskPath), []byte("tampered"), 0o600)
	rep, err := s.Fsck(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, p := range rep.Problems {
		kinds[p.Kind]++
	}
	if kinds["orphan_body"] != 1 || kinds["temp_file"] != 1 || kinds["missing_body"] != 1 || kinds["size_mismatch"] != 1 {
		t.Fatalf("report: %+v", rep.Problems)
	}
	rep, _ = s.Fsck(ctx, true)
	if rep.Unrepaired() != 0 {
		t.Fatalf("unrepaired: %+v", rep.Problems)
	}
	if got := readAll(t, w, "b.txt"); got != "bbb" {
		t.Fatalf("b restored from backup: %q", got)
	}
	checkClean(t, s)
}

// checkClean asserts that fsck finds nothing wrong.
func checkClean(t testing.TB, s *Store) {
	t.Helper()
	rep, err := s.Fsck(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Fatalf("fsck found: %+v", rep.Problems)
	}
}

func TestFileNamedLikeAnID(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	idLike := "11111111-2222-3333-4444-555555555555"
	f := create(t, w, idLike, "v1")
	if f.ID == idLike {
		t.Fatal("ids are generated")
	}
	g, err := w.Modify(ctx, idLike, func(_ *File, _ string, out io.Writer) error { _, err := io.WriteString(out, "v2"); return err })
	if err != nil || g.ID != f.ID || readAll(t, w, f.ID) != "v2" {
		t.Fatalf("modify by an id-shaped name: %+v %v", g, err)
	}
	if err := w.Delete(ctx, idLike); err != nil {
		t.Fatal(err)
	}
	checkClean(t, s)
}

// A data directory written by the previous version (no backup columns, no
// event tables) opens: existing backups start counting toward the quota
// and still revert.
func TestOpenMigratesOlderSchema(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"files", "backups"} {
		os.MkdirAll(filepath.Join(dir, d), 0o750)
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "metaclaw.db"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`CREATE TABLE agent_files (
		_id TEXT PRIMARY KEY, workspace TEXT NOT NULL, name TEXT NOT NULL, mime_type TEXT NOT NULL,
		size INTEGER NOT NULL, disk_path TEXT NOT NULL,
		source TEXT NOT NULL CHECK (source IN ('upload','created','derived')),
		source_session_id TEXT NOT NULL DEFAULT '', created_on TEXT NOT NULL, modified_on TEXT NOT NULL,
		sha256 TEXT NOT NULL, has_backup INTEGER NOT NULL DEFAULT 0, UNIQUE (workspace, name));
	INSERT INTO agent_files VALUES ('6f1c1a56-8d3e-4a59-9a43-0d7f2d2b0c11', 'default', 'notes.md', 'text/markdown', 3, 'body-v2',
		'created', '', '2024-01-01T00:00:00.000000000Z', '2024-01-02T00:00:00.000000000Z', ?, 1)`, sum("new"))
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "files", "body-v2"), []byte("new"), 0o600)
	os.WriteFile(filepath.Join(dir, "backups", "6f1c1a56-8d3e-4a59-9a43-0d7f2d2b0c11"), []byte("# old notes\n"), 0o600)

	s := openTest(t, Config{Dir: dir})
	w := s.Workspace("default")
	u, err := w.UsageDetail(context.Background())
	if err != nil || u.Files != 3 || u.Backups != 12 {
		t.Fatalf("usage of a migrated workspace: %+v %v", u, err)
	}
	checkClean(t, s)
	r, err := w.Revert(context.Background(), "notes.md")
	if err != nil || r.Size != 12 || r.SHA256 != sum("# old notes\n") || r.MimeType != "text/markdown" || readAll(t, w, "notes.md") != "# old notes\n" {
		t.Fatalf("revert of a backup kept by the previous version: %+v %v", r, err)
	}
	events, cancel := s.Bus().Subscribe("default", 0)
	defer cancel()
	create(t, w, "new.txt", "x")
	if e := <-events; e.Seq != 2 || e.Type != EventCreated { // 1 was the revert
		t.Fatalf("events after migration: %+v", e)
	}
	checkClean(t, s)
	// A second open of the migrated directory changes nothing.
	s2 := openTest(t, Config{Dir: dir})
	if fs, _ := s2.Workspace("default").List(context.Background(), ""); len(fs) != 2 {
		t.Fatalf("files after reopening: %v", fs)
	}
}

// After Close, a subscription is inert (never closed under the subscriber,
// which would make it resubscribe in a loop) until it is cancelled.
func TestSubscribeAfterClose(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	live, _ := s.Bus().Subscribe("default", 0)
	s.Close()
	if _, ok := <-live; ok {
		t.Fatal("a live subscription got an event at Close")
	}
	ch, cancel := s.Bus().Subscribe("default", 5)
	select {
	case e, ok := <-ch:
		t.Fatalf("inert subscription delivered %+v %v", e, ok)
	default:
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("cancel did not end the subscription")
	}
}
