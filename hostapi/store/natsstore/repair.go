package natsstore

import (
	"context"
	"sync"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/store"
)

// repair publishes the events of changes whose host died before it could.
// A host publishes a change's event right after the change commits; a
// crash in between would lose it. Every host sees every other host's
// changes in its index (a record names the host that made its last
// change, and a tombstone its deleter) and keeps them for a little longer
// than the lease time: if the host that made one is dead by then, it
// publishes the event itself, under the change's key, which the event
// stream deduplicates — so an event published before the crash is not
// stored twice, and one that was not is stored once, whichever hosts
// repair it.
type repair struct {
	c  *conn
	ev *events

	mu    sync.Mutex
	queue []observed // in arrival order, so by due time
	// onCheck, when set (tests), is told of every check made.
	onCheck func(observed)
}

type observed struct {
	ws  string
	rec store.FileRecord
	rev uint64
	due time.Time
}

func newRepair(c *conn, ev *events) *repair { return &repair{c: c, ev: ev} }

// observe is the index's hook for another host's record change.
func (r *repair) observe(ws string, _ *store.FileRecord, rec store.FileRecord, rev uint64) {
	r.mu.Lock()
	r.queue = append(r.queue, observed{ws: ws, rec: rec, rev: rev, due: time.Now().Add(r.c.cfg.LeaseTime + r.c.cfg.LeaseTime/4)})
	r.mu.Unlock()
}

func (r *repair) run() {
	defer r.c.wg.Done()
	t := time.NewTicker(min(r.c.cfg.LeaseTime/4, 500*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.c.stop:
			return
		case now := <-t.C:
			r.mu.Lock()
			n := 0
			for n < len(r.queue) && !r.queue[n].due.After(now) {
				n++
			}
			due := append([]observed(nil), r.queue[:n]...)
			r.queue = r.queue[n:]
			r.mu.Unlock()
			for _, o := range due {
				r.check(o)
				r.mu.Lock()
				fn := r.onCheck
				r.mu.Unlock()
				if fn != nil {
					fn(o)
				}
			}
		}
	}
}

// check publishes o's event if the host that made it is dead.
func (r *repair) check(o observed) {
	ctx, cancel := context.WithTimeout(context.Background(), r.c.cfg.Timeout)
	defer cancel()
	if r.c.isAlive(ctx, o.rec.Host) {
		return // it published the event, or is still trying
	}
	typ, data := changeEvent(o.rec)
	if !o.rec.Deleted {
		// A record that is gone without a tombstone was never visible (a
		// create that lost its name): nothing to announce.
		if _, _, ok := r.ev.ix.record(o.ws, o.rec.ID); !ok {
			return
		}
	}
	r.ev.Publish(ctx, o.ws, typ, data, store.ChangeRef{Key: store.FileChangeKey(o.ws, o.rec.ID, o.rev), Rev: o.rev})
}

// changeEvent is the event a record change reports, as the store makes it.
func changeEvent(rec store.FileRecord) (string, map[string]any) {
	switch {
	case rec.Deleted:
		return store.EventDeleted, map[string]any{"id": rec.ID}
	case rec.Change == store.EventCreated:
		return store.EventCreated, map[string]any{"id": rec.ID, "name": rec.Name, "size": rec.Size,
			"mime_type": rec.MimeType, "source_session_id": rec.SourceSessionID}
	}
	return store.EventModified, map[string]any{"id": rec.ID, "name": rec.Name, "size": rec.Size,
		"modified_on": store.FormatTime(rec.ModifiedOn)}
}
