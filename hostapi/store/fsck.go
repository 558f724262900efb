package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Problem is one disagreement fsck found between metadata and disk.
type Problem struct {
	// Kind is one of missing_body, symlink_body, unreadable_body,
	// size_mismatch, sha_mismatch, missing_backup, symlink_backup,
	// backup_size_mismatch, orphan_body, orphan_backup, temp_file.
	Kind     string `json:"kind"`
	FileID   string `json:"fileId,omitempty"`
	Name     string `json:"name,omitempty"`
	Path     string `json:"path,omitempty"` // relative to the data directory
	Detail   string `json:"detail"`
	Repaired bool   `json:"repaired"`
}

// FsckReport is what Fsck found and, with repair, fixed.
type FsckReport struct {
	FilesChecked int       `json:"filesChecked"`
	Problems     []Problem `json:"problems"`
}

// Unrepaired counts problems still standing.
func (r *FsckReport) Unrepaired() int {
	n := 0
	for _, p := range r.Problems {
		if !p.Repaired {
			n++
		}
	}
	return n
}

// Fsck checks every file of every workspace against disk. With repair it
// removes orphan bodies, dead processes' temp files and stray backups,
// recomputes metadata from a body whose size or hash disagrees (the body is
// the durable truth: the write protocol only points metadata at fsynced
// bodies), replaces a body that is a symbolic link or has gone by its backup
// when there is one and otherwise drops the file, and clears has_backup
// flags whose backup is missing.
//
// Fsck takes the data directory's server lock, so it refuses (BUSY, naming
// the process) while a server runs on the data directory, unless it is that
// server's own process calling. It is safe beside other writers: every
// repair re-checks the row it is about to change, and every orphan
// candidate, inside a write transaction right before acting, so nothing a
// committed row points to is ever deleted.
func (s *Store) Fsck(ctx context.Context, repair bool) (*FsckReport, error) {
	if s.shared != nil {
		return s.shared.fsck(ctx, repair)
	}
	if !heldByThisProcess(s.cfg.Dir) {
		release, holder, err := lockServer(s.cfg.Dir, "metaclaw fsck")
		if err == errLockHeld {
			return nil, apierr.New(apierr.Busy,
				"fsck cannot run while %s uses this data directory; stop it first (a server keeps the data directory consistent while it runs)", holder)
		}
		if err != nil {
			return nil, err
		}
		defer release()
	}
	rep := &FsckReport{Problems: []Problem{}}
	rows, err := s.db.QueryContext(ctx, `SELECT `+fileColumns+` FROM agent_files`)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "reading the metadata failed: %v", err)
	}
	var files []*File
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			rows.Close()
			return nil, apierr.Wrap(apierr.Internal, err, "reading the metadata failed: %v", err)
		}
		files = append(files, f)
	}
	rows.Close()
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, apierr.From(err)
		}
		rep.FilesChecked++
		s.checkFile(ctx, f, repair, rep)
	}
	s.sweepTemp(rep, repair)
	s.sweepOrphans(ctx, rep, repair)
	return rep, nil
}

// current reports whether f's row still says what it said when fsck read it
// (a writer may have replaced the body meanwhile, which is not a problem).
func current(tx *txn, f *File) bool {
	var disk, sum string
	var hasBackup bool
	err := tx.QueryRow(`SELECT disk_path, sha256, has_backup FROM agent_files WHERE _id=?`, f.ID).Scan(&disk, &sum, &hasBackup)
	return err == nil && disk == f.DiskPath && sum == f.SHA256 && hasBackup == f.HasBackup
}

