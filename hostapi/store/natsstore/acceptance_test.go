package natsstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/store/storetest"
)

var bg = context.Background()

// Upload on A → a subscriber on B sees file:created → B downloads it
// byte-identical → B edits it → A reads the edit; the event ids A's
// stream gave resume on B.
func TestTwoHostsShareWorkspace(t *testing.T) {
	d := newDeployment()
	a, b := d.host(t, store.Config{}, 0), d.host(t, store.Config{}, 0)
	events, cancel := b.Bus().Subscribe("default", 0)
	defer cancel()
	fromA, cancelA := a.Bus().Subscribe("default", 0)
	defer cancelA()

	body := make([]byte, 3<<20)
	rand.Read(body)
	f, err := a.Workspace("default").Create(bg, store.CreateOptions{Name: "in/data.bin", Source: store.SourceUpload}, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	e := storetest.Next(t, events)
	if e.Type != store.EventCreated || e.Data["id"] != f.ID || e.Data["size"] != int64(len(body)) {
		t.Fatalf("B saw %+v", e)
	}
	first := storetest.Next(t, fromA)
	if first.Seq != e.Seq {
		t.Fatalf("hosts number the event differently: %d on A, %d on B", first.Seq, e.Seq)
	}
	wb := b.Workspace("default")
	if got := storetest.Read(t, wb, "in/data.bin"); got != string(body) {
		t.Fatalf("B read %d bytes, not the %d uploaded", len(got), len(body))
	}
	if _, err := wb.Modify(bg, f.ID, func(_ *store.File, path string, out io.Writer) error {
		old, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = out.Write(append(old, "edited on B"...))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// A client of A hears of the edit from A's stream; once it has, A
	// serves the edit (events wait for the host's view of the change).
	if e := storetest.Next(t, fromA); e.Type != store.EventModified || e.Data["id"] != f.ID {
		t.Fatalf("A saw %+v", e)
	}
	got := storetest.Read(t, a.Workspace("default"), f.ID)
	if !strings.HasSuffix(got, "edited on B") || len(got) != len(body)+11 {
		t.Fatalf("A read %d bytes after B's edit", len(got))
	}
	if l, _ := a.Workspace("default").List(bg, ""); len(l) != 1 || l[0].Size != int64(len(body)+11) || !l[0].HasBackup {
		t.Fatalf("A lists %+v", l)
	}
	// A client of A that saw the first event resumes on B.
	resumed, cancelR := b.Bus().Subscribe("default", first.Seq)
	defer cancelR()
	if e := storetest.Next(t, resumed); e.Type != store.EventModified || e.Data["id"] != f.ID {
		t.Fatalf("resume on B from A's id gave %+v", e)
	}
}

// 8 writers on A and 8 on B each append 100 lines to one file: 1,600
// (20 each under -short).
func TestAppendsAcrossHostsLoseNothing(t *testing.T) {
	d := newDeployment()
	hosts := []*store.Store{d.host(t, store.Config{}, 0), d.host(t, store.Config{}, 0)}
	storetest.Create(t, hosts[0].Workspace("default"), "log.txt", "")
	perWriter := 100 // the 1,600 lines
	if testing.Short() {
		perWriter = 20
	}
	var wg sync.WaitGroup
	for h, s := range hosts {
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := s.Workspace("default")
				for i := range perWriter {
					_, err := w.Modify(bg, "log.txt", func(_ *store.File, path string, out io.Writer) error {
						old, err := os.ReadFile(path)
						if err != nil {
							return err
						}
						_, err = fmt.Fprintf(out, "%sh%d-g%d-%d\n", old, h, g, i)
						return err
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	text := storetest.Read(t, hosts[1].Workspace("default"), "log.txt")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	if want := 16 * perWriter; len(lines) != want || len(seen) != want {
		t.Fatalf("%d lines (%d distinct), want %d", len(lines), len(seen), want)
	}
}

// Uploads racing on both hosts never take the workspace past its quota.
func TestQuotaRaceAcrossHosts(t *testing.T) {
	d := newDeployment()
	cfg := store.Config{MaxWorkspaceSize: 100_000}
	hosts := []*store.Store{d.host(t, cfg, 0), d.host(t, cfg, 0)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for h, s := range hosts {
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Workspace("default").Create(bg, store.CreateOptions{Name: fmt.Sprintf("h%d-%d.bin", h, i)},
					bytes.NewReader(bytes.Repeat([]byte{'x'}, 15_000)))
				switch {
				case err == nil:
					mu.Lock()
					ok++
					mu.Unlock()
				case !apierr.Is(err, apierr.QuotaExceeded):
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	// Each host's view has the other's last uploads within milliseconds.
	for _, s := range hosts {
		eventually(t, func() error {
			u, err := s.Workspace("default").UsageDetail(bg)
			files, _ := s.Workspace("default").List(bg, "")
			if err != nil || u.Used() > 100_000 || u.Used() != int64(ok*15_000) || len(files) != ok || u.InFlight != 0 {
				return fmt.Errorf("usage %+v, %d files, %d successes, %v", u, len(files), ok, err)
			}
			return nil
		})
	}
	if ok != 6 {
		t.Fatalf("%d uploads of 15,000 bytes fit in 100,000", ok)
	}
}

// A tool saved on A is callable on B, and B's subscribers hear of it.
func TestToolsAcrossHosts(t *testing.T) {
	d := newDeployment()
	a, b := d.host(t, store.Config{}, 0), d.host(t, store.Config{}, 0)
	events, cancel := b.Bus().Subscribe("default", 0)
	defer cancel()
	if _, err := a.Tools().Save(bg, "default", store.ToolRecord{Name: "csv_rows", InputSchema: []byte(`{}`), Code: "return 1"}); err != nil {
		t.Fatal(err)
	}
	if e := storetest.Next(t, events); e.Type != store.EventToolChanged || e.Data["name"] != "csv_rows" {
		t.Fatalf("B saw %+v", e)
	}
	got, err := b.Tools().Get(bg, "default", "csv_rows")
	if err != nil || got.Code != "return 1" || got.Version != 1 {
		t.Fatalf("B got %+v %v", got, err)
	}
	if saved, err := b.Tools().Save(bg, "default", store.ToolRecord{Name: "csv_rows", InputSchema: []byte(`{}`), Code: "return 2"}); err != nil || saved.Version != 2 {
		t.Fatalf("B saved %+v %v", saved, err)
	}
	if got, _ := a.Tools().Get(bg, "default", "csv_rows"); got.Code != "return 2" {
		t.Fatalf("A got %+v", got)
	}
}

// A file with a time to live created on A disappears for B too, with the
// event, whichever host sweeps it.
func TestTTLAcrossHosts(t *testing.T) {
	d := newDeployment()
	cfg := store.Config{ExpirySweep: 20 * time.Millisecond}
	a, b := d.host(t, cfg, 0), d.host(t, cfg, 0)
	events, cancel := b.Bus().Subscribe("default", 0)
	defer cancel()
	f, err := a.Workspace("default").Create(bg, store.CreateOptions{Name: "run/out.txt", TTL: 200 * time.Millisecond}, strings.NewReader("tmp"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if e := storetest.Next(t, events); e.Type == store.EventDeleted && e.Data["id"] == f.ID {
			break
		}
	}
	for _, s := range []*store.Store{a, b} {
		_, err := s.Workspace("default").Resolve(bg, f.ID)
		storetest.WantCode(t, err, apierr.NotFound)
		eventually(t, func() error {
			if used, _, _ := s.Workspace("default").Usage(); used != 0 {
				return fmt.Errorf("usage %d after expiry", used)
			}
			return nil
		})
	}
}

// The child side of TestKillHostDuringUpload: a host that starts a 40 MB
// upload, says so after 8 MB, and never finishes it.
func runChild(mode string) int {
	if mode != "upload" {
		return 2
	}
	b, err := Open(bg, Config{URL: os.Getenv("NATSSTORE_URL"), Prefix: os.Getenv("NATSSTORE_PREFIX"), LeaseTime: time.Second})
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	s, err := store.Open(store.Config{Dir: os.Getenv("NATSSTORE_DIR"), Backend: b})
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	src := &stallingReader{left: 40 << 20, signalAt: 32 << 20}
	_, err = s.Workspace("default").Create(bg, store.CreateOptions{Name: "big.bin"}, src)
	fmt.Println("finished:", err)
	return 1
}

// stallingReader gives pattern bytes, prints "started" once signalAt bytes
// are left, then blocks forever.
type stallingReader struct {
	left, signalAt int64
	said           bool
}

func (r *stallingReader) Read(p []byte) (int, error) {
	if r.left <= r.signalAt {
		if !r.said {
			r.said = true
			fmt.Println("started")
		}
		select {}
	}
	n := min(int64(len(p)), r.left-r.signalAt)
	for i := range p[:n] {
		p[i] = byte(i)
	}
	r.left -= n
	return int(n), nil
}

// Kill host A (SIGKILL) in the middle of a 40 MB upload: no partial file
// is ever visible, its quota reservation is released within the lease
// time, B keeps serving.
func TestKillHostDuringUpload(t *testing.T) {
	d := newDeployment()
	cfg := store.Config{MaxWorkspaceSize: 48 << 20}
	bc, bb := d.backend(t, time.Second)
	b := d.storeOn(t, cfg, bb)
	wb := b.Workspace("default")
	storetest.Create(t, wb, "before.txt", "b")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NATSSTORE_CHILD=upload", "NATSSTORE_URL="+d.url, "NATSSTORE_PREFIX="+d.prefix,
		"NATSSTORE_DIR="+filepath.Join(t.TempDir(), "a"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "started" {
		cmd.Process.Kill()
		t.Fatalf("child said %q", sc.Text())
	}
	// A has read 8 MB: B sees A's reservations (A's writer reserves as the
	// bytes reach it, a buffer or two behind the reader), and B keeps
	// serving.
	eventually(t, func() error {
		u, err := wb.UsageDetail(bg)
		if err == nil && u.InFlight < 4<<20 {
			err = fmt.Errorf("A's upload reserves %d bytes", u.InFlight)
		}
		return err
	})
	storetest.Create(t, wb, "during.txt", "d")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	// Released within the lease time (the host's heartbeat expires), give
	// or take the server's expiry tick.
	for {
		u, err := wb.UsageDetail(bg)
		if err != nil {
			t.Fatal(err)
		}
		if u.InFlight == 0 {
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("A's reservation is still held %v after the kill: %+v", time.Since(killed), u)
		}
		time.Sleep(50 * time.Millisecond) // polling the shared ledger; no event marks an expiry
	}
	files, _ := wb.List(bg, "")
	if len(files) != 2 || files[0].Name != "before.txt" || files[1].Name != "during.txt" {
		t.Fatalf("B lists %+v", files)
	}
	_, err = wb.Resolve(bg, "big.bin")
	storetest.WantCode(t, err, apierr.NotFound)
	// The chunks A had sent are removed by the next janitor pass: every
	// chunk subject left belongs to a stored body.
	prefix := "$O." + bc.bodiesName + ".C."
	info, err := bc.bodiesStream.Info(bg, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil || len(info.State.Subjects) != 3 { // before.txt, during.txt and the 32 MB A sent
		t.Fatalf("chunk subjects before the janitor: %v %v", info.State.Subjects, err)
	}
	bc.janitor.pass(bg)
	info, err = bc.bodiesStream.Info(bg, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil || len(info.State.Subjects) != 2 {
		t.Fatalf("chunk subjects after the janitor: %v %v", info.State.Subjects, err)
	}
	// The room A had reserved is usable again.
	if _, err := wb.Create(bg, store.CreateOptions{Name: "big.bin"}, bytes.NewReader(make([]byte, 40<<20))); err != nil {
		t.Fatal(err)
	}
}

// eventually retries check until it passes, for at most 10 s: for what a
// host's view of the others' changes shows a few milliseconds later, which
// nothing announces.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // polling: see above
	}
}
