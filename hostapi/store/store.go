// Package store keeps a workspace's files: metadata in SQLite (WAL), bodies on
// local disk under generated names, atomic writes, quota, per-file
// coordination, one-level backups and durable change events (SPEC section 2).
//
// Write protocol, chosen so that a crash at any moment leaves either the old or
// the new body of every file and metadata that agrees with disk, and so that
// fsck can run beside writers without deleting anything committed:
//  1. stream the new body into this process's own temp directory
//     (files/.tmp/<pid>.<random>), hashing and sniffing as it goes, holding
//     quota for it, and fsync it — no lock is held while bytes arrive;
//  2. take the file's writer slot (other writers of the file wait; readers
//     never do) and open one SQLite write transaction that checks quota,
//     points the row at the new body (compare-and-swap on the old body's
//     name) and appends the change event;
//  3. still inside the transaction, hard-link the old body to backups/<id>
//     on the first modification, rename the new body to files/<generated
//     name> and fsync the directories; then commit;
//  4. retire the old body: remove it once no reader of this process uses it.
//
// A body only appears in files/ while the transaction that references it
// holds SQLite's write lock, so fsck, which re-checks every orphan candidate
// inside a write transaction, can never mistake a body being committed for
// an orphan. A crash leaves at most an unreferenced body and a dead process's
// temp directory; both are removed at the next start-up.
package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/mattn/go-sqlite3" // SQLite driver (cgo), the embedded metadata store

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Config sets where the store lives and its limits.
type Config struct {
	Dir              string // data directory; holds metaclaw.db, files/, cache/, backups/
	MaxFileSize      int64  // bytes per file; default 50 MB
	MaxWorkspaceSize int64  // bytes per workspace (files, backups, saved tools, writes in flight); default 1 GB
	// WorkspaceQuotas overrides MaxWorkspaceSize for the workspaces it names.
	WorkspaceQuotas map[string]int64
	// MaxToolSize is the most bytes (code + schema) one saved tool may
	// take; default 256 KB. The saved-tools package enforces it and charges
	// what it stores with Workspace.Charge.
	MaxToolSize int64
	// EventHistory is how many change events the event log keeps for
	// resuming subscribers (across all workspaces); default 10,000.
	EventHistory int

	// Backend, when set, keeps metadata, bodies, events, leases, quota and
	// saved tools in a shared backend (natsstore.Open) instead of SQLite
	// and disk, so that several hosts serve the same workspaces. Dir then
	// only holds this host's caches and temp files.
	Backend *Backend
	// BodyCacheBytes bounds this host's cache of bodies fetched from a
	// shared backend (format libraries need local files); default 2 GB.
	BodyCacheBytes int64
	// ExpirySweep is how often expired files (CreateOptions.TTL) are
	// deleted with their file:deleted event; default 1 s. Reads stop
	// seeing a file the moment it expires, whatever the sweep.
	ExpirySweep time.Duration
}

const (
	DefaultMaxFileSize      = 50 << 20
	DefaultMaxWorkspaceSize = 1 << 30
	DefaultMaxToolSize      = 256 << 10
	DefaultEventHistory     = 10_000
	DefaultBodyCacheBytes   = 2 << 30
	DefaultExpirySweep      = time.Second
)

// Store is the file store shared by every workspace of one data directory.
type Store struct {
	cfg      Config
	db       *sql.DB
	filesDir string
	tmpRoot  string
	tmp      *procTempDir
	backDir  string
	cacheDir string
	events   *eventLog
	locks    lockTable
	stmts    lookupStmts
	// writeMu serialises metadata transactions of this process so that they
	// do not spin on SQLite's busy handler; other processes still rely on it.
	writeMu sync.Mutex
	// commits counts committed metadata changes of this process. A lookup by
	// name reads it before and after pinning the file it found: unchanged,
	// the row it read is still current and needs no second lookup.
	commits atomic.Uint64

	quotaMu sync.Mutex
	// reserved bytes per workspace for writes in flight in this process.
	reserved map[string]int64
	// used is the committed size per workspace as last seen.
	used map[string]int64

	// Writes in flight, so that Close can stop them and wait for them to
	// clean up after themselves.
	flightMu sync.Mutex
	closing  bool
	flight   sync.WaitGroup
	stop     context.Context // done when Close starts
	stopNow  context.CancelFunc
	closed   sync.Once
	sweeps   sync.WaitGroup // the expiry sweeper

	// shared is the engine over a shared backend; nil for the local one.
	shared *sharedEngine
}

