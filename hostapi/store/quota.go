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
	used, err := s.usedBytes(ws)
	if err != nil {
		return err
	}
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
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
	if newSize <= oldSize {
		return nil
	}
	var used int64
	if err := tx.QueryRow(`SELECT COALESCE(SUM(size),0) FROM agent_files WHERE workspace=?`, ws).Scan(&used); err != nil {
		return apierr.Wrap(apierr.Internal, err, "reading quota: %v", err)
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
