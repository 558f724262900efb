package natsstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// meta keeps file records in the files bucket (see index.go for the
// keys). A name belongs to a file through its claim, created with
// compare-and-set on "does not exist", so two hosts creating the same name
// at once get one file and one ALREADY_EXISTS. A record is created before
// its claim and a claim removed after its record, so a claim pointing at
// no record is stale (a crash between the two steps) and is taken over; a
// record no claim points to is invisible (the janitor removes it). A
// rename claims the new name, updates the record, then frees the old
// name; a claim pointing at a record of another name is stale once it is
// older than the lease time.
//
// A delete first turns the record into a tombstone (its host, for the
// event repair), frees the name, then removes the tombstone in the
// background.
//
// Reads are served from the index (a map lookup); a miss asks the bucket.
type meta struct {
	c  *conn
	ix *index
	kv jetstream.KeyValue
}

var _ store.MetaStore = (*meta)(nil)

func fileKey(ws, id string) string { return wsKey(ws) + ".f." + id }

func nameKey(ws, name string) string {
	h := sha256.Sum256([]byte(name))
	return wsKey(ws) + ".n." + hex.EncodeToString(h[:])
}

func errNoFile() error {
	return apierr.New(apierr.NotFound, "file not found; call files.list() to see the workspace's files")
}

func decodeRecord(e jetstream.KeyValueEntry) (store.FileRecord, error) {
	var r store.FileRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return r, apierr.Wrap(apierr.Internal, err, "a file record in NATS is damaged (%v); run `metaclaw fsck`", err)
	}
	return r, nil
}

func (m *meta) Get(ctx context.Context, ws, id string) (store.FileRecord, store.Revision, error) {
	if r, rev, ok := m.ix.record(ws, id); ok {
		return r, rev, nil
	}
	return m.Latest(ctx, ws, id)
}

func (m *meta) Latest(ctx context.Context, ws, id string) (store.FileRecord, store.Revision, error) {
	k := fileKey(ws, id)
	e, err := m.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return store.FileRecord{}, 0, errNoFile()
	}
	if err != nil {
		return store.FileRecord{}, 0, unavailable("reading file metadata", err)
	}
	m.ix.apply(k, e.Revision(), e.Value(), false)
	r, err := decodeRecord(e)
	if err == nil && r.Deleted {
		err = errNoFile()
	}
	return r, e.Revision(), err
}

func (m *meta) Sync(ctx context.Context, rev store.Revision) error {
	return m.ix.waitFor(ctx, rev, 2*time.Second)
}

func (m *meta) ByName(ctx context.Context, ws, name string) (store.FileRecord, store.Revision, error) {
	if r, rev, ok := m.ix.byName(ws, name); ok {
		return r, rev, nil
	}
	// Not in the view: perhaps another host created it a moment ago.
	cl, _, err := m.getClaim(ctx, ws, name)
	if err != nil {
		return store.FileRecord{}, 0, err
	}
	r, rev, err := m.Latest(ctx, ws, cl.ID)
	if err == nil && r.Name != name {
		err = errNoFile()
	}
	return r, rev, err
}

func (m *meta) getClaim(ctx context.Context, ws, name string) (claim, jetstream.KeyValueEntry, error) {
	e, err := m.kv.Get(ctx, nameKey(ws, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return claim{}, nil, errNoFile()
	}
	if err != nil {
		return claim{}, nil, unavailable("reading file metadata", err)
	}
	var cl claim
	if err := json.Unmarshal(e.Value(), &cl); err != nil {
		return cl, e, apierr.Wrap(apierr.Internal, err, "a name claim in NATS is damaged (%v)", err)
	}
	return cl, e, nil
}

func (m *meta) List(ctx context.Context, ws string) ([]store.FileRecord, error) {
	return m.ix.list(ws), nil
}

func (m *meta) All(ctx context.Context) ([]store.WorkspaceRecord, error) {
	return m.ix.all(), nil
}

func (m *meta) Create(ctx context.Context, ws string, r store.FileRecord) (store.Revision, error) {
	val, err := json.Marshal(r)
	if err != nil {
		return 0, apierr.Wrap(apierr.Internal, err, "encoding file metadata failed: %v", err)
	}
	k := fileKey(ws, r.ID)
	rev, err := m.kv.Create(ctx, k, val)
	if err != nil {
		return 0, unavailable("recording file metadata", err)
	}
	m.ix.apply(k, rev, val, false)
	if err := m.claim(ctx, ws, r.Name, r.ID); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.cfg.Timeout)
		if m.kv.Delete(dctx, k, jetstream.LastRevision(rev)) == nil {
			m.ix.apply(k, rev+1, nil, false)
		}
		cancel()
		return 0, err
	}
	return rev, nil
}

