package agenttools_test

import (
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/agenttools"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/host"
	jsrun "github.com/metaclaw/metaclaw/runtime/js"
)

// Two full hosts (every operation area) on one NATS deployment: a tool
// saved on A is callable on B, B's OnChange watchers (the server's MCP
// tools/list_changed) fire for changes made on A, and the other way round.
func TestSavedToolsAcrossHosts(t *testing.T) {
	deployment := agenttools.NATSDeployment(t)
	open := func() (*door, <-chan string) {
		h, parts, err := host.Open(hostapi.Config{DataDir: t.TempDir(), Backend: deployment()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		h.Runner = jsrun.New(h)
		changed := make(chan string, 16)
		parts.Tools.OnChange(func(ws string) { changed <- ws })
		return &door{t: t, h: h, env: h.Env("default", "s")}, changed
	}
	a, changedA := open()
	b, changedB := open()
	waitChange := func(ch <-chan string, what string) {
		t.Helper()
		select {
		case ws := <-ch:
			if ws != "default" {
				t.Fatalf("%s: notified for workspace %q", what, ws)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no change notification", what)
		}
	}

	if got := a.must("tool_save", `{"name": "add_nums", "description": "Add a and b",
		"input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
		"code": "return input.a + input.b;"}`); got != `{"name":"add_nums","version":1}` {
		t.Fatalf("save on A: %s", got)
	}
	waitChange(changedB, "B hears of A's save")
	waitChange(changedA, "A hears of its own save")
	if got := b.must("add_nums", `{"a": 2, "b": 3}`); got != `5` {
		t.Fatalf("A's tool called on B: %s", got)
	}
	if got := b.must("tool_list", `{}`); !strings.Contains(got, `"name":"add_nums"`) || !strings.Contains(got, `"version":1`) {
		t.Fatalf("B's tool list: %s", got)
	}
	b.expect(apierr.ValidationFailed, "add_nums", "add_nums", `{"a": "2", "b": 3}`)

	// A new version saved on B replaces it for A, scripts included.
	if got := b.must("tool_save", `{"name": "add_nums", "description": "Add a and b, times ten", "code": "return (input.a + input.b) * 10;"}`); got != `{"name":"add_nums","version":2}` {
		t.Fatalf("save on B: %s", got)
	}
	waitChange(changedA, "A hears of B's save")
	waitChange(changedB, "B hears of its own save")
	if got := a.runResult(`{"code": "return await tools.call(\"add_nums\", {a: 1, b: 2});"}`); got != `30` {
		t.Fatalf("tools.call on A after B's save: %s", got)
	}
	// Both hosts count the tool's bytes in the workspace's quota (the
	// saving host at once, the other as its view follows).
	size := int64(len(`return (input.a + input.b) * 10;`) + len(`{"type":"object"}`) + len("Add a and b, times ten"))
	if ub, _, _ := b.env.WS.Usage(); ub != size {
		t.Fatalf("usage on B %d, want %d", ub, size)
	}
	waitUsage(t, a, size)

	a.must("tool_delete", `{"name": "add_nums"}`)
	waitChange(changedB, "B hears of A's delete")
	if _, err := b.call("add_nums", `{"a": 1, "b": 2}`); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("a deleted tool called on B: %v", err)
	}
	if got := b.must("tool_list", `{}`); strings.Contains(got, "add_nums") {
		t.Fatalf("B still lists the deleted tool: %s", got)
	}
	if u, _, _ := a.env.WS.Usage(); u != 0 {
		t.Fatalf("usage after the delete: %d", u)
	}
	waitUsage(t, b, 0)
}

// waitUsage waits (at most 10 s) until d's host counts want bytes: another
// host's change reaches its view within milliseconds, and nothing
// announces it.
func waitUsage(t *testing.T, d *door, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		u, _, err := d.env.WS.Usage()
		if err == nil && u == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage stays %d (%v), want %d", u, err, want)
		}
		time.Sleep(10 * time.Millisecond) // polling: see above
	}
}
