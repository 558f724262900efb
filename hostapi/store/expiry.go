package store

import (
	"context"
	"time"
)

// Files created with a time to live (CreateOptions.TTL, seed 003) stop
// being visible the moment they expire: every lookup and list checks the
// expiry. A sweeper in every process deletes them soon after, through the
// ordinary delete path, so their bodies, backups and quota go and
// subscribers get the usual file:deleted event. Two processes (or hosts)
// sweeping at once is harmless: the delete is a compare-and-set.

// startExpirySweeper runs sweep every cfg.ExpirySweep until Close.
func (s *Store) startExpirySweeper(sweep func(ctx context.Context, now time.Time)) {
	s.sweeps.Add(1)
	go func() {
		defer s.sweeps.Done()
		t := time.NewTicker(s.cfg.ExpirySweep)
		defer t.Stop()
		for {
			select {
			case <-s.stop.Done():
				return
			case now := <-t.C:
				sweep(s.stop, now)
			}
		}
	}()
}

// sweepExpiredLocal deletes the local store's expired files.
func (s *Store) sweepExpiredLocal(ctx context.Context, now time.Time) {
	rows, err := s.db.QueryContext(ctx, `SELECT _id, workspace FROM agent_files WHERE expires_on != '' AND expires_on <= ?`, formatTime(now))
	if err != nil {
		return
	}
	type due struct{ id, ws string }
	var list []due
	for rows.Next() {
		var d due
		if rows.Scan(&d.id, &d.ws) == nil {
			list = append(list, d)
		}
	}
	rows.Close()
	for _, d := range list {
		if ctx.Err() != nil {
			return
		}
		s.Workspace(d.ws).deleteExpired(ctx, d.id)
	}
}

// deleteExpired deletes file id if it is still expired once its writer
// slot is held (an overwrite may have given it a new life meanwhile).
func (w *Workspace) deleteExpired(ctx context.Context, id string) {
	release, err := w.s.locks.lockWriter(ctx, id)
	if err != nil {
		return
	}
	defer release()
	f, err := w.s.byID(w.name, id)
	if err != nil || !f.expired(time.Now()) {
		return
	}
	w.deleteFile(ctx, f)
}
