package natsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/store"
)

// events publishes change events on one subject per workspace of the
// events stream. An event's Seq is its stream sequence: it increases with
// every event of a workspace, on whichever host it was published, so a
// client resumes on any host from the last Seq it saw. Every event also
// carries the Seq of the workspace's previous event (publishing is a
// compare-and-set on the subject's last sequence), which is how a
// resuming subscriber learns that events it asked for were trimmed.
//
// An event also carries the metadata revision of its change: a host
// delivers it to its subscribers only once its view of the metadata has
// that revision, so whoever hears of a change on a host reads it there.
// Publishing carries the change's key as the message id, so the same
// change published twice (a host publishing a dead host's event, see
// repair.go) is stored once.
type events struct {
	c  *conn
	ix *index

	mu   sync.Mutex        // serialises this host's publishes per store
	last map[string]uint64 // workspace subject → last sequence seen
}

var _ store.EventStream = (*events)(nil)

const (
	hdrType = "Metaclaw-Type"
	hdrPrev = "Metaclaw-Prev"
	hdrRev  = "Metaclaw-Rev"
)

type eventBody struct {
	Time time.Time      `json:"time"`
	Data map[string]any `json:"data"`
}

func (ev *events) subject(ws string) string { return ev.c.eventsSubj + wsKey(ws) }

// lastSeq reads the sequence of the workspace's last event (0: none).
func (ev *events) lastSeq(ctx context.Context, subj string) (uint64, error) {
	m, err := ev.c.events.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return m.Sequence, nil
}

func (ev *events) Publish(ctx context.Context, ws, typ string, data map[string]any, change store.ChangeRef) (store.Event, error) {
	subj := ev.subject(ws)
	now := time.Now().UTC()
	payload, err := json.Marshal(eventBody{Time: now, Data: data})
	if err != nil {
		return store.Event{}, err
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for attempt := 0; ; attempt++ {
		prev, known := ev.last[subj]
		if !known {
			if prev, err = ev.lastSeq(ctx, subj); err != nil {
				return store.Event{}, unavailable("publishing a change event", err)
			}
		}
		msg := nats.NewMsg(subj)
		msg.Data = payload
		msg.Header.Set(hdrType, typ)
		msg.Header.Set(hdrPrev, strconv.FormatUint(prev, 10))
		if change.Rev != 0 {
			msg.Header.Set(hdrRev, strconv.FormatUint(change.Rev, 10))
		}
		opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(prev)}
		if change.Key != "" {
			opts = append(opts, jetstream.WithMsgID(change.Key))
		}
		ack, err := ev.c.js.PublishMsg(ctx, msg, opts...)
		if err == nil {
			if !ack.Duplicate {
				ev.last[subj] = ack.Sequence
			}
			return store.Event{Seq: ack.Sequence, Type: typ, Workspace: ws, Time: now, Data: data}, nil
		}
		delete(ev.last, subj)
		if !isWrongRevision(err) || attempt == 20 {
			return store.Event{}, unavailable("publishing a change event", err)
		}
		// Another host published meanwhile; the error says the subject's
		// last sequence, which saves asking for it.
		if seq, ok := lastSequenceOf(err); ok {
			ev.last[subj] = seq
		}
	}
}

// Subscribe implements store.Bus with an ordered consumer on the
// workspace's subject: replay from after+1, then live events, in order.
func (ev *events) Subscribe(ws string, after uint64) (<-chan store.Event, func()) {
	ch := make(chan store.Event, 256)
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	stop := func() { once.Do(cancel) }
	subj := ev.subject(ws)
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}, DeliverPolicy: jetstream.DeliverNewPolicy}
	var gap *store.Event
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
		if last, err := ev.lastSeq(ctx, subj); err == nil && last < after {
			// An id from the future: the stream was reset (a new
			// deployment). Everything the client holds is stale.
			gap = &store.Event{Seq: last, Type: store.EventGap, Workspace: ws, Time: time.Now().UTC(),
				Data: map[string]any{"missed_from": uint64(1), "missed_to": last, "reason": "unknown event id; the event log was reset"}}
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverNewPolicy, 0
		}
	}
	cons, err := ev.c.js.OrderedConsumer(ctx, ev.c.eventsName, cfg)
	if err != nil {
		// NATS unreachable: nothing will come; the channel stays open
		// until cancel (a closed one would make the caller resubscribe in
		// a loop).
		go func() { <-ctx.Done(); close(ch) }()
		return ch, stop
	}
	if gap != nil {
		ch <- *gap
	}
	go func() {
		defer close(ch)
		it, err := cons.Messages()
		if err != nil {
			<-ctx.Done()
			return
		}
		go func() { <-ctx.Done(); it.Stop() }()
		first := after > 0 && gap == nil
		for {
			m, err := it.Next()
			if err != nil {
				return // stopped
			}
			e, prev, ok := decodeEvent(ws, m)
			if !ok {
				continue
			}
			if rev, _ := strconv.ParseUint(m.Headers().Get(hdrRev), 10, 64); rev != 0 {
				// Deliver once this host's view has the change (bounded:
				// a view that is behind must not hold events up).
				ev.ix.waitFor(ctx, rev, time.Second)
			}
			if first {
				first = false
				if prev > after {
					// Events between after and this one were trimmed.
					g := store.Event{Seq: prev, Type: store.EventGap, Workspace: ws, Time: time.Now().UTC(),
						Data: map[string]any{"missed_from": after + 1, "missed_to": prev}}
					if !send(ctx, ch, g) {
						return
					}
				}
			}
			if !send(ctx, ch, e) {
				return
			}
		}
	}()
	return ch, stop
}

// send hands e over; a subscriber too slow to keep up loses its channel
// rather than holding the stream up (it resubscribes from its last Seq).
func send(ctx context.Context, ch chan store.Event, e store.Event) bool {
	select {
	case ch <- e:
		return true
	case <-ctx.Done():
		return false
	default:
		return false
	}
}

func decodeEvent(ws string, m jetstream.Msg) (store.Event, uint64, bool) {
	md, err := m.Metadata()
	if err != nil {
		return store.Event{}, 0, false
	}
	var body eventBody
	dec := json.NewDecoder(bytes.NewReader(m.Data()))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		return store.Event{}, 0, false
	}
	if body.Data == nil {
		body.Data = map[string]any{}
	}
	prev, _ := strconv.ParseUint(m.Headers().Get(hdrPrev), 10, 64)
	return store.Event{Seq: md.Sequence.Stream, Type: m.Headers().Get(hdrType), Workspace: ws, Time: body.Time,
		Data: canonicalNumbers(body.Data).(map[string]any)}, prev, true
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

// lastSequenceOf reads the subject's last sequence from a "wrong last
// sequence: N" error.
func lastSequenceOf(err error) (uint64, bool) {
	msg := err.Error()
	i := strings.LastIndex(msg, "wrong last sequence: ")
	if i < 0 {
		return 0, false
	}
	rest := msg[i+len("wrong last sequence: "):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	n, err := strconv.ParseUint(rest[:j], 10, 64)
	return n, err == nil && j > 0
}
