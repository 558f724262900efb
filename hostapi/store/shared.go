package store

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// The shared engine: the Workspace API on the seams of a shared backend
// (backend.go), for several hosts serving the same workspaces.
//
// Write protocol, chosen so that no partial body is ever visible, racing
// hosts never take a workspace past its quota, a dead host blocks nobody
// for longer than its lease, and no crash makes usage disagree with the
// files:
//  1. stream the new body into this host's temp directory and, as it
//     arrives, into the blob store under a new key, hashing it and
//     reserving quota under that key in the shared ledger (the reservation
//     belongs to this host: it goes when the host's heartbeat does);
//  2. commit the body in the blob store (until then nothing is readable
//     under its key);
//  3. for an existing file, take its lease (one writer per file across all
//     hosts; this host's writers first queue for its local slot, and the
//     lease passes between them without a round trip while they queue),
//     and read its record as of the lease;
//  4. compare-and-set the record. From that moment the record's size
//     counts in the usage and the reservation (named by the body's key)
//     does not, so there is nothing else to commit: the reservation is
//     dropped in the background;
//  5. move the new body from the temp directory into this host's body
//     cache (it is read back without a fetch), drop the replaced body from
//     the blob store and publish the change event under the change's key
//     (if this host dies first, another publishes it: the record names
//     this host).
type sharedEngine struct {
	s     *Store
	b     Backend
	cache *bodyCache
	// drops are bodies being removed from the blob store after their
	// change committed (nobody can reach them any more: no need to wait).
	drops sync.WaitGroup

	slotMu sync.Mutex
	slots  map[string]*fileSlot
}

// fileSlot is one file's writers on this host: they take turns on sem, and
// the remote lease passes from one to the next while they queue (at most
// maxTurns in a row, so that other hosts get their turn).
type fileSlot struct {
	sem     chan struct{}
	waiting int // writers holding or waiting for sem
	release func()
	rev     Revision
	turns   int
}

const maxTurns = 8

func openShared(cfg Config) (*Store, error) {
	b := cfg.Backend
	if b.Blobs == nil || b.Meta == nil || b.Leases == nil || b.Quota == nil || b.Events == nil || b.Tools == nil {
		return nil, apierr.New(apierr.Internal, "the shared backend is incomplete; open it with natsstore.Open")
	}
	s := &Store{
		cfg:      cfg,
		tmpRoot:  filepath.Join(cfg.Dir, "tmp"),
		cacheDir: filepath.Join(cfg.Dir, "cache"),
		reserved: map[string]int64{},
		used:     map[string]int64{},
	}
	s.stop, s.stopNow = context.WithCancel(context.Background())
	for _, d := range []string{cfg.Dir, s.tmpRoot, s.cacheDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			rel, _ := filepath.Rel(cfg.Dir, d)
			return nil, apierr.Wrap(apierr.Internal, err, "cannot create the data directory's %q folder (%s); check the --data directory's permissions", rel, ioReason(err))
		}
	}
	var err error
	s.tmp, err = newProcTempDir(s.tmpRoot)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "cannot create a temp directory in the data directory (%s); check its permissions and free space", ioReason(err))
	}
	dead, unlock := deadTempEntries(s.tmpRoot, s.tmp.path)
	for _, p := range dead {
		os.RemoveAll(p)
	}
	for _, u := range unlock {
		u()
	}
	cache, err := newBodyCache(filepath.Join(s.cacheDir, "bodies"), cfg.BodyCacheBytes)
	if err != nil {
		s.tmp.close()
		return nil, apierr.Wrap(apierr.Internal, err, "cannot create the body cache (%s); check the data directory's permissions", ioReason(err))
	}
	s.shared = &sharedEngine{s: s, b: *b, cache: cache, slots: map[string]*fileSlot{}}
	s.startExpirySweeper(s.shared.sweepExpired)
	return s, nil
}

