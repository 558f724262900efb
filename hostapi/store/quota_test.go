package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// diskBytes is what the workspace's bodies and backups really take.
func diskBytes(t *testing.T, s *Store, ws string) int64 {
	t.Helper()
	files, err := s.Workspace(ws).List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		fi, err := os.Stat(s.bodyPath(&f))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
		if f.HasBackup {
			bi, err := os.Stat(s.backupPath(f.ID))
			if err != nil {
				t.Fatal(err)
			}
			n += bi.Size()
		}
	}
	return n
}

// The quota is the disk: backups count, a revert gives their room back.
func TestQuotaCountsBackups(t *testing.T) {
	s := openTest(t, Config{MaxWorkspaceSize: 10_000})
	w := s.Workspace("default")
	ctx := context.Background()
	create(t, w, "a", strings.Repeat("a", 4000))
	rewrite := func(n int) error {
		_, err := w.Modify(ctx, "a", func(_ *File, _ string, out io.Writer) error {
			_, err := out.Write(bytes.Repeat([]byte("b"), n))
			return err
		})
		return err
	}
	// First modification: the old body stays as the backup.
	if err := rewrite(5000); err != nil {
		t.Fatal(err)
	}
	u, err := w.UsageDetail(ctx)
	if err != nil || u.Files != 5000 || u.Backups != 4000 || u.Used() != 9000 || u.InFlight != 0 || u.Limit != 10_000 {
		t.Fatalf("usage after the first modification: %+v %v", u, err)
	}
	if d := diskBytes(t, s, "default"); d != u.Used() {
		t.Fatalf("disk holds %d bytes, the quota counts %d", d, u.Used())
	}
	// Later modifications replace the body in place: 6,000 + 4,000 fits
	// exactly, a byte more does not.
	if err := rewrite(6000); err != nil {
		t.Fatal(err)
	}
	if err := rewrite(6001); apierr.CodeOf(err) != apierr.QuotaExceeded {
		t.Fatalf("one byte over with the backup counted: %v", err)
	}
	if _, err := w.Create(ctx, CreateOptions{Name: "b"}, strings.NewReader("x")); apierr.CodeOf(err) != apierr.QuotaExceeded {
		t.Fatalf("new file in a full workspace: %v", err)
	}
	// Revert: the backup becomes the body again, nothing is copied.
	r, err := w.Revert(ctx, "a")
	if err != nil || r.Size != 4000 || r.SHA256 != sum(strings.Repeat("a", 4000)) || readAll(t, w, "a") != strings.Repeat("a", 4000) {
		t.Fatalf("revert: %+v %v", r, err)
	}
	if used, limit, _ := w.Usage(); used != 4000 || limit != 10_000 {
		t.Fatalf("usage after revert: %d/%d", used, limit)
	}
	// Delete gives back body and backup.
	if err := rewrite(100); err != nil {
		t.Fatal(err)
	}
	if used, _, _ := w.Usage(); used != 4100 {
		t.Fatalf("usage with a new backup: %d", used)
	}
	if err := w.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if used, _, _ := w.Usage(); used != 0 {
		t.Fatalf("usage after delete: %d", used)
	}
	if _, err := os.Stat(s.backupPath(r.ID)); !os.IsNotExist(err) {
		t.Fatalf("backup left after delete: %v", err)
	}
	checkClean(t, s)
}

