package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// next reads one event or fails (the timeout guards against a hang; the
// events are delivered before the write that made them returns).
func next(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("subscription closed")
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

func TestEventIDsPerWorkspaceAndDurable(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	a, b := s.Workspace("a"), s.Workspace("b")
	live, cancel := s.Bus().Subscribe("a", 0)
	create(t, a, "1.txt", "x")
	create(t, b, "other.txt", "y")
	create(t, a, "2.txt", "x")
	if e := next(t, live); e.Seq != 1 || e.Type != EventCreated || e.Data["name"] != "1.txt" || e.Data["size"] != int64(1) || e.Workspace != "a" {
		t.Fatalf("first event: %+v", e)
	}
	// Workspace b's change is neither delivered to a's subscriber nor
	// numbered in a's sequence.
	if e := next(t, live); e.Seq != 2 || e.Data["name"] != "2.txt" {
		t.Fatalf("second event of a: %+v", e)
	}
	cancel()
	if err := a.Delete(context.Background(), "1.txt"); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// After a restart, a client resumes with its Last-Event-ID.
	s = openTest(t, Config{Dir: dir})
	resumed, cancel := s.Bus().Subscribe("a", 1)
	defer cancel()
	if e := next(t, resumed); e.Seq != 2 || e.Data["name"] != "2.txt" {
		t.Fatalf("replay after restart: %+v", e)
	}
	if e := next(t, resumed); e.Seq != 3 || e.Type != EventDeleted {
		t.Fatalf("replay after restart: %+v", e)
	}
	create(t, s.Workspace("a"), "3.txt", "z")
	if e := next(t, resumed); e.Seq != 4 || e.Data["name"] != "3.txt" {
		t.Fatalf("live after replay: %+v", e)
	}
	bEvents, cancelB := s.Bus().Subscribe("b", 0)
	defer cancelB()
	create(t, s.Workspace("b"), "more.txt", "z")
	if e := next(t, bEvents); e.Seq != 2 || e.Workspace != "b" {
		t.Fatalf("b's numbering: %+v", e)
	}
}

func TestEventLogIsBoundedAndReportsGaps(t *testing.T) {
	s := openTest(t, Config{EventHistory: 8})
	w := s.Workspace("w")
	for i := 1; i <= 40; i++ {
		create(t, w, fmt.Sprintf("f%02d", i), "x")
	}
	var rows int
	s.db.QueryRow(`SELECT count(*) FROM agent_events`).Scan(&rows)
	if rows < 8 || rows > 9 {
		t.Fatalf("the log holds %d events; want it trimmed to 8 (+ up to 1 before the next trim)", rows)
	}
	// Resuming from a point the log no longer has: a gap notice, then
	// what is left.
	ch, cancel := s.Bus().Subscribe("w", 3)
	defer cancel()
	gap := next(t, ch)
	first := gap.Seq + 1
	if gap.Type != EventGap || gap.Data["missed_from"] != uint64(4) || gap.Data["missed_to"] != gap.Seq || first < 32 {
		t.Fatalf("gap notice: %+v", gap)
	}
	for want := first; want <= 40; want++ {
		if e := next(t, ch); e.Seq != want || e.Type != EventCreated || e.Data["name"] != fmt.Sprintf("f%02d", want) {
			t.Fatalf("replay: %+v, want seq %d", e, want)
		}
	}
	// Resuming from inside the log: no gap.
	ch2, cancel2 := s.Bus().Subscribe("w", 38)
	defer cancel2()
	if e := next(t, ch2); e.Seq != 39 {
		t.Fatalf("resume: %+v", e)
	}
	// An id the log never gave (a reset data directory): a gap that tells
	// the client to reload, numbered so that it resumes correctly.
	ch3, cancel3 := s.Bus().Subscribe("w", 500)
	defer cancel3()
	if e := next(t, ch3); e.Type != EventGap || e.Seq != 40 || !strings.Contains(fmt.Sprint(e.Data["reason"]), "reset") {
		t.Fatalf("future id: %+v", e)
	}
	// Up to date: nothing to replay, then live events.
	ch4, cancel4 := s.Bus().Subscribe("w", 40)
	defer cancel4()
	create(t, w, "live", "x")
	if e := next(t, ch4); e.Seq != 41 || e.Data["name"] != "live" {
		t.Fatalf("live: %+v", e)
	}
}

// A subscriber that does not read loses its channel instead of slowing
// writers down, and resumes without loss from its last event.
func TestSlowSubscriberIsDroppedAndResumes(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("w")
	ch, cancel := s.Bus().Subscribe("w", 0)
	defer cancel()
	for i := 1; i <= 270; i++ {
		create(t, w, fmt.Sprintf("f%03d", i), "x")
	}
	var last uint64
	for e := range ch {
		last = e.Seq
	}
	if last == 0 || last >= 270 {
		t.Fatalf("the slow subscriber got up to %d of 270 before it was dropped", last)
	}
	again, cancel2 := s.Bus().Subscribe("w", last)
	defer cancel2()
	for want := last + 1; want <= 270; want++ {
		if e := next(t, again); e.Seq != want {
			t.Fatalf("resume: %+v, want %d", e, want)
		}
	}
}
