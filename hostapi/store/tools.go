package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// EventToolChanged tells subscribers that a workspace's saved tools
// changed (saved or deleted), on whichever host: MCP servers send
// tools/list_changed on it. Data: {name, version, deleted}.
const EventToolChanged = "tool:changed"

// ToolStore keeps saved agent tools for every workspace and charges their
// bytes (ToolRecord.Bytes, key "tool:NAME") to the workspace's quota in
// the same step, on either backend: the agent_tools table of SQLite, or
// the shared backend's tool records. Every save and delete emits
// EventToolChanged on the store's Bus.
type ToolStore struct{ s *Store }

// Tools is the store's saved-tool store.
func (s *Store) Tools() *ToolStore { return &ToolStore{s: s} }

// Watch calls fn for every change of a saved tool in any workspace — made
// by this process, another process on the same data directory, or another
// host of a shared backend — until stop is called. fn runs on one
// goroutine, in the order of the changes.
func (t *ToolStore) Watch(fn func(ToolChange)) (stop func()) {
	ctx, cancel := context.WithCancel(t.s.stop)
	if sh := t.s.shared; sh != nil {
		if err := sh.b.Tools.Watch(ctx, fn); err != nil {
			// NATS is unreachable at start: keep trying in the
			// background, the way its connection reconnects.
			go func() {
				for ctx.Err() == nil {
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
						if sh.b.Tools.Watch(ctx, fn) == nil {
							return
						}
					}
				}
			}()
		}
		return cancel
	}
	done := make(chan struct{})
	// Subscribe before returning, so that no change made after Watch
	// returns is missed.
	ch, unsubscribe := t.s.events.subscribeAll()
	go func() {
		defer close(done)
		for ch != nil {
			stopSub := unsubscribe
			go func() { <-ctx.Done(); stopSub() }()
			for e := range ch {
				if e.Type != EventToolChanged {
					continue
				}
				name, _ := e.Data["name"].(string)
				version, _ := e.Data["version"].(int64)
				deleted, _ := e.Data["deleted"].(bool)
				fn(ToolChange{Workspace: e.Workspace, Name: name, Version: int(version), Deleted: deleted})
			}
			// Closed: the store is closing, stop was called, or fn was
			// too slow for a burst of events (then follow again).
			if ctx.Err() != nil {
				return
			}
			ch, unsubscribe = t.s.events.subscribeAll()
		}
	}()
	return func() { cancel(); <-done }
}

// ToolChargeKey names a saved tool's bytes in its workspace's usage.
func ToolChargeKey(name string) string { return "tool:" + name }

func noTool(name string) error {
	return apierr.New(apierr.NotFound, "no saved tool named %q; tools.list() shows the tools", name)
}

// Get returns a saved tool; NOT_FOUND when there is none.
func (t *ToolStore) Get(ctx context.Context, ws, name string) (ToolRecord, error) {
	if sh := t.s.shared; sh != nil {
		r, _, err := sh.b.Tools.Get(ctx, ws, name)
		if apierr.Is(err, apierr.NotFound) {
			return r, noTool(name)
		}
		return r, err
	}
	var r ToolRecord
	var schema, created, updated string
	err := t.s.db.QueryRowContext(ctx, `SELECT name, description, input_schema, code, version, created_on, updated_on
		FROM agent_tools WHERE workspace=? AND name=?`, ws, name).
		Scan(&r.Name, &r.Description, &schema, &r.Code, &r.Version, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return r, noTool(name)
	}
	if err != nil {
		return r, apierr.Wrap(apierr.Internal, err, "reading saved tool %q failed: %v", name, err)
	}
	r.InputSchema = []byte(schema)
	r.CreatedOn, _ = time.Parse(time.RFC3339Nano, created)
	r.UpdatedOn, _ = time.Parse(time.RFC3339Nano, updated)
	return r, nil
}

// List returns a workspace's saved tools by name.
func (t *ToolStore) List(ctx context.Context, ws string) ([]ToolRecord, error) {
	if sh := t.s.shared; sh != nil {
		return sh.b.Tools.List(ctx, ws)
	}
	rows, err := t.s.db.QueryContext(ctx, `SELECT name, description, input_schema, code, version, created_on, updated_on
		FROM agent_tools WHERE workspace=? ORDER BY name`, ws)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "listing saved tools failed: %v", err)
	}
	defer rows.Close()
	out := []ToolRecord{}
	for rows.Next() {
		var r ToolRecord
		var schema, created, updated string
		if err := rows.Scan(&r.Name, &r.Description, &schema, &r.Code, &r.Version, &created, &updated); err != nil {
			return nil, apierr.Wrap(apierr.Internal, err, "listing saved tools failed: %v", err)
		}
		r.InputSchema = []byte(schema)
		r.CreatedOn, _ = time.Parse(time.RFC3339Nano, created)
		r.UpdatedOn, _ = time.Parse(time.RFC3339Nano, updated)
		out = append(out, r)
	}
	return out, apierr.From(rows.Err())
}

