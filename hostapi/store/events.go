package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"time"
)

// Event types (seed 000), and the gap notice a resuming subscriber gets
// when events it asked for are no longer in the event log.
const (
	EventCreated  = "file:created"
	EventModified = "file:modified"
	EventDeleted  = "file:deleted"
	EventGap      = "events:gap"
)

// Event is one change notification. Seq numbers the events of one workspace
// from 1, durably: it survives restarts, and one workspace's numbers say
// nothing about another's. Data carries the seed-000 payload.
type Event struct {
	Seq       uint64         `json:"seq"`
	Type      string         `json:"type"`
	Workspace string         `json:"workspace"`
	Time      time.Time      `json:"time"`
	Data      map[string]any `json:"data"`

	id int64 // position in the log across workspaces
}

// Bus is where change events are followed.
type Bus interface {
	// Subscribe delivers the events of workspace with Seq > after until
	// cancel is called. after = 0 means "from now on"; a later after
	// replays what the log still holds first, preceded by an EventGap
	// when some of the asked-for events are gone (the client reloads its
	// view instead of trusting the replay). A subscriber that falls too
	// far behind has its channel closed; it resubscribes from its last
	// Seq.
	Subscribe(workspace string, after uint64) (events <-chan Event, cancel func())
}

// pollInterval is how often a store that has subscribers checks whether
// another process committed events (PRAGMA data_version: a few µs).
const pollInterval = 100 * time.Millisecond

// eventLog is the Bus of a Store. Every change appends its event to
// agent_events in the transaction that makes the change, so events are
// exactly as durable as the changes, numbered per workspace, and visible to
// every process on the data directory. Delivery follows the log's order:
// this process's commits are delivered as they commit; while anyone is
// subscribed, a poller picks up what other processes committed.
type eventLog struct {
	s    *Store
	keep int64

	mu      sync.Mutex // everything below, and the use of conn
	conn    *sql.Conn  // the poller's own connection; nil until the first Subscribe
	cursor  int64      // id of the last event delivered
	version int64      // conn's last PRAGMA data_version
	subs    map[*subscriber]struct{}
	closed  bool
	stop    chan struct{}
	done    chan struct{}
}

type subscriber struct {
	ws  string
	all bool // every workspace's events (the saved-tool watch)
	ch  chan Event
}

var _ Bus = (*eventLog)(nil)

func newEventLog(s *Store) *eventLog {
	return &eventLog{s: s, keep: int64(s.cfg.EventHistory), subs: map[*subscriber]struct{}{}}
}

// append adds the event of a change to tx and numbers it.
func (l *eventLog) append(tx *txn, ws, typ string, data map[string]any) error {
	ev := Event{Type: typ, Workspace: ws, Time: time.Now().UTC(), Data: data}
	payload, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if err := tx.QueryRow(`INSERT INTO agent_event_seq (workspace, last) VALUES (?, 1)
		ON CONFLICT (workspace) DO UPDATE SET last = last + 1 RETURNING last`, ws).Scan(&ev.Seq); err != nil {
		return err
	}
	res, err := tx.Exec(`INSERT INTO agent_events (workspace, seq, type, time, data) VALUES (?,?,?,?,?)`,
		ws, ev.Seq, typ, formatTime(ev.Time), payload)
	if err != nil {
		return err
	}
	if ev.id, err = res.LastInsertId(); err != nil {
		return err
	}
	// Trim now and then: the log holds between keep and keep+keep/8 events.
	if every := max(l.keep/8, 1); ev.id%every == 0 {
		if _, err := tx.Exec(`DELETE FROM agent_events WHERE id <= ?`, ev.id-l.keep); err != nil {
			return err
		}
	}
	tx.events = append(tx.events, ev)
	return nil
}

// committed delivers the events of a transaction of this process that has
// just committed (called in commit order).
func (l *eventLog) committed(evs []Event) {
	if len(evs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil || l.closed {
		return // nobody has subscribed yet: nothing to deliver to
	}
	for _, ev := range evs {
		switch {
		case ev.id <= l.cursor:
			// already delivered by a catch-up
		case ev.id == l.cursor+1:
			l.fanout(ev)
			l.cursor = ev.id
		default:
			// Another process committed in between: read the log in order.
			l.catchUp(context.Background())
		}
	}
}

// Subscribe implements Bus.
func (l *eventLog) Subscribe(ws string, after uint64) (<-chan Event, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx := context.Background()
	if !l.closed && l.conn == nil && l.start(ctx) != nil {
		l.closed = true // the database is gone; the store is closing
	}
	if l.closed {
		// Nothing will ever come. The channel stays open until cancel:
		// a closed one would tell the subscriber to resubscribe at once,
		// which it would do in a loop.
		ch := make(chan Event)
		var once sync.Once
		return ch, func() { once.Do(func() { close(ch) }) }
	}
	// One read snapshot: catch everyone up to it, then replay from it, so
	// that nothing is lost or repeated between the replay and live events.
	var replay []Event
	if _, err := l.conn.ExecContext(ctx, `BEGIN`); err == nil {
		l.catchUp(ctx)
		if after > 0 {
			replay = l.replay(ctx, ws, after)
		}
		l.conn.ExecContext(ctx, `COMMIT`)
	}
	s := &subscriber{ws: ws, ch: make(chan Event, 256+len(replay))}
	for _, e := range replay {
		s.ch <- e
	}
	l.subs[s] = struct{}{}
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if _, ok := l.subs[s]; ok {
				delete(l.subs, s)
				close(s.ch)
			}
		})
	}
}

