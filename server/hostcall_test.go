package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/server/runfeed"
)

// hostCallPairs returns a message's host calls from its frames: each
// tool_use with its tool_result, in the order they streamed.
func hostCallPairs(t *testing.T, frames []sseEvent) (uses, results []map[string]any) {
	t.Helper()
	for _, f := range frames {
		b := block(f)
		if f.typ != "content_block_start" || b == nil || b["host_call"] != true {
			continue
		}
		switch b["type"] {
		case "tool_use":
			uses = append(uses, b)
		case "tool_result":
			if len(uses) == 0 || b["tool_use_id"] != uses[len(uses)-1]["id"] {
				t.Fatalf("host call result %v does not follow its tool_use", b)
			}
			results = append(results, b)
		}
	}
	if len(uses) != len(results) {
		t.Fatalf("%d host call uses, %d results", len(uses), len(results))
	}
	return uses, results
}

func TestRunFeedHostCalls(t *testing.T) {
	e := start(t, opts{})
	e.upload("data.csv", []byte("name,n\na,1\nb,2\n"), "")
	fs := e.feed("")
	big := strings.Repeat("0123456789", 20_000) // 200 KB: never shown whole
	res, runID := e.runAs("s1", map[string]any{"input": map[string]any{"big": big}, "code": `
		await files.writeText("big.txt", input.big);
		const text = await files.readText("big.txt");
		const info = await files.info("data.csv");
		try { await files.readText("missing.txt") } catch (e) {}
		return text.content.length + info.size`})
	if res["ok"] != true || res["result"] != float64(len(big)+15) {
		t.Fatalf("run %v", res)
	}
	frames := fs.untilStop(t)
	uses, results := hostCallPairs(t, frames)
	var names []string
	for _, u := range uses {
		names = append(names, u["name"].(string))
	}
	if got := strings.Join(names, " "); got != "files.writeText files.readText files.info files.readText" {
		t.Fatalf("host calls %q", got)
	}
	parent := block(frames[1])["id"]
	for i, u := range uses {
		if u["parent_id"] != parent || u["id"] == parent || u["id"] == "" {
			t.Errorf("host call %d: ids %v (the run's tool_use is %v)", i, u, parent)
		}
	}
	// Arguments and results are summarised: the file's content appears
	// cut, with its size, never whole.
	wrote := uses[0]["input"].(map[string]any)
	if wrote["id"] != "big.txt" || !strings.HasPrefix(wrote["content"].(string), "0123456789") || !strings.HasSuffix(wrote["content"].(string), "(200000 bytes)") {
		t.Errorf("writeText args %v", wrote)
	}
	if results[0]["status"] != "success" || results[0]["duration_ms"].(float64) <= 0 {
		t.Errorf("writeText result %v", results[0])
	}
	if s, _ := results[1]["content"].(map[string]any)["content"].(string); !strings.HasPrefix(s, "0123456789") || !strings.HasSuffix(s, "(200000 bytes)") {
		t.Errorf("readText result %v", results[1]["content"])
	}
	info := results[2]["content"].(map[string]any)
	if info["name"] != "data.csv" || info["size"] != float64(15) {
		t.Errorf("info result %v", info)
	}
	if r := results[3]; r["status"] != "error" || r["error"].(map[string]any)["code"] != "NOT_FOUND" || r["content"] != nil {
		t.Errorf("failed host call %v", r)
	}
	for _, f := range frames {
		if b, _ := json.Marshal(f.data); len(b) > 4096 {
			t.Errorf("a %d-byte %s frame", len(b), f.typ)
		}
	}
	// The history keeps the pairs and the count.
	run := e.json("GET", "/api/runs/"+runID, nil, 200)
	if run["host_calls"] != float64(4) || run["more_host_calls"] != nil {
		t.Errorf("history host_calls %v, more %v", run["host_calls"], run["more_host_calls"])
	}
	hist := 0
	for _, b := range run["content"].([]any) {
		if b.(map[string]any)["host_call"] == true {
			hist++
		}
	}
	if hist != 8 {
		t.Errorf("history has %d host call blocks, want 8", hist)
	}
	if stop := frames[len(frames)-1].data; stop["host_calls"] != float64(4) {
		t.Errorf("message_stop %v", stop)
	}

	// A run making many calls streams the first MaxHostCalls and counts the rest.
	res, runID = e.runAs("s1", map[string]any{"code": `
		let n = 0;
		for (let i = 0; i < 150; i++) n += (await files.info("data.csv")).size;
		return n`})
	if res["ok"] != true || res["result"] != float64(150*15) {
		t.Fatalf("loop run %v", res)
	}
	frames = fs.untilStop(t)
	uses, _ = hostCallPairs(t, frames)
	stop := frames[len(frames)-1].data
	if len(uses) != runfeed.MaxHostCalls || stop["host_calls"] != float64(150) || stop["more_host_calls"] != float64(150-runfeed.MaxHostCalls) {
		t.Fatalf("%d host calls streamed, stop %v", len(uses), stop)
	}
	if run := e.json("GET", "/api/runs/"+runID, nil, 200); run["more_host_calls"] != float64(50) {
		t.Errorf("history more_host_calls %v", run["more_host_calls"])
	}

	// A door's tool call is its message; the op it is does not repeat as a
	// host call.
	e.do("POST", "/api/tools/file_read_text", strings.NewReader(`{"id":"data.csv"}`), nil)
	frames = fs.untilStop(t)
	if uses, _ := hostCallPairs(t, frames); len(uses) != 0 {
		t.Fatalf("a tool call lists itself as a host call: %v", uses)
	}
	// run_script over the tool route: the script's calls are host calls.
	e.do("POST", "/api/tools/run_script", strings.NewReader(`{"code":"return (await files.info('data.csv')).size"}`), nil)
	frames = fs.untilStop(t)
	if uses, results := hostCallPairs(t, frames); len(uses) != 1 || uses[0]["name"] != "files.info" || results[0]["content"].(map[string]any)["size"] != float64(15) {
		t.Fatalf("run_script's host calls %v %v", uses, results)
	}
}
