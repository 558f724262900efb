package store

import (
	"context"
	"database/sql"
	"os"
)

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
	backup_size       INTEGER NOT NULL DEFAULT 0,
	backup_sha256     TEXT NOT NULL DEFAULT '',
	backup_mime_type  TEXT NOT NULL DEFAULT '',
	expires_on        TEXT NOT NULL DEFAULT '',
	UNIQUE (workspace, name)
);
CREATE INDEX IF NOT EXISTS agent_files_workspace ON agent_files (workspace);
CREATE INDEX IF NOT EXISTS agent_files_disk_path ON agent_files (disk_path);
-- Files with a time to live, for the expiry sweeper.
CREATE INDEX IF NOT EXISTS agent_files_expires ON agent_files (expires_on) WHERE expires_on != '';

-- Saved agent tools (the agenttools package's table; the store's
-- ToolStore reads and writes the same rows).
CREATE TABLE IF NOT EXISTS agent_tools (
	workspace    TEXT NOT NULL,
	name         TEXT NOT NULL,
	description  TEXT NOT NULL,
	input_schema TEXT NOT NULL,
	code         TEXT NOT NULL,
	version      INTEGER NOT NULL,
	created_on   TEXT NOT NULL,
	updated_on   TEXT NOT NULL,
	PRIMARY KEY (workspace, name)
);

-- Bytes a workspace stores outside agent_files (saved tools), by key.
CREATE TABLE IF NOT EXISTS agent_usage (
	workspace TEXT NOT NULL,
	key       TEXT NOT NULL,
	bytes     INTEGER NOT NULL,
	PRIMARY KEY (workspace, key)
);

-- The change events, appended in the transaction of the change they
-- describe. id orders them across workspaces (and processes: writers are
-- serialised by SQLite's write lock); seq numbers them within a workspace.
CREATE TABLE IF NOT EXISTS agent_events (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	workspace TEXT NOT NULL,
	seq       INTEGER NOT NULL,
	type      TEXT NOT NULL,
	time      TEXT NOT NULL,
	data      TEXT NOT NULL,
	UNIQUE (workspace, seq)
);
-- The last event number of each workspace; it survives trimming.
CREATE TABLE IF NOT EXISTS agent_event_seq (
	workspace TEXT PRIMARY KEY,
	last      INTEGER NOT NULL
);
`

// migrate creates the schema and brings a database written by an earlier
// version up to date, inside one write transaction so that processes
// opening the same data directory at once do not race.
func (s *Store) migrate() error {
	ctx := context.Background()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// CREATE TABLE IF NOT EXISTS leaves an older agent_files as it is: add
	// the columns it lacks first.
	hadFiles, err := tableExists(tx, "agent_files")
	if err != nil {
		return err
	}
	if hadFiles {
		cols, err := columns(tx, "agent_files")
		if err != nil {
			return err
		}
		if !cols["backup_size"] {
			for _, stmt := range []string{
				`ALTER TABLE agent_files ADD COLUMN backup_size INTEGER NOT NULL DEFAULT 0`,
				`ALTER TABLE agent_files ADD COLUMN backup_sha256 TEXT NOT NULL DEFAULT ''`,
				`ALTER TABLE agent_files ADD COLUMN backup_mime_type TEXT NOT NULL DEFAULT ''`,
			} {
				if _, err := tx.Exec(stmt); err != nil {
					return err
				}
			}
			if err := s.fillBackupSizes(tx); err != nil {
				return err
			}
		}
		if !cols["expires_on"] {
			if _, err := tx.Exec(`ALTER TABLE agent_files ADD COLUMN expires_on TEXT NOT NULL DEFAULT ''`); err != nil {
				return err
			}
		}
	}
	if _, err := tx.Exec(schema); err != nil {
		return err
	}
	return tx.Commit()
}

// fillBackupSizes records the size of backups kept by an earlier version,
// which did not count them toward the quota. (Their hash and type are
// computed when they are restored.)
func (s *Store) fillBackupSizes(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT _id FROM agent_files WHERE has_backup=1`)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		fi, err := os.Lstat(s.backupPath(id))
		if err != nil || !fi.Mode().IsRegular() {
			continue // fsck reports it
		}
		if _, err := tx.Exec(`UPDATE agent_files SET backup_size=? WHERE _id=?`, fi.Size(), id); err != nil {
			return err
		}
	}
	return nil
}

func tableExists(tx *sql.Tx, name string) (bool, error) {
	var n int
	err := tx.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type='table' AND name=?`, name).Scan(&n)
	return n > 0, err
}

func columns(tx *sql.Tx, table string) (map[string]bool, error) {
	rows, err := tx.Query(`SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out[n] = true
	}
	return out, rows.Err()
}

// lookupStmts are the hot metadata lookups, prepared once.
type lookupStmts struct {
	byID, byName *sql.Stmt
}

func (l *lookupStmts) prepare(db *sql.DB) error {
	var err error
	if l.byID, err = db.Prepare(`SELECT ` + fileColumns + ` FROM agent_files WHERE workspace=? AND _id=?`); err != nil {
		return err
	}
	l.byName, err = db.Prepare(`SELECT ` + fileColumns + ` FROM agent_files WHERE workspace=? AND name=?`)
	return err
}

func (l *lookupStmts) close() {
	for _, st := range []*sql.Stmt{l.byID, l.byName} {
		if st != nil {
			st.Close()
		}
	}
}