// Saved tools (and whatever else charges the workspace) count too.
func TestCharges(t *testing.T) {
	s := openTest(t, Config{MaxWorkspaceSize: 10_000, WorkspaceQuotas: map[string]int64{"big": 50_000}})
	w := s.Workspace("default")
	ctx := context.Background()
	if s.MaxToolSize() != DefaultMaxToolSize || DefaultMaxToolSize != 256<<10 {
		t.Fatalf("per-tool limit: %d", s.MaxToolSize())
	}
	create(t, w, "a", strings.Repeat("a", 6000))
	if err := w.Charge(ctx, "tool:one", 3000); err != nil {
		t.Fatal(err)
	}
	if n, _ := w.Charged(ctx, "tool:one"); n != 3000 {
		t.Fatalf("charged: %d", n)
	}
	u, _ := w.UsageDetail(ctx)
	if u.Other != 3000 || u.Used() != 9000 {
		t.Fatalf("usage: %+v", u)
	}
	// Files see the charge…
	if _, err := w.Create(ctx, CreateOptions{Name: "b"}, bytes.NewReader(make([]byte, 1001))); apierr.CodeOf(err) != apierr.QuotaExceeded {
		t.Fatalf("file past a charged quota: %v", err)
	}
	// …and charges see files. Replacing a charge counts only the growth.
	if err := w.Charge(ctx, "tool:two", 1001); apierr.CodeOf(err) != apierr.QuotaExceeded {
		t.Fatalf("charge past the quota: %v", err)
	}
	if err := w.Charge(ctx, "tool:one", 4000); err != nil {
		t.Fatalf("growing a charge within the quota: %v", err)
	}
	if err := w.Charge(ctx, "tool:one", 4001); apierr.CodeOf(err) != apierr.QuotaExceeded {
		t.Fatalf("growing a charge past the quota: %v", err)
	}
	if n, _ := w.Charged(ctx, "tool:one"); n != 4000 {
		t.Fatalf("a refused charge changed the record: %d", n)
	}
	// Removing the charge frees its room for files at once.
	if err := w.Charge(ctx, "tool:one", 0); err != nil {
		t.Fatal(err)
	}
	create(t, w, "b", strings.Repeat("b", 4000))
	if n, _ := w.Charged(ctx, "tool:one"); n != 0 {
		t.Fatalf("removed charge: %d", n)
	}
	// Inside the caller's own transaction, committed with its data.
	tx, err := s.DB().Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.ChargeTx(tx, "tool:three", 1); apierr.CodeOf(err) != apierr.QuotaExceeded {
		t.Fatalf("ChargeTx past the quota: %v", err)
	}
	tx.Rollback()
	for _, bad := range []struct {
		key string
		n   int64
	}{{"", 1}, {"tool:x", -1}} {
		if err := w.Charge(ctx, bad.key, bad.n); apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Fatalf("charge %q %d: %v", bad.key, bad.n, err)
		}
	}
	// Per-workspace quota override.
	big := s.Workspace("big")
	if _, limit, _ := big.Usage(); limit != 50_000 || s.WorkspaceLimit("big") != 50_000 {
		t.Fatalf("override: %d", limit)
	}
	create(t, big, "c", strings.Repeat("c", 30_000))
	checkClean(t, s)
}

// Racing writers and chargers never take a workspace past its quota, not
// by a byte, and nothing stays reserved afterwards.
func TestRacingWritersAndChargesNeverExceedQuota(t *testing.T) {
	const quota = 500_000
	s := openTest(t, Config{MaxFileSize: 100_000, MaxWorkspaceSize: quota})
	w := s.Workspace("default")
	var wg sync.WaitGroup
	var files, charges atomic.Int64
	for i := 0; i < 30; i++ {
		wg.Add(2)
		go func(i int) {
			defer wg.Done()
			_, err := w.Create(context.Background(), CreateOptions{Name: fmt.Sprintf("f%02d", i)}, &slowReader{n: 40_000})
			if err == nil {
				files.Add(1)
			} else if apierr.CodeOf(err) != apierr.QuotaExceeded {
				t.Errorf("write: %v", err)
			}
		}(i)
		go func(i int) {
			defer wg.Done()
			err := w.Charge(context.Background(), fmt.Sprintf("tool:%d", i), 20_000)
			if err == nil {
				charges.Add(1)
			} else if apierr.CodeOf(err) != apierr.QuotaExceeded {
				t.Errorf("charge: %v", err)
			}
		}(i)
	}
	wg.Wait()
	u, _ := w.UsageDetail(context.Background())
	if u.Used() > quota || u.Files != files.Load()*40_000 || u.Other != charges.Load()*20_000 || u.InFlight != 0 {
		t.Fatalf("usage %+v with %d files and %d charges; quota %d", u, files.Load(), charges.Load(), quota)
	}
	if files.Load() == 0 || charges.Load() == 0 {
		t.Fatalf("%d files, %d charges: the race did not race", files.Load(), charges.Load())
	}
	checkClean(t, s)
}