// Open opens (creating if needed) the store in cfg.Dir. Temp files of
// processes that are gone, and the bodies their crash left unreferenced, are
// removed on the way; other live processes' writes are left alone.
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
	if cfg.MaxToolSize <= 0 {
		cfg.MaxToolSize = DefaultMaxToolSize
	}
	if cfg.EventHistory <= 0 {
		cfg.EventHistory = DefaultEventHistory
	}
	if cfg.BodyCacheBytes <= 0 {
		cfg.BodyCacheBytes = DefaultBodyCacheBytes
	}
	if cfg.ExpirySweep <= 0 {
		cfg.ExpirySweep = DefaultExpirySweep
	}
	if cfg.Backend != nil {
		return openShared(cfg)
	}
	s := &Store{
		cfg:      cfg,
		filesDir: filepath.Join(cfg.Dir, "files"),
		tmpRoot:  filepath.Join(cfg.Dir, "files", ".tmp"),
		backDir:  filepath.Join(cfg.Dir, "backups"),
		cacheDir: filepath.Join(cfg.Dir, "cache"),
		reserved: map[string]int64{},
		used:     map[string]int64{},
	}
	s.stop, s.stopNow = context.WithCancel(context.Background())
	for _, d := range []string{cfg.Dir, s.filesDir, s.tmpRoot, s.backDir, s.cacheDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			rel, _ := filepath.Rel(cfg.Dir, d)
			return nil, apierr.Wrap(apierr.Internal, err, "cannot create the data directory's %q folder (%s); check the --data directory's permissions", rel, ioReason(err))
		}
	}
	dsn := "file:" + filepath.Join(cfg.Dir, "metaclaw.db") +
		"?_journal_mode=WAL&_busy_timeout=10000&_synchronous=NORMAL&_foreign_keys=on&_txlock=immediate"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "cannot open the metadata database: %v", err)
	}
	s.db = db
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, apierr.Wrap(apierr.Internal, err, "cannot prepare the metadata database: %v", err)
	}
	if err := s.stmts.prepare(db); err != nil {
		db.Close()
		return nil, apierr.Wrap(apierr.Internal, err, "cannot prepare the metadata lookups: %v", err)
	}
	s.tmp, err = newProcTempDir(s.tmpRoot)
	if err != nil {
		s.stmts.close()
		db.Close()
		return nil, apierr.Wrap(apierr.Internal, err, "cannot create a temp directory in the data directory (%s); check its permissions and free space", ioReason(err))
	}
	s.events = newEventLog(s)
	s.cleanLeftovers()
	s.startExpirySweeper(s.sweepExpiredLocal)
	return s, nil
}

// cleanLeftovers removes what processes that are gone left behind: their
// temp directories and, when there was one (a crash), unreferenced bodies
// and backups.
func (s *Store) cleanLeftovers() {
	dead, unlock := deadTempEntries(s.tmpRoot, s.tmp.path)
	crashed := false
	for _, p := range dead {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			crashed = true
		}
		os.RemoveAll(p)
	}
	for _, u := range unlock {
		u()
	}
	if crashed {
		s.sweepOrphans(context.Background(), &FsckReport{}, true)
	}
}

// Close stops writes in flight (they clean up after themselves), removes this
// process's temp directory and closes the metadata database.
func (s *Store) Close() error {
	var err error
	s.closed.Do(func() {
		s.flightMu.Lock()
		s.closing = true
		s.flightMu.Unlock()
		s.stopNow()
		done := make(chan struct{})
		go func() { s.flight.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// A writer stuck in its source's Read: its temp file goes with
			// the directory below, and its commit will fail cleanly.
		}
		s.sweeps.Wait()
		if s.shared != nil {
			s.tmp.close()
			err = s.shared.close()
			return
		}
		s.events.close()
		s.locks.drainRetired()
		s.tmp.close()
		s.stmts.close()
		err = s.db.Close()
	})
	return err
}

// beginWrite registers a write in flight; it fails once Close has started.
func (s *Store) beginWrite() (done func(), err error) {
	s.flightMu.Lock()
	defer s.flightMu.Unlock()
	if s.closing {
		return nil, apierr.New(apierr.FileWriteFailed, "the host is shutting down; the write was not started")
	}
	s.flight.Add(1)
	var once sync.Once
	return func() { once.Do(s.flight.Done) }, nil
}

// DB exposes the metadata database to sibling packages that keep their own
// tables in it. It is nil when the store runs on a shared backend: use
// Tools() for saved tools, which works on both.
func (s *Store) DB() *sql.DB { return s.db }

// Shared reports whether the store runs on a shared backend (several hosts).
func (s *Store) Shared() bool { return s.shared != nil }

// Bus is where the workspaces' change events can be followed (including
// changes made by other processes on the same data directory, or by other
// hosts on a shared backend).
func (s *Store) Bus() Bus {
	if s.shared != nil {
		return s.shared.b.Events
	}
	return s.events
}

// CacheDir is the directory for derived caches (DuckDB databases, compiled wasm).
func (s *Store) CacheDir() string { return s.cacheDir }

