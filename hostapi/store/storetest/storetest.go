// Package storetest is the store's conformance suite: the behaviour of the
// Workspace API, the event bus and the tool store, written once and run
// against every backend (the local SQLite one in hostapi/store, the NATS
// one in hostapi/store/natsstore), after litestream's RunWithReplicaClient.
package storetest

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Opener opens a fresh, empty store with cfg's limits (Dir and Backend
// are the opener's business). It registers the store's Close.
type Opener func(t testing.TB, cfg store.Config) *store.Store

// Run runs every conformance test against the stores open makes.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"CreateResolveListDelete", testCreateResolveListDelete},
		{"OpenAndView", testOpenAndView},
		{"ModifyBackupRevert", testModifyBackupRevert},
		{"SizeAndQuota", testSizeAndQuota},
		{"RacingWritersNeverExceedQuota", testRacingWritersNeverExceedQuota},
		{"ModifyIsSerialised", testModifyIsSerialised},
		{"CopyRename", testCopyRename},
		{"Charges", testCharges},
		{"Events", testEvents},
		{"TTL", testTTL},
		{"Tools", testTools},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

var bg = context.Background()

// Create stores body as name, failing the test on error.
func Create(t testing.TB, w *store.Workspace, name, body string) *store.File {
	t.Helper()
	f, err := w.Create(bg, store.CreateOptions{Name: name}, strings.NewReader(body))
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return f
}

// Read returns ref's body, failing the test on error.
func Read(t testing.TB, w *store.Workspace, ref string) string {
	t.Helper()
	r, err := w.Open(bg, ref)
	if err != nil {
		t.Fatalf("open %s: %v", ref, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// WantCode fails the test unless err carries code.
func WantCode(t testing.TB, err error, code apierr.Code) {
	t.Helper()
	if !apierr.Is(err, code) {
		t.Fatalf("got %v, want %s", err, code)
	}
}

// Next returns the next event from ch within 10 s.
func Next(t testing.TB, ch <-chan store.Event) store.Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("event channel closed")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return store.Event{}
}

func names(fs []store.File) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Name)
	}
	return strings.Join(out, ",")
}

func testCreateResolveListDelete(t *testing.T, open Opener) {
	s := open(t, store.Config{})
	w := s.Workspace("default")
	a := Create(t, w, "notes/a.txt", "hello\n")
	if a.Size != 6 || a.MimeType != "text/plain" || a.Source != store.SourceCreated || len(a.SHA256) != 64 || a.HasBackup {
		t.Fatalf("created %+v", a)
	}
	Create(t, w, "data/b.csv", "x,y\n1,2\n")
	for _, ref := range []string{a.ID, "notes/a.txt", "/notes/a.txt", strings.ToUpper(a.ID)} {
		f, err := w.Resolve(bg, ref)
		if err != nil || f.ID != a.ID || f.Name != "notes/a.txt" || f.SHA256 != a.SHA256 {
			t.Fatalf("resolve %q: %+v %v", ref, f, err)
		}
	}
	_, err := w.Resolve(bg, "missing.txt")
	WantCode(t, err, apierr.NotFound)
	_, err = w.Resolve(bg, " ")
	WantCode(t, err, apierr.ValidationFailed)
	if got, _ := w.List(bg, ""); names(got) != "data/b.csv,notes/a.txt" {
		t.Fatalf("list: %s", names(got))
	}
	if got, _ := w.List(bg, "*.csv"); names(got) != "data/b.csv" {
		t.Fatalf("list *.csv: %s", names(got))
	}
	// Another workspace sees nothing of this one.
	if got, _ := s.Workspace("other").List(bg, ""); len(got) != 0 {
		t.Fatalf("other workspace lists %s", names(got))
	}
	_, err = w.Create(bg, store.CreateOptions{Name: "notes/a.txt"}, strings.NewReader("again"))
	WantCode(t, err, apierr.AlreadyExists)
	if Read(t, w, "notes/a.txt") != "hello\n" {
		t.Fatal("a refused create changed the file")
	}
	o, err := w.Create(bg, store.CreateOptions{Name: "notes/a.txt", Overwrite: true}, strings.NewReader("again"))
	if err != nil || o.ID != a.ID || Read(t, w, a.ID) != "again" || !o.HasBackup {
		t.Fatalf("overwrite: %+v %v", o, err)
	}
	_, err = w.Create(bg, store.CreateOptions{Name: "../x"}, strings.NewReader("x"))
	WantCode(t, err, apierr.ValidationFailed)
	if err := w.Delete(bg, a.ID); err != nil {
		t.Fatal(err)
	}
	_, err = w.Resolve(bg, a.ID)
	WantCode(t, err, apierr.NotFound)
	WantCode(t, w.Delete(bg, a.ID), apierr.NotFound)
	if got, _ := w.List(bg, ""); names(got) != "data/b.csv" {
		t.Fatalf("list after delete: %s", names(got))
	}
	// The name is free again.
	if b := Create(t, w, "notes/a.txt", "new"); b.ID == a.ID || Read(t, w, "notes/a.txt") != "new" {
		t.Fatalf("re-created %+v", b)
	}
}

