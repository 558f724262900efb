package natsstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/store"
)

// janitor removes, now and then, what crashed hosts (or failed steps) left
// in the shared store:
//   - chunks of bodies whose put never finished, once their host is dead;
//   - bodies no record refers to (a put whose record never came, a
//     replaced body whose removal failed), once their host is dead or they
//     are older than OrphanAge;
//   - records no name claim points to (a create that died between the
//     two), older than the lease time;
//   - tombstones whose removal did not happen;
//   - saved-tool charges that disagree with the tools (a save or delete
//     that died between the charge and the tool), seen twice in a row;
//   - delete markers older than ten minutes (every tenth pass).
//
// Every host runs it at a random offset; the steps are compare-and-set or
// idempotent, so two janitors at once do no harm.
type janitor struct {
	c      *conn
	ix     *index
	blobs  *blobs
	ledger *ledger
	seen   map[string]int64 // charge mismatches of the last pass
	passes int
}

func (j *janitor) run() {
	defer j.c.wg.Done()
	every := j.c.cfg.JanitorInterval
	for {
		wait := every/2 + time.Duration(rand.Int64N(int64(every)))
		t := time.NewTimer(wait)
		select {
		case <-j.c.stop:
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		go func() {
			select {
			case <-j.c.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		j.pass(ctx)
		cancel()
	}
}

// pass runs every step once.
func (j *janitor) pass(ctx context.Context) {
	j.passes++
	j.bodies(ctx)
	j.records(ctx)
	j.toolCharges(ctx)
	if j.passes%10 == 0 {
		older := jetstream.DeleteMarkersOlderThan(10 * time.Minute)
		j.c.files.PurgeDeletes(ctx, older)
		j.c.tools.PurgeDeletes(ctx, older)
	}
}

// hostOfToken turns the host part of a chunk token back into a host id.
func hostOfToken(token string) (string, bool) {
	h, _, ok := strings.Cut(token, "_")
	if !ok || len(h) != 32 {
		return "", false
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], true
}

// bodies removes unfinished puts of dead hosts and unreferenced bodies.
func (j *janitor) bodies(ctx context.Context) {
	objs, err := j.c.bodies.List(ctx, jetstream.ListObjectsShowDeleted())
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return
	}
	used := map[string]bool{} // chunk tokens of stored (or deleted) objects
	for _, o := range objs {
		used[o.NUID] = true
	}
	prefix := "$O." + j.c.bodiesName + ".C."
	info, err := j.c.bodiesStream.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err == nil {
		for subj := range info.State.Subjects {
			token := strings.TrimPrefix(subj, prefix)
			host, ok := hostOfToken(token)
			if used[token] || !ok || j.c.isAlive(ctx, host) {
				continue
			}
			j.c.bodiesStream.Purge(ctx, jetstream.WithPurgeSubject(subj))
		}
	}
	refs := j.ix.referenced()
	for _, o := range objs {
		if o.Deleted || refs[o.Name] {
			continue
		}
		host, _, _ := strings.Cut(o.Name, "/")
		if time.Since(o.ModTime) > j.c.cfg.OrphanAge || !j.c.isAlive(ctx, host) {
			// Read the references again: a record may have arrived since.
			if !j.ix.referenced()[o.Name] {
				j.blobs.Delete(ctx, o.Name)
			}
		}
	}
}

// records removes unclaimed records and leftover tombstones.
func (j *janitor) records(ctx context.Context) {
	age := j.c.cfg.LeaseTime
	for _, wr := range j.ix.unclaimed() {
		r := wr.Record
		if time.Since(r.ModifiedOn) <= age {
			continue
		}
		k := fileKey(wr.Workspace, r.ID)
		if rev, err := deleteAt(ctx, j.c.files, k, wr.Revision); err == nil {
			j.ix.apply(k, rev, nil, false)
		}
	}
	for k, rev := range j.ix.tombstones(age) {
		if drev, err := deleteAt(ctx, j.c.files, k, rev); err == nil {
			j.ix.apply(k, drev, nil, false)
		}
	}
}

// toolCharges sets every "tool:NAME" charge to its tool's size, when the
// same disagreement is seen on two passes in a row (a save in progress
// disagrees for a moment only).
func (j *janitor) toolCharges(ctx context.Context) {
	want := map[string]int64{} // ws \x00 key → bytes the tools say
	now := map[string]int64{}  // disagreements of this pass
	lister, err := j.c.tools.ListKeys(ctx)
	if err == nil {
		for k := range lister.Keys() {
			wsPart, namePart, _ := strings.Cut(k, ".")
			ws, ok1 := wsName(wsPart)
			name, ok2 := wsName(namePart)
			if !ok1 || !ok2 {
				continue
			}
			t, _, err := (&tools{c: j.c}).Get(ctx, ws, name)
			if err != nil {
				continue
			}
			want[ws+"\x00"+store.ToolChargeKey(name)] = t.Bytes()
		}
		lister.Stop()
	} else if !errors.Is(err, jetstream.ErrNoKeysFound) {
		return
	}
	for _, ws := range j.ix.workspaces() {
		e, _ := j.ix.ledger(ws)
		for key, n := range e.Charges {
			if strings.HasPrefix(key, "tool:") && want[ws+"\x00"+key] != n {
				now[ws+"\x00"+key] = want[ws+"\x00"+key]
			}
		}
	}
	for wk, n := range want {
		ws, key, _ := strings.Cut(wk, "\x00")
		if e, _ := j.ix.ledger(ws); e.Charges[key] != n {
			now[wk] = n
		}
	}
	for wk, n := range now {
		if prev, ok := j.seen[wk]; ok && prev == n {
			ws, key, _ := strings.Cut(wk, "\x00")
			j.ledger.Charge(ctx, ws, key, n, 1<<62)
			delete(now, wk)
		}
	}
	j.seen = now
}
