package store

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Actor says who is changing files: the session (provenance) and a recorder
// that collects the run's artifact list. It travels in the context so that
// every format package gets provenance and artifacts without plumbing.
type Actor struct {
	Session string
	Record  func(f File, action string)
}

type actorKey struct{}

// WithActor attaches a to ctx.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

func actorOf(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	return a
}

// Resolve finds a file by id or by name (one metadata lookup).
func (w *Workspace) Resolve(ctx context.Context, ref string) (*File, error) {
	ref = strings.TrimSpace(ref)
	if err := ctx.Err(); err != nil {
		return nil, apierr.From(err)
	}
	if ref == "" {
		return nil, apierr.New(apierr.ValidationFailed, "file reference is empty; pass a file id or a name such as \"data.csv\"")
	}
	if w.s.shared != nil {
		return w.s.shared.resolveFile(ctx, w.name, ref)
	}
	if IsID(ref) {
		f, err := w.s.byID(w.name, strings.ToLower(ref))
		if err == nil && f.expired(time.Now()) {
			return nil, notFound(ref)
		}
		if err == nil || !apierr.Is(err, apierr.NotFound) {
			return f, err
		}
		// A name that looks like an id.
	}
	f, err := w.s.byName(w.name, lookupName(ref))
	if apierr.Is(err, apierr.NotFound) || (err == nil && f.expired(time.Now())) {
		return nil, notFound(ref)
	}
	return f, err
}

func notFound(ref string) error {
	return apierr.New(apierr.NotFound, "file %q not found; call files.list() to see the workspace's files", ref)
}

// byID and byName are the two metadata lookups. A lookup by key takes
// microseconds; giving the driver a cancellable context would make it start
// a watcher goroutine per query, which costs more than the query itself.
func (s *Store) byID(ws, id string) (*File, error) {
	return lookup(s.stmts.byID.QueryRowContext(context.Background(), ws, id))
}

func (s *Store) byName(ws, name string) (*File, error) {
	return lookup(s.stmts.byName.QueryRowContext(context.Background(), ws, name))
}

func lookup(r *sql.Row) (*File, error) {
	f, err := scanFile(r)
	if isNoRows(err) {
		return nil, apierr.New(apierr.NotFound, "file not found; call files.list() to see the workspace's files")
	}
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "reading file metadata failed: %v", err)
	}
	return f, nil
}

// List returns the files whose names match pattern (see CompileGlob), by name.
func (w *Workspace) List(ctx context.Context, pattern string) ([]File, error) {
	g, err := CompileGlob(pattern)
	if err != nil {
		return nil, err
	}
	if w.s.shared != nil {
		return w.s.shared.list(ctx, w.name, g)
	}
	now := time.Now()
	rows, err := w.s.db.QueryContext(ctx, `SELECT `+fileColumns+` FROM agent_files WHERE workspace=? ORDER BY name`, w.name)
	if err != nil {
		return nil, apierr.From(err)
	}
	defer rows.Close()
	out := []File{}
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, apierr.From(err)
		}
		if g.Match(f.Name) && !f.expired(now) {
			out = append(out, *f)
		}
	}
	return out, apierr.From(rows.Err())
}

// Reader is an open file body with its metadata. The body stays readable
// until Close, whatever writers do meanwhile.
type Reader struct {
	*os.File
	Meta    *File
	release func()
}

// Close closes the body and ends the read.
func (r *Reader) Close() error {
	err := r.File.Close()
	r.release()
	return err
}

