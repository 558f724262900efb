package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// The quota counts everything a workspace keeps on disk: file bodies, the
// backups kept by first modifications, what other packages store for it
// (saved tools, through Charge) and the bodies being written right now.
//
// It has two layers. In this process, writers reserve bytes before they
// write them (reserve), so racing uploads are stopped while streaming, never
// after they filled the disk. At commit, the metadata transaction re-checks
// the committed total in SQLite (checkQuotaTx), which also covers other
// processes on the same data directory: the committed total never exceeds
// the quota by a byte.

// usageQuery sums a workspace's committed bytes: file bodies, backups, and
// charged bytes.
const usageQuery = `SELECT
	(SELECT COALESCE(SUM(size), 0) FROM agent_files WHERE workspace=?1),
	(SELECT COALESCE(SUM(backup_size), 0) FROM agent_files WHERE workspace=?1),
	(SELECT COALESCE(SUM(bytes), 0) FROM agent_usage WHERE workspace=?1)`

type queryer interface {
	QueryRow(query string, args ...any) *sql.Row
}

func usageOf(q queryer, ws string) (files, backups, other int64, err error) {
	err = q.QueryRow(usageQuery, ws).Scan(&files, &backups, &other)
	if err != nil {
		err = apierr.Wrap(apierr.Internal, err, "reading the workspace's usage failed: %v", err)
	}
	return
}

func (s *Store) usedBytes(ws string) (int64, error) {
	f, b, o, err := usageOf(s.db, ws)
	return f + b + o, err
}

func (s *Store) quotaError(ws string, used, limit int64) error {
	return apierr.New(apierr.QuotaExceeded,
		"workspace %q would exceed its %s quota (%s used, counting file backups and saved tools); delete files you no longer need",
		ws, humanBytes(limit), humanBytes(used))
}

// reserve holds n more bytes for a write in flight.
func (s *Store) reserve(ws string, n int64) error {
	limit := s.WorkspaceLimit(ws)
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	used, err := s.usedLocked(ws)
	if err != nil {
		return err
	}
	if used+s.reserved[ws]+n > limit {
		// The figure may be stale (another process deleted files, a tool
		// was removed): check the database before saying no.
		if used, err = s.usedBytes(ws); err != nil {
			return err
		}
		s.used[ws] = used
		if used+s.reserved[ws]+n > limit {
			return s.quotaError(ws, used+s.reserved[ws], limit)
		}
	}
	s.reserved[ws] += n
	return nil
}

func (s *Store) unreserve(ws string, n int64) {
	if n == 0 {
		return
	}
	s.quotaMu.Lock()
	s.reserved[ws] -= n
	s.quotaMu.Unlock()
}

// usedLocked returns the bytes committed in ws as this process knows them,
// loading the figure from SQLite the first time.
func (s *Store) usedLocked(ws string) (int64, error) {
	if u, ok := s.used[ws]; ok {
		return u, nil
	}
	u, err := s.usedBytes(ws)
	if err != nil {
		return 0, err
	}
	s.used[ws] = u
	return u, nil
}

// settle turns a writer's reservation into committed usage in one step, so
// that no other writer sees the bytes neither reserved nor used. It runs
// right after the commit, in commit order.
func (s *Store) settle(ws string, reserved, usedAfter int64) {
	s.quotaMu.Lock()
	s.reserved[ws] -= reserved
	s.used[ws] = usedAfter
	s.quotaMu.Unlock()
}

// checkQuotaTx verifies inside the commit transaction that changing the
// workspace's committed bytes by delta keeps it within its quota (a change
// that frees space is always allowed), and returns the new total.
func (s *Store) checkQuotaTx(tx queryer, ws string, delta, inFlight int64) (int64, error) {
	f, b, o, err := usageOf(tx, ws)
	if err != nil {
		return 0, err
	}
	used := f + b + o
	if delta > 0 {
		if limit := s.WorkspaceLimit(ws); used+inFlight+delta > limit {
			return 0, s.quotaError(ws, used+inFlight, limit)
		}
	}
	return used + delta, nil
}

// Usage is what a workspace stores, in bytes.
type Usage struct {
	Files    int64 `json:"files"`    // current bodies
	Backups  int64 `json:"backups"`  // bodies kept by first modifications
	Other    int64 `json:"other"`    // charged by other packages (saved tools)
	InFlight int64 `json:"inFlight"` // reserved by writes in progress in this process
	Limit    int64 `json:"limit"`
}

// Used is the committed total the quota is checked against.
func (u Usage) Used() int64 { return u.Files + u.Backups + u.Other }