func (e *sharedEngine) close() error {
	e.drops.Wait()
	if e.b.Close != nil {
		return e.b.Close()
	}
	return nil
}

// detached is a context for steps that must finish once a change has
// started (dropping a body, publishing its event), whatever the caller's.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

func (e *sharedEngine) limit(ws string) int64 { return e.s.WorkspaceLimit(ws) }

func toFile(ws string, r FileRecord) *File {
	f := &File{
		ID: r.ID, Workspace: ws, Name: r.Name, MimeType: r.MimeType, Size: r.Size, DiskPath: r.Blob,
		Source: r.Source, SourceSessionID: r.SourceSessionID, CreatedOn: r.CreatedOn, ModifiedOn: r.ModifiedOn,
		SHA256: r.SHA256, ExpiresOn: r.ExpiresOn,
	}
	if r.Backup != nil {
		f.HasBackup = true
		f.backupSize, f.backupSHA, f.backupMIME = r.Backup.Size, r.Backup.SHA256, r.Backup.MimeType
	}
	return f
}

func (r FileRecord) body() BodyRef {
	return BodyRef{Blob: r.Blob, Size: r.Size, SHA256: r.SHA256, MimeType: r.MimeType}
}

func (r FileRecord) expired(now time.Time) bool {
	return !r.ExpiresOn.IsZero() && !r.ExpiresOn.After(now)
}

// resolve finds ref (an id or a name) in this host's view of the records
// (a round trip only when the view does not have it).
func (e *sharedEngine) resolve(ctx context.Context, ws, ref string) (FileRecord, Revision, error) {
	ref = strings.TrimSpace(ref)
	if err := ctx.Err(); err != nil {
		return FileRecord{}, 0, apierr.From(err)
	}
	if ref == "" {
		return FileRecord{}, 0, apierr.New(apierr.ValidationFailed, "file reference is empty; pass a file id or a name such as \"data.csv\"")
	}
	now := time.Now()
	if IsID(ref) {
		r, rev, err := e.b.Meta.Get(ctx, ws, strings.ToLower(ref))
		if err == nil && !r.expired(now) {
			return r, rev, nil
		}
		if err != nil && !apierr.Is(err, apierr.NotFound) {
			return FileRecord{}, 0, err
		}
		// A name that looks like an id.
	}
	r, rev, err := e.b.Meta.ByName(ctx, ws, lookupName(ref))
	if apierr.Is(err, apierr.NotFound) || (err == nil && r.expired(now)) {
		return FileRecord{}, 0, notFound(ref)
	}
	return r, rev, err
}

func (e *sharedEngine) resolveFile(ctx context.Context, ws, ref string) (*File, error) {
	r, _, err := e.resolve(ctx, ws, ref)
	if err != nil {
		return nil, err
	}
	return toFile(ws, r), nil
}

func (e *sharedEngine) list(ctx context.Context, ws string, g *Glob) ([]File, error) {
	recs, err := e.b.Meta.List(ctx, ws)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	all := g.MatchesAll()
	out := make([]File, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		if (all || g.Match(r.Name)) && !r.expired(now) {
			out = append(out, *toFile(ws, *r))
		}
	}
	return out, nil
}

func (e *sharedEngine) getBlob(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, _, err := e.b.Blobs.Get(ctx, key)
	return rc, err
}

