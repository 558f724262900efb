package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Problem is one disagreement fsck found between metadata and disk.
type Problem struct {
	Kind     string `json:"kind"` // missing_body, size_mismatch, sha_mismatch, orphan_body, temp_file, missing_backup, orphan_backup
	FileID   string `json:"fileId,omitempty"`
	Name     string `json:"name,omitempty"`
	Path     string `json:"path,omitempty"`
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
// removes orphan bodies, temp files and stray backups, recomputes metadata
// from a body whose size or hash disagrees (the body is the durable truth:
// the write protocol only points metadata at fsynced bodies), drops rows
// whose body is gone (restoring from the backup when there is one) and
// clears has_backup flags whose backup is missing.
//
// Run it while no writer is active on the data directory (at start-up or
// from the CLI): it treats temp files as leftovers of crashed writes.
func (s *Store) Fsck(ctx context.Context, repair bool) (*FsckReport, error) {
	rep := &FsckReport{Problems: []Problem{}}
	rows, err := s.db.QueryContext(ctx, `SELECT `+fileColumns+` FROM agent_files`)
	if err != nil {
		return nil, err
	}
	var files []*File
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		files = append(files, f)
	}
	rows.Close()
	referenced := map[string]bool{}
	backups := map[string]bool{}
	for _, f := range files {
		rep.FilesChecked++
		referenced[f.DiskPath] = true
		if f.HasBackup {
			backups[f.ID] = true
		}
		if err := s.checkFile(ctx, f, repair, rep); err != nil {
			return nil, err
		}
	}
	// Orphan bodies and temp files.
	entries, err := os.ReadDir(s.filesDir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() || referenced[e.Name()] {
			continue
		}
		p := Problem{Kind: "orphan_body", Path: filepath.Join("files", e.Name()), Detail: "body on disk that no file refers to (left by an interrupted write)"}
		if repair {
			p.Repaired = os.Remove(filepath.Join(s.filesDir, e.Name())) == nil
		}
		rep.Problems = append(rep.Problems, p)
	}
	tmps, _ := os.ReadDir(s.tmpDir)
	for _, e := range tmps {
		p := Problem{Kind: "temp_file", Path: filepath.Join("files", ".tmp", e.Name()), Detail: "partial body of an interrupted write"}
		if repair {
			p.Repaired = os.Remove(filepath.Join(s.tmpDir, e.Name())) == nil
		}
		rep.Problems = append(rep.Problems, p)
	}
	bks, _ := os.ReadDir(s.backDir)
	for _, e := range bks {
		id := e.Name()
		if backups[id] {
			continue
		}
		p := Problem{Kind: "orphan_backup", FileID: strings.TrimSuffix(id, ".tmp"), Path: filepath.Join("backups", id), Detail: "backup that no file refers to"}
		if repair {
			p.Repaired = os.Remove(filepath.Join(s.backDir, id)) == nil
		}
		rep.Problems = append(rep.Problems, p)
	}
	return rep, nil
}

func (s *Store) checkFile(ctx context.Context, f *File, repair bool, rep *FsckReport) error {
	path := s.bodyPath(f)
	size, sum, err := hashFile(path)
	if os.IsNotExist(err) {
		p := Problem{Kind: "missing_body", FileID: f.ID, Name: f.Name, Path: filepath.Join("files", f.DiskPath), Detail: "metadata refers to a body that is not on disk"}
		if repair {
			p.Repaired, p.Detail = s.repairMissing(ctx, f, p.Detail)
		}
		rep.Problems = append(rep.Problems, p)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if size != f.Size || sum != f.SHA256 {
		kind := "sha_mismatch"
		if size != f.Size {
			kind = "size_mismatch"
		}
		p := Problem{Kind: kind, FileID: f.ID, Name: f.Name, Detail: fmt.Sprintf("metadata says %d bytes sha256 %.12s…, disk has %d bytes sha256 %.12s…", f.Size, f.SHA256, size, sum)}
		if repair {
			err := s.withTx(ctx, func(tx *sql.Tx) error {
				_, err := tx.Exec(`UPDATE agent_files SET size=?, sha256=? WHERE _id=?`, size, sum, f.ID)
				return err
			})
			p.Repaired = err == nil
		}
		rep.Problems = append(rep.Problems, p)
	}
	if f.HasBackup {
		if _, err := os.Stat(s.backupPath(f.ID)); os.IsNotExist(err) {
			p := Problem{Kind: "missing_backup", FileID: f.ID, Name: f.Name, Detail: "has_backup is set but the backup is gone"}
			if repair {
				err := s.withTx(ctx, func(tx *sql.Tx) error {
					_, err := tx.Exec(`UPDATE agent_files SET has_backup=0 WHERE _id=?`, f.ID)
					return err
				})
				p.Repaired = err == nil
			}
			rep.Problems = append(rep.Problems, p)
		}
	}
	return nil
}

// repairMissing restores a lost body from its backup, or drops the row.
func (s *Store) repairMissing(ctx context.Context, f *File, detail string) (bool, string) {
	if f.HasBackup {
		bk := s.backupPath(f.ID)
		if size, sum, err := hashFile(bk); err == nil {
			if err := os.Rename(bk, s.bodyPath(f)); err == nil {
				err = s.withTx(ctx, func(tx *sql.Tx) error {
					_, err := tx.Exec(`UPDATE agent_files SET size=?, sha256=?, has_backup=0 WHERE _id=?`, size, sum, f.ID)
					return err
				})
				if err == nil {
					return true, detail + "; restored the backup"
				}
			}
		}
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`DELETE FROM agent_files WHERE _id=?`, f.ID)
		return err
	})
	return err == nil, detail + "; removed the file's metadata"
}

func hashFile(path string) (int64, string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, fh)
	if err != nil {
		return 0, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
