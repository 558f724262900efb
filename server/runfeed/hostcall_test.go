package runfeed

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

type inner struct {
	Rows [][]any `json:"rows"`
}

type result struct {
	inner
	Name    string          `json:"name"`
	Data    []byte          `json:"data"`
	Raw     json.RawMessage `json:"raw"`
	At      time.Time       `json:"at"`
	Skip    string          `json:"-"`
	Empty   string          `json:"empty,omitempty"`
	Deep    map[string]any  `json:"deep"`
	private int
}

func TestSummarize(t *testing.T) {
	rows := make([][]any, 100_000)
	for i := range rows {
		rows[i] = []any{i, strings.Repeat("x", 300)}
	}
	got := Summarize(&result{inner: inner{Rows: rows}, Name: "q3.xlsx", Data: make([]byte, 5000), Raw: json.RawMessage(`{"a":1}`),
		At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Skip: "no", Deep: map[string]any{"a": map[string]any{"b": map[string]any{"c": map[string]any{"d": 1}}}}})
	b, _ := json.Marshal(got)
	if len(b) > sumBytes {
		t.Fatalf("summary of %d bytes: %s", len(b), b)
	}
	m := got.(map[string]any)
	if m["name"] != "q3.xlsx" || m["data"] != "(5000 bytes)" || m["at"] != "2026-01-02T03:04:05Z" || m["raw"].(map[string]any)["a"] != float64(1) {
		t.Fatalf("summary %s", b)
	}
	if _, ok := m["Skip"]; ok || m["empty"] != nil || m["private"] != nil {
		t.Fatalf("hidden fields shown: %s", b)
	}
	if !strings.Contains(string(b), `"c":"(1 keys)"`) {
		t.Errorf("nesting not bounded: %s", b)
	}
	if !strings.Contains(string(b), "(100000 items)") {
		t.Errorf("a long list does not say its length: %s", b)
	}
	// Strings are cut on a rune boundary with their size.
	s := Summarize(strings.Repeat("é", 200)).(string)
	if !strings.HasSuffix(s, "… (400 bytes)") || !strings.HasPrefix(s, "éé") || strings.Contains(s, "\ufffd") {
		t.Errorf("cut string %q", s)
	}
	if Summarize(nil) != nil || Summarize(errors.New("boom")) != "boom" || Summarize(3) != int64(3) {
		t.Errorf("scalars")
	}
	// A big free-form argument map stays within the budget.
	args := map[string]any{}
	for i := range 100 {
		args[strings.Repeat("k", i+1)] = strings.Repeat("v", 1000)
	}
	if b, _ := json.Marshal(Summarize(args)); len(b) > sumBytes+64 {
		t.Errorf("args summary %d bytes", len(b))
	}
}

// Host calls stream as pairs under the run, stop at the cap, and none
// arrive after the run ended.
func TestHostCallsBounded(t *testing.T) {
	f := New(Options{})
	live, cancel := f.Subscribe("w", "")
	defer cancel()
	h := f.Begin(Call{Workspace: "w", Kind: "script", Name: "script.js"})
	var frames []Frame
	for i := range MaxHostCalls + 7 {
		h.HostCall(HostCall{Name: "files.info", Args: map[string]any{"id": i}, Result: map[string]any{"size": 1}})
		frames = append(frames, drain(live)...)
	}
	h.End(Outcome{OK: true})
	h.HostCall(HostCall{Name: "files.late"})
	frames = append(frames, drain(live)...)
	pairs := 0
	for _, fr := range frames {
		if b, _ := fr.Data()["content_block"].(map[string]any); fr.Type == FrameBlockStart && b["host_call"] == true && b["type"] == "tool_use" {
			pairs++
			if b["name"] == "files.late" {
				t.Fatal("a host call after the end streamed")
			}
		}
	}
	stop := frames[len(frames)-1]
	if pairs != MaxHostCalls || stop.Data()["host_calls"] != MaxHostCalls+7 || stop.Data()["more_host_calls"] != 7 {
		t.Fatalf("%d pairs, stop %v", pairs, stop.Data())
	}
	if r, _ := f.Get("w", h.RunID()); r.HostCalls != MaxHostCalls+7 || len(r.Content) != 2+2*MaxHostCalls {
		t.Fatalf("run: %d calls, %d blocks", r.HostCalls, len(r.Content))
	}
}