func testOpenAndView(t *testing.T, open Opener) {
	s := open(t, store.Config{})
	w := s.Workspace("default")
	body := strings.Repeat("0123456789", 100_000) // 1 MB
	f := Create(t, w, "big.txt", body)
	err := w.View(bg, "big.txt", func(got *store.File, path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if got.ID != f.ID || string(b) != body {
			return fmt.Errorf("view gave %d bytes of %s", len(b), got.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := w.Open(bg, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := r.ReadAt(buf, 999_990); err != nil || string(buf) != "0123456789" || r.Meta.Size != 1_000_000 {
		t.Fatalf("ReadAt: %q %v", buf, err)
	}
	// A reader keeps its body while a writer replaces it.
	if _, err := w.Create(bg, store.CreateOptions{Name: "big.txt", Overwrite: true}, strings.NewReader("small")); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	r.Close()
	if string(rest) != body {
		t.Fatalf("the open reader saw %d bytes", len(rest))
	}
	if Read(t, w, "big.txt") != "small" {
		t.Fatal("the new body is not read back")
	}
	WantCode(t, w.View(bg, "nope", func(*store.File, string) error { return nil }), apierr.NotFound)
}

func testModifyBackupRevert(t *testing.T, open Opener) {
	s := open(t, store.Config{})
	w := s.Workspace("default")
	f := Create(t, w, "doc.md", "v1\n")
	appendLine := func(line string) *store.File {
		t.Helper()
		nf, err := w.Modify(bg, f.ID, func(cur *store.File, path string, out io.Writer) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			_, err = out.Write(append(b, line...))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return nf
	}
	m := appendLine("v2\n")
	if !m.HasBackup || m.Size != 6 || Read(t, w, "doc.md") != "v1\nv2\n" || m.MimeType != "text/markdown" {
		t.Fatalf("modified %+v", m)
	}
	appendLine("v3\n")
	used, _, _ := w.Usage()
	if used != 9+3 { // body + the backup of the first version
		t.Fatalf("usage %d, want 12", used)
	}
	// A failing modification changes nothing.
	_, err := w.Modify(bg, f.ID, func(*store.File, string, io.Writer) error {
		return apierr.New(apierr.ValidationFailed, "nope")
	})
	WantCode(t, err, apierr.ValidationFailed)
	r, err := w.Revert(bg, "doc.md")
	if err != nil || r.Size != 3 || r.HasBackup || Read(t, w, f.ID) != "v1\n" {
		t.Fatalf("revert: %+v %v", r, err)
	}
	_, err = w.Revert(bg, "doc.md")
	WantCode(t, err, apierr.NotFound)
	if used, _, _ := w.Usage(); used != 3 {
		t.Fatalf("usage after revert %d, want 3", used)
	}
}

func testSizeAndQuota(t *testing.T, open Opener) {
	s := open(t, store.Config{MaxFileSize: 100, MaxWorkspaceSize: 250})
	w := s.Workspace("default")
	_, err := w.Create(bg, store.CreateOptions{Name: "big"}, strings.NewReader(strings.Repeat("x", 101)))
	WantCode(t, err, apierr.TooLarge)
	Create(t, w, "a", strings.Repeat("a", 100))
	Create(t, w, "b", strings.Repeat("b", 100))
	_, err = w.Create(bg, store.CreateOptions{Name: "c"}, strings.NewReader(strings.Repeat("c", 60)))
	WantCode(t, err, apierr.QuotaExceeded)
	if got, _ := w.List(bg, ""); names(got) != "a,b" {
		t.Fatalf("a refused write left %s", names(got))
	}
	u, err := w.UsageDetail(bg)
	if err != nil || u.Files != 200 || u.Backups != 0 || u.InFlight != 0 || u.Limit != 250 {
		t.Fatalf("usage %+v %v", u, err)
	}
	// An overwrite keeps the old body as backup: it needs room for both.
	_, err = w.Create(bg, store.CreateOptions{Name: "a", Overwrite: true}, strings.NewReader(strings.Repeat("z", 60)))
	WantCode(t, err, apierr.QuotaExceeded)
	if Read(t, w, "a") != strings.Repeat("a", 100) {
		t.Fatal("a refused overwrite changed the file")
	}
	if err := w.Delete(bg, "b"); err != nil {
		t.Fatal(err)
	}
	Create(t, w, "c", strings.Repeat("c", 50))
	if used, limit, _ := w.Usage(); used != 150 || limit != 250 {
		t.Fatalf("usage %d/%d", used, limit)
	}
}

func testRacingWritersNeverExceedQuota(t *testing.T, open Opener) {
	s := open(t, store.Config{MaxWorkspaceSize: 1000})
	w := s.Workspace("default")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.Create(bg, store.CreateOptions{Name: fmt.Sprintf("f%d", i)}, strings.NewReader(strings.Repeat("x", 300)))
			if err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			} else if !apierr.Is(err, apierr.QuotaExceeded) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	used, _, _ := w.Usage()
	files, _ := w.List(bg, "")
	if used > 1000 || used != int64(ok*300) || len(files) != ok || ok < 1 {
		t.Fatalf("used %d with %d files (%d successes)", used, len(files), ok)
	}
	if u, _ := w.UsageDetail(bg); u.InFlight != 0 {
		t.Fatalf("reservations left: %+v", u)
	}
}

func testModifyIsSerialised(t *testing.T, open Opener) {
	s := open(t, store.Config{})
	w := s.Workspace("default")
	Create(t, w, "log.txt", "")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				_, err := w.Modify(bg, "log.txt", func(cur *store.File, path string, out io.Writer) error {
					b, err := os.ReadFile(path)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(out, "%sg%d-%d\n", b, g, i)
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(Read(t, w, "log.txt"), "\n"); n != 40 {
		t.Fatalf("%d lines, want 40", n)
	}
}

func testCopyRename(t *testing.T, open Opener) {
	s := open(t, store.Config{})
	w := s.Workspace("default")
	a := Create(t, w, "a.txt", "A")
	Create(t, w, "b.txt", "B")
	c, err := w.Copy(bg, "a.txt", "c.txt", false)
	if err != nil || c.ID == a.ID || c.Source != store.SourceDerived || Read(t, w, "c.txt") != "A" {
		t.Fatalf("copy: %+v %v", c, err)
	}
	_, err = w.Rename(bg, "a.txt", "b.txt")
	WantCode(t, err, apierr.AlreadyExists)
	r, err := w.Rename(bg, a.ID, "dir/renamed.txt")
	if err != nil || r.ID != a.ID || r.Name != "dir/renamed.txt" {
		t.Fatalf("rename: %+v %v", r, err)
	}
	_, err = w.Resolve(bg, "a.txt")
	WantCode(t, err, apierr.NotFound)
	if Read(t, w, "dir/renamed.txt") != "A" {
		t.Fatal("renamed body")
	}
	if got, _ := w.List(bg, ""); names(got) != "b.txt,c.txt,dir/renamed.txt" {
		t.Fatalf("list: %s", names(got))
	}
	// The old name is free.
	Create(t, w, "a.txt", "again")
}

func testCharges(t *testing.T, open Opener) {
	s := open(t, store.Config{MaxWorkspaceSize: 1000})
	w := s.Workspace("default")
	Create(t, w, "a", strings.Repeat("a", 600))
	if err := w.Charge(bg, "tool:x", 300); err != nil {
		t.Fatal(err)
	}
	WantCode(t, w.Charge(bg, "tool:y", 200), apierr.QuotaExceeded)
	WantCode(t, w.Charge(bg, "", 1), apierr.ValidationFailed)
	WantCode(t, w.Charge(bg, "tool:z", -1), apierr.ValidationFailed)
	if n, _ := w.Charged(bg, "tool:x"); n != 300 {
		t.Fatalf("charged %d", n)
	}
	if u, _ := w.UsageDetail(bg); u.Other != 300 || u.Files != 600 {
		t.Fatalf("usage %+v", u)
	}
	_, err := w.Create(bg, store.CreateOptions{Name: "b"}, strings.NewReader(strings.Repeat("b", 101)))
	WantCode(t, err, apierr.QuotaExceeded)
	if err := w.Charge(bg, "tool:x", 0); err != nil {
		t.Fatal(err)
	}
	if n, _ := w.Charged(bg, "tool:x"); n != 0 {
		t.Fatalf("charged %d after removal", n)
	}
	Create(t, w, "b", strings.Repeat("b", 300))
}

func testEvents(t *testing.T, open Opener) {
	s := open(t, store.Config{})
	w := s.Workspace("default")
	ch, cancel := s.Bus().Subscribe("default", 0)
	defer cancel()
	other, cancelOther := s.Bus().Subscribe("other", 0)
	defer cancelOther()
	f := Create(t, w, "e.txt", "1")
	e1 := Next(t, ch)
	if e1.Type != store.EventCreated || e1.Data["id"] != f.ID || e1.Data["name"] != "e.txt" || e1.Data["size"] != int64(1) || e1.Seq == 0 {
		t.Fatalf("created event %+v", e1)
	}
	if _, err := w.Create(bg, store.CreateOptions{Name: "e.txt", Overwrite: true}, strings.NewReader("22")); err != nil {
		t.Fatal(err)
	}
	e2 := Next(t, ch)
	if e2.Type != store.EventModified || e2.Data["size"] != int64(2) || e2.Seq <= e1.Seq {
		t.Fatalf("modified event %+v", e2)
	}
	if err := w.Delete(bg, f.ID); err != nil {
		t.Fatal(err)
	}
	e3 := Next(t, ch)
	if e3.Type != store.EventDeleted || e3.Data["id"] != f.ID || e3.Seq <= e2.Seq {
		t.Fatalf("deleted event %+v", e3)
	}
	select {
	case e := <-other:
		t.Fatalf("another workspace got %+v", e)
	default:
	}
	// Resuming after the first event replays the other two, then follows.
	re, cancelRe := s.Bus().Subscribe("default", e1.Seq)
	defer cancelRe()
	if a, b := Next(t, re), Next(t, re); a.Seq != e2.Seq || b.Seq != e3.Seq || b.Type != store.EventDeleted {
		t.Fatalf("replay %+v %+v", a, b)
	}
	Create(t, w, "later.txt", "x")
	if e := Next(t, re); e.Type != store.EventCreated || e.Data["name"] != "later.txt" {
		t.Fatalf("live after replay %+v", e)
	}
}

func testTTL(t *testing.T, open Opener) {
	s := open(t, store.Config{ExpirySweep: 20 * time.Millisecond})
	w := s.Workspace("default")
	ch, cancel := s.Bus().Subscribe("default", 0)
	defer cancel()
	_, err := w.Create(bg, store.CreateOptions{Name: "neg.txt", TTL: -time.Second}, strings.NewReader("x"))
	WantCode(t, err, apierr.ValidationFailed)
	keep := Create(t, w, "keep.txt", "k")
	f, err := w.Create(bg, store.CreateOptions{Name: "tmp/out.csv", TTL: 300 * time.Millisecond}, strings.NewReader("a,b\n"))
	if err != nil || f.ExpiresOn.IsZero() || f.ExpiresOn.Sub(f.CreatedOn) < 250*time.Millisecond {
		t.Fatalf("created %+v %v", f, err)
	}
	if got, _ := w.Resolve(bg, f.ID); got == nil || !got.ExpiresOn.Equal(f.ExpiresOn) {
		t.Fatalf("resolve before expiry: %+v", got)
	}
	// A modification keeps the expiry.
	m, err := w.Modify(bg, f.ID, func(_ *store.File, _ string, out io.Writer) error {
		_, err := io.WriteString(out, "a,b\n1,2\n")
		return err
	})
	if err != nil || !m.ExpiresOn.Equal(f.ExpiresOn) {
		t.Fatalf("modify: %+v %v", m, err)
	}
	for seen := false; !seen; {
		e := Next(t, ch)
		seen = e.Type == store.EventDeleted && e.Data["id"] == f.ID
	}
	if time.Now().Before(f.ExpiresOn) {
		t.Fatal("deleted before its time")
	}
	_, err = w.Resolve(bg, "tmp/out.csv")
	WantCode(t, err, apierr.NotFound)
	if got, _ := w.List(bg, ""); names(got) != "keep.txt" {
		t.Fatalf("list after expiry: %s", names(got))
	}
	if used, _, _ := w.Usage(); used != keep.Size {
		t.Fatalf("usage after expiry %d", used)
	}
	// Overwriting with a TTL gives an existing file one.
	o, err := w.Create(bg, store.CreateOptions{Name: "keep.txt", Overwrite: true, TTL: time.Hour}, strings.NewReader("k2"))
	if err != nil || o.ExpiresOn.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("overwrite with ttl: %+v %v", o, err)
	}
}

func testTools(t *testing.T, open Opener) {
	s := open(t, store.Config{MaxWorkspaceSize: 1000})
	ts := s.Tools()
	ch, cancel := s.Bus().Subscribe("default", 0)
	defer cancel()
	changes := make(chan store.ToolChange, 16)
	stopWatch := ts.Watch(func(c store.ToolChange) { changes <- c })
	defer stopWatch()
	nextChange := func() store.ToolChange {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no tool change within 10 s")
		}
		return store.ToolChange{}
	}
	_, err := ts.Get(bg, "default", "count_rows")
	WantCode(t, err, apierr.NotFound)
	tool := store.ToolRecord{Name: "count_rows", Description: "Count rows", InputSchema: []byte(`{"type":"object"}`), Code: "return 1"}
	saved, err := ts.Save(bg, "default", tool)
	if err != nil || saved.Version != 1 || saved.CreatedOn.IsZero() {
		t.Fatalf("save: %+v %v", saved, err)
	}
	if e := Next(t, ch); e.Type != store.EventToolChanged || e.Data["name"] != "count_rows" || e.Data["version"] != int64(1) || e.Data["deleted"] != false {
		t.Fatalf("event %+v", e)
	}
	if c := nextChange(); c != (store.ToolChange{Workspace: "default", Name: "count_rows", Version: 1}) {
		t.Fatalf("watched %+v", c)
	}
	tool.Code = "return 2"
	saved, err = ts.Save(bg, "default", tool)
	if err != nil || saved.Version != 2 {
		t.Fatalf("second save: %+v %v", saved, err)
	}
	Next(t, ch)
	if c := nextChange(); c != (store.ToolChange{Workspace: "default", Name: "count_rows", Version: 2}) {
		t.Fatalf("watched %+v", c)
	}
	got, err := ts.Get(bg, "default", "count_rows")
	if err != nil || got.Code != "return 2" || got.Version != 2 || string(got.InputSchema) != `{"type":"object"}` || got.Description != "Count rows" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if n, _ := s.Workspace("default").Charged(bg, store.ToolChargeKey("count_rows")); n != tool.Bytes() {
		t.Fatalf("charged %d, want %d", n, tool.Bytes())
	}
	if list, _ := ts.List(bg, "other"); len(list) != 0 {
		t.Fatalf("other workspace lists %v", list)
	}
	big := store.ToolRecord{Name: "too_big", InputSchema: []byte(`{}`), Code: strings.Repeat("x", 2000)}
	_, err = ts.Save(bg, "default", big)
	WantCode(t, err, apierr.QuotaExceeded)
	if list, _ := ts.List(bg, "default"); len(list) != 1 || list[0].Name != "count_rows" {
		t.Fatalf("list: %+v", list)
	}
	if err := ts.Delete(bg, "default", "count_rows"); err != nil {
		t.Fatal(err)
	}
	if e := Next(t, ch); e.Type != store.EventToolChanged || e.Data["deleted"] != true {
		t.Fatalf("delete event %+v", e)
	}
	if c := nextChange(); c.Workspace != "default" || c.Name != "count_rows" || !c.Deleted {
		t.Fatalf("watched %+v", c)
	}
	WantCode(t, ts.Delete(bg, "default", "count_rows"), apierr.NotFound)
	// In another workspace.
	if _, err := ts.Save(bg, "other", store.ToolRecord{Name: "elsewhere", InputSchema: []byte(`{}`), Code: "return 3"}); err != nil {
		t.Fatal(err)
	}
	if c := nextChange(); c != (store.ToolChange{Workspace: "other", Name: "elsewhere", Version: 1}) {
		t.Fatalf("watched %+v", c)
	}
	select {
	case c := <-changes:
		t.Fatalf("a refused save or delete was watched: %+v", c)
	default:
	}
	if n, _ := s.Workspace("default").Charged(bg, store.ToolChargeKey("count_rows")); n != 0 {
		t.Fatalf("charge left: %d", n)
	}
}
