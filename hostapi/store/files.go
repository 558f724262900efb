package store

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"strings"
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

func (w *Workspace) changed(ctx context.Context, f *File, action string, event Event) {
	if a := actorOf(ctx); a.Record != nil {
		a.Record(*f, action)
	}
	event.Workspace = w.name
	w.s.bus.Publish(event)
}

// Resolve finds a file by id or by name.
func (w *Workspace) Resolve(ctx context.Context, ref string) (*File, error) {
	ref = strings.TrimSpace(ref)
	if err := ctx.Err(); err != nil {
		return nil, apierr.From(err)
	}
	// A lookup by key takes microseconds; giving the driver a cancellable
	// context would make it start a watcher goroutine per query, which
	// costs more than the query itself.
	ctx = context.WithoutCancel(ctx)
	if ref == "" {
		return nil, apierr.New(apierr.ValidationFailed, "file reference is empty; pass a file id or a name such as \"data.csv\"")
	}
	if IsID(ref) {
		f, err := scanFile(w.s.db.QueryRowContext(ctx, `SELECT `+fileColumns+` FROM agent_files WHERE workspace=? AND _id=?`, w.name, strings.ToLower(ref)))
		if err == nil {
			return f, nil
		}
		if !isNoRows(err) {
			return nil, apierr.From(err)
		}
	}
	name := strings.TrimLeft(ref, "/")
	f, err := scanFile(w.s.db.QueryRowContext(ctx, `SELECT `+fileColumns+` FROM agent_files WHERE workspace=? AND name=?`, w.name, name))
	if isNoRows(err) {
		return nil, apierr.New(apierr.NotFound, "file %q not found; call files.list() to see the workspace's files", ref)
	}
	if err != nil {
		return nil, apierr.From(err)
	}
	return f, nil
}

// List returns the files whose names match pattern (see CompileGlob), by name.
func (w *Workspace) List(ctx context.Context, pattern string) ([]File, error) {
	g, err := CompileGlob(pattern)
	if err != nil {
		return nil, err
	}
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
		if g.Match(f.Name) {
			out = append(out, *f)
		}
	}
	return out, apierr.From(rows.Err())
}

// Reader is an open file body with its metadata; the file's read lock is
// held until Close.
type Reader struct {
	*os.File
	Meta    *File
	release func()
}

// Close closes the body and releases the read lock.
func (r *Reader) Close() error {
	err := r.File.Close()
	r.release()
	return err
}

// Open opens a file's body for reading under its read lock.
func (w *Workspace) Open(ctx context.Context, ref string) (*Reader, error) {
	f, release, err := w.rlocked(ctx, ref)
	if err != nil {
		return nil, err
	}
	fh, err := os.Open(w.s.bodyPath(f))
	if err != nil {
		release()
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot open %q: %v; run `metaclaw fsck`", f.Name, err)
	}
	return &Reader{File: fh, Meta: f, release: release}, nil
}

// View runs fn with a file's metadata and the path of its body while holding
// the read lock, for libraries that want a path (excelize, pdfcpu, DuckDB).
// fn must only read the path.
func (w *Workspace) View(ctx context.Context, ref string, fn func(f *File, path string) error) error {
	f, release, err := w.rlocked(ctx, ref)
	if err != nil {
		return err
	}
	defer release()
	return fn(f, w.s.bodyPath(f))
}

// rlocked resolves ref and takes its read lock, re-reading the metadata under
// the lock since a writer may have replaced the body meanwhile.
func (w *Workspace) rlocked(ctx context.Context, ref string) (*File, func(), error) {
	return w.locked(ctx, ref, w.s.locks.rlock)
}

// locked resolves ref, takes its lock with lock and returns the metadata
// read under the lock (a writer may have replaced the body meanwhile). A
// ref that is an id is locked before the one lookup; a name needs a lookup
// first to learn the id.
func (w *Workspace) locked(ctx context.Context, ref string, lock func(id string) func()) (*File, func(), error) {
	id := strings.ToLower(strings.TrimSpace(ref))
	if !IsID(id) {
		f, err := w.Resolve(ctx, ref)
		if err != nil {
			return nil, nil, err
		}
		id = f.ID
	}
	release := lock(id)
	f, err := w.Resolve(ctx, id)
	if err != nil {
		release()
		return nil, nil, err
	}
	if f.ID != id { // a file whose name looks like an id
		release()
		return w.locked(ctx, f.ID, lock)
	}
	return f, release, nil
}

// CreateOptions describe a new file.
type CreateOptions struct {
	Name      string
	MimeType  string // used when the body gives no better answer (empty or unknown)
	Source    string // upload, created or derived; default created
	Overwrite bool   // replace an existing file of the same name (keeping its id)
}