// readable pins a local copy of ref's body. A body dropped between the
// lookup and the fetch (a writer on some host replaced it) sends it back
// to the record, as the shared store holds it now.
func (e *sharedEngine) readable(ctx context.Context, ws, ref string) (FileRecord, string, func(), error) {
	r, _, err := e.resolve(ctx, ws, ref)
	if err != nil {
		return r, "", nil, err
	}
	for attempt := 0; ; attempt++ {
		path, unpin, err := e.cache.acquire(ctx, r.body(), e.getBlob)
		if err == nil {
			return r, path, unpin, nil
		}
		if !apierr.Is(err, apierr.NotFound) || attempt == 3 {
			if apierr.Is(err, apierr.NotFound) {
				err = apierr.Wrap(apierr.FileReadFailed, err, "the stored content of %q is missing from the shared store; run `metaclaw fsck`", r.Name)
			}
			return r, "", nil, err
		}
		now, _, lerr := e.b.Meta.Latest(ctx, ws, r.ID)
		if apierr.Is(lerr, apierr.NotFound) {
			return r, "", nil, apierr.New(apierr.NotFound, "file %q was deleted meanwhile; call files.list() to see the workspace's files", ref)
		}
		if lerr != nil {
			return r, "", nil, lerr
		}
		r = now
	}
}

func (e *sharedEngine) open(ctx context.Context, ws, ref string) (*Reader, error) {
	r, path, unpin, err := e.readable(ctx, ws, ref)
	if err != nil {
		return nil, err
	}
	fh, err := openBody(path, r.Name)
	if err != nil {
		unpin()
		return nil, err
	}
	return &Reader{File: fh, Meta: toFile(ws, r), release: unpin}, nil
}

func (e *sharedEngine) view(ctx context.Context, ws, ref string, fn func(f *File, path string) error) error {
	r, path, unpin, err := e.readable(ctx, ws, ref)
	if err != nil {
		return err
	}
	defer unpin()
	if err := checkBody(path, r.Name); err != nil {
		return err
	}
	return fn(toFile(ws, r), path)
}

// lease takes file id's writer slot on this host, then its lease across
// hosts — unless the writer before it on this host kept the lease for it.
// rev orders the lease after its earlier holders' changes (0 when it came
// from this host's previous writer, whose changes this host's view has).
func (e *sharedEngine) lease(ctx context.Context, ws, id string) (func(), Revision, error) {
	key := ws + "\x00" + id
	e.slotMu.Lock()
	sl := e.slots[key]
	if sl == nil {
		sl = &fileSlot{sem: make(chan struct{}, 1)}
		e.slots[key] = sl
	}
	sl.waiting++
	e.slotMu.Unlock()
	leave := func() {
		e.slotMu.Lock()
		sl.waiting--
		if sl.waiting == 0 && sl.release == nil {
			delete(e.slots, key)
		}
		e.slotMu.Unlock()
	}
	select {
	case sl.sem <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, 0, apierr.Wrap(apierr.Of(ctx.Err()).Code, ctx.Err(), "gave up waiting for another write to the same file to finish; try again")
	}
	e.slotMu.Lock()
	held := sl.release != nil
	e.slotMu.Unlock()
	var rev Revision
	if !held {
		release, r, err := e.b.Leases.Acquire(ctx, ws, id)
		if err != nil {
			<-sl.sem
			leave()
			return nil, 0, err
		}
		e.slotMu.Lock()
		sl.release, sl.turns = release, 0
		e.slotMu.Unlock()
		rev = r
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			e.slotMu.Lock()
			sl.waiting--
			sl.turns++
			var remote func()
			if sl.waiting == 0 || sl.turns >= maxTurns {
				remote, sl.release = sl.release, nil
			}
			if sl.waiting == 0 {
				delete(e.slots, key)
			}
			e.slotMu.Unlock()
			if remote != nil {
				remote()
			}
			<-sl.sem
		})
	}, rev, nil
}

// current reads file id's record under its lease: from this host's view
// once it has caught up with the lease, or from the shared store.
func (e *sharedEngine) current(ctx context.Context, ws, id string, rev Revision) (FileRecord, Revision, error) {
	if e.b.Meta.Sync(ctx, rev) == nil {
		if r, rv, err := e.b.Meta.Get(ctx, ws, id); err == nil {
			return r, rv, nil
		}
	}
	return e.b.Meta.Latest(ctx, ws, id)
}

