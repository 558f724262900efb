package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// gatedReader yields its content in two halves: the first at once, the
// second only after release is closed. started is closed when the first
// half has been read (the write is in progress).
type gatedReader struct {
	first, second string
	started       chan struct{}
	release       chan struct{}
	ctx           context.Context
	step          int
}

func newGated(first, second string) *gatedReader {
	return &gatedReader{first: first, second: second, started: make(chan struct{}), release: make(chan struct{}), ctx: context.Background()}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	g.step++
	switch g.step {
	case 1:
		return copy(p, g.first), nil
	case 2:
		close(g.started)
		select {
		case <-g.release:
		case <-g.ctx.Done():
			return 0, g.ctx.Err()
		}
		return copy(p, g.second), nil
	}
	return 0, io.EOF
}

// A slow upload that overwrites a file holds nothing while its bytes
// arrive: readers (Open, View, by name and by id) complete and see the old
// body, another writer of the same file commits, and the upload's body
// replaces the file only when it is whole.
func TestSlowOverwriteDoesNotBlockReaders(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	f := create(t, w, "report.txt", "old\n")
	up := newGated("new first half\n", "new second half\n")
	done := make(chan error, 1)
	go func() {
		_, err := w.Create(ctx, CreateOptions{Name: "report.txt", Overwrite: true}, up)
		done <- err
	}()
	<-up.started
	for _, ref := range []string{"report.txt", f.ID} {
		if got := readAll(t, w, ref); got != "old\n" {
			t.Fatalf("reader during the upload saw %q", got)
		}
		err := w.View(ctx, ref, func(cur *File, path string) error {
			b, err := os.ReadFile(path)
			if string(b) != "old\n" || cur.SHA256 != sum("old\n") {
				return fmt.Errorf("view saw %q (%v)", b, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Even a writer of the same file is not held up by the upload.
	if _, err := w.Modify(ctx, "report.txt", func(_ *File, _ string, out io.Writer) error {
		_, err := io.WriteString(out, "edited meanwhile\n")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	close(up.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, w, "report.txt"); got != "new first half\nnew second half\n" {
		t.Fatalf("after the upload: %q", got)
	}
	g, _ := w.Resolve(ctx, "report.txt")
	if g.ID != f.ID {
		t.Fatal("overwrite changed the id")
	}
	checkClean(t, s)
}

// A modification in progress (its fn still working) does not stop readers
// either: they see the current body until the new one commits.
func TestModifyInProgressDoesNotBlockReaders(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	create(t, w, "a.txt", "v1")
	inside, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := w.Modify(ctx, "a.txt", func(_ *File, _ string, out io.Writer) error {
			io.WriteString(out, "v2")
			close(inside)
			<-finish
			return nil
		})
		done <- err
	}()
	<-inside
	if got := readAll(t, w, "a.txt"); got != "v1" {
		t.Fatalf("reader during a modification: %q", got)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, w, "a.txt"); got != "v2" {
		t.Fatalf("after: %q", got)
	}
}

// A reader that opened a body keeps reading it whole while writers replace
// and delete the file; the replaced bodies are removed when it is done.
func TestOpenReaderOutlivesWriters(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	old := strings.Repeat("old body\n", 1000)
	f := create(t, w, "a.txt", old)
	r, err := w.Open(ctx, "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	err = w.View(ctx, "a.txt", func(_ *File, path string) error {
		for i := 0; i < 3; i++ {
			if _, err := w.Modify(ctx, f.ID, func(_ *File, _ string, out io.Writer) error {
				_, err := fmt.Fprintf(out, "v%d", i)
				return err
			}); err != nil {
				return err
			}
		}
		b, err := os.ReadFile(path) // the path handed out still holds the old body
		seen = string(b)
		return err
	})
	if err != nil || seen != old {
		t.Fatalf("view across modifications: %v, saw %d bytes", err, len(seen))
	}
	if err := w.Delete(ctx, "a.txt"); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil || string(b) != old {
		t.Fatalf("reader across delete: %v, %d bytes", err, len(b))
	}
	r.Close()
	entries, _ := os.ReadDir(s.filesDir)
	if len(entries) != 1 { // only .tmp
		t.Fatalf("bodies left after the last reader: %d entries", len(entries))
	}
	checkClean(t, s)
}

// nothingLeft asserts that a failed or interrupted write left no trace: no
// temp file, no body, no reservation, and the files as they were.
func nothingLeft(t *testing.T, s *Store, ws string, wantFiles int) {
	t.Helper()
	tmp, _ := os.ReadDir(s.tmp.path)
	if len(tmp) != 0 {
		t.Fatalf("temp files left: %d", len(tmp))
	}
	s.quotaMu.Lock()
	r := s.reserved[ws]
	s.quotaMu.Unlock()
	if r != 0 {
		t.Fatalf("%d bytes still reserved", r)
	}
	files, _ := s.Workspace(ws).List(context.Background(), "")
	if len(files) != wantFiles {
		t.Fatalf("%d files, want %d", len(files), wantFiles)
	}
	checkClean(t, s)
}

func TestInterruptedWritesLeaveNothing(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	create(t, w, "keep.txt", "kept")

	// The caller goes away while the body streams (client left, run ended).
	ctx, cancel := context.WithCancel(context.Background())
	up := newGated(strings.Repeat("x", 100_000), "never")
	up.ctx = ctx
	done := make(chan error, 1)
	go func() {
		_, err := w.Create(ctx, CreateOptions{Name: "big.bin"}, up)
		done <- err
	}()
	<-up.started
	s.quotaMu.Lock()
	inflight := s.reserved["default"]
	s.quotaMu.Unlock()
	if inflight != 100_000 {
		t.Fatalf("in flight: %d bytes reserved, want 100000", inflight)
	}
	cancel()
	if err := <-done; apierr.CodeOf(err) != apierr.Timeout {
		t.Fatalf("cancelled upload: %v", err)
	}
	nothingLeft(t, s, "default", 1)

	// The same for an overwrite, and for a modification whose caller is
	// gone by the time its content is ready.
	ctx, cancel = context.WithCancel(context.Background())
	up = newGated("half", "never")
	up.ctx = ctx
	go func() {
		_, err := w.Create(ctx, CreateOptions{Name: "keep.txt", Overwrite: true}, up)
		done <- err
	}()
	<-up.started
	cancel()
	if err := <-done; apierr.CodeOf(err) != apierr.Timeout || readAll(t, w, "keep.txt") != "kept" {
		t.Fatalf("cancelled overwrite: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	_, err := w.Modify(ctx, "keep.txt", func(_ *File, _ string, out io.Writer) error {
		io.WriteString(out, "changed")
		cancel()
		return nil
	})
	if apierr.CodeOf(err) != apierr.Timeout || readAll(t, w, "keep.txt") != "kept" {
		t.Fatalf("modification cancelled: %v", err)
	}
	nothingLeft(t, s, "default", 1)
}

// A process that exits with writes in flight (the CLI after a run) stops
// them: Close leaves no temp file or body behind.
func TestCloseStopsWritesInFlight(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	w := s.Workspace("default")
	create(t, w, "keep.txt", "kept")
	up := newGated(strings.Repeat("y", 50_000), strings.Repeat("z", 50_000))
	done := make(chan error, 1)
	go func() {
		_, err := w.Create(context.Background(), CreateOptions{Name: "late.bin"}, up)
		done <- err
	}()
	<-up.started
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Close waits for the write; once it has begun, the source delivers
	// its last bytes, and the writer sees the store closing and gives up.
	<-s.stop.Done()
	close(up.release)
	if err := <-done; apierr.CodeOf(err) != apierr.FileWriteFailed || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("write during Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := w.Create(context.Background(), CreateOptions{Name: "after"}, strings.NewReader("x")); err == nil {
		t.Fatal("a write after Close succeeded")
	}
	s = openTest(t, Config{Dir: dir})
	entries, _ := os.ReadDir(s.tmpRoot)
	if len(entries) != 1 {
		t.Fatalf("temp directories after a clean close: %d, want only the new store's", len(entries))
	}
	nothingLeft(t, s, "default", 1)
}

// Start-up removes what dead processes left and never touches a live
// process's writes in flight (a CLI starting beside a server).
func TestStartupCleansOnlyDeadProcessesLeftovers(t *testing.T) {
	dir := t.TempDir()
	live := openTest(t, Config{Dir: dir})
	lw := live.Workspace("default")
	create(t, lw, "a.txt", "a")
	up := newGated("in flight", " and more")
	done := make(chan error, 1)
	go func() {
		_, err := lw.Create(context.Background(), CreateOptions{Name: "slow.txt"}, up)
		done <- err
	}()
	<-up.started

	// A crashed process: its temp directory (unlocked), an unreferenced
	// body and a stray backup; and a loose temp file of an older version.
	dead := filepath.Join(live.tmpRoot, "999999.12345")
	os.MkdirAll(dead, 0o750)
	os.WriteFile(filepath.Join(dead, "body-1"), []byte("partial"), 0o600)
	os.WriteFile(filepath.Join(live.filesDir, "11111111-0000-0000-0000-000000000000"), []byte("orphan"), 0o600)
	os.WriteFile(filepath.Join(live.backDir, "22222222-0000-0000-0000-000000000000"), []byte("orphan"), 0o600)
	os.WriteFile(filepath.Join(live.tmpRoot, "body-old"), []byte("old"), 0o600)

	cli := openTest(t, Config{Dir: dir})
	for _, gone := range []string{dead, filepath.Join(live.filesDir, "11111111-0000-0000-0000-000000000000"),
		filepath.Join(live.backDir, "22222222-0000-0000-0000-000000000000"), filepath.Join(live.tmpRoot, "body-old")} {
		if _, err := os.Lstat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("left behind by start-up: %s (%v)", filepath.Base(gone), err)
		}
	}
	if tmp, _ := os.ReadDir(live.tmp.path); len(tmp) != 1 {
		t.Fatalf("the live process's temp file was touched: %d entries", len(tmp))
	}
	close(up.release)
	if err := <-done; err != nil {
		t.Fatalf("the live write after the other process started: %v", err)
	}
	if got := readAll(t, cli.Workspace("default"), "slow.txt"); got != "in flight and more" {
		t.Fatalf("live write: %q", got)
	}
	checkClean(t, cli)
}

// fsck --repair beside busy writers (the race of issue 11, where it deleted
// committed bodies): after any number of passes, every file reads back
// exactly what its last write wrote.
func TestFsckRaceWithWriters(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, Config{Dir: dir})
	// fsck runs from another Store on the same directory, as the CLI would.
	checker := openTest(t, Config{Dir: dir})
	w := s.Workspace("default")
	ctx := context.Background()
	const writers, rounds = 4, 30
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				name := fmt.Sprintf("w%d-%d.txt", i, r%3)
				body := fmt.Sprintf("writer %d round %d\n", i, r)
				if _, err := w.Create(ctx, CreateOptions{Name: name, Overwrite: true}, strings.NewReader(body)); err != nil {
					t.Error(err)
					return
				}
				if r%5 == 4 {
					if _, err := w.Rename(ctx, name, name+".renamed"); err != nil {
						t.Error(err)
						return
					}
					if err := w.Delete(ctx, name+".renamed"); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}(i)
	}
	var passes int
	var repaired []Problem
	fsckDone := make(chan struct{})
	go func() {
		defer close(fsckDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			rep, err := checker.Fsck(ctx, true)
			if err != nil {
				t.Error(err)
				return
			}
			passes++
			repaired = append(repaired, rep.Problems...)
		}
	}()
	wg.Wait()
	close(stop)
	<-fsckDone
	for _, p := range repaired {
		if p.Kind != "orphan_body" {
			// Only bodies replaced a moment ago (retired, not yet
			// removed by their writer) may show up.
			t.Errorf("fsck beside writers reported %+v", p)
		}
	}
	// Each writer's last rounds: 27 wrote w-0, 28 wrote w-1, 29 wrote,
	// renamed and deleted w-2.
	for i := 0; i < writers; i++ {
		for r, name := range map[int]string{27: fmt.Sprintf("w%d-0.txt", i), 28: fmt.Sprintf("w%d-1.txt", i)} {
			if got, want := readAll(t, w, name), fmt.Sprintf("writer %d round %d\n", i, r); got != want {
				t.Fatalf("%s: %q, want %q", name, got, want)
			}
		}
		if _, err := w.Resolve(ctx, fmt.Sprintf("w%d-2.txt", i)); apierr.CodeOf(err) != apierr.NotFound {
			t.Fatalf("deleted file: %v", err)
		}
	}
	files, _ := w.List(ctx, "")
	if len(files) != 2*writers {
		t.Fatalf("%d files, want %d", len(files), 2*writers)
	}
	for _, f := range files {
		got := readAll(t, w, f.ID)
		if sum(got) != f.SHA256 || int64(len(got)) != f.Size {
			t.Fatalf("%s: body %q disagrees with its metadata", f.Name, got)
		}
	}
	if passes == 0 {
		t.Fatal("fsck never ran")
	}
	checkClean(t, s)
}

// Readers racing writers never fail and never see a torn body: by name and
// by id, through Open and View, while writers replace the file's body as
// fast as they can. With a writer in another process (a second Store on
// the same directory, as a CLI beside a server), Open still never fails: a
// body removed between the lookup and the open sends it back to the
// metadata. (View hands out a path; another process's writer may remove
// that body while fn reads it, which fn sees as a failed read.)
func TestReadersNeverFailDuringOverwrites(t *testing.T) {
	for _, crossProcess := range []bool{false, true} {
		t.Run(fmt.Sprint("crossProcess=", crossProcess), func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, Config{Dir: dir})
			w := s.Workspace("default")
			writer := w
			if crossProcess {
				writer = openTest(t, Config{Dir: dir}).Workspace("default")
			}
			readersRace(t, w, writer, !crossProcess)
			checkClean(t, s)
		})
	}
}

