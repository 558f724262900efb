package store

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"
)

// The seams of a shared backend: what several hosts serving the same
// workspaces need from a distributed engine (NATS JetStream in
// hostapi/store/natsstore). Each is small and says what it guarantees; the
// shared engine (shared.go) builds the Workspace API on top of them, so a
// Store opened with Config.Backend behaves as the local one does — the
// conformance suite in hostapi/store/storetest runs against both.
//
// The local backend (SQLite + disk + the event log) does not go through
// these seams: on one machine a single SQLite transaction gives it what the
// seams give a cluster (quota, metadata and event committed together).

// Backend is a shared backend, assembled by its package (natsstore.Open).
type Backend struct {
	Blobs  BlobStore
	Meta   MetaStore
	Leases Leases
	Quota  QuotaLedger
	Events EventStream
	Tools  ToolRecords
	// HostID names this host in leases and reservations; a host whose
	// heartbeat stops is dead, and what it held is released.
	HostID string
	// Close releases the backend's connections (and an embedded server).
	Close func() error
}

// Revision is the version of a record in a MetaStore or ToolRecords; every
// change gives a record a new, larger one. 0 means "does not exist yet".
type Revision = uint64

// ErrConflict says a compare-and-set lost: the record changed since the
// revision the caller read. The caller reads it again and retries.
var ErrConflict = errors.New("the record changed meanwhile")

// BlobInfo describes a stored body.
type BlobInfo struct {
	Key    string
	Size   int64
	SHA256 string // hex
}