// writing resolves ref, takes the file's lease and reads its record again
// under it, so that the record is current for this writer.
func (e *sharedEngine) writing(ctx context.Context, ws, ref string) (FileRecord, Revision, func(), error) {
	for attempt := 0; ; attempt++ {
		r, _, err := e.resolve(ctx, ws, ref)
		if err != nil {
			return r, 0, nil, err
		}
		release, lrev, err := e.lease(ctx, ws, r.ID)
		if err != nil {
			return r, 0, nil, err
		}
		cur, rev, err := e.current(ctx, ws, r.ID, lrev)
		switch {
		case err == nil && cur.expired(time.Now()):
			release()
			return r, 0, nil, notFound(ref)
		case err == nil && (cur.Name == r.Name || attempt == 3):
			return cur, rev, release, nil
		case err == nil:
			// Renamed while this writer waited: the name may be another
			// file's now.
			release()
		case apierr.Is(err, apierr.NotFound) && attempt < 3:
			release() // deleted meanwhile; perhaps the name is taken again
		default:
			release()
			if apierr.Is(err, apierr.NotFound) {
				err = apierr.New(apierr.NotFound, "file %q was deleted meanwhile; call files.list() to see the workspace's files", ref)
			}
			return r, 0, nil, err
		}
	}
}

// reserve holds quota for a write in flight in the shared ledger: what is
// needed now, and ahead by up to half of what was already written (at most
// 8 MB, at most room), so that a big upload needs few round trips while a
// small one, written in one piece, reserves exactly its size.
func (e *sharedEngine) reserve(ws, id string, need, written, room int64) (int64, error) {
	ctx, cancel := context.WithTimeout(e.s.stop, 30*time.Second)
	defer cancel()
	grab := need
	if ahead := min(need+written/2, 8<<20, room); ahead > grab {
		grab = ahead
	}
	err := e.b.Quota.Reserve(ctx, ws, id, grab, e.limit(ws))
	if apierr.Is(err, apierr.QuotaExceeded) && grab > need {
		grab = need
		err = e.b.Quota.Reserve(ctx, ws, id, grab, e.limit(ws))
	}
	if err != nil {
		if e.s.stop.Err() != nil {
			return 0, apierr.New(apierr.FileWriteFailed, "the host is shutting down; the write was abandoned and nothing was changed")
		}
		return 0, err
	}
	return grab, nil
}

func (e *sharedEngine) release(ws, id string) {
	if id == "" {
		return
	}
	ctx, cancel := detached(context.Background())
	defer cancel()
	e.b.Quota.Release(ctx, ws, id)
}

// storeBody commits a finished body in the blob store; it returns its key.
func (e *sharedEngine) storeBody(ctx context.Context, b *body) (string, error) {
	if b.blob == nil {
		return "", apierr.New(apierr.Internal, "a body for the shared store was written without its blob")
	}
	info, err := b.blob.Commit(b.size, b.sha256)
	b.blob = nil
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return "", apierr.From(cerr)
		}
		return "", apierr.Wrap(apierr.FileWriteFailed, err, "storing the new content in the shared store failed (%v); nothing was changed, try again", err)
	}
	if info.Size != b.size || (info.SHA256 != "" && info.SHA256 != b.sha256) {
		e.dropBlob(ctx, b.resID)
		return "", apierr.New(apierr.FileWriteFailed, "the shared store kept different content than was sent; nothing was changed, try again")
	}
	return b.resID, nil
}

func (e *sharedEngine) dropBlob(ctx context.Context, key string) {
	if key == "" {
		return
	}
	dctx, cancel := detached(ctx)
	defer cancel()
	e.b.Blobs.Delete(dctx, key)
}

// dropLater removes a body no record refers to any more, in the
// background.
func (e *sharedEngine) dropLater(key string) {
	if key == "" {
		return
	}
	e.drops.Add(1)
	go func() {
		defer e.drops.Done()
		e.dropBlob(context.Background(), key)
	}()
}