// subscribeAll delivers every workspace's events from now on, this
// process's and other processes', until cancel (nil when the store is
// closing).
func (l *eventLog) subscribeAll() (<-chan Event, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed && l.conn == nil && l.start(context.Background()) != nil {
		l.closed = true
	}
	if l.closed {
		return nil, func() {}
	}
	s := &subscriber{all: true, ch: make(chan Event, 1024)}
	l.subs[s] = struct{}{}
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if _, ok := l.subs[s]; ok {
				delete(l.subs, s)
				close(s.ch)
			}
		})
	}
}

// start opens the poller's connection and starts following the log from
// its end.
func (l *eventLog) start(ctx context.Context) error {
	conn, err := l.s.db.Conn(ctx)
	if err != nil {
		return err
	}
	var cursor int64
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM agent_events`).Scan(&cursor); err != nil {
		conn.Close()
		return err
	}
	if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&l.version); err != nil {
		conn.Close()
		return err
	}
	l.conn, l.cursor = conn, cursor
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.poll()
	return nil
}

// poll picks up events that other processes commit.
func (l *eventLog) poll() {
	defer close(l.done)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	ctx := context.Background()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		var v int64
		if err := l.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err == nil && v != l.version {
			l.version = v
			l.catchUp(ctx)
		}
		l.mu.Unlock()
	}
}

// catchUp delivers every event after the cursor. l.mu is held.
func (l *eventLog) catchUp(ctx context.Context) {
	rows, err := l.conn.QueryContext(ctx, `SELECT id, workspace, seq, type, time, data FROM agent_events WHERE id > ? ORDER BY id`, l.cursor)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return
		}
		l.fanout(ev)
		l.cursor = ev.id
	}
}

// replay returns the events of ws after seq `after` up to the cursor,
// preceded by a gap notice when the log no longer has some of them. l.mu is
// held, inside the snapshot Subscribe opened.
func (l *eventLog) replay(ctx context.Context, ws string, after uint64) []Event {
	var last uint64
	err := l.conn.QueryRowContext(ctx, `SELECT last FROM agent_event_seq WHERE workspace=?`, ws).Scan(&last)
	if err != nil && err != sql.ErrNoRows {
		return nil
	}
	now := time.Now().UTC()
	if after >= last {
		if after == last {
			return nil
		}
		// An id from the future: the log was reset (a new data directory).
		// Everything the client holds is stale.
		return []Event{{Seq: last, Type: EventGap, Workspace: ws, Time: now,
			Data: map[string]any{"missed_from": uint64(1), "missed_to": last, "reason": "unknown event id; the event log was reset"}}}
	}
	rows, err := l.conn.QueryContext(ctx, `SELECT id, workspace, seq, type, time, data FROM agent_events
		WHERE workspace=? AND seq>? AND id<=? ORDER BY seq`, ws, after, l.cursor)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil
		}
		out = append(out, ev)
	}
	first := last + 1 // when everything asked for was trimmed
	if len(out) > 0 {
		first = out[0].Seq
	}
	if first > after+1 {
		gap := Event{Seq: first - 1, Type: EventGap, Workspace: ws, Time: now,
			Data: map[string]any{"missed_from": after + 1, "missed_to": first - 1}}
		out = append([]Event{gap}, out...)
	}
	return out
}

// fanout hands ev to the workspace's subscribers; one too slow to keep up
// loses its channel rather than slowing writers down. l.mu is held.
func (l *eventLog) fanout(ev Event) {
	for s := range l.subs {
		if !s.all && s.ws != ev.Workspace {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			close(s.ch)
			delete(l.subs, s)
		}
	}
}

func (l *eventLog) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	stop, done := l.stop, l.done
	l.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.subs {
		close(s.ch)
		delete(l.subs, s)
	}
	if l.conn != nil {
		l.conn.Close()
	}
}

func scanEvent(r rowScanner) (Event, error) {
	var ev Event
	var t string
	var data []byte
	if err := r.Scan(&ev.id, &ev.Workspace, &ev.Seq, &ev.Type, &t, &data); err != nil {
		return ev, err
	}
	ev.Time = parseTime(t)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return ev, err
	}
	ev.Data = canonicalNumbers(m).(map[string]any)
	return ev, nil
}

// canonicalNumbers turns decoded json.Numbers into int64 (integral) or
// float64, the types the events had when they were made.
func canonicalNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = canonicalNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = canonicalNumbers(e)
		}
		return x
	}
	return v
}
