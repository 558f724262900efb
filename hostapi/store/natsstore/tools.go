package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// tools keeps saved tools in the tools bucket, one key per workspace and
// name (<ws>.<name>), changed with compare-and-set on revisions.
type tools struct{ c *conn }

var _ store.ToolRecords = (*tools)(nil)

func toolKey(ws, name string) string { return wsKey(ws) + "." + wsKey(name) }

func (t *tools) Get(ctx context.Context, ws, name string) (store.ToolRecord, store.Revision, error) {
	e, err := t.c.tools.Get(ctx, toolKey(ws, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return store.ToolRecord{}, 0, apierr.New(apierr.NotFound, "no saved tool named %q", name)
	}
	if err != nil {
		return store.ToolRecord{}, 0, unavailable("reading a saved tool", err)
	}
	var r store.ToolRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return r, 0, apierr.Wrap(apierr.Internal, err, "saved tool %q in NATS is damaged (%v)", name, err)
	}
	return r, e.Revision(), nil
}

func (t *tools) List(ctx context.Context, ws string) ([]store.ToolRecord, error) {
	out := []store.ToolRecord{}
	lister, err := t.c.tools.ListKeysFiltered(ctx, wsKey(ws)+".>")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return out, nil
		}
		return nil, unavailable("listing saved tools", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	lister.Stop()
	for _, k := range keys {
		e, err := t.c.tools.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, unavailable("listing saved tools", err)
		}
		var r store.ToolRecord
		if json.Unmarshal(e.Value(), &r) == nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (t *tools) Put(ctx context.Context, ws string, r store.ToolRecord, rev store.Revision) (store.Revision, error) {
	val, err := json.Marshal(r)
	if err != nil {
		return 0, apierr.Wrap(apierr.Internal, err, "encoding saved tool failed: %v", err)
	}
	k := toolKey(ws, r.Name)
	var nrev uint64
	if rev == 0 {
		nrev, err = t.c.tools.Create(ctx, k, val)
	} else {
		nrev, err = t.c.tools.Update(ctx, k, val, rev)
	}
	if err != nil {
		if isWrongRevision(err) {
			return 0, store.ErrConflict
		}
		return 0, unavailable("saving a tool", err)
	}
	return nrev, nil
}

func (t *tools) Delete(ctx context.Context, ws, name string, rev store.Revision) error {
	err := t.c.tools.Delete(ctx, toolKey(ws, name), jetstream.LastRevision(rev))
	if err != nil {
		if isWrongRevision(err) {
			return store.ErrConflict
		}
		return unavailable("deleting a saved tool", err)
	}
	return nil
}

// Watch follows the tools bucket: every put and delete of any workspace's
// tool, from every host (this one's included).
func (t *tools) Watch(ctx context.Context, fn func(store.ToolChange)) error {
	w, err := t.c.tools.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return unavailable("following the saved tools", err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				wsPart, namePart, _ := strings.Cut(e.Key(), ".")
				ws, ok1 := wsName(wsPart)
				name, ok2 := wsName(namePart)
				if !ok1 || !ok2 {
					continue
				}
				ch := store.ToolChange{Workspace: ws, Name: name, Deleted: e.Operation() != jetstream.KeyValuePut}
				if !ch.Deleted {
					var r store.ToolRecord
					if json.Unmarshal(e.Value(), &r) == nil {
						ch.Version = r.Version
					}
				}
				fn(ch)
			}
		}
	}()
	return nil
}
