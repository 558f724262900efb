package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// ledger keeps one entry per workspace in the quota bucket: committed
// bytes (files, backups, named charges) and the reservations of writes in
// flight, each owned by a host. Every change reads the entry, checks the
// limit and writes it back at the revision it read, so racing hosts take
// turns and the committed total never passes the limit. Reservations of
// hosts whose heartbeat expired are dropped by whoever needs the room.
type ledger struct{ c *conn }

var _ store.QuotaLedger = (*ledger)(nil)

type ledgerEntry struct {
	Files    int64                  `json:"files"`
	Backups  int64                  `json:"backups"`
	Charges  map[string]int64       `json:"charges,omitempty"`
	Reserved map[string]reservation `json:"reserved,omitempty"`
}

type reservation struct {
	Host  string `json:"host"`
	Bytes int64  `json:"bytes"`
}

func (e *ledgerEntry) reserved() int64 {
	var n int64
	for _, r := range e.Reserved {
		n += r.Bytes
	}
	return n
}

func (e *ledgerEntry) used() int64 {
	u := store.QuotaUsage{Files: e.Files, Backups: e.Backups, Charges: e.Charges}
	return u.Used()
}

// dropDead removes the reservations of hosts that stopped; it reports
// whether any went.
func (l *ledger) dropDead(ctx context.Context, e *ledgerEntry) bool {
	dropped := false
	for id, r := range e.Reserved {
		if !l.c.isAlive(ctx, r.Host) {
			delete(e.Reserved, id)
			dropped = true
		}
	}
	return dropped
}

func quotaKey(ws string) string { return "q." + wsKey(ws) }

// update applies fn to the workspace's entry with compare-and-set,
// retrying when another host got there first. fn returning errSkip leaves
// the entry as it is.
func (l *ledger) update(ctx context.Context, ws string, fn func(e *ledgerEntry) error) error {
	k := quotaKey(ws)
	for attempt := 0; ; attempt++ {
		var e ledgerEntry
		var rev uint64
		cur, err := l.c.quota.Get(ctx, k)
		switch {
		case err == nil:
			if err := json.Unmarshal(cur.Value(), &e); err != nil {
				return apierr.Wrap(apierr.Internal, err, "the quota ledger of workspace %q is damaged (%v); run `metaclaw fsck --repair`", ws, err)
			}
			rev = cur.Revision()
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			return unavailable("reading the quota ledger", err)
		}
		if e.Charges == nil {
			e.Charges = map[string]int64{}
		}
		if e.Reserved == nil {
			e.Reserved = map[string]reservation{}
		}
		if err := fn(&e); err != nil {
			if errors.Is(err, errSkip) {
				return nil
			}
			return err
		}
		val, _ := json.Marshal(&e)
		if rev == 0 {
			_, err = l.c.quota.Create(ctx, k, val)
		} else {
			_, err = l.c.quota.Update(ctx, k, val, rev)
		}
		if err == nil {
			return nil
		}
		if !isWrongRevision(err) {
			return unavailable("updating the quota ledger", err)
		}
		// Lost the race: back off a little (more after several losses)
		// and read again.
		if attempt > 2 {
			d := time.Duration(rand.IntN(1+min(attempt, 20))) * 200 * time.Microsecond
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return apierr.From(ctx.Err())
			}
		}
	}
}

var errSkip = errors.New("no change")

func quotaError(ws string, used, limit int64) error {
	return apierr.New(apierr.QuotaExceeded,
		"workspace %q would exceed its %s quota (%s used, counting file backups, saved tools and writes in progress on every host); delete files you no longer need",
		ws, humanBytes(limit), humanBytes(used))
}

func (l *ledger) Reserve(ctx context.Context, ws, id string, n, limit int64) error {
	return l.update(ctx, ws, func(e *ledgerEntry) error {
		if total := e.used() + e.reserved() + n; total > limit {
			if !l.dropDead(ctx, e) || e.used()+e.reserved()+n > limit {
				return quotaError(ws, e.used()+e.reserved(), limit)
			}
		}
		r := e.Reserved[id]
		r.Host = l.c.hostID
		r.Bytes += n
		e.Reserved[id] = r
		return nil
	})
}

func (l *ledger) Release(ctx context.Context, ws, id string) error {
	return l.update(ctx, ws, func(e *ledgerEntry) error {
		if _, ok := e.Reserved[id]; !ok {
			return errSkip
		}
		delete(e.Reserved, id)
		return nil
	})
}

func (l *ledger) Commit(ctx context.Context, ws, id string, files, backups, limit int64) error {
	return l.update(ctx, ws, func(e *ledgerEntry) error {
		delete(e.Reserved, id)
		if files+backups > 0 && e.used()+files+backups > limit {
			return quotaError(ws, e.used(), limit)
		}
		e.Files += files
		e.Backups += backups
		return nil
	})
}

func (l *ledger) Charge(ctx context.Context, ws, key string, n, limit int64) (int64, error) {
	var old int64
	err := l.update(ctx, ws, func(e *ledgerEntry) error {
		old = e.Charges[key]
		if d := n - old; d > 0 && e.used()+e.reserved()+d > limit {
			if !l.dropDead(ctx, e) || e.used()+e.reserved()+d > limit {
				return quotaError(ws, e.used()+e.reserved(), limit)
			}
		}
		if n == 0 {
			delete(e.Charges, key)
		} else {
			e.Charges[key] = n
		}
		return nil
	})
	return old, err
}

func (l *ledger) Usage(ctx context.Context, ws string) (store.QuotaUsage, error) {
	var u store.QuotaUsage
	cur, err := l.c.quota.Get(ctx, quotaKey(ws))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return u, nil
	}
	if err != nil {
		return u, unavailable("reading the quota ledger", err)
	}
	var e ledgerEntry
	if err := json.Unmarshal(cur.Value(), &e); err != nil {
		return u, apierr.Wrap(apierr.Internal, err, "the quota ledger of workspace %q is damaged (%v)", ws, err)
	}
	l.dropDeadView(ctx, &e)
	return store.QuotaUsage{Files: e.Files, Backups: e.Backups, Charges: e.Charges, Reserved: e.reserved()}, nil
}

// dropDeadView leaves out, from what Usage reports, reservations of hosts
// that stopped (the next change removes them for good).
func (l *ledger) dropDeadView(ctx context.Context, e *ledgerEntry) { l.dropDead(ctx, e) }

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
