package store

import (
	"context"
	"errors"
	"fmt"
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
// hosts never take a workspace past its quota, and a dead host blocks
// nobody for longer than its lease:
//  1. stream the new body into this host's temp directory, hashing it and
//     reserving quota in the shared ledger as bytes arrive (the reservation
//     belongs to this host: it goes when the host's heartbeat does);
//  2. put the body into the blob store under a new key (a body is only
//     reachable through a record, so an interrupted put is invisible);
//  3. for an existing file, take its lease (one writer per file across all
//     hosts; this host's writers first queue for its local slot), re-read
//     the record, then turn the reservation into committed usage in the
//     ledger (compare-and-set: a change past the quota is refused) and
//     compare-and-set the record; if the record moved on, give the usage
//     back;
//  4. move the new body from the temp directory into this host's body
//     cache (it is read back without a fetch), drop the replaced body from
//     the blob store and publish the change event.
//
// A crash between the ledger and the record leaves the ledger counting a
// body that is not there (the safe direction: the quota is never
// exceeded); fsck reports the difference.
type sharedEngine struct {
	s     *Store
	b     Backend
	cache *bodyCache
	// drops are bodies being removed from the blob store after their
	// change committed (nobody can reach them any more: no need to wait).
	drops sync.WaitGroup
}

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
	s.shared = &sharedEngine{s: s, b: *b, cache: cache}
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
// started (giving back quota, dropping a body), whatever the caller's.
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

func (r FileRecord) backupSize() int64 {
	if r.Backup == nil {
		return 0
	}
	return r.Backup.Size
}

// resolve finds ref (an id or a name) with one or two metadata reads.
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
	out := []File{}
	for _, r := range recs {
		if g.Match(r.Name) && !r.expired(now) {
			out = append(out, *toFile(ws, r))
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
// to the record.
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
		now, _, lerr := e.b.Meta.Get(ctx, ws, r.ID)
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
// hosts.
func (e *sharedEngine) lease(ctx context.Context, ws, id string) (func(), error) {
	local, err := e.s.locks.lockWriter(ctx, ws+"\x00"+id)
	if err != nil {
		return nil, err
	}
	remote, err := e.b.Leases.Acquire(ctx, "file/"+ws+"/"+id)
	if err != nil {
		local()
		return nil, err
	}
	return func() { remote(); local() }, nil
}

// writing resolves ref, takes the file's lease and reads its record again
// under it, so that the record is current for this writer.
func (e *sharedEngine) writing(ctx context.Context, ws, ref string) (FileRecord, Revision, func(), error) {
	for attempt := 0; ; attempt++ {
		r, _, err := e.resolve(ctx, ws, ref)
		if err != nil {
			return r, 0, nil, err
		}
		release, err := e.lease(ctx, ws, r.ID)
		if err != nil {
			return r, 0, nil, err
		}
		cur, rev, err := e.b.Meta.Get(ctx, ws, r.ID)
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

// commitQuota turns b's reservation into committed usage.
func (e *sharedEngine) commitQuota(ctx context.Context, ws string, b *body, files, backups int64) error {
	id := ""
	if b != nil {
		id = b.resID
	}
	if err := e.b.Quota.Commit(ctx, ws, id, files, backups, e.limit(ws)); err != nil {
		return err
	}
	if b != nil {
		b.resID = "" // consumed: nothing to give back
	}
	return nil
}

// giveBack undoes a committed usage change whose record change failed.
func (e *sharedEngine) giveBack(ctx context.Context, ws string, files, backups int64) {
	dctx, cancel := detached(ctx)
	defer cancel()
	e.b.Quota.Commit(dctx, ws, "", -files, -backups, e.limit(ws))
}

// storeBody puts a finished body into the blob store under a new key.
func (e *sharedEngine) storeBody(ctx context.Context, b *body) (string, error) {
	key := e.b.HostID + "/" + uuid.NewString()
	fh, err := os.Open(b.tmp)
	if err != nil {
		return "", apierr.Wrap(apierr.FileWriteFailed, err, "reading back the new content failed (%s)", ioReason(err))
	}
	defer fh.Close()
	info, err := e.b.Blobs.Put(ctx, key, fh, b.size)
	if err != nil {
		e.dropBlob(ctx, key)
		if cerr := ctx.Err(); cerr != nil {
			return "", apierr.From(cerr)
		}
		return "", apierr.Wrap(apierr.FileWriteFailed, err, "storing the new content in the shared store failed (%v); nothing was changed, try again", err)
	}
	if info.Size != b.size || (info.SHA256 != "" && info.SHA256 != b.sha256) {
		e.dropBlob(ctx, key)
		return "", apierr.New(apierr.FileWriteFailed, "the shared store kept different content than was sent; nothing was changed, try again")
	}
	return key, nil
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

// adopt moves a committed body from the temp directory into the cache.
func (e *sharedEngine) adopt(b *body) {
	if unpin, err := e.cache.place(b.tmp, b.sha256, b.size); err == nil {
		unpin()
	}
	b.committed()
}

func (e *sharedEngine) publish(ctx context.Context, ws, typ string, data map[string]any) {
	dctx, cancel := detached(ctx)
	defer cancel()
	for attempt := 0; attempt < 3; attempt++ {
		if _, err := e.b.Events.Publish(dctx, ws, typ, data); err == nil {
			return
		}
	}
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
				CreatedOn: now, ModifiedOn: now, ExpiresOn: expires,
			}
			if err := e.commitQuota(ctx, ws, b, r.Size, 0); err != nil {
				return nil, err
			}
			if _, err := e.b.Meta.Create(ctx, ws, r); err != nil {
				e.giveBack(ctx, ws, r.Size, 0)
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
			e.publish(ctx, ws, EventCreated, map[string]any{
				"id": f.ID, "name": f.Name, "size": f.Size, "mime_type": f.MimeType, "source_session_id": f.SourceSessionID,
			})
			w.record(ctx, f, "created")
			return f, nil
		}
		release, err := e.lease(ctx, ws, cur.ID)
		if err != nil {
			return nil, err
		}
		now, rev, err := e.b.Meta.Get(ctx, ws, cur.ID)
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
	if expires != nil {
		nf.ExpiresOn = *expires
	}
	dFiles, dBackups, drop := nf.Size-cur.Size, int64(0), ""
	if cur.Backup == nil {
		bk := cur.body()
		nf.Backup = &bk
		dBackups = cur.Size
	} else {
		drop = cur.Blob
	}
	if err := e.commitQuota(ctx, ws, b, dFiles, dBackups); err != nil {
		return nil, err
	}
	if _, err := e.b.Meta.Update(ctx, ws, cur, nf, rev); err != nil {
		e.giveBack(ctx, ws, dFiles, dBackups)
		if errors.Is(err, ErrConflict) || apierr.Is(err, apierr.NotFound) {
			return nil, apierr.Wrap(apierr.FileWriteFailed, err, "file %q changed or was deleted on another host during the write; try again", cur.Name)
		}
		return nil, err
	}
	e.adopt(b)
	e.dropLater(drop)
	f := toFile(ws, nf)
	e.publish(ctx, ws, EventModified, map[string]any{
		"id": f.ID, "name": f.Name, "size": f.Size, "modified_on": formatTime(f.ModifiedOn),
	})
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
	if err := e.b.Meta.Delete(ctx, ws, cur, rev); err != nil {
		if errors.Is(err, ErrConflict) {
			return nil, apierr.Wrap(apierr.FileWriteFailed, err, "file %q changed or was deleted on another host meanwhile; try again", cur.Name)
		}
		return nil, err
	}
	// Freeing space after the record is gone errs on the safe side.
	e.giveBack(ctx, ws, cur.Size, cur.backupSize())
	e.dropLater(cur.Blob)
	if cur.Backup != nil {
		e.dropLater(cur.Backup.Blob)
	}
	e.publish(ctx, ws, EventDeleted, map[string]any{"id": cur.ID})
	return toFile(ws, cur), nil
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
	nf.Name, nf.ModifiedOn = name, time.Now()
	if _, err := e.b.Meta.Update(ctx, w.name, cur, nf, rev); err != nil {
		switch {
		case apierr.Is(err, apierr.AlreadyExists):
			return nil, apierr.New(apierr.AlreadyExists, "file %q already exists; delete it first or choose another name", name)
		case errors.Is(err, ErrConflict):
			return nil, apierr.Wrap(apierr.FileWriteFailed, err, "file %q changed on another host meanwhile; try again", cur.Name)
		}
		return nil, err
	}
	f := toFile(w.name, nf)
	e.publish(ctx, w.name, EventModified, map[string]any{
		"id": f.ID, "name": f.Name, "size": f.Size, "modified_on": formatTime(f.ModifiedOn),
	})
	w.record(ctx, f, "modified")
	return f, nil
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
	nf.Backup, nf.ModifiedOn = nil, time.Now()
	dFiles, dBackups := bk.Size-cur.Size, -bk.Size
	if err := e.commitQuota(ctx, w.name, nil, dFiles, dBackups); err != nil {
		return nil, err
	}
	if _, err := e.b.Meta.Update(ctx, w.name, cur, nf, rev); err != nil {
		e.giveBack(ctx, w.name, dFiles, dBackups)
		if errors.Is(err, ErrConflict) {
			return nil, apierr.Wrap(apierr.FileWriteFailed, err, "file %q changed on another host meanwhile; try again", cur.Name)
		}
		return nil, err
	}
	e.dropLater(cur.Blob)
	f := toFile(w.name, nf)
	e.publish(ctx, w.name, EventModified, map[string]any{
		"id": f.ID, "name": f.Name, "size": f.Size, "modified_on": formatTime(f.ModifiedOn),
	})
	w.record(ctx, f, "modified")
	return f, nil
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
	release, err := e.lease(lctx, ws, id)
	if err != nil {
		return
	}
	defer release()
	cur, rev, err := e.b.Meta.Get(lctx, ws, id)
	if err != nil || !cur.expired(time.Now()) {
		return
	}
	e.deleteRecord(lctx, ws, cur, rev)
}

// fsck checks every record of a shared backend against the blob store and
// the quota ledger. With repair, a record whose body is gone falls back to
// its backup or is dropped, a missing backup is forgotten, and a ledger
// that disagrees with the records is set to them (run it while the
// workspaces are idle: writes in flight make the ledger differ for a
// moment).
func (e *sharedEngine) fsck(ctx context.Context, repair bool) (*FsckReport, error) {
	rep := &FsckReport{Problems: []Problem{}}
	all, err := e.b.Meta.All(ctx)
	if err != nil {
		return nil, err
	}
	type totals struct{ files, backups int64 }
	sums := map[string]*totals{}
	for _, wr := range all {
		if err := ctx.Err(); err != nil {
			return nil, apierr.From(err)
		}
		rep.FilesChecked++
		ws, r := wr.Workspace, wr.Record
		t := sums[ws]
		if t == nil {
			t = &totals{}
			sums[ws] = t
		}
		_, err := e.b.Blobs.Stat(ctx, r.Blob)
		if apierr.Is(err, apierr.NotFound) {
			p := Problem{Kind: "missing_body", FileID: r.ID, Name: r.Name, Path: r.Blob, Detail: "the record refers to a body the shared store does not hold"}
			if repair {
				p.Repaired = e.repairBody(ctx, ws, r.ID) == nil
			}
			rep.Problems = append(rep.Problems, p)
			continue
		}
		t.files += r.Size
		if r.Backup == nil {
			continue
		}
		if _, err := e.b.Blobs.Stat(ctx, r.Backup.Blob); apierr.Is(err, apierr.NotFound) {
			p := Problem{Kind: "missing_backup", FileID: r.ID, Name: r.Name, Path: r.Backup.Blob, Detail: "the record keeps a backup the shared store does not hold"}
			if repair {
				p.Repaired = e.forgetBackup(ctx, ws, r.ID) == nil
			}
			rep.Problems = append(rep.Problems, p)
			continue
		}
		t.backups += r.Backup.Size
	}
	for ws, t := range sums {
		u, err := e.b.Quota.Usage(ctx, ws)
		if err != nil || (u.Files == t.files && u.Backups == t.backups) {
			continue
		}
		p := Problem{Kind: "quota_mismatch", Detail: fmt.Sprintf("workspace %q: the ledger counts %d bytes of files and %d of backups, the records %d and %d",
			ws, u.Files, u.Backups, t.files, t.backups)}
		if repair {
			p.Repaired = e.b.Quota.Commit(ctx, ws, "", t.files-u.Files, t.backups-u.Backups, 1<<62) == nil
		}
		rep.Problems = append(rep.Problems, p)
	}
	return rep, nil
}

// repairBody points a record whose body is gone at its backup, or drops it.
func (e *sharedEngine) repairBody(ctx context.Context, ws, id string) error {
	release, err := e.lease(ctx, ws, id)
	if err != nil {
		return err
	}
	defer release()
	cur, rev, err := e.b.Meta.Get(ctx, ws, id)
	if err != nil {
		return err
	}
	if cur.Backup != nil {
		if _, err := e.b.Blobs.Stat(ctx, cur.Backup.Blob); err == nil {
			nf := cur
			bk := *cur.Backup
			nf.Blob, nf.Size, nf.SHA256, nf.MimeType, nf.Backup = bk.Blob, bk.Size, bk.SHA256, bk.MimeType, nil
			if _, err := e.b.Meta.Update(ctx, ws, cur, nf, rev); err != nil {
				return err
			}
			e.giveBack(ctx, ws, cur.Size-bk.Size, bk.Size)
			return nil
		}
	}
	_, err = e.deleteRecord(ctx, ws, cur, rev)
	return err
}

// forgetBackup clears a record's missing backup.
func (e *sharedEngine) forgetBackup(ctx context.Context, ws, id string) error {
	release, err := e.lease(ctx, ws, id)
	if err != nil {
		return err
	}
	defer release()
	cur, rev, err := e.b.Meta.Get(ctx, ws, id)
	if err != nil || cur.Backup == nil {
		return err
	}
	nf := cur
	nf.Backup = nil
	if _, err := e.b.Meta.Update(ctx, ws, cur, nf, rev); err != nil {
		return err
	}
	e.giveBack(ctx, ws, 0, cur.Backup.Size)
	return nil
}