func readersRace(t *testing.T, w, writer *Workspace, withView bool) {
	ctx := context.Background()
	body := func(k int) string { return strings.Repeat(fmt.Sprintf("version %04d\n", k), 200) }
	f := create(t, w, "hot.txt", body(0))
	valid := func(got string) bool {
		var k int
		_, err := fmt.Sscanf(got, "version %04d\n", &k)
		return err == nil && got == body(k)
	}
	stop := make(chan struct{})
	done := make(chan int)
	for r := 0; r < 2; r++ {
		go func(r int) {
			n := 0
			defer func() { done <- n }()
			for ; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				ref := []string{"hot.txt", f.ID}[n%2]
				var got string
				var err error
				if r == 1 && withView {
					err = w.View(ctx, ref, func(_ *File, path string) error {
						b, err := os.ReadFile(path)
						got = string(b)
						return err
					})
				} else {
					var rd *Reader
					if rd, err = w.Open(ctx, ref); err == nil {
						var b []byte
						b, err = io.ReadAll(rd)
						rd.Close()
						got = string(b)
					}
				}
				if err != nil || !valid(got) {
					t.Errorf("read %d of %s: %v, %d bytes", n, ref, err, len(got))
					return
				}
			}
		}(r)
	}
	for k := 1; k <= 25; k++ {
		if _, err := writer.Create(ctx, CreateOptions{Name: "hot.txt", Overwrite: true}, strings.NewReader(body(k))); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if n := <-done + <-done; n == 0 {
		t.Fatal("no reads happened")
	}
	if got := readAll(t, w, "hot.txt"); got != body(25) {
		t.Fatalf("final body: %q", got[:20])
	}
}