// Usage reports the bytes the workspace stores (files, backups and charged
// bytes) and its quota.
func (w *Workspace) Usage() (used, limit int64, err error) {
	if sh := w.s.shared; sh != nil {
		u, err := sh.b.Quota.Usage(context.Background(), w.name)
		return u.Used(), w.s.WorkspaceLimit(w.name), err
	}
	used, err = w.s.usedBytes(w.name)
	return used, w.s.WorkspaceLimit(w.name), err
}

// UsageDetail breaks the workspace's usage down.
func (w *Workspace) UsageDetail(ctx context.Context) (Usage, error) {
	u := Usage{Limit: w.s.WorkspaceLimit(w.name)}
	if sh := w.s.shared; sh != nil {
		q, err := sh.b.Quota.Usage(ctx, w.name)
		u.Files, u.Backups, u.Other, u.InFlight = q.Files, q.Backups, q.Other(), q.Reserved
		return u, err
	}
	var err error
	u.Files, u.Backups, u.Other, err = usageOf(w.s.db, w.name)
	w.s.quotaMu.Lock()
	u.InFlight = w.s.reserved[w.name]
	w.s.quotaMu.Unlock()
	return u, err
}

// Charge records that key (for example "tool:csv_preview") stores n bytes
// for this workspace outside its files, replacing what key was charged
// before; n = 0 removes the charge. Growing a charge past the quota (which
// counts files, backups, other charges and writes in flight) is
// QUOTA_EXCEEDED and changes nothing.
func (w *Workspace) Charge(ctx context.Context, key string, n int64) error {
	if sh := w.s.shared; sh != nil {
		key, err := checkCharge(key, n)
		if err != nil {
			return err
		}
		_, err = sh.b.Quota.Charge(ctx, w.name, key, n, w.s.WorkspaceLimit(w.name))
		return err
	}
	return w.s.withTx(ctx, func(tx *txn) error { return w.ChargeTx(tx.Tx, key, n) })
}

// ChargeTx is Charge inside the caller's transaction on Store.DB(), so that
// what is stored and what it is charged commit together.
// It only exists for the local backend (a shared one has no SQL
// transaction): use Tools() to store a saved tool with its charge on both.
func (w *Workspace) ChargeTx(tx *sql.Tx, key string, n int64) error {
	if w.s.shared != nil {
		return apierr.New(apierr.Internal, "ChargeTx needs the local SQLite backend; on a shared backend use Workspace.Charge or Store.Tools()")
	}
	key, err := checkCharge(key, n)
	if err != nil {
		return err
	}
	var old int64
	err = tx.QueryRow(`SELECT bytes FROM agent_usage WHERE workspace=? AND key=?`, w.name, key).Scan(&old)
	if err != nil && !isNoRows(err) {
		return apierr.Wrap(apierr.Internal, err, "reading the workspace's usage failed: %v", err)
	}
	w.s.quotaMu.Lock()
	inFlight := w.s.reserved[w.name]
	w.s.quotaMu.Unlock()
	if _, err := w.s.checkQuotaTx(tx, w.name, n-old, inFlight); err != nil {
		return err
	}
	if n == 0 {
		_, err = tx.Exec(`DELETE FROM agent_usage WHERE workspace=? AND key=?`, w.name, key)
	} else {
		_, err = tx.Exec(`INSERT INTO agent_usage (workspace, key, bytes) VALUES (?,?,?)
			ON CONFLICT (workspace, key) DO UPDATE SET bytes=excluded.bytes`, w.name, key, n)
	}
	if err != nil {
		return apierr.Wrap(apierr.Internal, err, "recording the workspace's usage failed: %v", err)
	}
	// The caller commits when it likes: forget the cached total so that the
	// next reservation reads the committed one.
	w.s.quotaMu.Lock()
	delete(w.s.used, w.name)
	w.s.quotaMu.Unlock()
	return nil
}

func checkCharge(key string, n int64) (string, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return "", apierr.New(apierr.ValidationFailed, "a charge needs a key, such as \"tool:NAME\"")
	}
	if n < 0 {
		return "", apierr.New(apierr.ValidationFailed, "a charge of %d bytes is negative", n)
	}
	return key, nil
}

// Charged reports the bytes key is charged in this workspace (0 if none).
func (w *Workspace) Charged(ctx context.Context, key string) (int64, error) {
	if sh := w.s.shared; sh != nil {
		u, err := sh.b.Quota.Usage(ctx, w.name)
		return u.Charges[strings.TrimSpace(key)], err
	}
	var n int64
	err := w.s.db.QueryRowContext(ctx, `SELECT bytes FROM agent_usage WHERE workspace=? AND key=?`, w.name, strings.TrimSpace(key)).Scan(&n)
	if isNoRows(err) {
		return 0, nil
	}
	if err != nil {
		return 0, apierr.Wrap(apierr.Internal, err, "reading the workspace's usage failed: %v", err)
	}
	return n, nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
