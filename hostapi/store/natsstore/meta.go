package natsstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// meta keeps file records in the files bucket:
//
//	<ws>.f.<id>          the record (JSON)
//	<ws>.n.<sha256(name)> the name claim: {id, name}
//
// A name belongs to a file through its claim, created with
// compare-and-set on "does not exist", so two hosts creating the same name
// at once get one file and one ALREADY_EXISTS. A record is created before
// its claim and a claim removed after its record, so a claim pointing at
// no record is stale (a crash between the two steps) and is taken over; a
// record no claim points to is invisible. A rename claims the new name,
// updates the record, then frees the old name; a claim pointing at a
// record of another name is stale once it is older than the lease time.
//
// Every host follows the bucket with a watcher and keeps an index of it,
// so that List (and the name lookups' first guess) need no round trip;
// single-file reads go to the bucket, so they see every host's latest
// change.
type meta struct {
	c  *conn
	kv jetstream.KeyValue

	mu      sync.RWMutex
	spaces  map[string]*wsIndex // by workspace key
	revs    map[string]uint64   // last revision applied, per bucket key
	watcher jetstream.KeyWatcher
	done    chan struct{}
}

type wsIndex struct {
	recs   map[string]indexed // by id
	claims map[string]claim   // by name
	names  map[string]string  // claim key suffix (name hash) → name
}

type indexed struct {
	rec store.FileRecord
	rev uint64
}

type claim struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

var _ store.MetaStore = (*meta)(nil)

func newMeta(ctx context.Context, c *conn) (*meta, error) {
	m := &meta{c: c, kv: c.files, spaces: map[string]*wsIndex{}, revs: map[string]uint64{}, done: make(chan struct{})}
	w, err := c.files.WatchAll(context.Background())
	if err != nil {
		return nil, unavailable("following the file metadata", err)
	}
	m.watcher = w
	ready := make(chan struct{})
	go m.follow(ready)
	select {
	case <-ready:
	case <-ctx.Done():
		w.Stop()
		return nil, apierr.From(ctx.Err())
	case <-time.After(2 * time.Minute):
		w.Stop()
		return nil, apierr.New(apierr.Timeout, "loading the file metadata from NATS took longer than 2 minutes")
	}
	return m, nil
}

// follow applies the bucket's changes to the index; ready is closed once
// the initial state is loaded.
func (m *meta) follow(ready chan struct{}) {
	defer close(m.done)
	for e := range m.watcher.Updates() {
		if e == nil {
			if ready != nil {
				close(ready)
				ready = nil
			}
			continue
		}
		var val []byte
		if e.Operation() == jetstream.KeyValuePut {
			val = e.Value()
		}
		m.apply(e.Key(), e.Revision(), val)
	}
}

func (m *meta) close() {
	m.watcher.Stop()
	<-m.done
}

func fileKey(ws, id string) string { return wsKey(ws) + ".f." + id }

func nameKey(ws, name string) string {
	h := sha256.Sum256([]byte(name))
	return wsKey(ws) + ".n." + hex.EncodeToString(h[:])
}

// apply records a key's value at rev in the index (val nil: deleted),
// unless the index already has a later revision of it.
func (m *meta) apply(key string, rev uint64, val []byte) {
	parts := strings.SplitN(key, ".", 3)
	if len(parts) != 3 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev <= m.revs[key] {
		return
	}
	m.revs[key] = rev
	sp := m.spaces[parts[0]]
	if sp == nil {
		sp = &wsIndex{recs: map[string]indexed{}, claims: map[string]claim{}, names: map[string]string{}}
		m.spaces[parts[0]] = sp
	}
	switch parts[1] {
	case "f":
		if val == nil {
			delete(sp.recs, parts[2])
			return
		}
		var r store.FileRecord
		if json.Unmarshal(val, &r) == nil {
			sp.recs[parts[2]] = indexed{rec: r, rev: rev}
		}
	case "n":
		if val == nil {
			if name, ok := sp.names[parts[2]]; ok {
				delete(sp.claims, name)
				delete(sp.names, parts[2])
			}
			return
		}
		var cl claim
		if json.Unmarshal(val, &cl) == nil {
			sp.claims[cl.Name] = cl
			sp.names[parts[2]] = cl.Name
		}
	}
}