// BlobStore keeps file bodies under keys chosen by the engine (never a
// user's file name). Bodies are immutable: a changed file gets a new key.
type BlobStore interface {
	// Create starts streaming a body in under key, so that it travels
	// while the caller still receives it. Nothing is readable under key
	// until the writer's Commit succeeds; an aborted or interrupted one
	// (even a killed process) leaves nothing readable.
	Create(ctx context.Context, key string) (BlobWriter, error)
	// Get streams a body out; NOT_FOUND when key holds nothing.
	Get(ctx context.Context, key string) (io.ReadCloser, BlobInfo, error)
	// Stat describes a body; NOT_FOUND when key holds nothing.
	Stat(ctx context.Context, key string) (BlobInfo, error)
	// Delete removes a body; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// BlobWriter is a body being stored.
type BlobWriter interface {
	io.Writer
	// Commit makes the body readable once every byte written is stored;
	// size and sha256 (hex) are what the caller wrote, computed as it
	// went.
	Commit(size int64, sha256 string) (BlobInfo, error)
	// Abort drops what was sent.
	Abort()
}

// BodyRef is where a body is and what it is.
type BodyRef struct {
	Blob     string `json:"blob"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	MimeType string `json:"mime_type"`
}

// FileRecord is a file's metadata as a shared backend stores it.
type FileRecord struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	MimeType        string    `json:"mime_type"`
	Size            int64     `json:"size"`
	SHA256          string    `json:"sha256"`
	Blob            string    `json:"blob"`
	Source          string    `json:"source"`
	SourceSessionID string    `json:"source_session_id,omitempty"`
	CreatedOn       time.Time `json:"created_on"`
	ModifiedOn      time.Time `json:"modified_on"`
	ExpiresOn       time.Time `json:"expires_on,omitzero"`
	Backup          *BodyRef  `json:"backup,omitempty"`
	// Host is the host that made the record's last change and Change what
	// it was (EventCreated or EventModified), so that any host can publish
	// its event if that host dies before it does.
	Host   string `json:"host,omitempty"`
	Change string `json:"change,omitempty"`
	// Deleted marks a tombstone: a record being deleted, kept until its
	// event is out (a backend never returns one).
	Deleted bool `json:"deleted,omitempty"`
}

// FileChangeKey names a change of file id at metadata revision rev, for
// ChangeRef.
func FileChangeKey(ws, id string, rev Revision) string {
	return ws + "/" + id + "/" + strconv.FormatUint(rev, 10)
}

// MetaStore keeps file records, unique by name within a workspace. Every
// change is a compare-and-set on the record's revision.
//
// Reads are served from this host's view of the records, which follows
// every host's changes (NATS: a watch of the bucket, a few hundred
// microseconds behind) and has this host's own changes at once. A record
// the view does not have is looked up in the shared store, so a file just
// created elsewhere is never reported missing; a record changed elsewhere
// may be seen as it was for that short delay. Writers read under the
// file's lease after Sync, which makes the view current.
type MetaStore interface {
	// Get returns file id's record; NOT_FOUND when there is none.
	Get(ctx context.Context, ws, id string) (FileRecord, Revision, error)
	// Latest returns file id's record as the shared store holds it now (a
	// round trip).
	Latest(ctx context.Context, ws, id string) (FileRecord, Revision, error)
	// ByName returns the record that holds name; NOT_FOUND when none does.
	ByName(ctx context.Context, ws, name string) (FileRecord, Revision, error)
	// Sync waits until the view holds every change up to rev (a lease's
	// revision); an error says the view is behind and Latest must be used.
	Sync(ctx context.Context, rev Revision) error
	// List returns the workspace's records by name. It may be served from
	// a local copy that follows the shared state (a change made on another
	// host shows up within milliseconds; this host's own at once).
	List(ctx context.Context, ws string) ([]FileRecord, error)
	// Create stores a new record and claims its name; ALREADY_EXISTS when
	// another record holds the name.
	Create(ctx context.Context, ws string, r FileRecord) (Revision, error)
	// Update replaces prev, read at revision rev, by next (ErrConflict
	// when the record moved on). A changed Name claims the new name first
	// (ALREADY_EXISTS when taken) and frees the old one.
	Update(ctx context.Context, ws string, prev, next FileRecord, rev Revision) (Revision, error)
	// Delete removes the record at revision rev and frees its name
	// (ErrConflict when it moved on); it returns the deletion's revision.
	Delete(ctx context.Context, ws string, r FileRecord, rev Revision) (Revision, error)
	// All returns the records of every workspace (for the expiry sweeper
	// and fsck; it may be served from the local copy List uses).
	All(ctx context.Context) ([]WorkspaceRecord, error)
}

// WorkspaceRecord is a record with the workspace it belongs to.
type WorkspaceRecord struct {
	Workspace string
	Record    FileRecord
	Revision  Revision
}

// Leases are per-file locks shared by every host. A lease held by a host
// that stops (crash, kill, lost network) is released when its heartbeat
// expires, so a dead host never blocks the others for longer than that.
type Leases interface {
	// Acquire waits until it holds file id's lease or ctx is done. rev
	// orders the lease after every change its earlier holders made:
	// MetaStore.Sync(rev) makes them visible.
	Acquire(ctx context.Context, ws, id string) (release func(), rev Revision, err error)
}

// QuotaUsage is a workspace's usage: its records' bodies and backups, the
// named charges and the writes in flight on every host.
type QuotaUsage struct {
	Files    int64            `json:"files"`
	Backups  int64            `json:"backups"`
	Charges  map[string]int64 `json:"charges,omitempty"`
	Reserved int64            `json:"reserved"`
}

// Other is the sum of the charges.
func (u QuotaUsage) Other() int64 {
	var n int64
	for _, c := range u.Charges {
		n += c
	}
	return n
}

// Used is the committed total the quota is checked against.
func (u QuotaUsage) Used() int64 { return u.Files + u.Backups + u.Other() }

// QuotaLedger guards a workspace's quota for every host. Usage is counted
// from the records themselves (their bodies and backups), so no crash can
// make the count disagree with them; the ledger holds what records do not:
// named charges, and reservations of writes in flight, each owned by a
// host and dropped when its heartbeat expires. Changes are
// compare-and-set, so racing writers on different hosts never take a
// workspace past its limit.
//
// A reservation is named by the blob key of the body it is for: once a
// record refers to that body, the record's size counts and the
// reservation no longer does, so a write commits without touching the
// ledger and a crash between the two steps counts nothing twice.
type QuotaLedger interface {
	// Reserve adds n bytes to reservation id (a blob key); QUOTA_EXCEEDED
	// (nothing reserved) when usage plus n would pass limit.
	Reserve(ctx context.Context, ws, id string, n, limit int64) error
	// Release drops reservation id; it may happen later, in the
	// background (a reservation whose body a record holds counts nothing).
	Release(ctx context.Context, ws, id string) error
	// Charge sets the named charge to n bytes (0 removes it), checked
	// against limit like Commit; it returns the previous charge.
	Charge(ctx context.Context, ws, key string, n, limit int64) (old int64, err error)
	// Usage reads the ledger.
	Usage(ctx context.Context, ws string) (QuotaUsage, error)
}

// EventStream numbers and stores change events and delivers them to
// subscribers on every host. Seq increases with every event of a
// workspace (it may skip numbers), so a client resumes on any host with
// the last Seq it saw.
type EventStream interface {
	Bus
	// Publish stores an event and returns it numbered. change names the
	// change it reports: publishing the same change twice (a host that
	// took over a dead one's work) stores it once; its Rev is the
	// metadata revision a subscriber's host must have seen before
	// delivering the event, so that whoever hears of a change on a host
	// can read it there.
	Publish(ctx context.Context, ws, typ string, data map[string]any, change ChangeRef) (Event, error)
}

// ChangeRef names a change for its event: Key is unique to the change
// ("" for none) and Rev its metadata revision (0 for none).
type ChangeRef struct {
	Key string
	Rev Revision
}

// ToolRecord is a saved tool as a backend stores it (the agenttools
// package owns its meaning).
type ToolRecord struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Code        string          `json:"code"`
	Version     int             `json:"version"`
	CreatedOn   time.Time       `json:"created_on"`
	UpdatedOn   time.Time       `json:"updated_on"`
}

// Bytes is what the tool is charged to its workspace's quota: its code,
// schema and description, as the agenttools package counts them.
func (t ToolRecord) Bytes() int64 {
	return int64(len(t.Code) + len(t.InputSchema) + len(t.Description))
}

// ToolRecords keeps saved tools per workspace with compare-and-set.
type ToolRecords interface {
	Get(ctx context.Context, ws, name string) (ToolRecord, Revision, error) // NOT_FOUND
	List(ctx context.Context, ws string) ([]ToolRecord, error)              // by name
	// Put stores t at revision rev (0: must not exist); ErrConflict when
	// the record moved on.
	Put(ctx context.Context, ws string, t ToolRecord, rev Revision) (Revision, error)
	// Delete removes the tool at revision rev; ErrConflict when it moved on.
	Delete(ctx context.Context, ws, name string, rev Revision) error
	// Watch calls fn, in order, for every later change of any workspace's
	// tools made on any host, until ctx ends. It is derived from the
	// records themselves, so a host that dies right after a change cannot
	// make the others miss it.
	Watch(ctx context.Context, fn func(ToolChange)) error
}

// ToolChange is one change of a saved tool.
type ToolChange struct {
	Workspace string
	Name      string
	Version   int // of the saved tool (0 for a delete on a shared backend)
	Deleted   bool
}