// Save stores tool (a new one at version 1, or the next version of an
// existing one) and charges its bytes; QUOTA_EXCEEDED stores nothing. It
// returns the stored record. Names and contents are the caller's to check.
func (t *ToolStore) Save(ctx context.Context, ws string, tool ToolRecord) (ToolRecord, error) {
	if tool.Name == "" {
		return tool, apierr.New(apierr.ValidationFailed, "a saved tool needs a name")
	}
	if len(tool.InputSchema) == 0 {
		tool.InputSchema = []byte(`{}`)
	}
	now := time.Now().UTC()
	tool.UpdatedOn = now
	if sh := t.s.shared; sh != nil {
		return t.saveShared(ctx, sh, ws, tool)
	}
	created := now.Format(time.RFC3339Nano)
	err := t.s.withTx(ctx, func(tx *txn) error {
		err := tx.QueryRow(`
			INSERT INTO agent_tools (workspace, name, description, input_schema, code, version, created_on, updated_on)
			VALUES (?, ?, ?, ?, ?, 1, ?, ?)
			ON CONFLICT (workspace, name) DO UPDATE SET description=excluded.description, input_schema=excluded.input_schema,
				code=excluded.code, version=agent_tools.version+1, updated_on=excluded.updated_on
			RETURNING version, created_on`, ws, tool.Name, tool.Description, string(tool.InputSchema), tool.Code, created, created).
			Scan(&tool.Version, &created)
		if err != nil {
			return apierr.Wrap(apierr.Internal, err, "saving tool %q failed: %v", tool.Name, err)
		}
		if err := t.s.Workspace(ws).ChargeTx(tx.Tx, ToolChargeKey(tool.Name), tool.Bytes()); err != nil {
			return err
		}
		return t.s.events.append(tx, ws, EventToolChanged, map[string]any{"name": tool.Name, "version": int64(tool.Version), "deleted": false})
	})
	tool.CreatedOn, _ = time.Parse(time.RFC3339Nano, created)
	return tool, err
}

func (t *ToolStore) saveShared(ctx context.Context, sh *sharedEngine, ws string, tool ToolRecord) (ToolRecord, error) {
	limit := t.s.WorkspaceLimit(ws)
	for attempt := 0; ; attempt++ {
		cur, rev, err := sh.b.Tools.Get(ctx, ws, tool.Name)
		switch {
		case err == nil:
			tool.Version, tool.CreatedOn = cur.Version+1, cur.CreatedOn
		case apierr.Is(err, apierr.NotFound):
			tool.Version, tool.CreatedOn, rev = 1, tool.UpdatedOn, 0
		default:
			return tool, err
		}
		old, err := sh.b.Quota.Charge(ctx, ws, ToolChargeKey(tool.Name), tool.Bytes(), limit)
		if err != nil {
			return tool, err
		}
		nrev, err := sh.b.Tools.Put(ctx, ws, tool, rev)
		if err == nil {
			sh.publish(ctx, ws, EventToolChanged, map[string]any{"name": tool.Name, "version": int64(tool.Version), "deleted": false},
				ChangeRef{Key: "tool/" + ws + "/" + tool.Name + "/" + strconv.FormatUint(nrev, 10)})
			return tool, nil
		}
		// Put the charge back as it was, then retry on a lost race.
		dctx, cancel := detached(ctx)
		sh.b.Quota.Charge(dctx, ws, ToolChargeKey(tool.Name), old, 1<<62)
		cancel()
		if !errors.Is(err, ErrConflict) || attempt == 4 {
			return tool, err
		}
	}
}

// Delete removes a saved tool and its charge; NOT_FOUND when there is none.
func (t *ToolStore) Delete(ctx context.Context, ws, name string) error {
	if sh := t.s.shared; sh != nil {
		for attempt := 0; ; attempt++ {
			cur, rev, err := sh.b.Tools.Get(ctx, ws, name)
			if apierr.Is(err, apierr.NotFound) {
				return noTool(name)
			}
			if err != nil {
				return err
			}
			err = sh.b.Tools.Delete(ctx, ws, name, rev)
			if errors.Is(err, ErrConflict) && attempt < 4 {
				continue
			}
			if err != nil {
				return err
			}
			sh.b.Quota.Charge(ctx, ws, ToolChargeKey(name), 0, t.s.WorkspaceLimit(ws))
			sh.publish(ctx, ws, EventToolChanged, map[string]any{"name": name, "version": int64(cur.Version), "deleted": true},
				ChangeRef{Key: "tool/" + ws + "/" + name + "/" + strconv.FormatUint(rev, 10) + "/deleted"})
			return nil
		}
	}
	return t.s.withTx(ctx, func(tx *txn) error {
		var version int64
		err := tx.QueryRow(`DELETE FROM agent_tools WHERE workspace=? AND name=? RETURNING version`, ws, name).Scan(&version)
		if errors.Is(err, sql.ErrNoRows) {
			return noTool(name)
		}
		if err != nil {
			return apierr.Wrap(apierr.Internal, err, "deleting tool %q failed: %v", name, err)
		}
		if err := t.s.Workspace(ws).ChargeTx(tx.Tx, ToolChargeKey(name), 0); err != nil {
			return err
		}
		return t.s.events.append(tx, ws, EventToolChanged, map[string]any{"name": name, "version": version, "deleted": true})
	})
}
