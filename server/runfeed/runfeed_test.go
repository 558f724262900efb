package runfeed

import (
	"strconv"
	"strings"
	"testing"
)

func drain(ch <-chan Frame) []Frame {
	var out []Frame
	for {
		select {
		case f, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, f)
		default:
			return out
		}
	}
}

// A client that resumes after frames left the ring is told so first, then
// gets what the ring still holds; the history keeps the last KeepRuns.
func TestRingAndHistoryBounds(t *testing.T) {
	f := New(Options{KeepRuns: 3, KeepFrames: 10})
	live, cancel := f.Subscribe("w", "")
	defer cancel()
	var first string
	for i := 0; i < 5; i++ {
		h := f.Begin(Call{Workspace: "w", Session: "s", Kind: "tool", Name: "file_list", Door: "http"})
		h.End(Outcome{OK: true})
	}
	frames := drain(live)
	// per call: message_start, tool_use start+stop, result start+stop, message_stop
	if len(frames) != 30 {
		t.Fatalf("%d frames", len(frames))
	}
	first = frames[0].ID()
	resumed, c2 := f.Subscribe("w", first)
	defer c2()
	got := drain(resumed)
	if got[0].Type != FrameGap || len(got) != 11 || got[1].ID() != frames[20].ID() {
		t.Fatalf("resume after a trimmed frame: %d frames, first %s", len(got), got[0].Type)
	}
	// Resuming at the end replays nothing.
	atEnd, c3 := f.Subscribe("w", frames[29].ID())
	defer c3()
	if got := drain(atEnd); len(got) != 0 {
		t.Fatalf("resume at the end replays %d frames", len(got))
	}
	if runs := f.Runs("w", ""); len(runs) != 3 {
		t.Fatalf("history keeps %d runs", len(runs))
	}
	if runs := f.Runs("other", ""); len(runs) != 0 {
		t.Fatalf("another workspace sees %d runs", len(runs))
	}
}

// Running calls are never trimmed from the history, and inputs are clipped.
func TestRunningKeptAndClip(t *testing.T) {
	f := New(Options{KeepRuns: 1})
	long := strings.Repeat("é", 5000)
	h := f.Begin(Call{Workspace: "w", Kind: "script", Name: "script.js", Input: map[string]any{"code": long, "input": nil}})
	f.Begin(Call{Workspace: "w", Kind: "tool", Name: "b"}).End(Outcome{OK: true})
	runs := f.Runs("w", "")
	if len(runs) != 1 || runs[0].ID != h.RunID() || runs[0].Status != "running" {
		t.Fatalf("runs %+v", runs)
	}
	code := runs[0].Content[0]["input"].(map[string]any)["code"].(string)
	if len(code) > 4200 || !strings.HasSuffix(code, "(10000 bytes)") || !strings.HasPrefix(code, "éé") {
		t.Fatalf("clipped code is %d bytes: …%s", len(code), code[len(code)-20:])
	}
	h.Artifact(Artifact{ID: "1", Path: "/a", Filename: "a", Action: "created"})
	h.Artifact(Artifact{ID: "1", Path: "/a", Filename: "a", Action: "modified", Size: 5})
	h.Artifact(Artifact{ID: "2", Path: "/b", Filename: "b", Action: "created"})
	h.Artifact(Artifact{ID: "2", Path: "/b", Filename: "b", Action: "deleted"})
	h.End(Outcome{OK: true})
	r, err := f.Get("w", h.RunID())
	if err != nil || len(r.Attachments) != 1 || r.Attachments[0].Action != "created" || r.Attachments[0].Size != 5 {
		t.Fatalf("attachments %+v %v", r.Attachments, err)
	}
	if run, _, ok := f.MadeBy("w", "1"); !ok || run != h.RunID() {
		t.Fatal("provenance of file 1")
	}
	if _, _, ok := f.MadeBy("w", "2"); ok {
		t.Fatal("a deleted file has no provenance")
	}
}

// Small inputs pass through Clip as they are (without being encoded to
// find out); a long one is clipped.
func TestClipSizesByJSON(t *testing.T) {
	small := map[string]any{"code": "return 1", "n": int64(5), "xs": []any{true, nil, 1.5}}
	if got := Clip(small); got.(map[string]any)["code"] != "return 1" {
		t.Fatalf("small input changed: %v", got)
	}
	long := strings.Repeat("\x01", 10000)
	got := Clip(map[string]any{"s": long}).(map[string]any)["s"].(string)
	if len(got) >= len(long) || len(got) > maxInputBytes+64 {
		t.Fatalf("a %d-byte input kept %d bytes", len(long), len(got))
	}
}

// The ring keeps exactly the last KeepFrames frames, in order, whether it
// is still filling or has wrapped many times over.
func TestRingKeepsTheLastFrames(t *testing.T) {
	const keep = 100
	f := New(Options{KeepFrames: keep})
	for _, runs := range []int{3, 40, 500} {
		for i := 0; i < runs; i++ {
			h := f.Begin(Call{Workspace: "w", Kind: "script", Name: "script.js", Door: "http"})
			h.End(Outcome{OK: true})
		}
		f.mu.Lock()
		seq := f.ws["w"].seq
		f.mu.Unlock()
		// From the start: everything still kept replays after a gap
		// frame when some were lost.
		got := drain(mustSubscribe(t, f, f.epoch+"-0"))
		kept := min(seq, keep)
		if seq > keep {
			if len(got) == 0 || got[0].Type != FrameGap {
				t.Fatalf("after %d frames: no gap frame first", seq)
			}
			got = got[1:]
		}
		if uint64(len(got)) != kept {
			t.Fatalf("after %d frames: %d replayed, want %d", seq, len(got), kept)
		}
		for i, fr := range got {
			if wantID := f.epoch + "-" + strconv.FormatUint(seq-kept+1+uint64(i), 10); fr.ID() != wantID {
				t.Fatalf("after %d frames: frame %d is %s, want %s", seq, i, fr.ID(), wantID)
			}
		}
	}
}

func mustSubscribe(t *testing.T, f *Feed, last string) <-chan Frame {
	t.Helper()
	ch, cancel := f.Subscribe("w", last)
	t.Cleanup(cancel)
	return ch
}
