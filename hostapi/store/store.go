// Package store keeps a workspace's files: metadata in SQLite (WAL), bodies on
// local disk under generated names, atomic writes, quota, per-file locks,
// one-level backups and change events (SPEC section 2).
//
// Write protocol, chosen so that a crash at any moment leaves either the old or
// the new body of every file and metadata that agrees with disk:
//  1. stream the new body into files/.tmp/<random>, hashing and sniffing as it
//     goes, fsync it;
//  2. rename it to files/<generated name> (a name never used before);
//  3. on the first modification, hard-link the old body to backups/<id>;
//  4. one SQLite transaction points the row at the new body (and checks quota);
//  5. remove the old body.
//
// A crash before 4 leaves an unreferenced body (fsck removes it); a crash after
// 4 leaves the old body unreferenced (fsck removes it). Metadata never points at
// a partial body.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // SQLite driver (cgo), the embedded metadata store

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Config sets where the store lives and its limits.
type Config struct {
	Dir              string // data directory; holds metaclaw.db, files/, cache/, backups/
	MaxFileSize      int64  // bytes per file; default 50 MB
	MaxWorkspaceSize int64  // bytes per workspace; default 1 GB
	Bus              Bus    // event bus; default an in-process bus
}

const (
	DefaultMaxFileSize      = 50 << 20
	DefaultMaxWorkspaceSize = 1 << 30
)

// Store is the file store shared by every workspace of one data directory.
type Store struct {
	cfg      Config
	db       *sql.DB
	filesDir string
	tmpDir   string
	backDir  string
	cacheDir string
	bus      Bus
	locks    lockTable
	// writeMu serialises metadata transactions of this process so that they
	// do not spin on SQLite's busy handler; other processes still rely on it.
	writeMu sync.Mutex

	quotaMu sync.Mutex
	// reserved bytes per workspace for writes in flight in this process.
	reserved map[string]int64
	// used is the committed size per workspace as last seen.
	used map[string]int64
}

// Open opens (creating if needed) the store in cfg.Dir.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		cfg.Dir = "data"
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	if cfg.MaxWorkspaceSize <= 0 {
		cfg.MaxWorkspaceSize = DefaultMaxWorkspaceSize
	}
	s := &Store{
		cfg:      cfg,
		filesDir: filepath.Join(cfg.Dir, "files"),
		tmpDir:   filepath.Join(cfg.Dir, "files", ".tmp"),
		backDir:  filepath.Join(cfg.Dir, "backups"),
		cacheDir: filepath.Join(cfg.Dir, "cache"),
		bus:      cfg.Bus,
		reserved: map[string]int64{},
		used:     map[string]int64{},
	}
	if s.bus == nil {
		s.bus = NewMemoryBus(1024)
	}
	for _, d := range []string{cfg.Dir, s.filesDir, s.tmpDir, s.backDir, s.cacheDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	dsn := "file:" + filepath.Join(cfg.Dir, "metaclaw.db") +
		"?_journal_mode=WAL&_busy_timeout=10000&_synchronous=NORMAL&_foreign_keys=on&_txlock=immediate"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open metadata: %w", err)
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create schema: %w", err)
	}
	s.db = db
	return s, nil
}

const schema = `
CREATE TABLE IF NOT EXISTS agent_files (
	_id               TEXT PRIMARY KEY,
	workspace         TEXT NOT NULL,
	name              TEXT NOT NULL,
	mime_type         TEXT NOT NULL,
	size              INTEGER NOT NULL,
	disk_path         TEXT NOT NULL,
	source            TEXT NOT NULL CHECK (source IN ('upload','created','derived')),
	source_session_id TEXT NOT NULL DEFAULT '',
	created_on        TEXT NOT NULL,
	modified_on       TEXT NOT NULL,
	sha256            TEXT NOT NULL,
	has_backup        INTEGER NOT NULL DEFAULT 0,
	UNIQUE (workspace, name)
);
CREATE INDEX IF NOT EXISTS agent_files_workspace ON agent_files (workspace);
`