func decodeRecord(e jetstream.KeyValueEntry) (store.FileRecord, error) {
	var r store.FileRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return r, apierr.Wrap(apierr.Internal, err, "a file record in NATS is damaged (%v); run `metaclaw fsck`", err)
	}
	return r, nil
}

func (m *meta) Get(ctx context.Context, ws, id string) (store.FileRecord, store.Revision, error) {
	e, err := m.kv.Get(ctx, fileKey(ws, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return store.FileRecord{}, 0, apierr.New(apierr.NotFound, "file not found; call files.list() to see the workspace's files")
	}
	if err != nil {
		return store.FileRecord{}, 0, unavailable("reading file metadata", err)
	}
	r, err := decodeRecord(e)
	return r, e.Revision(), err
}

func (m *meta) ByName(ctx context.Context, ws, name string) (store.FileRecord, store.Revision, error) {
	m.mu.RLock()
	var guess string
	if sp := m.spaces[wsKey(ws)]; sp != nil {
		guess = sp.claims[name].ID
	}
	m.mu.RUnlock()
	if guess != "" {
		r, rev, err := m.Get(ctx, ws, guess)
		if err == nil && r.Name == name {
			return r, rev, nil
		}
		if err != nil && !apierr.Is(err, apierr.NotFound) {
			return r, 0, err
		}
	}
	// The index may lag behind another host: ask the claim.
	cl, _, err := m.getClaim(ctx, ws, name)
	if err != nil {
		return store.FileRecord{}, 0, err
	}
	r, rev, err := m.Get(ctx, ws, cl.ID)
	if err == nil && r.Name != name {
		err = apierr.New(apierr.NotFound, "file not found; call files.list() to see the workspace's files")
	}
	return r, rev, err
}

func (m *meta) getClaim(ctx context.Context, ws, name string) (claim, jetstream.KeyValueEntry, error) {
	e, err := m.kv.Get(ctx, nameKey(ws, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return claim{}, nil, apierr.New(apierr.NotFound, "file not found; call files.list() to see the workspace's files")
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
	m.mu.RLock()
	sp := m.spaces[wsKey(ws)]
	var out []store.FileRecord
	if sp != nil {
		out = make([]store.FileRecord, 0, len(sp.claims))
		for name, cl := range sp.claims {
			if ix, ok := sp.recs[cl.ID]; ok && ix.rec.Name == name {
				out = append(out, ix.rec)
			}
		}
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *meta) All(ctx context.Context) ([]store.WorkspaceRecord, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []store.WorkspaceRecord
	for key, sp := range m.spaces {
		ws, ok := wsName(key)
		if !ok {
			continue
		}
		for name, cl := range sp.claims {
			if ix, ok := sp.recs[cl.ID]; ok && ix.rec.Name == name {
				out = append(out, store.WorkspaceRecord{Workspace: ws, Record: ix.rec, Revision: ix.rev})
			}
		}
	}
	return out, nil
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
	m.apply(k, rev, val)
	if err := m.claim(ctx, ws, r.Name, r.ID); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.cfg.Timeout)
		if m.kv.Delete(dctx, k, jetstream.LastRevision(rev)) == nil {
			m.apply(k, rev+1, nil)
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
			m.apply(k, rev, val)
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
		holder, _, err := m.Get(ctx, ws, cl.ID)
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
			m.apply(k, rev, val)
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
	cl, e, err := m.getClaim(ctx, ws, name)
	if err != nil || cl.ID != id {
		return
	}
	k := nameKey(ws, name)
	if m.kv.Delete(ctx, k, jetstream.LastRevision(e.Revision())) == nil {
		m.apply(k, e.Revision()+1, nil)
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
	m.apply(k, nrev, val)
	if renamed {
		m.unclaim(ctx, ws, prev.Name, prev.ID)
	}
	return nrev, nil
}

func (m *meta) Delete(ctx context.Context, ws string, r store.FileRecord, rev store.Revision) error {
	k := fileKey(ws, r.ID)
	if err := m.kv.Delete(ctx, k, jetstream.LastRevision(rev)); err != nil {
		if isWrongRevision(err) {
			return store.ErrConflict
		}
		return unavailable("deleting file metadata", err)
	}
	m.apply(k, rev+1, nil)
	m.unclaim(ctx, ws, r.Name, r.ID)
	return nil
}
