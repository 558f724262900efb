package natsstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/store/storetest"
)

// The crash windows of the shared engine, each made by hand: a host does
// the first steps of a change through its backend and "dies" (closes
// without finishing: its heartbeat goes, as a killed host's expires).

// putBody stores data under a new key of host c, as a write does.
func putBody(t *testing.T, c *conn, b *store.Backend, data []byte) (key, sha string) {
	t.Helper()
	key = c.hostID + "/" + uuid.NewString()
	w, err := b.Blobs.Create(bg, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(data)
	sha = hex.EncodeToString(h[:])
	if _, err := w.Commit(int64(len(data)), sha); err != nil {
		t.Fatal(err)
	}
	return key, sha
}

// A host that dies after committing a change and before publishing its
// event: another host publishes it (and a host that published before
// dying is not published twice).
func TestDeadHostsEventIsPublishedByAnother(t *testing.T) {
	d := newDeployment()
	_, bb := d.backend(t, time.Second)
	b := d.storeOn(t, store.Config{}, bb)
	events, cancel := b.Bus().Subscribe("default", 0)
	defer cancel()

	c, cb := d.backend(t, time.Second)
	data := []byte("made by a host that died\n")
	key, sha := putBody(t, c, cb, data)
	now := time.Now()
	rec := store.FileRecord{ID: uuid.NewString(), Name: "orphan/event.txt", MimeType: "text/plain", Size: int64(len(data)),
		SHA256: sha, Blob: key, Source: store.SourceCreated, CreatedOn: now, ModifiedOn: now, Host: c.hostID, Change: store.EventCreated}
	if _, err := cb.Meta.Create(bg, "default", rec); err != nil {
		t.Fatal(err)
	}
	cb.Close() // dies before publishing file:created

	e := storetest.Next(t, events)
	if e.Type != store.EventCreated || e.Data["id"] != rec.ID || e.Data["name"] != "orphan/event.txt" || e.Data["size"] != int64(len(data)) {
		t.Fatalf("the repaired event is %+v", e)
	}
	if got := storetest.Read(t, b.Workspace("default"), "orphan/event.txt"); got != string(data) {
		t.Fatalf("read %q", got)
	}

	// A host that published before dying: its event is stored once.
	c2, cb2 := d.backend(t, time.Second)
	checked := make(chan observed, 4)
	rp := hostRepair(t, bb)
	rp.mu.Lock()
	rp.onCheck = func(o observed) { checked <- o }
	rp.mu.Unlock()
	key2, sha2 := putBody(t, c2, cb2, []byte("x"))
	rec2 := rec
	rec2.ID, rec2.Name, rec2.Size, rec2.SHA256, rec2.Blob, rec2.Host = uuid.NewString(), "published.txt", 1, sha2, key2, c2.hostID
	rev, err := cb2.Meta.Create(bg, "default", rec2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cb2.Events.Publish(bg, "default", store.EventCreated, map[string]any{"id": rec2.ID, "name": rec2.Name},
		store.ChangeRef{Key: store.FileChangeKey("default", rec2.ID, rev), Rev: rev}); err != nil {
		t.Fatal(err)
	}
	cb2.Close()
	if e := storetest.Next(t, events); e.Data["id"] != rec2.ID {
		t.Fatalf("got %+v", e)
	}
	select {
	case o := <-checked:
		if o.rec.ID != rec2.ID {
			t.Fatalf("checked %+v", o.rec)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the surviving host did not check the dead host's change")
	}
	storetest.Create(t, b.Workspace("default"), "after.txt", "a")
	if e := storetest.Next(t, events); e.Data["name"] != "after.txt" {
		t.Fatalf("after the repair, the next event is %+v (a duplicate?)", e)
	}
}

// hostRepair is the repair loop of the host whose backend is b.
func hostRepair(t *testing.T, b *store.Backend) *repair {
	t.Helper()
	r, ok := b.Events.(*events)
	if !ok {
		t.Fatal("not a NATS backend")
	}
	return r.c.repair
}

// Usage counts a record once, whether or not its writer dropped its
// reservation before dying; a reservation of a dead host counts nothing.
func TestUsageAfterAWriterDies(t *testing.T) {
	d := newDeployment()
	_, bb := d.backend(t, time.Second)
	b := d.storeOn(t, store.Config{MaxWorkspaceSize: 10_000}, bb)
	w := b.Workspace("default")

	c, cb := d.backend(t, time.Second)
	data := bytes.Repeat([]byte("q"), 1000)
	key, sha := putBody(t, c, cb, data)
	if err := cb.Quota.Reserve(bg, "default", key, 1000, 10_000); err != nil {
		t.Fatal(err)
	}
	if err := cb.Quota.Reserve(bg, "default", c.hostID+"/never-stored", 4000, 10_000); err != nil {
		t.Fatal(err)
	}
	waitUsage(t, w, func(u store.Usage) bool { return u.Files == 0 && u.InFlight == 5000 })
	now := time.Now()
	rec := store.FileRecord{ID: uuid.NewString(), Name: "counted.bin", Size: 1000, SHA256: sha, Blob: key,
		CreatedOn: now, ModifiedOn: now, Host: c.hostID, Change: store.EventCreated}
	if _, err := cb.Meta.Create(bg, "default", rec); err != nil {
		t.Fatal(err)
	}
	// The record holds the body: its reservation counts nothing any more,
	// although it was never released.
	waitUsage(t, w, func(u store.Usage) bool { return u.Files == 1000 && u.InFlight == 4000 })
	cb.Close() // dies holding the other reservation
	waitUsage(t, w, func(u store.Usage) bool { return u.Files == 1000 && u.InFlight == 0 })
	// The room is usable: 9,000 bytes fit, one more does not.
	if _, err := w.Create(bg, store.CreateOptions{Name: "fill.bin"}, bytes.NewReader(make([]byte, 9000))); err != nil {
		t.Fatal(err)
	}
	_, err := w.Create(bg, store.CreateOptions{Name: "over.bin"}, strings.NewReader("x"))
	storetest.WantCode(t, err, apierr.QuotaExceeded)
}

// waitUsage polls the workspace's usage until ok (the view follows other
// hosts' changes, and a host's death shows when its heartbeat expires;
// neither has an event) for at most 10 s.
func waitUsage(t *testing.T, w *store.Workspace, ok func(store.Usage) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		u, err := w.UsageDetail(bg)
		if err == nil && ok(u) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage stays %+v (%v)", u, err)
		}
		time.Sleep(20 * time.Millisecond) // polling: see above
	}
}

// The janitor removes what crashed hosts leave, and nothing else.
func TestJanitorRemovesWhatDeadHostsLeave(t *testing.T) {
	d := newDeployment()
	bc, bb := d.backend(t, time.Second)
	b := d.storeOn(t, store.Config{}, bb)
	w := b.Workspace("default")
	kept := storetest.Create(t, w, "kept.txt", "kept")

	c, cb := d.backend(t, time.Second)
	// A put that never finished: three chunks, no object.
	half, err := cb.Blobs.Create(bg, c.hostID+"/"+uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := half.Write(make([]byte, 3*chunkSize+10)); err != nil {
		t.Fatal(err)
	}
	for len(half.(*blobWriter).acks) > 0 {
		half.(*blobWriter).settle()
	}
	deadChunks := half.(*blobWriter).subject
	// A body stored whose record never came.
	orphan, _ := putBody(t, c, cb, []byte("orphan"))
	// A record whose name was never claimed, and a tombstone left behind.
	old := time.Now().Add(-time.Hour)
	unclaimed := store.FileRecord{ID: uuid.NewString(), Name: "never-named.txt", Blob: orphan, CreatedOn: old, ModifiedOn: old, Host: c.hostID}
	tombstone := store.FileRecord{ID: uuid.NewString(), Name: "gone.txt", Deleted: true, ModifiedOn: old, Host: c.hostID}
	for _, r := range []store.FileRecord{unclaimed, tombstone} {
		val, _ := json.Marshal(r)
		if _, err := c.files.Create(bg, fileKey("default", r.ID), val); err != nil {
			t.Fatal(err)
		}
	}
	// A tool saved without its charge, and a charge without its tool.
	ghost := store.ToolRecord{Name: "uncharged", InputSchema: []byte(`{}`), Code: "return 1"}
	if _, err := cb.Tools.Put(bg, "default", ghost, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.Quota.Charge(bg, "default", store.ToolChargeKey("deleted_tool"), 123, 1<<30); err != nil {
		t.Fatal(err)
	}
	cb.Close() // dies

	// A live host's body with no record yet (a write in progress) stays.
	inFlight, _ := putBody(t, bc, bb, []byte("in flight"))

	waitDead(t, bc, c.hostID)
	bc.ix.waitFor(bg, lastRevision(t, bc), 10*time.Second)
	bc.janitor.pass(bg)
	bc.janitor.pass(bg) // charges are fixed when seen wrong twice

	info, err := bc.bodiesStream.Info(bg, jetstream.WithSubjectFilter(deadChunks))
	if err != nil || info.State.Subjects[deadChunks] != 0 {
		t.Fatalf("the dead put's chunks are still there: %v %v", info.State.Subjects, err)
	}
	_, err = bb.Blobs.Stat(bg, orphan)
	storetest.WantCode(t, err, apierr.NotFound)
	if _, err := bb.Blobs.Stat(bg, inFlight); err != nil {
		t.Fatalf("a live host's body in flight was removed: %v", err)
	}
	for _, id := range []string{unclaimed.ID, tombstone.ID} {
		if _, err := c.files.Get(bg, fileKey("default", id)); err == nil {
			t.Fatalf("record %s is still there", id)
		}
	}
	if got := storetest.Read(t, w, kept.ID); got != "kept" {
		t.Fatalf("a live file changed: %q", got)
	}
	u, err := bb.Quota.Usage(bg, "default")
	if err != nil || u.Charges[store.ToolChargeKey("deleted_tool")] != 0 || u.Charges[store.ToolChargeKey("uncharged")] != ghost.Bytes() {
		t.Fatalf("charges %+v %v", u.Charges, err)
	}
}

// waitDead waits until c no longer sees host as alive (its heartbeat
// expires on the server's clock; nothing announces it).
func waitDead(t *testing.T, c *conn, host string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.isAlive(bg, host) {
		if time.Now().After(deadline) {
			t.Fatal("the closed host still counts as alive")
		}
		time.Sleep(20 * time.Millisecond) // polling: see above
	}
}

// lastRevision is the files bucket's last revision.
func lastRevision(t *testing.T, c *conn) uint64 {
	t.Helper()
	st, err := c.js.Stream(bg, "KV_"+c.files.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(bg)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}
