package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// leases are keys of the files bucket (<ws>.l.<id>). Taking one is
// creating its key (compare-and-set on "does not exist"); giving it back
// is deleting it at the revision it was created with. A lease whose
// holder's heartbeat has expired is taken over, so a dead host blocks
// nobody for longer than the lease time. Waiters wake on the key's delete
// message, and check again at least every poll interval for a holder that
// died.
type leases struct{ c *conn }

var _ store.Leases = (*leases)(nil)

type leaseValue struct {
	Host  string    `json:"host"`
	Token string    `json:"token"`
	Since time.Time `json:"since"`
}

func leaseKey(ws, id string) string { return wsKey(ws) + ".l." + id }

func (l *leases) Acquire(ctx context.Context, ws, id string) (func(), store.Revision, error) {
	k := leaseKey(ws, id)
	val, _ := json.Marshal(leaseValue{Host: l.c.hostID, Token: uuid.NewString(), Since: time.Now().UTC()})
	var (
		wake chan struct{}
		sub  *nats.Subscription
	)
	defer func() {
		if sub != nil {
			sub.Unsubscribe()
		}
	}()
	poll := min(l.c.cfg.LeaseTime/4, 100*time.Millisecond)
	for {
		rev, err := l.c.files.Create(ctx, k, val)
		if err == nil {
			return l.releaser(k, rev), rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if ctx.Err() != nil {
				return nil, 0, l.gaveUp(ctx)
			}
			return nil, 0, unavailable("taking a file lease", err)
		}
		if sub == nil {
			// Deletes of the key arrive on its subject: subscribe, then
			// try again at once so that no release is missed. One
			// pending wake-up is enough: the callback never blocks, so a
			// busy key never makes this connection a slow consumer.
			wake = make(chan struct{}, 1)
			if sub, err = l.c.nc.Subscribe("$KV."+l.c.files.Bucket()+"."+k, func(*nats.Msg) {
				select {
				case wake <- struct{}{}:
				default:
				}
			}); err != nil {
				return nil, 0, unavailable("taking a file lease", err)
			}
			continue
		}
		cur, err := l.c.files.Get(ctx, k)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			continue // released meanwhile
		case err != nil:
			if ctx.Err() != nil {
				return nil, 0, l.gaveUp(ctx)
			}
			return nil, 0, unavailable("taking a file lease", err)
		}
		var holder leaseValue
		json.Unmarshal(cur.Value(), &holder)
		if !l.c.isAlive(ctx, holder.Host) {
			// Its host is gone: take the lease over (only one waiter wins
			// this delete; the others see the key change and retry).
			l.c.files.Delete(ctx, k, jetstream.LastRevision(cur.Revision()))
			continue
		}
		t := time.NewTimer(poll)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, 0, l.gaveUp(ctx)
		}
		t.Stop()
	}
}

func (l *leases) gaveUp(ctx context.Context) error {
	return apierr.Wrap(apierr.Of(ctx.Err()).Code, ctx.Err(), "gave up waiting for another write to the same file to finish; try again")
}

func (l *leases) releaser(k string, rev uint64) func() {
	done := false
	return func() {
		if done {
			return
		}
		done = true
		ctx, cancel := context.WithTimeout(context.Background(), l.c.cfg.Timeout)
		defer cancel()
		// At our revision only: a lease taken over meanwhile is not ours.
		l.c.files.Delete(ctx, k, jetstream.LastRevision(rev))
	}
}