// claim makes name id's, taking over a stale claim.
func (m *meta) claim(ctx context.Context, ws, name, id string) error {
	k := nameKey(ws, name)
	val, _ := json.Marshal(claim{ID: id, Name: name})
	for attempt := 0; attempt < 8; attempt++ {
		rev, err := m.kv.Create(ctx, k, val)
		if err == nil {
			m.ix.apply(k, rev, val, false)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return unavailable("claiming a file name", err)
		}
		cl, e, err := m.getClaim(ctx, ws, name)
		if apierr.Is(err, apierr.NotFound) {
			continue // freed meanwhile
		}
		if err != nil {
			return err
		}
		holder, _, err := m.Latest(ctx, ws, cl.ID)
		stale := false
		switch {
		case apierr.Is(err, apierr.NotFound):
			stale = true // its record is gone: a delete or create that did not finish
		case err != nil:
			return err
		case holder.Name != name:
			stale = time.Since(e.Created()) > m.c.cfg.LeaseTime // an unfinished rename
		}
		if !stale {
			return apierr.New(apierr.AlreadyExists, "file %q already exists; pass overwrite: true to replace it, or choose another name", name)
		}
		if rev, err := m.kv.Update(ctx, k, val, e.Revision()); err == nil {
			m.ix.apply(k, rev, val, false)
			return nil
		} else if !isWrongRevision(err) {
			return unavailable("claiming a file name", err)
		}
	}
	return apierr.New(apierr.Busy, "file name %q is being claimed by other writers; try again", name)
}

// unclaim frees name if id holds it.
func (m *meta) unclaim(ctx context.Context, ws, name, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.cfg.Timeout)
	defer cancel()
	k := nameKey(ws, name)
	var crev uint64
	m.ix.mu.RLock()
	if sp := m.ix.spaces[wsKey(ws)]; sp != nil && sp.claims[name].ID == id {
		crev = m.ix.revs[k]
	}
	m.ix.mu.RUnlock()
	if crev == 0 {
		cl, e, err := m.getClaim(ctx, ws, name)
		if err != nil || cl.ID != id {
			return
		}
		crev = e.Revision()
	}
	if rev, err := deleteAt(ctx, m.kv, k, crev); err == nil {
		m.ix.apply(k, rev, nil, false)
	} else if isWrongRevision(err) {
		// The view was behind: ask the bucket.
		if cl, e, err := m.getClaim(ctx, ws, name); err == nil && cl.ID == id {
			if rev, err := deleteAt(ctx, m.kv, k, e.Revision()); err == nil {
				m.ix.apply(k, rev, nil, false)
			}
		}
	}
}

func (m *meta) Update(ctx context.Context, ws string, prev, next store.FileRecord, rev store.Revision) (store.Revision, error) {
	val, err := json.Marshal(next)
	if err != nil {
		return 0, apierr.Wrap(apierr.Internal, err, "encoding file metadata failed: %v", err)
	}
	renamed := next.Name != prev.Name
	if renamed {
		if err := m.claim(ctx, ws, next.Name, next.ID); err != nil {
			return 0, err
		}
	}
	k := fileKey(ws, next.ID)
	nrev, err := m.kv.Update(ctx, k, val, rev)
	if err != nil {
		if renamed {
			m.unclaim(ctx, ws, next.Name, next.ID)
		}
		if isWrongRevision(err) {
			return 0, store.ErrConflict
		}
		return 0, unavailable("recording file metadata", err)
	}
	m.ix.apply(k, nrev, val, false)
	if renamed {
		m.unclaim(ctx, ws, prev.Name, prev.ID)
	}
	return nrev, nil
}

func (m *meta) Delete(ctx context.Context, ws string, r store.FileRecord, rev store.Revision) (store.Revision, error) {
	k := fileKey(ws, r.ID)
	tomb := store.FileRecord{ID: r.ID, Name: r.Name, Deleted: true, Host: m.c.hostID, ModifiedOn: time.Now().UTC()}
	val, _ := json.Marshal(tomb)
	trev, err := m.kv.Update(ctx, k, val, rev)
	if err != nil {
		if isWrongRevision(err) {
			return 0, store.ErrConflict
		}
		return 0, unavailable("deleting file metadata", err)
	}
	m.ix.apply(k, trev, val, false)
	m.unclaim(ctx, ws, r.Name, r.ID)
	m.c.background(func(ctx context.Context) {
		if drev, err := deleteAt(ctx, m.kv, k, trev); err == nil {
			m.ix.apply(k, drev, nil, false)
		}
	})
	return trev, nil
}