// Close closes the metadata database.
func (s *Store) Close() error { return s.db.Close() }

// DB exposes the metadata database to sibling packages that keep their own
// tables in it (saved agent tools).
func (s *Store) DB() *sql.DB { return s.db }

// Bus is the event bus changes are published on.
func (s *Store) Bus() Bus { return s.bus }

// CacheDir is the directory for derived caches (DuckDB databases, compiled wasm).
func (s *Store) CacheDir() string { return s.cacheDir }

// Limits reports the configured per-file and per-workspace byte limits.
func (s *Store) Limits() (maxFile, maxWorkspace int64) {
	return s.cfg.MaxFileSize, s.cfg.MaxWorkspaceSize
}

// Workspace returns a handle on one workspace. It is cheap; no I/O happens.
func (s *Store) Workspace(name string) *Workspace {
	if name == "" {
		name = "default"
	}
	return &Workspace{s: s, name: name}
}

// Workspace is one isolated set of files.
type Workspace struct {
	s    *Store
	name string
}

// Name is the workspace's name.
func (w *Workspace) Name() string { return w.name }

// Store is the store the workspace belongs to.
func (w *Workspace) Store() *Store { return w.s }

// File is the metadata of one file.
type File struct {
	ID              string    `json:"id"`
	Workspace       string    `json:"workspace"`
	Name            string    `json:"name"`
	MimeType        string    `json:"mimeType"`
	Size            int64     `json:"size"`
	DiskPath        string    `json:"-"`
	Source          string    `json:"source"`
	SourceSessionID string    `json:"sourceSessionId"`
	CreatedOn       time.Time `json:"createdOn"`
	ModifiedOn      time.Time `json:"modifiedOn"`
	SHA256          string    `json:"sha256"`
	HasBackup       bool      `json:"hasBackup"`
}

// Sources of a file (SPEC 2).
const (
	SourceUpload  = "upload"
	SourceCreated = "created"
	SourceDerived = "derived"
)

const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(timeLayout, s)
	return t
}

const fileColumns = `_id, workspace, name, mime_type, size, disk_path, source, source_session_id, created_on, modified_on, sha256, has_backup`

type rowScanner interface{ Scan(dest ...any) error }

func scanFile(r rowScanner) (*File, error) {
	var f File
	var created, modified string
	if err := r.Scan(&f.ID, &f.Workspace, &f.Name, &f.MimeType, &f.Size, &f.DiskPath, &f.Source,
		&f.SourceSessionID, &created, &modified, &f.SHA256, &f.HasBackup); err != nil {
		return nil, err
	}
	f.CreatedOn, f.ModifiedOn = parseTime(created), parseTime(modified)
	return &f, nil
}

// bodyPath is the absolute path of a file's current body.
func (s *Store) bodyPath(f *File) string { return filepath.Join(s.filesDir, f.DiskPath) }

// BodyPath returns where f's current body lives on disk. Only read it while
// holding the file's lock (Open does that for you).
func (w *Workspace) BodyPath(f *File) string { return w.s.bodyPath(f) }

func (s *Store) backupPath(id string) string { return filepath.Join(s.backDir, id) }

// withTx runs fn in one write transaction.
func (s *Store) withTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	// The transaction must not be abandoned half-way because a caller's
	// context expired between the rename and the commit: use a detached
	// context with its own bound instead.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	tx, err := s.db.BeginTx(tctx, nil)
	if err != nil {
		return apierr.Wrap(apierr.FileWriteFailed, err, "metadata store unavailable: %v", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return apierr.Wrap(apierr.FileWriteFailed, err, "metadata commit failed: %v", err)
	}
	return nil
}

var errNoRows = sql.ErrNoRows

func isNoRows(err error) bool { return errors.Is(err, errNoRows) }