// Open opens a file's body for reading. The body is opened without
// following symbolic links: one planted in the data directory is refused.
func (w *Workspace) Open(ctx context.Context, ref string) (*Reader, error) {
	if w.s.shared != nil {
		return w.s.shared.open(ctx, w.name, ref)
	}
	var fh *os.File
	f, unpin, err := w.readable(ctx, ref, func(f *File, path string) (err error) {
		fh, err = openBody(path, f.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Reader{File: fh, Meta: f, release: unpin}, nil
}

// View runs fn with a file's metadata and the path of its body, for
// libraries that want a path (excelize, pdfcpu, DuckDB). The body stays at
// that path until fn returns, whatever writers do meanwhile. fn must only
// read the path.
func (w *Workspace) View(ctx context.Context, ref string, fn func(f *File, path string) error) error {
	if w.s.shared != nil {
		return w.s.shared.view(ctx, w.name, ref, fn)
	}
	f, unpin, err := w.readable(ctx, ref, func(f *File, path string) error { return checkBody(path, f.Name) })
	if err != nil {
		return err
	}
	defer unpin()
	return fn(f, w.s.bodyPath(f))
}

// readable resolves ref with one metadata lookup, pins the file and checks
// its body with check (an Lstat or an open). Once the body is seen after
// the pin, it stays until unpin: a writer that replaces or deletes it
// retires it instead. A body already gone (replaced or deleted between the
// lookup and the pin, by this process or another) sends readable back to
// the metadata for the current row.
func (w *Workspace) readable(ctx context.Context, ref string, check func(f *File, path string) error) (*File, func(), error) {
	f, err := w.Resolve(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		unpin := w.s.locks.pin(f.ID)
		err := check(f, w.s.bodyPath(f))
		if err == nil {
			return f, unpin, nil
		}
		unpin()
		if !errors.Is(err, os.ErrNotExist) || attempt == 3 {
			return nil, nil, err
		}
		now, lerr := w.s.byID(w.name, f.ID)
		if apierr.Is(lerr, apierr.NotFound) {
			return nil, nil, apierr.New(apierr.NotFound, "file %q was deleted meanwhile; call files.list() to see the workspace's files", ref)
		}
		if lerr != nil {
			return nil, nil, lerr
		}
		if now.DiskPath == f.DiskPath {
			return nil, nil, err // the body is really missing
		}
		f = now
	}
}

// openBody opens a body for reading without following a symbolic link.
func openBody(path, name string) (*os.File, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, bodyError(err, name)
	}
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		fh.Close()
		return nil, apierr.New(apierr.FileReadFailed, "the stored content of %q is not a regular file; the data directory was tampered with — run `metaclaw fsck --repair`", name)
	}
	return fh, nil
}

// checkBody verifies that a body is a regular file (not a planted link)
// before its path is handed to a library that will open it.
func checkBody(path, name string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return bodyError(err, name)
	}
	if !fi.Mode().IsRegular() {
		return apierr.New(apierr.FileReadFailed, "the stored content of %q is not a regular file; the data directory was tampered with — run `metaclaw fsck --repair`", name)
	}
	return nil
}

func bodyError(err error, name string) error {
	switch {
	case errors.Is(err, syscall.ELOOP):
		return apierr.Wrap(apierr.FileReadFailed, err, "the stored content of %q is a symbolic link, which is never followed; the data directory was tampered with — run `metaclaw fsck --repair`", name)
	case errors.Is(err, os.ErrNotExist):
		return apierr.Wrap(apierr.FileReadFailed, err, "the stored content of %q is missing; run `metaclaw fsck` to check the data directory", name)
	}
	return apierr.Wrap(apierr.FileReadFailed, err, "cannot open %q (%s); run `metaclaw fsck` to check the data directory", name, ioReason(err))
}