// adopt moves a committed body from the temp directory into the cache and
// drops its reservation (the record counts it now).
func (e *sharedEngine) adopt(b *body) {
	if unpin, err := e.cache.place(b.tmp, b.sha256, b.size); err == nil {
		unpin()
	}
	e.release(b.ws, b.resID)
	b.resID = ""
	b.committed()
}

// publish stores a change's event. A failure is retried in the background
// while this host lives; if it dies first, another host publishes the
// event from the record.
func (e *sharedEngine) publish(ctx context.Context, ws, typ string, data map[string]any, change ChangeRef) {
	dctx, cancel := detached(ctx)
	defer cancel()
	if _, err := e.b.Events.Publish(dctx, ws, typ, data, change); err == nil {
		return
	}
	e.drops.Add(1)
	go func() {
		defer e.drops.Done()
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			select {
			case <-e.s.stop.Done():
				return // the other hosts repair it
			case <-time.After(wait):
			}
			ctx, cancel := detached(context.Background())
			_, err := e.b.Events.Publish(ctx, ws, typ, data, change)
			cancel()
			if err == nil {
				return
			}
		}
	}()
}

func createdEvent(f *File) map[string]any {
	return map[string]any{"id": f.ID, "name": f.Name, "size": f.Size, "mime_type": f.MimeType, "source_session_id": f.SourceSessionID}
}

func modifiedEvent(f *File) map[string]any {
	return map[string]any{"id": f.ID, "name": f.Name, "size": f.Size, "modified_on": formatTime(f.ModifiedOn)}
}

func (e *sharedEngine) create(ctx context.Context, w *Workspace, name string, opt CreateOptions, src io.Reader) (*File, error) {
	ws := w.name
	source := opt.Source
	if source == "" {
		source = SourceCreated
	}
	cur, _, err := e.b.Meta.ByName(ctx, ws, name)
	exists := err == nil
	if exists && cur.expired(time.Now()) {
		e.deleteExpired(ctx, ws, cur.ID)
		cur, _, err = e.b.Meta.ByName(ctx, ws, name)
		exists = err == nil
	}
	switch {
	case exists && !opt.Overwrite:
		return nil, alreadyExists(name)
	case err != nil && !apierr.Is(err, apierr.NotFound):
		return nil, err
	}
	bw, err := e.s.newBodyWriter(ws)
	if err != nil {
		return nil, err
	}
	if exists && cur.Backup != nil {
		bw.credit = cur.Size
	}
	if _, err := copyCtx(ctx, bw, src); err != nil {
		bw.abort()
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		bw.abort()
		return nil, apierr.From(err)
	}
	b, err := bw.finish()
	if err != nil {
		return nil, err
	}
	defer b.discard()
	key, err := e.storeBody(ctx, b)
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			e.dropBlob(ctx, key)
		}
	}()
	expires := opt.expiry(time.Now())
	for attempt := 0; ; attempt++ {
		if attempt == 4 {
			return nil, apierr.New(apierr.FileWriteFailed, "file %q kept changing while it was being written; try again", name)
		}
		if !exists {
			now := time.Now()
			r := FileRecord{
				ID: uuid.NewString(), Name: name, MimeType: pickMIME(b.head, name, opt.MimeType), Size: b.size,
				SHA256: b.sha256, Blob: key, Source: source, SourceSessionID: actorOf(ctx).Session,
				CreatedOn: now, ModifiedOn: now, ExpiresOn: expires, Host: e.b.HostID, Change: EventCreated,
			}
			rev, err := e.b.Meta.Create(ctx, ws, r)
			if err != nil {
				if !apierr.Is(err, apierr.AlreadyExists) {
					return nil, err
				}
				if !opt.Overwrite {
					return nil, alreadyExists(name)
				}
				// Created meanwhile on some host: replace it.
				cur, _, err = e.b.Meta.ByName(ctx, ws, name)
				exists = err == nil
				if err != nil && !apierr.Is(err, apierr.NotFound) {
					return nil, err
				}
				continue
			}
			done = true
			e.adopt(b)
			f := toFile(ws, r)
			e.publish(ctx, ws, EventCreated, createdEvent(f), ChangeRef{Key: FileChangeKey(ws, f.ID, rev), Rev: rev})
			w.record(ctx, f, "created")
			return f, nil
		}
		release, lrev, err := e.lease(ctx, ws, cur.ID)
		if err != nil {
			return nil, err
		}
		now, rev, err := e.current(ctx, ws, cur.ID, lrev)
		if err != nil || now.Name != name {
			release()
			if err != nil && !apierr.Is(err, apierr.NotFound) {
				return nil, err
			}
			// Deleted or renamed meanwhile: the name is free again, or
			// another file's.
			cur, _, err = e.b.Meta.ByName(ctx, ws, name)
			exists = err == nil
			if err != nil && !apierr.Is(err, apierr.NotFound) {
				return nil, err
			}
			continue
		}
		f, err := e.commitBody(ctx, w, now, rev, b, key, opt.MimeType, &expires)
		release()
		done = err == nil
		return f, err
	}
}

