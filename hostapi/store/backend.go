package store

import (
	"context"
	"encoding/json"
	"errors"
	"io"
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
	// Put streams size bytes from r in under key and returns what was
	// stored. A Put that fails or is interrupted leaves nothing readable
	// under key.
	Put(ctx context.Context, key string, r io.Reader, size int64) (BlobInfo, error)
	// Get streams a body out; NOT_FOUND when key holds nothing.
	Get(ctx context.Context, key string) (io.ReadCloser, BlobInfo, error)
	// Stat describes a body; NOT_FOUND when key holds nothing.
	Stat(ctx context.Context, key string) (BlobInfo, error)
	// Delete removes a body; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
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
}

// MetaStore keeps file records, unique by name within a workspace. Every
// change is a compare-and-set on the record's revision.
type MetaStore interface {
	// Get returns file id's record; NOT_FOUND when there is none.
	Get(ctx context.Context, ws, id string) (FileRecord, Revision, error)
	// ByName returns the record that holds name; NOT_FOUND when none does.
	ByName(ctx context.Context, ws, name string) (FileRecord, Revision, error)
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
	// (ErrConflict when it moved on).
	Delete(ctx context.Context, ws string, r FileRecord, rev Revision) error
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

// Leases are per-key locks shared by every host. A lease held by a host
// that stops (crash, kill, lost network) is released when its heartbeat
// expires, so a dead host never blocks the others for longer than that.
type Leases interface {
	// Acquire waits until it holds key's lease or ctx is done.
	Acquire(ctx context.Context, key string) (release func(), err error)
}

// QuotaUsage is what a workspace's ledger holds.
type QuotaUsage struct {
	Files    int64            `json:"files"`
	Backups  int64            `json:"backups"`
	Charges  map[string]int64 `json:"charges,omitempty"`
	Reserved int64            `json:"reserved"` // writes in flight on every host
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

// QuotaLedger counts a workspace's bytes for every host, with
// compare-and-set updates so that racing writers on different hosts never
// take it past its limit. Reservations belong to the host that made them
// and are dropped when its heartbeat expires.
type QuotaLedger interface {
	// Reserve adds n bytes to reservation id; QUOTA_EXCEEDED (nothing
	// reserved) when committed plus reserved bytes would pass limit.
	Reserve(ctx context.Context, ws, id string, n, limit int64) error
	// Release drops reservation id.
	Release(ctx context.Context, ws, id string) error
	// Commit drops reservation id (may be "") and applies the deltas to the
	// committed counters in one step. A change that grows the committed
	// total past limit is QUOTA_EXCEEDED and changes nothing.
	Commit(ctx context.Context, ws, id string, files, backups, limit int64) error
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
	// Publish stores an event and returns it numbered.
	Publish(ctx context.Context, ws, typ string, data map[string]any) (Event, error)
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