func (s *Store) checkFile(ctx context.Context, f *File, repair bool, rep *FsckReport) {
	path := s.bodyPath(f)
	rel := filepath.Join("files", f.DiskPath)
	fi, err := os.Lstat(path)
	switch {
	case os.IsNotExist(err):
		s.badBody(ctx, f, repair, rep, Problem{Kind: "missing_body", FileID: f.ID, Name: f.Name, Path: rel,
			Detail: "metadata refers to a body that is not on disk"})
		return
	case err != nil:
		rep.Problems = append(rep.Problems, Problem{Kind: "unreadable_body", FileID: f.ID, Name: f.Name, Path: rel, Detail: ioReason(err)})
		return
	case !fi.Mode().IsRegular():
		s.badBody(ctx, f, repair, rep, Problem{Kind: "symlink_body", FileID: f.ID, Name: f.Name, Path: rel,
			Detail: fmt.Sprintf("the body is a %s, not a regular file (planted in the data directory); it is never followed", fileKind(fi))})
		return
	}
	size, sum, _, err := hashFile(path)
	if os.IsNotExist(err) {
		return // replaced by a writer since the Lstat
	}
	if err != nil {
		rep.Problems = append(rep.Problems, Problem{Kind: "unreadable_body", FileID: f.ID, Name: f.Name, Path: rel, Detail: ioReason(err)})
		return
	}
	if size != f.Size || sum != f.SHA256 {
		p := Problem{Kind: "sha_mismatch", FileID: f.ID, Name: f.Name, Path: rel,
			Detail: fmt.Sprintf("metadata says %d bytes sha256 %.12s…, disk has %d bytes sha256 %.12s…", f.Size, f.SHA256, size, sum)}
		if size != f.Size {
			p.Kind = "size_mismatch"
		}
		stillThere := true
		err := s.withTx(ctx, func(tx *txn) error {
			if stillThere = current(tx, f); !stillThere || !repair {
				return nil
			}
			_, err := tx.Exec(`UPDATE agent_files SET size=?, sha256=? WHERE _id=?`, size, sum, f.ID)
			p.Repaired = err == nil
			return err
		})
		if stillThere {
			p.Repaired = p.Repaired && err == nil
			rep.Problems = append(rep.Problems, p)
		}
	}
	if !f.HasBackup {
		return
	}
	bk := s.backupPath(f.ID)
	brel := filepath.Join("backups", f.ID)
	bfi, err := os.Lstat(bk)
	switch {
	case os.IsNotExist(err) || (err == nil && !bfi.Mode().IsRegular()):
		p := Problem{Kind: "missing_backup", FileID: f.ID, Name: f.Name, Path: brel, Detail: "has_backup is set but the backup is gone"}
		if err == nil {
			p.Kind, p.Detail = "symlink_backup", fmt.Sprintf("the backup is a %s, not a regular file; it is never followed", fileKind(bfi))
		}
		stillThere := true
		terr := s.withTx(ctx, func(tx *txn) error {
			if stillThere = current(tx, f); !stillThere || !repair {
				return nil
			}
			if p.Kind == "symlink_backup" {
				if err := os.Remove(bk); err != nil && !os.IsNotExist(err) {
					return err
				}
			}
			_, err := tx.Exec(`UPDATE agent_files SET has_backup=0, backup_size=0, backup_sha256='', backup_mime_type='' WHERE _id=?`, f.ID)
			p.Repaired = err == nil
			return err
		})
		if stillThere {
			p.Repaired = p.Repaired && terr == nil
			rep.Problems = append(rep.Problems, p)
		}
	case err == nil && bfi.Size() != f.backupSize:
		p := Problem{Kind: "backup_size_mismatch", FileID: f.ID, Name: f.Name, Path: brel,
			Detail: fmt.Sprintf("metadata says the backup has %d bytes, disk has %d (the quota counts backups)", f.backupSize, bfi.Size())}
		stillThere := true
		terr := s.withTx(ctx, func(tx *txn) error {
			if stillThere = current(tx, f); !stillThere || !repair {
				return nil
			}
			_, err := tx.Exec(`UPDATE agent_files SET backup_size=? WHERE _id=?`, bfi.Size(), f.ID)
			p.Repaired = err == nil
			return err
		})
		if stillThere {
			p.Repaired = p.Repaired && terr == nil
			rep.Problems = append(rep.Problems, p)
		}
	}
}

// badBody handles a body that is gone or is not a regular file: with
// repair, the entry is removed (a link, never its target), and the backup
// becomes the body when there is a sound one; otherwise the file is
// dropped. Neither blesses what was planted.
func (s *Store) badBody(ctx context.Context, f *File, repair bool, rep *FsckReport, p Problem) {
	path := s.bodyPath(f)
	var bSize int64
	var bSum string
	var bHead []byte
	backupOK := false
	if repair && f.HasBackup {
		var err error
		if bSize, bSum, bHead, err = hashFile(s.backupPath(f.ID)); err == nil {
			backupOK = true
		}
	}
	stillThere := true
	err := s.withTx(ctx, func(tx *txn) error {
		if stillThere = current(tx, f); !stillThere || !repair {
			return nil
		}
		if p.Kind != "missing_body" {
			if err := os.RemoveAll(path); err != nil {
				return err
			}
		}
		ws := f.Workspace
		if backupOK {
			if _, err := tx.Exec(`UPDATE agent_files SET size=?, sha256=?, mime_type=?, has_backup=0, backup_size=0, backup_sha256='', backup_mime_type='' WHERE _id=?`,
				bSize, bSum, DetectMIME(bHead, f.Name), f.ID); err != nil {
				return err
			}
			if err := s.events.append(tx, ws, EventModified, map[string]any{"id": f.ID, "name": f.Name, "size": bSize, "modified_on": formatTime(f.ModifiedOn)}); err != nil {
				return err
			}
			if err := os.Rename(s.backupPath(f.ID), path); err != nil {
				return err
			}
			tx.onUndo(func() { os.Rename(path, s.backupPath(f.ID)) })
			syncDir(s.filesDir)
			p.Detail += "; restored the backup"
		} else {
			if _, err := tx.Exec(`DELETE FROM agent_files WHERE _id=?`, f.ID); err != nil {
				return err
			}
			if err := s.events.append(tx, ws, EventDeleted, map[string]any{"id": f.ID}); err != nil {
				return err
			}
			p.Detail += "; removed the file (there was no sound backup to restore)"
		}
		tx.onAfter(func() {
			s.quotaMu.Lock()
			delete(s.used, ws) // reload the committed total on next use
			s.quotaMu.Unlock()
		})
		p.Repaired = true
		return nil
	})
	if !stillThere {
		return
	}
	if err != nil {
		p.Repaired = false
	}
	if p.Repaired && !backupOK {
		os.Remove(s.backupPath(f.ID))
	}
	rep.Problems = append(rep.Problems, p)
}