// commitBody points cur (read at rev, under its lease) at the stored body
// b, keeping the current body as the backup on the first modification.
func (e *sharedEngine) commitBody(ctx context.Context, w *Workspace, cur FileRecord, rev Revision, b *body, key, mimeHint string, expires *time.Time) (*File, error) {
	ws := w.name
	nf := cur
	nf.Size, nf.SHA256, nf.Blob = b.size, b.sha256, key
	nf.MimeType = pickMIME(b.head, cur.Name, mimeHint)
	if b.size == 0 && mimeHint == "" {
		nf.MimeType = cur.MimeType
	}
	nf.ModifiedOn = time.Now()
	nf.Host, nf.Change = e.b.HostID, EventModified
	if expires != nil {
		nf.ExpiresOn = *expires
	}
	drop := ""
	if cur.Backup == nil {
		bk := cur.body()
		nf.Backup = &bk
	} else {
		drop = cur.Blob
	}
	nrev, err := e.b.Meta.Update(ctx, ws, cur, nf, rev)
	if err != nil {
		if errors.Is(err, ErrConflict) || apierr.Is(err, apierr.NotFound) {
			return nil, apierr.Wrap(apierr.FileWriteFailed, err, "file %q changed or was deleted on another host during the write; try again", cur.Name)
		}
		return nil, err
	}
	e.adopt(b)
	e.dropLater(drop)
	f := toFile(ws, nf)
	e.publish(ctx, ws, EventModified, modifiedEvent(f), ChangeRef{Key: FileChangeKey(ws, f.ID, nrev), Rev: nrev})
	w.record(ctx, f, "modified")
	return f, nil
}

func (e *sharedEngine) modify(ctx context.Context, w *Workspace, ref string, fn func(cur *File, curPath string, out io.Writer) error) (*File, error) {
	cur, rev, release, err := e.writing(ctx, w.name, ref)
	if err != nil {
		return nil, err
	}
	defer release()
	path, unpin, err := e.cache.acquire(ctx, cur.body(), e.getBlob)
	if err != nil {
		return nil, err
	}
	defer unpin()
	if err := checkBody(path, cur.Name); err != nil {
		return nil, err
	}
	bw, err := e.s.newBodyWriter(w.name)
	if err != nil {
		return nil, err
	}
	if cur.Backup != nil {
		bw.credit = cur.Size
	}
	if err := fn(toFile(w.name, cur), path, bw); err != nil {
		bw.abort()
		if bw.err != nil {
			return nil, bw.err
		}
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		bw.abort()
		return nil, apierr.From(err)
	}
	b, err := bw.finish()
	if err != nil {
		return nil, err
	}
	defer b.discard()
	key, err := e.storeBody(ctx, b)
	if err != nil {
		return nil, err
	}
	f, err := e.commitBody(ctx, w, cur, rev, b, key, "", nil)
	if err != nil {
		e.dropBlob(ctx, key)
	}
	return f, err
}