// Create stores body as a new file. An existing name answers ALREADY_EXISTS
// unless Overwrite is set, in which case that file's body is replaced.
func (w *Workspace) Create(ctx context.Context, opt CreateOptions, body io.Reader) (*File, error) {
	name, err := CleanName(opt.Name)
	if err != nil {
		return nil, err
	}
	source := opt.Source
	if source == "" {
		source = SourceCreated
	}
	if existing, err := w.Resolve(ctx, name); err == nil {
		if !opt.Overwrite {
			return nil, apierr.New(apierr.AlreadyExists, "file %q already exists; pass overwrite: true to replace it, or choose another name", name)
		}
		return w.replace(ctx, existing.ID, opt.MimeType, body)
	} else if !apierr.Is(err, apierr.NotFound) {
		return nil, err
	}
	bw, err := w.s.newBodyWriter(w.name)
	if err != nil {
		return nil, err
	}
	if _, err := copyCtx(ctx, bw, body); err != nil {
		bw.abort()
		return nil, err
	}
	b, err := bw.finish()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	f := &File{
		ID: uuid.NewString(), Workspace: w.name, Name: name, MimeType: pickMIME(b.head, name, opt.MimeType),
		Size: b.size, DiskPath: b.diskPath, Source: source, SourceSessionID: actorOf(ctx).Session,
		CreatedOn: now, ModifiedOn: now, SHA256: b.sha256,
	}
	err = w.s.withTx(ctx, func(tx *sql.Tx) error {
		if err := w.s.checkQuotaTx(tx, w.name, 0, f.Size); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO agent_files (`+fileColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
			f.ID, f.Workspace, f.Name, f.MimeType, f.Size, f.DiskPath, f.Source, f.SourceSessionID,
			formatTime(f.CreatedOn), formatTime(f.ModifiedOn), f.SHA256, false)
		if isUniqueViolation(err) {
			return apierr.New(apierr.AlreadyExists, "file %q already exists; pass overwrite: true to replace it, or choose another name", name)
		}
		return apierr.From(err)
	})
	if err != nil {
		w.s.unreserve(w.name, b.reserved)
		os.Remove(w.s.bodyPath(f))
		return nil, err
	}
	w.s.settle(w.name, b.reserved, f.Size)
	w.changed(ctx, f, "created", Event{Type: EventCreated, Data: map[string]any{
		"id": f.ID, "name": f.Name, "size": f.Size, "mime_type": f.MimeType, "source_session_id": f.SourceSessionID,
	}})
	return f, nil
}

func pickMIME(head []byte, name, given string) string {
	detected := DetectMIME(head, name)
	if given != "" && (detected == "application/octet-stream" || (len(head) == 0)) {
		return given
	}
	return detected
}

// Modify replaces a file's body with what fn writes to out, under the file's
// write lock, so that read-modify-write sequences never lose an update. fn
// reads the current body from curPath. The first modification keeps the
// previous body as the backup that Revert restores.
func (w *Workspace) Modify(ctx context.Context, ref string, fn func(cur *File, curPath string, out io.Writer) error) (*File, error) {
	cur, release, err := w.locked(ctx, ref, w.s.locks.wlock)
	if err != nil {
		return nil, err
	}
	defer release()
	bw, err := w.s.newBodyWriter(w.name)
	if err != nil {
		return nil, err
	}
	bw.credit = cur.Size
	if err := fn(cur, w.s.bodyPath(cur), bw); err != nil {
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
	return w.commitBody(ctx, cur, b, "")
}

// replace streams body over an existing file (Create with Overwrite).
func (w *Workspace) replace(ctx context.Context, id, mimeHint string, body io.Reader) (*File, error) {
	release := w.s.locks.wlock(id)
	defer release()
	cur, err := w.Resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	bw, err := w.s.newBodyWriter(w.name)
	if err != nil {
		return nil, err
	}
	bw.credit = cur.Size
	if _, err := copyCtx(ctx, bw, body); err != nil {
		bw.abort()
		return nil, err
	}
	b, err := bw.finish()
	if err != nil {
		return nil, err
	}
	return w.commitBody(ctx, cur, b, mimeHint)
}

// commitBody points cur at the durable new body b; the caller holds the
// write lock.
func (w *Workspace) commitBody(ctx context.Context, cur *File, b *body, mimeHint string) (*File, error) {
	newPath := w.s.bodyPath(&File{DiskPath: b.diskPath})
	oldPath := w.s.bodyPath(cur)
	makeBackup := !cur.HasBackup
	if makeBackup {
		tmp := w.s.backupPath(cur.ID) + ".tmp"
		os.Remove(tmp)
		if err := os.Link(oldPath, tmp); err != nil {
			w.s.unreserve(w.name, b.reserved)
			os.Remove(newPath)
			return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot keep a backup of %q: %v", cur.Name, err)
		}
		if err := os.Rename(tmp, w.s.backupPath(cur.ID)); err != nil {
			os.Remove(tmp)
			w.s.unreserve(w.name, b.reserved)
			os.Remove(newPath)
			return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot keep a backup of %q: %v", cur.Name, err)
		}
		syncDir(w.s.backDir)
	}
	nf := *cur
	nf.DiskPath, nf.Size, nf.SHA256 = b.diskPath, b.size, b.sha256
	nf.MimeType = pickMIME(b.head, cur.Name, mimeHint)
	if b.size == 0 && mimeHint == "" {
		nf.MimeType = cur.MimeType
	}
	nf.ModifiedOn = time.Now()
	nf.HasBackup = true
	err := w.s.withTx(ctx, func(tx *sql.Tx) error {
		if err := w.s.checkQuotaTx(tx, w.name, cur.Size, nf.Size); err != nil {
			return err
		}
		res, err := tx.Exec(`UPDATE agent_files SET disk_path=?, size=?, sha256=?, mime_type=?, modified_on=?, has_backup=1 WHERE _id=? AND disk_path=?`,
			nf.DiskPath, nf.Size, nf.SHA256, nf.MimeType, formatTime(nf.ModifiedOn), cur.ID, cur.DiskPath)
		if err != nil {
			return apierr.From(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apierr.New(apierr.FileWriteFailed, "file %q changed or was deleted by another process during the write; try again", cur.Name)
		}
		return nil
	})
	if err != nil {
		w.s.unreserve(w.name, b.reserved)
		os.Remove(newPath)
		if makeBackup {
			os.Remove(w.s.backupPath(cur.ID))
		}
		return nil, err
	}
	w.s.settle(w.name, b.reserved, nf.Size-cur.Size)
	os.Remove(oldPath)
	w.changed(ctx, &nf, "modified", Event{Type: EventModified, Data: map[string]any{
		"id": nf.ID, "name": nf.Name, "size": nf.Size, "modified_on": formatTime(nf.ModifiedOn),
	}})
	return &nf, nil
}

// Delete removes a file, its body and its backup.
func (w *Workspace) Delete(ctx context.Context, ref string) error {
	f, release, err := w.locked(ctx, ref, w.s.locks.wlock)
	if err != nil {
		return err
	}
	defer release()
	err = w.s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`DELETE FROM agent_files WHERE _id=?`, f.ID)
		return apierr.From(err)
	})
	if err != nil {
		return err
	}
	w.s.settle(w.name, 0, -f.Size)
	os.Remove(w.s.bodyPath(f))
	os.Remove(w.s.backupPath(f.ID))
	w.changed(ctx, f, "deleted", Event{Type: EventDeleted, Data: map[string]any{"id": f.ID}})
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
	f, release, err := w.locked(ctx, ref, w.s.locks.wlock)
	if err != nil {
		return nil, err
	}
	defer release()
	if f.Name == name {
		return f, nil
	}
	f.ModifiedOn = time.Now()
	err = w.s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`UPDATE agent_files SET name=?, modified_on=? WHERE _id=?`, name, formatTime(f.ModifiedOn), f.ID)
		if isUniqueViolation(err) {
			return apierr.New(apierr.AlreadyExists, "file %q already exists; delete it first or choose another name", name)
		}
		return apierr.From(err)
	})
	if err != nil {
		return nil, err
	}
	f.Name = name
	w.changed(ctx, f, "modified", Event{Type: EventModified, Data: map[string]any{
		"id": f.ID, "name": f.Name, "size": f.Size, "modified_on": formatTime(f.ModifiedOn),
	}})
	return f, nil
}

// Revert restores the body kept by the first modification (one-level undo).
func (w *Workspace) Revert(ctx context.Context, ref string) (*File, error) {
	f, err := w.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !f.HasBackup {
		return nil, apierr.New(apierr.NotFound, "file %q has no earlier version to revert to (it has not been modified since it was created or last reverted)", f.Name)
	}
	var restored *File
	restored, err = w.Modify(ctx, f.ID, func(cur *File, _ string, out io.Writer) error {
		bk, err := os.Open(w.s.backupPath(cur.ID))
		if err != nil {
			return apierr.Wrap(apierr.FileReadFailed, err, "the backup of %q is missing; run `metaclaw fsck --repair`", cur.Name)
		}
		defer bk.Close()
		_, err = io.Copy(out, bk)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The backup is consumed; Modify has just kept the body we reverted from
	// only if there was no backup, which is not the case here, so clear it.
	if err := w.s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`UPDATE agent_files SET has_backup=0 WHERE _id=?`, restored.ID)
		return apierr.From(err)
	}); err != nil {
		return nil, err
	}
	os.Remove(w.s.backupPath(restored.ID))
	restored.HasBackup = false
	return restored, nil
}

func isUniqueViolation(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintUnique
}

// copyCtx copies src to dst, stopping when ctx is done. Coded errors from dst
// (quota, size) pass through; read errors become FILE_READ_FAILED.
func copyCtx(ctx context.Context, dst *BodyWriter, src io.Reader) (int64, error) {
	if src == nil {
		return 0, nil
	}
	buf := make([]byte, 256<<10)
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
			return total, apierr.Wrap(apierr.FileReadFailed, rerr, "reading the new content failed: %v", rerr)
		}
	}
}
