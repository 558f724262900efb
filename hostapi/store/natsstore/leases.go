package natsstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// leases are entries of the locks bucket. Taking one is creating its key
// (compare-and-set on "does not exist"); giving it back is deleting it at
// the revision it was created with. A lease whose holder's heartbeat has
// expired is taken over, so a dead host blocks nobody for longer than the
// lease time. Waiters wake on the key's delete message, and check again
// at least every poll interval for a holder that died.
type leases struct{ c *conn }

var _ store.Leases = (*leases)(nil)

type leaseValue struct {
	Host  string    `json:"host"`
	Token string    `json:"token"`
	Since time.Time `json:"since"`
}

func leaseKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return "l." + hex.EncodeToString(h[:20])
}

func (l *leases) Acquire(ctx context.Context, key string) (func(), error) {
	k := leaseKey(key)
	val, _ := json.Marshal(leaseValue{Host: l.c.hostID, Token: uuid.NewString(), Since: time.Now().UTC()})
	// Deletes of the key arrive on its subject: subscribe before the
	// first try so that no release is missed.
	wake := make(chan *nats.Msg, 1)
	sub, err := l.c.nc.ChanSubscribe("$KV."+l.c.locks.Bucket()+"."+k, wake)
	if err != nil {
		return nil, unavailable("taking a file lease", err)
	}
	defer sub.Unsubscribe()
	poll := min(l.c.cfg.LeaseTime/4, 100*time.Millisecond)
	for {
		rev, err := l.c.locks.Create(ctx, k, val)
		if err == nil {
			return l.releaser(k, rev), nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if ctx.Err() != nil {
				return nil, l.gaveUp(ctx)
			}
			return nil, unavailable("taking a file lease", err)
		}
		cur, err := l.c.locks.Get(ctx, k)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			continue // released meanwhile
		case err != nil:
			if ctx.Err() != nil {
				return nil, l.gaveUp(ctx)
			}
			return nil, unavailable("taking a file lease", err)
		}
		var holder leaseValue
		json.Unmarshal(cur.Value(), &holder)
		if !l.c.isAlive(ctx, holder.Host) {
			// Its host is gone: take the lease over (only one waiter wins
			// this delete; the others see the key change and retry).
			l.c.locks.Delete(ctx, k, jetstream.LastRevision(cur.Revision()))
			continue
		}
		t := time.NewTimer(poll)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, l.gaveUp(ctx)
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
		l.c.locks.Delete(ctx, k, jetstream.LastRevision(rev))
	}
}