// Limits reports the configured per-file and default per-workspace byte
// limits (see WorkspaceLimit for a workspace's own).
func (s *Store) Limits() (maxFile, maxWorkspace int64) {
	return s.cfg.MaxFileSize, s.cfg.MaxWorkspaceSize
}

// WorkspaceLimit is the quota of workspace ws.
func (s *Store) WorkspaceLimit(ws string) int64 {
	if q, ok := s.cfg.WorkspaceQuotas[ws]; ok && q > 0 {
		return q
	}
	return s.cfg.MaxWorkspaceSize
}

// MaxToolSize is the most bytes one saved tool (code + schema) may take.
func (s *Store) MaxToolSize() int64 { return s.cfg.MaxToolSize }

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
	// ExpiresOn is when a file created with a time to live disappears
	// (zero: never).
	ExpiresOn time.Time `json:"expiresOn,omitzero"`

	// The backup kept by the first modification (when HasBackup): its
	// size counts toward the quota, and Revert restores it as it was.
	backupSize int64
	backupSHA  string
	backupMIME string
}

// Sources of a file (SPEC 2).
const (
	SourceUpload  = "upload"
	SourceCreated = "created"
	SourceDerived = "derived"
)

const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// FormatTime writes a time the way events and metadata carry it.
func FormatTime(t time.Time) string { return formatTime(t) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(timeLayout, s)
	return t
}

const fileColumns = `_id, workspace, name, mime_type, size, disk_path, source, source_session_id, created_on, modified_on, sha256, has_backup, backup_size, backup_sha256, backup_mime_type, expires_on`

type rowScanner interface{ Scan(dest ...any) error }

func scanFile(r rowScanner) (*File, error) {
	var f File
	var created, modified, expires string
	if err := r.Scan(&f.ID, &f.Workspace, &f.Name, &f.MimeType, &f.Size, &f.DiskPath, &f.Source,
		&f.SourceSessionID, &created, &modified, &f.SHA256, &f.HasBackup, &f.backupSize, &f.backupSHA, &f.backupMIME, &expires); err != nil {
		return nil, err
	}
	f.CreatedOn, f.ModifiedOn = parseTime(created), parseTime(modified)
	if expires != "" {
		f.ExpiresOn = parseTime(expires)
	}
	return &f, nil
}

// bodyPath is where f's body lives (under the data directory: never put it
// in a message).
func (s *Store) bodyPath(f *File) string { return filepath.Join(s.filesDir, f.DiskPath) }

// BodyPath returns where f's body lives on disk. It is only guaranteed to
// stay there during a View of the file (View hands it to you); tests and
// benchmarks use it to look at the disk directly.
// On a shared backend it is this host's cached copy (present once the
// file was read or written here).
func (w *Workspace) BodyPath(f *File) string {
	if sh := w.s.shared; sh != nil && len(f.SHA256) == 64 {
		return sh.cache.path(f.SHA256)
	}
	return w.s.bodyPath(f)
}

func (s *Store) backupPath(id string) string { return filepath.Join(s.backDir, id) }

// txn is one write transaction of this process. Statements run first;
// filesystem steps that must happen under SQLite's write lock (placing a
// body, keeping a backup) register how to undo them, in case the commit does
// not happen. after runs once the commit is durable, still in commit order.
type txn struct {
	*sql.Tx
	s      *Store
	events []Event
	undo   []func()
	after  []func()
}

func (t *txn) onUndo(fn func())  { t.undo = append(t.undo, fn) }
func (t *txn) onAfter(fn func()) { t.after = append(t.after, fn) }

// withTx runs fn in one write transaction.
func (s *Store) withTx(ctx context.Context, fn func(tx *txn) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	// The transaction must not be abandoned half-way because a caller's
	// context expired between the rename and the commit: use a detached
	// context with its own bound instead.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	sqlTx, err := s.db.BeginTx(tctx, nil)
	if err != nil {
		return apierr.Wrap(apierr.FileWriteFailed, err, "the metadata store is unavailable (%v); try again", err)
	}
	tx := &txn{Tx: sqlTx, s: s}
	rollback := func() {
		sqlTx.Rollback()
		for i := len(tx.undo) - 1; i >= 0; i-- {
			tx.undo[i]()
		}
	}
	if err := fn(tx); err != nil {
		rollback()
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		rollback()
		return apierr.Wrap(apierr.FileWriteFailed, err, "the metadata commit failed (%v); nothing was changed, try again", err)
	}
	s.commits.Add(1)
	for _, fn := range tx.after {
		fn()
	}
	s.events.committed(tx.events)
	return nil
}

var errNoRows = sql.ErrNoRows

func isNoRows(err error) bool { return errors.Is(err, errNoRows) }
