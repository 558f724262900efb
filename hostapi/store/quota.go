package store

import (
	"database/sql"
	"fmt"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Quota has two layers. In this process, writers reserve bytes before they
// write them (reserve), so racing uploads are stopped while streaming. At
// commit, the metadata transaction re-checks the sum of sizes in SQLite
// (checkQuotaTx), which also covers other processes on the same data dir.

func (s *Store) reserve(ws string, n int64) error {
	_, maxWS := s.Limits()
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	used, err := s.usedLocked(ws)
	if err != nil {
		return err
	}
	if used+s.reserved[ws]+n > maxWS {
		return apierr.New(apierr.QuotaExceeded,
			"workspace %q would exceed its %s quota (%s used); delete files you no longer need",
			ws, humanBytes(maxWS), humanBytes(used))
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

// settle turns a writer's reservation into committed size in one step, so
// that no other writer sees the bytes neither reserved nor used. Sizes read
// inside a commit transaction (checkQuotaTx) refresh used from SQLite, which
// also picks up other processes' writes.
func (s *Store) settle(ws string, reserved, delta int64) {
	s.quotaMu.Lock()
	s.reserved[ws] -= reserved
	if u, ok := s.used[ws]; ok {
		s.used[ws] = u + delta
	}
	s.quotaMu.Unlock()
}

func (s *Store) setUsed(ws string, used int64) {
	s.quotaMu.Lock()
	s.used[ws] = used
	s.quotaMu.Unlock()
}

func (s *Store) usedBytes(ws string) (int64, error) {
	var used int64
	err := s.db.QueryRow(`SELECT COALESCE(SUM(size),0) FROM agent_files WHERE workspace=?`, ws).Scan(&used)
	if err != nil {
		return 0, apierr.Wrap(apierr.Internal, err, "reading quota: %v", err)
	}
	return used, nil
}

// Usage reports the bytes a workspace's files take.
func (w *Workspace) Usage() (used, limit int64, err error) {
	used, err = w.s.usedBytes(w.name)
	_, limit = w.s.Limits()
	return used, limit, err
}

// checkQuotaTx verifies inside the commit transaction that replacing oldSize
// bytes with newSize keeps the workspace within its quota.
func (s *Store) checkQuotaTx(tx *sql.Tx, ws string, oldSize, newSize int64) error {
	var used int64
	if err := tx.QueryRow(`SELECT COALESCE(SUM(size),0) FROM agent_files WHERE workspace=?`, ws).Scan(&used); err != nil {
		return apierr.Wrap(apierr.Internal, err, "reading quota: %v", err)
	}
	s.setUsed(ws, used)
	if newSize <= oldSize {
		return nil
	}
	_, maxWS := s.Limits()
	if used-oldSize+newSize > maxWS {
		return apierr.New(apierr.QuotaExceeded,
			"workspace %q would exceed its %s quota (%s used); delete files you no longer need",
			ws, humanBytes(maxWS), humanBytes(used))
	}
	return nil
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