// writing resolves ref and takes its writer slot. The metadata is current
// for this process's writers (other processes' are caught by the
// compare-and-swap of the commit), from one lookup: an id is claimed
// before it is looked up; a name is looked up, its file claimed, and looked
// up again only if this process committed a change in between.
func (w *Workspace) writing(ctx context.Context, ref string) (*File, func(), error) {
	take := w.s.locks.lockWriter
	if err := ctx.Err(); err != nil {
		return nil, nil, apierr.From(err)
	}
	if id := strings.ToLower(strings.TrimSpace(ref)); IsID(id) {
		release, err := take(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		f, err := w.s.byID(w.name, id)
		if err == nil && f.expired(time.Now()) {
			release()
			return nil, nil, notFound(ref)
		}
		if err == nil {
			return f, release, nil
		}
		release()
		if !apierr.Is(err, apierr.NotFound) {
			return nil, nil, err
		}
		// Perhaps a file whose name looks like an id.
	}
	gen := w.s.commits.Load()
	f, err := w.Resolve(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	release, err := take(ctx, f.ID)
	if err != nil {
		return nil, nil, err
	}
	if w.s.commits.Load() != gen {
		// A commit happened between the lookup and the claim; it may
		// have been this file's.
		if f, err = w.s.byID(w.name, f.ID); err != nil {
			release()
			if apierr.Is(err, apierr.NotFound) {
				err = apierr.New(apierr.NotFound, "file %q was deleted meanwhile; call files.list() to see the workspace's files", ref)
			}
			return nil, nil, err
		}
	}
	return f, release, nil
}

// CreateOptions describe a new file.
type CreateOptions struct {
	Name      string
	MimeType  string // used when the body gives no better answer (empty or unknown)
	Source    string // upload, created or derived; default created
	Overwrite bool   // replace an existing file of the same name (keeping its id)
	// TTL, when positive, makes the file disappear that long after it is
	// created (or overwritten), with the usual file:deleted event.
	TTL time.Duration
}

// expiry is when a file created now with opt disappears (zero: never).
func (opt CreateOptions) expiry(now time.Time) time.Time {
	if opt.TTL <= 0 {
		return time.Time{}
	}
	return now.Add(opt.TTL)
}

// expired reports whether f's time to live has run out at now.
func (f *File) expired(now time.Time) bool {
	return !f.ExpiresOn.IsZero() && !f.ExpiresOn.After(now)
}

func formatExpiry(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return formatTime(t)
}

// Create stores body as a new file. An existing name answers ALREADY_EXISTS
// unless Overwrite is set, in which case that file's body is replaced. The
// body is streamed to disk before anything is locked: a slow upload that
// overwrites a file never holds up its readers or other writers, and the
// file changes only when all of it has arrived.
func (w *Workspace) Create(ctx context.Context, opt CreateOptions, src io.Reader) (*File, error) {
	name, err := CleanName(opt.Name)
	if err != nil {
		return nil, err
	}
	if opt.TTL < 0 {
		return nil, apierr.New(apierr.ValidationFailed, "a time to live of %s is negative; give a positive duration, or none to keep the file", opt.TTL)
	}
	if w.s.shared != nil {
		return w.s.shared.create(ctx, w, name, opt, src)
	}
	source := opt.Source
	if source == "" {
		source = SourceCreated
	}
	gen := w.s.commits.Load()
	existing, err := w.Resolve(ctx, name)
	switch {
	case err == nil && !opt.Overwrite:
		return nil, alreadyExists(name)
	case err != nil && !apierr.Is(err, apierr.NotFound):
		return nil, err
	case err != nil:
		existing = nil
	}
	bw, err := w.s.newBodyWriter(w.name)
	if err != nil {
		return nil, err
	}
	if existing != nil {
		bw.credit = replacedBytes(existing)
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
	defer b.discard() // a no-op once committed
	cur := existing
	for attempt := 0; ; attempt++ {
		if attempt == 4 {
			return nil, apierr.New(apierr.FileWriteFailed, "file %q kept changing while it was being written; try again", name)
		}
		if cur == nil {
			f, err := w.insert(ctx, name, source, opt.MimeType, b, opt.expiry(time.Now()))
			if !apierr.Is(err, apierr.AlreadyExists) || !opt.Overwrite {
				return f, err
			}
			// Created meanwhile by someone else: replace it.
			gen = w.s.commits.Load()
			if cur, err = w.Resolve(ctx, name); err != nil && !apierr.Is(err, apierr.NotFound) {
				return nil, err
			}
			continue
		}
		release, err := w.s.locks.lockWriter(ctx, cur.ID)
		if err != nil {
			return nil, err
		}
		if w.s.commits.Load() != gen {
			// Something committed since the lookup: read the row again.
			now, err := w.s.byID(w.name, cur.ID)
			if err != nil && !apierr.Is(err, apierr.NotFound) {
				release()
				return nil, err
			}
			if now == nil || now.Name != name {
				// Deleted or renamed meanwhile: the name is free again,
				// or taken by another file.
				release()
				gen = w.s.commits.Load()
				if cur, err = w.Resolve(ctx, name); err != nil && !apierr.Is(err, apierr.NotFound) {
					return nil, err
				}
				continue
			}
			cur = now
		}
		expires := opt.expiry(time.Now())
		f, err := w.commitBody(ctx, cur, b, opt.MimeType, &expires)
		release()
		return f, err
	}
}

func alreadyExists(name string) error {
	return apierr.New(apierr.AlreadyExists, "file %q already exists; pass overwrite: true to replace it, or choose another name", name)
}

// replacedBytes is how much of f's usage a new body of f frees when it
// commits: the current body, unless it becomes the backup.
func replacedBytes(f *File) int64 {
	if f.HasBackup {
		return f.Size
	}
	return 0
}

// insert commits b as a new file called name.
func (w *Workspace) insert(ctx context.Context, name, source, mimeHint string, b *body, expires time.Time) (*File, error) {
	now := time.Now()
	f := &File{
		ID: uuid.NewString(), Workspace: w.name, Name: name, MimeType: pickMIME(b.head, name, mimeHint),
		Size: b.size, Source: source, SourceSessionID: actorOf(ctx).Session,
		CreatedOn: now, ModifiedOn: now, SHA256: b.sha256, ExpiresOn: expires,
	}
	err := w.s.withTx(ctx, func(tx *txn) error {
		usedAfter, err := w.s.checkQuotaTx(tx, w.name, f.Size, 0)
		if err != nil {
			return err
		}
		f.DiskPath = uuid.NewString()
		_, err = tx.Exec(`INSERT INTO agent_files (`+fileColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			f.ID, f.Workspace, f.Name, f.MimeType, f.Size, f.DiskPath, f.Source, f.SourceSessionID,
			formatTime(f.CreatedOn), formatTime(f.ModifiedOn), f.SHA256, false, 0, "", "", formatExpiry(f.ExpiresOn))
		if isUniqueViolation(err) {
			return alreadyExists(name)
		}
		if err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "recording file %q failed: %v", name, err)
		}
		if err := w.s.events.append(tx, w.name, EventCreated, map[string]any{
			"id": f.ID, "name": f.Name, "size": f.Size, "mime_type": f.MimeType, "source_session_id": f.SourceSessionID,
		}); err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "recording the change event failed: %v", err)
		}
		if err := b.placeAs(tx, f.DiskPath); err != nil {
			return err
		}
		tx.onAfter(func() {
			w.s.settle(w.name, b.reserved, usedAfter)
			b.committed()
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	w.record(ctx, f, "created")
	return f, nil
}

func (w *Workspace) record(ctx context.Context, f *File, action string) {
	if a := actorOf(ctx); a.Record != nil {
		a.Record(*f, action)
	}
}

func pickMIME(head []byte, name, given string) string {
	detected := DetectMIME(head, name)
	if given != "" && (detected == "application/octet-stream" || (len(head) == 0)) {
		return given
	}
	return detected
}

// Modify replaces a file's body with what fn writes to out. Writers of the
// file take turns, so that read-modify-write sequences never lose an
// update; readers carry on with the current body until the new one
// commits. fn reads the current body from curPath. The first modification
// keeps the previous body as the backup that Revert restores.
func (w *Workspace) Modify(ctx context.Context, ref string, fn func(cur *File, curPath string, out io.Writer) error) (*File, error) {
	if w.s.shared != nil {
		return w.s.shared.modify(ctx, w, ref, fn)
	}
	cur, release, err := w.writing(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer release()
	curPath := w.s.bodyPath(cur)
	if err := checkBody(curPath, cur.Name); err != nil {
		return nil, err
	}
	bw, err := w.s.newBodyWriter(w.name)
	if err != nil {
		return nil, err
	}
	bw.credit = replacedBytes(cur)
	if err := fn(cur, curPath, bw); err != nil {
		bw.abort()
		if bw.err != nil {
			return nil, bw.err // the writer's own coded error (TOO_LARGE, QUOTA_EXCEEDED)
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
	return w.commitBody(ctx, cur, b, "", nil)
}

// commitBody points cur at the durable new body b, keeping the current body
// as the backup on the first modification; the caller holds the file's
// writer slot. expires, when not nil, replaces the file's expiry (an
// overwrite by Create); nil keeps it.
func (w *Workspace) commitBody(ctx context.Context, cur *File, b *body, mimeHint string, expires *time.Time) (*File, error) {
	oldPath := w.s.bodyPath(cur)
	makeBackup := !cur.HasBackup
	nf := *cur
	nf.Size, nf.SHA256 = b.size, b.sha256
	nf.MimeType = pickMIME(b.head, cur.Name, mimeHint)
	if b.size == 0 && mimeHint == "" {
		nf.MimeType = cur.MimeType
	}
	nf.ModifiedOn = time.Now()
	nf.HasBackup = true
	if expires != nil {
		nf.ExpiresOn = *expires
	}
	delta := nf.Size - cur.Size
	if makeBackup {
		nf.backupSize, nf.backupSHA, nf.backupMIME = cur.Size, cur.SHA256, cur.MimeType
		delta += cur.Size // the old body stays, as the backup
	}
	err := w.s.withTx(ctx, func(tx *txn) error {
		usedAfter, err := w.s.checkQuotaTx(tx, w.name, delta, 0)
		if err != nil {
			return err
		}
		newName := uuid.NewString()
		res, err := tx.Exec(`UPDATE agent_files SET disk_path=?, size=?, sha256=?, mime_type=?, modified_on=?, has_backup=1,
			backup_size=?, backup_sha256=?, backup_mime_type=?, expires_on=? WHERE _id=? AND disk_path=?`,
			newName, nf.Size, nf.SHA256, nf.MimeType, formatTime(nf.ModifiedOn),
			nf.backupSize, nf.backupSHA, nf.backupMIME, formatExpiry(nf.ExpiresOn), cur.ID, cur.DiskPath)
		if err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "recording the new content of %q failed: %v", cur.Name, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apierr.New(apierr.FileWriteFailed, "file %q changed or was deleted by another process during the write; try again", cur.Name)
		}
		if err := w.s.events.append(tx, w.name, EventModified, map[string]any{
			"id": nf.ID, "name": nf.Name, "size": nf.Size, "modified_on": formatTime(nf.ModifiedOn),
		}); err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "recording the change event failed: %v", err)
		}
		if makeBackup {
			bk := w.s.backupPath(cur.ID)
			os.Remove(bk) // a leftover no row refers to (has_backup is 0)
			if err := os.Link(oldPath, bk); err != nil {
				return apierr.Wrap(apierr.FileWriteFailed, err, "cannot keep a backup of %q (%s); run `metaclaw fsck`", cur.Name, ioReason(err))
			}
			tx.onUndo(func() { os.Remove(bk) })
			syncDir(w.s.backDir)
		}
		if err := b.placeAs(tx, newName); err != nil {
			return err
		}
		nf.DiskPath = newName
		tx.onAfter(func() {
			w.s.settle(w.name, b.reserved, usedAfter)
			b.committed()
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	w.s.locks.retire(cur.ID, oldPath)
	w.record(ctx, &nf, "modified")
	return &nf, nil
}

// Delete removes a file, its body and its backup.
func (w *Workspace) Delete(ctx context.Context, ref string) error {
	if w.s.shared != nil {
		return w.s.shared.delete(ctx, w, ref)
	}
	f, release, err := w.writing(ctx, ref)
	if err != nil {
		return err
	}
	defer release()
	return w.deleteFile(ctx, f)
}

// deleteFile removes f, whose writer slot the caller holds.
func (w *Workspace) deleteFile(ctx context.Context, f *File) error {
	err := w.s.withTx(ctx, func(tx *txn) error {
		usedAfter, err := w.s.checkQuotaTx(tx, w.name, -(f.Size + f.backupSize), 0)
		if err != nil {
			return err
		}
		res, err := tx.Exec(`DELETE FROM agent_files WHERE _id=? AND disk_path=?`, f.ID, f.DiskPath)
		if err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "deleting %q failed: %v", f.Name, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apierr.New(apierr.FileWriteFailed, "file %q changed or was deleted by another process meanwhile; try again", f.Name)
		}
		if err := w.s.events.append(tx, w.name, EventDeleted, map[string]any{"id": f.ID}); err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "recording the change event failed: %v", err)
		}
		if f.HasBackup {
			// Out of backups/ before the commit, so that fsck never sees
			// it there without its row; gone for good after the commit.
			bk, moved := w.s.backupPath(f.ID), filepath.Join(w.s.tmp.path, "backup-"+f.ID)
			if err := os.Rename(bk, moved); err == nil {
				tx.onUndo(func() { os.Rename(moved, bk) })
				tx.onAfter(func() { os.Remove(moved) })
			}
		}
		tx.onAfter(func() { w.s.settle(w.name, 0, usedAfter) })
		return nil
	})
	if err != nil {
		return err
	}
	w.s.locks.retire(f.ID, w.s.bodyPath(f))
	w.record(ctx, f, "deleted")
	return nil
}

// Copy duplicates a file under newName as a derived file.
func (w *Workspace) Copy(ctx context.Context, ref, newName string, overwrite bool) (*File, error) {
	rd, err := w.Open(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	if n, err := CleanName(newName); err == nil && n == rd.Meta.Name {
		return nil, apierr.New(apierr.AlreadyExists, "cannot copy %q onto itself; choose another name", n)
	}
	return w.Create(ctx, CreateOptions{Name: newName, MimeType: rd.Meta.MimeType, Source: SourceDerived, Overwrite: overwrite}, rd)
}

// Rename gives a file a new name, keeping its id and body.
func (w *Workspace) Rename(ctx context.Context, ref, newName string) (*File, error) {
	name, err := CleanName(newName)
	if err != nil {
		return nil, err
	}
	if w.s.shared != nil {
		return w.s.shared.rename(ctx, w, ref, name)
	}
	f, release, err := w.writing(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer release()
	if f.Name == name {
		return f, nil
	}
	f.ModifiedOn = time.Now()
	err = w.s.withTx(ctx, func(tx *txn) error {
		res, err := tx.Exec(`UPDATE agent_files SET name=?, modified_on=? WHERE _id=?`, name, formatTime(f.ModifiedOn), f.ID)
		if isUniqueViolation(err) {
			return apierr.New(apierr.AlreadyExists, "file %q already exists; delete it first or choose another name", name)
		}
		if err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "renaming %q failed: %v", f.Name, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apierr.New(apierr.NotFound, "file %q was deleted meanwhile", f.Name)
		}
		if err := w.s.events.append(tx, w.name, EventModified, map[string]any{
			"id": f.ID, "name": name, "size": f.Size, "modified_on": formatTime(f.ModifiedOn),
		}); err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "recording the change event failed: %v", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.Name = name
	w.record(ctx, f, "modified")
	return f, nil
}

// Revert restores the body kept by the first modification (one-level undo).
// The backup becomes the body again (nothing is copied), so a revert never
// needs quota.
func (w *Workspace) Revert(ctx context.Context, ref string) (*File, error) {
	if w.s.shared != nil {
		return w.s.shared.revert(ctx, w, ref)
	}
	cur, release, err := w.writing(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer release()
	if !cur.HasBackup {
		return nil, apierr.New(apierr.NotFound, "file %q has no earlier version to revert to (it has not been modified since it was created or last reverted)", cur.Name)
	}
	bk := w.s.backupPath(cur.ID)
	fi, err := os.Lstat(bk)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "the backup of %q is missing or damaged; run `metaclaw fsck --repair`", cur.Name)
	}
	nf := *cur
	nf.Size, nf.SHA256, nf.MimeType = cur.backupSize, cur.backupSHA, cur.backupMIME
	if nf.SHA256 == "" || nf.Size != fi.Size() {
		// A backup kept by an earlier version: describe it from its bytes.
		size, sum, head, err := hashFile(bk)
		if err != nil {
			return nil, apierr.Wrap(apierr.FileReadFailed, err, "the backup of %q cannot be read (%s); run `metaclaw fsck --repair`", cur.Name, ioReason(err))
		}
		nf.Size, nf.SHA256, nf.MimeType = size, sum, DetectMIME(head, cur.Name)
	}
	nf.ModifiedOn = time.Now()
	nf.HasBackup, nf.backupSize, nf.backupSHA, nf.backupMIME = false, 0, "", ""
	oldPath := w.s.bodyPath(cur)
	err = w.s.withTx(ctx, func(tx *txn) error {
		usedAfter, err := w.s.checkQuotaTx(tx, w.name, -(cur.Size+cur.backupSize)+nf.Size, 0)
		if err != nil {
			return err
		}
		newName := uuid.NewString()
		res, err := tx.Exec(`UPDATE agent_files SET disk_path=?, size=?, sha256=?, mime_type=?, modified_on=?, has_backup=0,
			backup_size=0, backup_sha256='', backup_mime_type='' WHERE _id=? AND disk_path=?`,
			newName, nf.Size, nf.SHA256, nf.MimeType, formatTime(nf.ModifiedOn), cur.ID, cur.DiskPath)
		if err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "reverting %q failed: %v", cur.Name, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apierr.New(apierr.FileWriteFailed, "file %q changed or was deleted by another process meanwhile; try again", cur.Name)
		}
		if err := w.s.events.append(tx, w.name, EventModified, map[string]any{
			"id": nf.ID, "name": nf.Name, "size": nf.Size, "modified_on": formatTime(nf.ModifiedOn),
		}); err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "recording the change event failed: %v", err)
		}
		dst := filepath.Join(w.s.filesDir, newName)
		if err := os.Rename(bk, dst); err != nil {
			return apierr.Wrap(apierr.FileWriteFailed, err, "restoring the backup of %q failed (%s)", cur.Name, ioReason(err))
		}
		tx.onUndo(func() { os.Rename(dst, bk) })
		syncDir(w.s.filesDir)
		syncDir(w.s.backDir)
		nf.DiskPath = newName
		tx.onAfter(func() { w.s.settle(w.name, 0, usedAfter) })
		return nil
	})
	if err != nil {
		return nil, err
	}
	w.s.locks.retire(cur.ID, oldPath)
	w.record(ctx, &nf, "modified")
	return &nf, nil
}

func isUniqueViolation(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintUnique
}

// copyBufs recycles copyCtx's buffers: a write should not allocate 256 KB.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// copyCtx copies src to dst, stopping when ctx is done. Coded errors from dst
// (quota, size) pass through; read errors become FILE_READ_FAILED.
func copyCtx(ctx context.Context, dst *BodyWriter, src io.Reader) (int64, error) {
	if src == nil {
		return 0, nil
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, apierr.From(err)
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return total, err
			}
			total += int64(n)
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			var ae *apierr.Error
			if errors.As(rerr, &ae) {
				return total, ae
			}
			if err := ctx.Err(); err != nil {
				return total, apierr.From(err) // the source gave up because the caller did
			}
			reason := rerr.Error()
			var pe *os.PathError
			if errors.As(rerr, &pe) {
				reason = ioReason(rerr)
			}
			return total, apierr.Wrap(apierr.FileReadFailed, rerr, "reading the new content failed (%s); nothing was changed", reason)
		}
	}
}
