package natsstore

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// The files bucket holds everything the hosts coordinate on, so that one
// watch, in the bucket's order, keeps each host's view of it:
//
//	<ws>.f.<id>           a file record (JSON; a tombstone while it is being deleted)
//	<ws>.n.<sha256(name)> a name claim: {id, name}
//	<ws>.l.<id>           a file's lease: {host, token, since}
//	<ws>.q.ledger         the quota ledger: charges and reservations
//
// Because a lease and a ledger are revisions of the same stream as the
// records, a host that has applied the bucket up to a lease's (or a
// ledger's) revision has seen every change made before it: a writer under
// a lease reads the record from its view, and a quota check counts the
// records its view holds at the ledger's revision.

// index is this host's view of the files bucket.
type index struct {
	c *conn

	mu      sync.RWMutex
	spaces  map[string]*wsIndex // by workspace key
	revs    map[string]uint64   // last revision applied, per record, claim and ledger key
	applied uint64              // every revision up to it has been applied (the watch's order)
	advance chan struct{}       // closed and replaced when applied grows
	sweep   int                 // applies since revs was last pruned
	live    bool                // the initial state is loaded

	watcher jetstream.KeyWatcher // guarded by mu
	restart chan struct{}        // asks follow for a new watcher
	stopped chan struct{}        // closed by close
	done    chan struct{}
	// observe is told of every record change that another host made,
	// after the initial state (the event repair).
	observe func(ws string, prev *store.FileRecord, rec store.FileRecord, rev uint64)
}

type wsIndex struct {
	name      string
	recs      map[string]indexed // by id; tombstones are not here
	claims    map[string]claim   // by name
	names     map[string]string  // claim key suffix (name hash) → name
	blobs     map[string]int     // blob key → how many records refer to it (bodies and backups)
	tombs     map[string]tomb    // tombstones by id, until their removal
	ledger    ledgerEntry
	ledgerRev uint64
	files     int64 // sizes of the records' bodies
	backups   int64 // sizes of their backups
	sorted    []store.FileRecord
}

type tomb struct {
	rev uint64
	at  time.Time
}

type indexed struct {
	rec store.FileRecord
	rev uint64
}

type claim struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func newIndex(ctx context.Context, c *conn) (*index, error) {
	ix := &index{c: c, spaces: map[string]*wsIndex{}, revs: map[string]uint64{}, advance: make(chan struct{}),
		restart: make(chan struct{}, 1), stopped: make(chan struct{}), done: make(chan struct{})}
	w, err := c.files.WatchAll(context.Background())
	if err != nil {
		return nil, unavailable("following the file metadata", err)
	}
	ix.watcher = w
	ready := make(chan struct{})
	go ix.follow(ready)
	select {
	case <-ready:
	case <-ctx.Done():
		w.Stop()
		return nil, apierr.From(ctx.Err())
	case <-time.After(2 * time.Minute):
		w.Stop()
		return nil, apierr.New(apierr.Timeout, "loading the file metadata from NATS took longer than 2 minutes")
	}
	return ix, nil
}