func (e *sharedEngine) delete(ctx context.Context, w *Workspace, ref string) error {
	cur, rev, release, err := e.writing(ctx, w.name, ref)
	if err != nil {
		return err
	}
	defer release()
	f, err := e.deleteRecord(ctx, w.name, cur, rev)
	if err == nil {
		w.record(ctx, f, "deleted")
	}
	return err
}

// deleteRecord removes cur (read at rev, under its lease) with its bodies.
func (e *sharedEngine) deleteRecord(ctx context.Context, ws string, cur FileRecord, rev Revision) (*File, error) {
	drev, err := e.b.Meta.Delete(ctx, ws, cur, rev)
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return nil, apierr.Wrap(apierr.FileWriteFailed, err, "file %q changed or was deleted on another host meanwhile; try again", cur.Name)
		}
		return nil, err
	}
	e.dropLater(cur.Blob)
	if cur.Backup != nil {
		e.dropLater(cur.Backup.Blob)
	}
	e.publish(ctx, ws, EventDeleted, map[string]any{"id": cur.ID}, ChangeRef{Key: FileChangeKey(ws, cur.ID, drev), Rev: drev})
	return toFile(ws, cur), nil
}

// update replaces cur (read at rev, under its lease) by nf and publishes
// file:modified.
func (e *sharedEngine) update(ctx context.Context, w *Workspace, cur, nf FileRecord, rev Revision) (*File, error) {
	nf.ModifiedOn = time.Now()
	nf.Host, nf.Change = e.b.HostID, EventModified
	nrev, err := e.b.Meta.Update(ctx, w.name, cur, nf, rev)
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return nil, apierr.Wrap(apierr.FileWriteFailed, err, "file %q changed on another host meanwhile; try again", cur.Name)
		}
		return nil, err
	}
	f := toFile(w.name, nf)
	e.publish(ctx, w.name, EventModified, modifiedEvent(f), ChangeRef{Key: FileChangeKey(w.name, f.ID, nrev), Rev: nrev})
	w.record(ctx, f, "modified")
	return f, nil
}

func (e *sharedEngine) rename(ctx context.Context, w *Workspace, ref, name string) (*File, error) {
	cur, rev, release, err := e.writing(ctx, w.name, ref)
	if err != nil {
		return nil, err
	}
	defer release()
	if cur.Name == name {
		return toFile(w.name, cur), nil
	}
	nf := cur
	nf.Name = name
	f, err := e.update(ctx, w, cur, nf, rev)
	if apierr.Is(err, apierr.AlreadyExists) {
		return nil, apierr.New(apierr.AlreadyExists, "file %q already exists; delete it first or choose another name", name)
	}
	return f, err
}

func (e *sharedEngine) revert(ctx context.Context, w *Workspace, ref string) (*File, error) {
	cur, rev, release, err := e.writing(ctx, w.name, ref)
	if err != nil {
		return nil, err
	}
	defer release()
	if cur.Backup == nil {
		return nil, apierr.New(apierr.NotFound, "file %q has no earlier version to revert to (it has not been modified since it was created or last reverted)", cur.Name)
	}
	bk := *cur.Backup
	nf := cur
	nf.Blob, nf.Size, nf.SHA256, nf.MimeType = bk.Blob, bk.Size, bk.SHA256, bk.MimeType
	nf.Backup = nil
	f, err := e.update(ctx, w, cur, nf, rev)
	if err == nil {
		e.dropLater(cur.Blob)
	}
	return f, err
}

// sweepExpired deletes expired files of every workspace.
func (e *sharedEngine) sweepExpired(ctx context.Context, now time.Time) {
	all, err := e.b.Meta.All(ctx)
	if err != nil {
		return
	}
	for _, wr := range all {
		if ctx.Err() != nil {
			return
		}
		if wr.Record.expired(now) {
			e.deleteExpired(ctx, wr.Workspace, wr.Record.ID)
		}
	}
}

