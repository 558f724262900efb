package store

import (
	"sync"
	"time"
)

// Event types (seed 000), and the gap notice a resuming subscriber gets
// when events it asked for are no longer in the replay buffer.
const (
	EventCreated  = "file:created"
	EventModified = "file:modified"
	EventDeleted  = "file:deleted"
	EventGap      = "events:gap"
)

// Event is one change notification. Data carries the seed-000 payload.
type Event struct {
	Seq       uint64         `json:"seq"`
	Type      string         `json:"type"`
	Workspace string         `json:"workspace"`
	Time      time.Time      `json:"time"`
	Data      map[string]any `json:"data"`
}

// Bus carries change events. The embedded default is in-process; a
// multi-host deployment swaps in one backed by a message broker.
type Bus interface {
	Publish(e Event) Event
	// Subscribe delivers events of workspace with Seq > after (replaying
	// what the bus still remembers) until cancel is called.
	Subscribe(workspace string, after uint64) (events <-chan Event, cancel func())
}

// MemoryBus is an in-process Bus with a bounded replay buffer.
type MemoryBus struct {
	mu     sync.Mutex
	seq    uint64
	ring   []Event
	next   int
	filled bool
	subs   map[*subscriber]struct{}
}

type subscriber struct {
	ws string
	ch chan Event
}

// NewMemoryBus keeps the last size events for replay.
func NewMemoryBus(size int) *MemoryBus {
	if size < 1 {
		size = 1
	}
	return &MemoryBus{ring: make([]Event, size), subs: map[*subscriber]struct{}{}}
}

// Publish stamps e with the next sequence number and delivers it. A
// subscriber too slow to keep up loses its channel (it is closed) rather than
// slowing writers down; it can resubscribe from its last Seq.
func (b *MemoryBus) Publish(e Event) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b.ring[b.next] = e
	b.next = (b.next + 1) % len(b.ring)
	if b.next == 0 {
		b.filled = true
	}
	for s := range b.subs {
		if s.ws != e.Workspace {
			continue
		}
		select {
		case s.ch <- e:
		default:
			close(s.ch)
			delete(b.subs, s)
		}
	}
	return e
}

// Subscribe implements Bus.
func (b *MemoryBus) Subscribe(workspace string, after uint64) (<-chan Event, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &subscriber{ws: workspace, ch: make(chan Event, 256+len(b.ring))}
	if after > 0 && after < b.seq {
		replay := b.replayLocked()
		// Events after `after` fell out of the buffer: say so, so that
		// the client reloads its view instead of trusting the replay.
		if len(replay) > 0 && replay[0].Seq > after+1 {
			s.ch <- Event{Seq: replay[0].Seq - 1, Type: EventGap, Workspace: workspace, Time: time.Now().UTC(),
				Data: map[string]any{"missed_from": after + 1, "missed_to": replay[0].Seq - 1}}
		}
		for _, e := range replay {
			if e.Seq > after && e.Workspace == workspace {
				s.ch <- e
			}
		}
	}
	b.subs[s] = struct{}{}
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if _, ok := b.subs[s]; ok {
				delete(b.subs, s)
				close(s.ch)
			}
		})
	}
}

func (b *MemoryBus) replayLocked() []Event {
	if !b.filled {
		return b.ring[:b.next]
	}
	out := make([]Event, 0, len(b.ring))
	out = append(out, b.ring[b.next:]...)
	return append(out, b.ring[:b.next]...)
}

// LastSeq is the sequence number of the newest event.
func (b *MemoryBus) LastSeq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}
