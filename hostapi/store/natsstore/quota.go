package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// ledger keeps one entry per workspace in the files bucket (<ws>.q.ledger):
// named charges and the reservations of writes in flight, each owned by a
// host and named by the blob key of its body. A workspace's usage is its
// records' bodies and backups (counted by the index), its charges, and its
// reservations whose body no record holds yet, of hosts still alive. Every
// change reads the entry from the index, waits until the index has applied
// the bucket up to the entry's revision (so that the records it counts are
// at least as recent), checks the limit and writes the entry back at that
// revision: racing hosts take turns, and none can take the workspace past
// its limit.
//
// Releases are lazy: a reservation whose body a record holds counts
// nothing, so they are dropped in the background, together, or by the
// next change of the entry.
type ledger struct {
	c  *conn
	ix *index

	mu      sync.Mutex
	pending map[string]map[string]bool // workspace → reservations to drop
	flushes map[string]bool            // workspaces with a flush running
}

var _ store.QuotaLedger = (*ledger)(nil)

type ledgerEntry struct {
	Charges  map[string]int64       `json:"charges,omitempty"`
	Reserved map[string]reservation `json:"reserved,omitempty"`
}

type reservation struct {
	Host  string `json:"host"`
	Bytes int64  `json:"bytes"`
}

func (e ledgerEntry) clone() ledgerEntry {
	return ledgerEntry{Charges: maps.Clone(e.Charges), Reserved: maps.Clone(e.Reserved)}
}

func quotaKey(ws string) string { return wsKey(ws) + ".q.ledger" }

// state is a ledger entry with what the index counts beside it.
type state struct {
	e                     ledgerEntry
	files, backups, other int64
	reserved              int64 // by reservations that still count
}

func (s *state) used() int64 { return s.files + s.backups + s.other + s.reserved }

// count works out what e and the records count. Reservations of hosts
// that stopped are dropped from e (the write that follows removes them
// for good); fulfilled ones too, and this host's released ones.
func (l *ledger) count(ctx context.Context, ws string, e ledgerEntry, released map[string]bool) *state {
	s := &state{e: e}
	if s.e.Charges == nil {
		s.e.Charges = map[string]int64{}
	}
	if s.e.Reserved == nil {
		s.e.Reserved = map[string]reservation{}
	}
	var fulfilled map[string]bool
	s.files, s.backups, fulfilled = l.ix.usage(ws, s.e.Reserved)
	for id, r := range s.e.Reserved {
		if fulfilled[id] || (r.Host == l.c.hostID && released[id]) || !l.c.isAlive(ctx, r.Host) {
			delete(s.e.Reserved, id)
			continue
		}
		s.reserved += r.Bytes
	}
	for _, n := range s.e.Charges {
		s.other += n
	}
	return s
}

// update applies fn to the workspace's entry with compare-and-set,
// retrying when another host got there first. fn returning errSkip leaves
// the entry as it is.
func (l *ledger) update(ctx context.Context, ws string, fn func(s *state) error) error {
	k := quotaKey(ws)
	for attempt := 0; ; attempt++ {
		e, rev := l.ix.ledger(ws)
		if err := l.ix.waitFor(ctx, rev, 2*time.Second); err != nil {
			return err
		}
		before, _ := json.Marshal(&e)
		l.mu.Lock()
		dropping := l.pending[ws]
		l.pending[ws] = nil
		l.mu.Unlock()
		s := l.count(ctx, ws, e, dropping)
		if err := fn(s); err != nil {
			l.requeue(ws, dropping)
			if errors.Is(err, errSkip) {
				return nil
			}
			return err
		}
		val, _ := json.Marshal(&s.e)
		if rev != 0 && string(before) == string(val) {
			return nil // nothing to write
		}
		var nrev uint64
		var err error
		if rev == 0 {
			nrev, err = l.c.files.Create(ctx, k, val)
		} else {
			nrev, err = l.c.files.Update(ctx, k, val, rev)
		}
		if err == nil {
			l.ix.apply(k, nrev, val, false)
			return nil
		}
		l.requeue(ws, dropping)
		if !isWrongRevision(err) {
			return unavailable("updating the quota ledger", err)
		}
		// Lost the race: read the entry as it is now, and back off a
		// little after several losses.
		cur, gerr := l.c.files.Get(ctx, k)
		switch {
		case gerr == nil:
			l.ix.apply(k, cur.Revision(), cur.Value(), false)
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
		default:
			return unavailable("reading the quota ledger", gerr)
		}
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

// requeue puts back releases a failed update did not write.
func (l *ledger) requeue(ws string, ids map[string]bool) {
	if len(ids) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending[ws] == nil {
		l.pending[ws] = map[string]bool{}
	}
	for id := range ids {
		l.pending[ws][id] = true
	}
}

var errSkip = errors.New("no change")

func quotaError(ws string, used, limit int64) error {
	return apierr.New(apierr.QuotaExceeded,
		"workspace %q would exceed its %s quota (%s used, counting file backups, saved tools and writes in progress on every host); delete files you no longer need",
		ws, humanBytes(limit), humanBytes(used))
}

func (l *ledger) Reserve(ctx context.Context, ws, id string, n, limit int64) error {
	return l.update(ctx, ws, func(s *state) error {
		if s.used()+n > limit {
			return quotaError(ws, s.used(), limit)
		}
		r := s.e.Reserved[id]
		r.Host = l.c.hostID
		r.Bytes += n
		s.e.Reserved[id] = r
		return nil
	})
}

// Release drops reservation id in the background.
func (l *ledger) Release(ctx context.Context, ws, id string) error {
	l.mu.Lock()
	if l.pending[ws] == nil {
		l.pending[ws] = map[string]bool{}
	}
	l.pending[ws][id] = true
	start := !l.flushes[ws]
	l.flushes[ws] = true
	l.mu.Unlock()
	if start {
		l.c.background(func(ctx context.Context) { l.flush(ctx, ws) })
	}
	return nil
}

// flush writes the workspace's pending releases until none are left.
func (l *ledger) flush(ctx context.Context, ws string) {
	for {
		l.mu.Lock()
		if len(l.pending[ws]) == 0 || ctx.Err() != nil {
			delete(l.flushes, ws)
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		if err := l.update(ctx, ws, func(s *state) error { return nil }); err != nil {
			l.mu.Lock()
			delete(l.flushes, ws)
			l.mu.Unlock()
			return // the next change of the entry, or the owner's death, drops them
		}
	}
}

func (l *ledger) Charge(ctx context.Context, ws, key string, n, limit int64) (int64, error) {
	var old int64
	err := l.update(ctx, ws, func(s *state) error {
		old = s.e.Charges[key]
		if d := n - old; d > 0 && s.used()+d > limit {
			return quotaError(ws, s.used(), limit)
		}
		if n == 0 {
			delete(s.e.Charges, key)
		} else {
			s.e.Charges[key] = n
		}
		return nil
	})
	return old, err
}

func (l *ledger) Usage(ctx context.Context, ws string) (store.QuotaUsage, error) {
	e, rev := l.ix.ledger(ws)
	if err := l.ix.waitFor(ctx, rev, 2*time.Second); err != nil {
		return store.QuotaUsage{}, err
	}
	l.mu.Lock()
	released := maps.Clone(l.pending[ws])
	l.mu.Unlock()
	s := l.count(ctx, ws, e, released)
	return store.QuotaUsage{Files: s.files, Backups: s.backups, Charges: s.e.Charges, Reserved: s.reserved}, nil
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