// deleteExpired deletes file id if it is still expired under its lease.
func (e *sharedEngine) deleteExpired(ctx context.Context, ws, id string) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	release, lrev, err := e.lease(lctx, ws, id)
	if err != nil {
		return
	}
	defer release()
	cur, rev, err := e.current(lctx, ws, id, lrev)
	if err != nil || !cur.expired(time.Now()) {
		return
	}
	e.deleteRecord(lctx, ws, cur, rev)
}

// fsck checks every record of a shared backend against the blob store.
// With repair, a record whose body is gone falls back to its backup or is
// dropped, and a missing backup is forgotten. (Usage is counted from the
// records, so it cannot disagree with them; what crashed hosts leave in
// the blob store is removed by the backend's janitor.)
func (e *sharedEngine) fsck(ctx context.Context, repair bool) (*FsckReport, error) {
	rep := &FsckReport{Problems: []Problem{}}
	all, err := e.b.Meta.All(ctx)
	if err != nil {
		return nil, err
	}
	for _, wr := range all {
		if err := ctx.Err(); err != nil {
			return nil, apierr.From(err)
		}
		rep.FilesChecked++
		ws, r := wr.Workspace, wr.Record
		_, err := e.b.Blobs.Stat(ctx, r.Blob)
		if apierr.Is(err, apierr.NotFound) {
			p := Problem{Kind: "missing_body", FileID: r.ID, Name: r.Name, Path: r.Blob, Detail: "the record refers to a body the shared store does not hold"}
			if repair {
				p.Repaired = e.repairBody(ctx, ws, r.ID) == nil
			}
			rep.Problems = append(rep.Problems, p)
			continue
		}
		if r.Backup == nil {
			continue
		}
		if _, err := e.b.Blobs.Stat(ctx, r.Backup.Blob); apierr.Is(err, apierr.NotFound) {
			p := Problem{Kind: "missing_backup", FileID: r.ID, Name: r.Name, Path: r.Backup.Blob, Detail: "the record keeps a backup the shared store does not hold"}
			if repair {
				p.Repaired = e.forgetBackup(ctx, ws, r.ID) == nil
			}
			rep.Problems = append(rep.Problems, p)
		}
	}
	return rep, nil
}

// repairBody points a record whose body is gone at its backup, or drops it.
func (e *sharedEngine) repairBody(ctx context.Context, ws, id string) error {
	release, lrev, err := e.lease(ctx, ws, id)
	if err != nil {
		return err
	}
	defer release()
	cur, rev, err := e.current(ctx, ws, id, lrev)
	if err != nil {
		return err
	}
	w := e.s.Workspace(ws)
	if cur.Backup != nil {
		if _, err := e.b.Blobs.Stat(ctx, cur.Backup.Blob); err == nil {
			nf := cur
			bk := *cur.Backup
			nf.Blob, nf.Size, nf.SHA256, nf.MimeType, nf.Backup = bk.Blob, bk.Size, bk.SHA256, bk.MimeType, nil
			_, err := e.update(ctx, w, cur, nf, rev)
			return err
		}
	}
	_, err = e.deleteRecord(ctx, ws, cur, rev)
	return err
}

// forgetBackup clears a record's missing backup.
func (e *sharedEngine) forgetBackup(ctx context.Context, ws, id string) error {
	release, lrev, err := e.lease(ctx, ws, id)
	if err != nil {
		return err
	}
	defer release()
	cur, rev, err := e.current(ctx, ws, id, lrev)
	if err != nil || cur.Backup == nil {
		return err
	}
	nf := cur
	nf.Backup = nil
	_, err = e.update(ctx, e.s.Workspace(ws), cur, nf, rev)
	return err
}