// follow applies the bucket's changes in order; ready is closed once the
// initial state is loaded. When the connection comes back after a
// failover, or the view falls behind, it follows again from the revision
// after the last one applied (the library's watch only notices a lost
// consumer after missing its heartbeats, which takes seconds).
func (ix *index) follow(ready chan struct{}) {
	defer close(ix.done)
	ix.mu.RLock()
	w := ix.watcher
	ix.mu.RUnlock()
	for {
		select {
		case <-ix.stopped:
			w.Stop()
			return
		case <-ix.restart:
			ix.mu.RLock()
			from := ix.applied + 1
			ix.mu.RUnlock()
			nw, err := ix.c.files.WatchAll(context.Background(), jetstream.ResumeFromRevision(from))
			if err != nil {
				// NATS is still away: try again shortly.
				time.AfterFunc(250*time.Millisecond, ix.kick)
				continue
			}
			w.Stop()
			w = nw
			ix.mu.Lock()
			ix.watcher = w
			ix.mu.Unlock()
		case e, ok := <-w.Updates():
			if !ok {
				// Stopped under us: wait for a restart or the end.
				w = stoppedWatcher{}
				continue
			}
			if e == nil {
				ix.mu.Lock()
				ix.live = true
				ix.mu.Unlock()
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
			ix.apply(e.Key(), e.Revision(), val, true)
		}
	}
}

// kick asks follow to follow the bucket again (coalesced).
func (ix *index) kick() {
	select {
	case ix.restart <- struct{}{}:
	default:
	}
}

// stoppedWatcher delivers nothing.
type stoppedWatcher struct{}

func (stoppedWatcher) Updates() <-chan jetstream.KeyValueEntry { return nil }
func (stoppedWatcher) Stop() error                             { return nil }

func (ix *index) close() {
	close(ix.stopped)
	<-ix.done
}

func (ix *index) space(wsk string) *wsIndex {
	sp := ix.spaces[wsk]
	if sp == nil {
		name, _ := wsName(wsk)
		sp = &wsIndex{name: name, recs: map[string]indexed{}, claims: map[string]claim{}, names: map[string]string{}, blobs: map[string]int{}, tombs: map[string]tomb{}}
		ix.spaces[wsk] = sp
	}
	return sp
}

// apply records a key's value at rev (val nil: deleted), unless the view
// already has a later revision of it. fromWatch says the change comes in
// the bucket's order (own changes are applied at once, ahead of it).
func (ix *index) apply(key string, rev uint64, val []byte, fromWatch bool) {
	parts := strings.SplitN(key, ".", 3)
	ix.mu.Lock()
	var notify func()
	if len(parts) == 3 && parts[1] != "l" && rev > ix.revs[key] {
		ix.revs[key] = rev
		notify = ix.applyLocked(parts, rev, val, fromWatch && ix.live)
	}
	if fromWatch && rev > ix.applied {
		ix.applied = rev
		close(ix.advance)
		ix.advance = make(chan struct{})
		if ix.sweep++; ix.sweep >= 4096 {
			ix.pruneLocked()
		}
	}
	ix.mu.Unlock()
	if notify != nil {
		notify()
	}
}

// pruneLocked forgets the revisions of deleted keys the watch has passed:
// no older change of them can arrive any more.
func (ix *index) pruneLocked() {
	ix.sweep = 0
	for k, rev := range ix.revs {
		if rev > ix.applied {
			continue
		}
		parts := strings.SplitN(k, ".", 3)
		sp := ix.spaces[parts[0]]
		gone := sp == nil
		if !gone {
			switch parts[1] {
			case "f":
				_, ok := sp.recs[parts[2]]
				gone = !ok
			case "n":
				_, ok := sp.names[parts[2]]
				gone = !ok
			}
		}
		if gone {
			delete(ix.revs, k)
		}
	}
}

func (sp *wsIndex) count(r store.FileRecord, sign int64) {
	sp.files += sign * r.Size
	sp.blobs[r.Blob] += int(sign)
	if sp.blobs[r.Blob] <= 0 {
		delete(sp.blobs, r.Blob)
	}
	if r.Backup != nil {
		sp.backups += sign * r.Backup.Size
		sp.blobs[r.Backup.Blob] += int(sign)
		if sp.blobs[r.Backup.Blob] <= 0 {
			delete(sp.blobs, r.Backup.Blob)
		}
	}
}

func (ix *index) applyLocked(parts []string, rev uint64, val []byte, observe bool) func() {
	sp := ix.space(parts[0])
	switch parts[1] {
	case "f":
		old, had := sp.recs[parts[2]]
		var r store.FileRecord
		deleted := val == nil
		if !deleted {
			if json.Unmarshal(val, &r) != nil {
				return nil
			}
			deleted = r.Deleted
		}
		if had {
			sp.count(old.rec, -1)
			delete(sp.recs, parts[2])
		}
		if !deleted {
			sp.recs[parts[2]] = indexed{rec: r, rev: rev}
			sp.count(r, 1)
		}
		if val != nil && r.Deleted {
			sp.tombs[parts[2]] = tomb{rev: rev, at: r.ModifiedOn}
		} else {
			delete(sp.tombs, parts[2])
		}
		sp.sorted = nil
		if observe && val != nil && r.Host != "" && r.Host != ix.c.hostID && ix.observe != nil {
			var prev *store.FileRecord
			if had {
				p := old.rec
				prev = &p
			}
			ws, fn := sp.name, ix.observe
			return func() { fn(ws, prev, r, rev) }
		}
	case "n":
		if val == nil {
			if name, ok := sp.names[parts[2]]; ok {
				delete(sp.claims, name)
				delete(sp.names, parts[2])
			}
		} else {
			var cl claim
			if json.Unmarshal(val, &cl) == nil {
				sp.claims[cl.Name] = cl
				sp.names[parts[2]] = cl.Name
			}
		}
		sp.sorted = nil
	case "q":
		var e ledgerEntry
		if val != nil {
			json.Unmarshal(val, &e)
		}
		sp.ledger, sp.ledgerRev = e, rev
		if val == nil {
			sp.ledgerRev = 0
		}
	}
	return nil
}

// waitFor waits until the view holds every change up to rev, at most
// limit (the watch may be reconnecting).
func (ix *index) waitFor(ctx context.Context, rev uint64, limit time.Duration) error {
	var timer <-chan time.Time
	for {
		ix.mu.RLock()
		ok, ch := ix.applied >= rev, ix.advance
		ix.mu.RUnlock()
		if ok {
			return nil
		}
		if timer == nil {
			t := time.NewTimer(limit)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-ch:
		case <-timer:
			ix.kick() // the watch may have lost its consumer
			return apierr.New(apierr.Busy, "this host's view of the file metadata is behind NATS; try again")
		case <-ctx.Done():
			return apierr.From(ctx.Err())
		}
	}
}

// record returns a record of the view (tombstones excluded).
func (ix *index) record(ws, id string) (store.FileRecord, uint64, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if sp := ix.spaces[wsKey(ws)]; sp != nil {
		if r, ok := sp.recs[id]; ok {
			return r.rec, r.rev, true
		}
	}
	return store.FileRecord{}, 0, false
}

// byName returns the record that holds name in the view.
func (ix *index) byName(ws, name string) (store.FileRecord, uint64, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	sp := ix.spaces[wsKey(ws)]
	if sp == nil {
		return store.FileRecord{}, 0, false
	}
	cl, ok := sp.claims[name]
	if !ok {
		return store.FileRecord{}, 0, false
	}
	r, ok := sp.recs[cl.ID]
	if !ok || r.rec.Name != name {
		return store.FileRecord{}, 0, false
	}
	return r.rec, r.rev, true
}

// list returns the workspace's visible records by name. The slice is
// shared with later calls until the workspace changes: read it, do not
// change it.
func (ix *index) list(ws string) []store.FileRecord {
	wsk := wsKey(ws)
	ix.mu.RLock()
	sp := ix.spaces[wsk]
	if sp == nil {
		ix.mu.RUnlock()
		return nil
	}
	if out := sp.sorted; out != nil {
		ix.mu.RUnlock()
		return out
	}
	ix.mu.RUnlock()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if sp.sorted != nil {
		return sp.sorted
	}
	out := make([]store.FileRecord, 0, len(sp.claims))
	for name, cl := range sp.claims {
		if r, ok := sp.recs[cl.ID]; ok && r.rec.Name == name {
			out = append(out, r.rec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	sp.sorted = out
	return out
}

// all returns every visible record of every workspace.
func (ix *index) all() []store.WorkspaceRecord {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []store.WorkspaceRecord
	for _, sp := range ix.spaces {
		for name, cl := range sp.claims {
			if r, ok := sp.recs[cl.ID]; ok && r.rec.Name == name {
				out = append(out, store.WorkspaceRecord{Workspace: sp.name, Record: r.rec, Revision: r.rev})
			}
		}
	}
	return out
}

// ledger returns the workspace's ledger as the view holds it.
func (ix *index) ledger(ws string) (ledgerEntry, uint64) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if sp := ix.spaces[wsKey(ws)]; sp != nil {
		return sp.ledger.clone(), sp.ledgerRev
	}
	return ledgerEntry{}, 0
}

// usage sums the workspace's records and tells which reservations are
// fulfilled (a record holds their body), as the view holds them.
func (ix *index) usage(ws string, reservations map[string]reservation) (files, backups int64, fulfilled map[string]bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	sp := ix.spaces[wsKey(ws)]
	if sp == nil {
		return 0, 0, nil
	}
	for id := range reservations {
		if sp.blobs[id] > 0 {
			if fulfilled == nil {
				fulfilled = map[string]bool{}
			}
			fulfilled[id] = true
		}
	}
	return sp.files, sp.backups, fulfilled
}

// referenced reports whether any record of any workspace refers to blob
// key, or any reservation is named by it.
func (ix *index) referenced() map[string]bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := map[string]bool{}
	for _, sp := range ix.spaces {
		for k := range sp.blobs {
			out[k] = true
		}
		for k := range sp.ledger.Reserved {
			out[k] = true
		}
	}
	return out
}

// unclaimed returns the records no claim points to.
func (ix *index) unclaimed() []store.WorkspaceRecord {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []store.WorkspaceRecord
	for _, sp := range ix.spaces {
		for id, r := range sp.recs {
			if cl, ok := sp.claims[r.rec.Name]; !ok || cl.ID != id {
				out = append(out, store.WorkspaceRecord{Workspace: sp.name, Record: r.rec, Revision: r.rev})
			}
		}
	}
	return out
}

// tombstones returns the tombstones older than age, as keys and revisions.
func (ix *index) tombstones(age time.Duration) map[string]uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := map[string]uint64{}
	for wsk, sp := range ix.spaces {
		for id, t := range sp.tombs {
			if time.Since(t.at) > age {
				out[wsk+".f."+id] = t.rev
			}
		}
	}
	return out
}

// workspaces returns the workspaces the view knows.
func (ix *index) workspaces() []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]string, 0, len(ix.spaces))
	for _, sp := range ix.spaces {
		out = append(out, sp.name)
	}
	return out
}