// sweepTemp reports (and with repair removes) temp files that no live
// process is writing: directories of processes that are gone and loose
// files of earlier versions. A live process's temp directory is locked and
// left alone.
func (s *Store) sweepTemp(rep *FsckReport, repair bool) {
	dead, unlock := deadTempEntries(s.tmpRoot, s.tmp.path)
	defer func() {
		for _, u := range unlock {
			u()
		}
	}()
	for _, p := range dead {
		pr := Problem{Kind: "temp_file", Path: filepath.Join("files", ".tmp", filepath.Base(p)),
			Detail: "partial body of a write interrupted by a crash"}
		if repair {
			pr.Repaired = os.RemoveAll(p) == nil
		}
		rep.Problems = append(rep.Problems, pr)
	}
}

// sweepOrphans reports (and with repair removes) bodies and backups that no
// row refers to. Each candidate is re-checked inside a write transaction
// right before it is reported or removed: a body being committed by any
// process is placed inside its transaction, so it is either referenced by
// then or was never committed.
func (s *Store) sweepOrphans(ctx context.Context, rep *FsckReport, repair bool) {
	referenced := map[string]bool{}
	withBackup := map[string]bool{}
	rows, err := s.db.QueryContext(ctx, `SELECT disk_path, _id, has_backup FROM agent_files`)
	if err != nil {
		return
	}
	for rows.Next() {
		var disk, id string
		var hb bool
		if rows.Scan(&disk, &id, &hb) == nil {
			referenced[disk] = true
			withBackup[id] = hb
		}
	}
	rows.Close()

	if entries, err := os.ReadDir(s.filesDir); err == nil {
		for _, e := range entries {
			name := e.Name()
			if name == ".tmp" || referenced[name] {
				continue
			}
			path := filepath.Join(s.filesDir, name)
			if s.locks.isRetired(path) {
				continue // replaced while a reader of this process still reads it
			}
			p := Problem{Kind: "orphan_body", Path: filepath.Join("files", name), Detail: "body on disk that no file refers to (left by an interrupted write)"}
			s.orphan(ctx, rep, repair, p, path, `SELECT count(*) FROM agent_files WHERE disk_path=?`, name)
		}
	}
	if entries, err := os.ReadDir(s.backDir); err == nil {
		for _, e := range entries {
			name := e.Name()
			if withBackup[name] {
				continue
			}
			p := Problem{Kind: "orphan_backup", FileID: strings.TrimSuffix(name, ".tmp"), Path: filepath.Join("backups", name), Detail: "backup that no file refers to"}
			s.orphan(ctx, rep, repair, p, filepath.Join(s.backDir, name), `SELECT count(*) FROM agent_files WHERE _id=? AND has_backup=1`, name)
		}
	}
}

// orphan re-checks one candidate with query (which counts the rows that
// would make it referenced) under the write lock, then reports and, with
// repair, removes it.
func (s *Store) orphan(ctx context.Context, rep *FsckReport, repair bool, p Problem, path, query, arg string) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		p.Detail = fmt.Sprintf("a %s that no file refers to", fileKind(fi))
	}
	orphaned := false
	err := s.withTx(ctx, func(tx *txn) error {
		var n int
		if err := tx.QueryRow(query, arg).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil // committed meanwhile
		}
		if _, err := os.Lstat(path); err != nil {
			return nil // gone meanwhile: its writer removed it
		}
		if orphaned = true; repair {
			if err := os.RemoveAll(path); err != nil {
				return err
			}
			p.Repaired = true
		}
		return nil
	})
	if err != nil {
		p.Repaired = false
	}
	if orphaned {
		rep.Problems = append(rep.Problems, p)
	}
}

func fileKind(fi os.FileInfo) string {
	switch m := fi.Mode(); {
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	}
	return "special file"
}

// hashFile reads a body (never through a symbolic link) and returns its
// size, sha256 and first bytes.
func hashFile(path string) (int64, string, []byte, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, "", nil, err
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, "", nil, fmt.Errorf("not a regular file")
	}
	h := sha256.New()
	head := make([]byte, sniffLen)
	k, _ := io.ReadFull(fh, head)
	head = head[:k]
	h.Write(head)
	n, err := io.Copy(h, fh)
	if err != nil {
		return 0, "", nil, err
	}
	return n + int64(k), hex.EncodeToString(h.Sum(nil)), head, nil
}
