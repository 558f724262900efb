package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/agenttools"
)

// feedStream is a connected client of GET /api/runs/events.
type feedStream struct {
	frames chan sseEvent
	cancel context.CancelFunc
}

func (e *env) feed(lastID string) *feedStream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/api/runs/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		e.t.Fatalf("runs/events: %d", resp.StatusCode)
	}
	fs := &feedStream{frames: make(chan sseEvent, 1000), cancel: cancel}
	connected := make(chan struct{})
	go func() {
		defer close(fs.frames)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == ": connected":
				close(connected)
			case strings.HasPrefix(line, "id: "):
				cur.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				cur.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(line[6:]), &cur.data)
			case line == "" && cur.typ != "":
				fs.frames <- cur
				cur = sseEvent{}
			}
		}
	}()
	select {
	case <-connected:
	case <-time.After(5 * time.Second):
		e.t.Fatal("run feed did not start")
	}
	e.t.Cleanup(cancel)
	return fs
}

// untilStop collects frames until the message_stop of a message.
func (fs *feedStream) untilStop(t *testing.T) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		select {
		case f, ok := <-fs.frames:
			if !ok {
				t.Fatalf("feed closed after %v", out)
			}
			out = append(out, f)
			if f.typ == "message_stop" {
				return out
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no message_stop; got %v", out)
		}
	}
}

func block(f sseEvent) map[string]any {
	b, _ := f.data["content_block"].(map[string]any)
	return b
}

func (e *env) runAs(session string, body map[string]any) (map[string]any, string) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	resp, out := e.do("POST", "/api/run", bytes.NewReader(b), map[string]string{"Content-Type": "application/json", "X-Session-Id": session})
	if resp.StatusCode != 200 {
		e.t.Fatalf("run: %d %s", resp.StatusCode, out)
	}
	var res map[string]any
	json.Unmarshal(out, &res)
	return res, resp.Header.Get("X-Run-Id")
}

func TestRunFeed(t *testing.T) {
	e := start(t, opts{})
	fs := e.feed("")
	res, runID := e.runAs("s1", map[string]any{"code": `
		await files.create("notes/a.md", {content: "# A\n"});
		await files.insertLines("notes/a.md", 1, "more");
		await files.create("tmp.txt", {content: "x"});
		await files.delete("tmp.txt");
		console.log("done");
		return 42`})
	if res["ok"] != true || runID == "" {
		t.Fatalf("run %v, run id %q", res, runID)
	}
	frames := fs.untilStop(t)
	var types []string
	for _, f := range frames {
		types = append(types, f.typ)
		if f.id == "" || (f.typ != "message_start" && f.data["message_id"] != runID) {
			t.Fatalf("frame %s without id or for another message: %v", f.typ, f.data)
		}
	}
	// start, tool_use, 5 artifacts (created, modified, created, deleted… as they happen), result, attachments, stop
	want := "message_start content_block_start content_block_stop"
	if !strings.HasPrefix(strings.Join(types, " "), want) || types[len(types)-1] != "message_stop" {
		t.Fatalf("frame order %v", types)
	}
	msg := frames[0].data["message"].(map[string]any)
	if msg["id"] != runID || msg["kind"] != "script" || msg["name"] != "script.js" || msg["session_id"] != "s1" || msg["door"] != "http" || msg["role"] != "assistant" {
		t.Fatalf("message_start %v", msg)
	}
	use := block(frames[1])
	if use["type"] != "tool_use" || !strings.Contains(use["input"].(map[string]any)["code"].(string), `files.create("notes/a.md"`) {
		t.Fatalf("tool_use %v", use)
	}
	var arts []map[string]any
	var result, attachments map[string]any
	for _, f := range frames {
		b := block(f)
		if f.typ != "content_block_start" || b == nil {
			continue
		}
		switch {
		case b["type"] == "tool_result" && b["artifact"] != nil:
			if b["tool_use_id"] != use["id"] || b["name"] != "script.js" || b["status"] != "success" {
				t.Fatalf("artifact block %v", b)
			}
			arts = append(arts, b["artifact"].(map[string]any))
		case b["type"] == "tool_result":
			result = b
		case b["type"] == "attachments":
			attachments = b
		}
	}
	var seen []string
	for _, a := range arts {
		seen = append(seen, a["filename"].(string)+":"+a["action"].(string))
	}
	if strings.Join(seen, " ") != "a.md:created a.md:modified tmp.txt:created tmp.txt:deleted" {
		t.Fatalf("artifacts streamed %v", seen)
	}
	a := arts[0]
	if a["path"] != "/notes/a.md" || a["icon_type"] != "md" || a["source"] != "generated" || !strings.HasPrefix(a["url"].(string), "/api/files/") ||
		a["message_id"] != runID || a["session_id"] != "s1" {
		t.Fatalf("artifact %v", a)
	}
	if result["status"] != "success" || result["content"].(map[string]any)["logs"] != float64(1) || result["content"].(map[string]any)["result"] != float64(42) {
		t.Fatalf("closing tool_result %v", result)
	}
	files := attachments["files"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["path"] != "/notes/a.md" || files[0].(map[string]any)["action"] != "created" {
		t.Fatalf("attachments %v", attachments)
	}
	stop := frames[len(frames)-1].data
	if stop["status"] != "ok" || stop["session_id"] != "s1" || stop["instructions"] != nil {
		t.Fatalf("message_stop %v", stop)
	}

	// A failing run ends with its coded error.
	e.runAs("s1", map[string]any{"code": `await files.readText("missing.txt")`})
	frames = fs.untilStop(t)
	stop = frames[len(frames)-1].data
	if stop["status"] != "error" || stop["error"].(map[string]any)["code"] != "NOT_FOUND" {
		t.Fatalf("failed run stop %v", stop)
	}

	// A meta-tool call over HTTP is a message too, named after the tool.
	e.do("POST", "/api/tools/file_write_text", strings.NewReader(`{"id":"w.txt","content":"hello"}`), map[string]string{"X-Session-Id": "agent-7"})
	frames = fs.untilStop(t)
	msg = frames[0].data["message"].(map[string]any)
	if msg["kind"] != "tool" || msg["name"] != "file_write_text" || msg["session_id"] != "agent-7" {
		t.Fatalf("tool message %v", msg)
	}
	if in := block(frames[1])["input"].(map[string]any); in["id"] != "w.txt" || in["content"] != "hello" {
		t.Fatalf("tool_use input %v", in)
	}
	var art map[string]any
	for _, f := range frames {
		if b := block(f); b != nil && b["artifact"] != nil {
			art = b["artifact"].(map[string]any)
		}
	}
	if art == nil || art["filename"] != "w.txt" || art["action"] != "created" {
		t.Fatalf("tool artifact %v", art)
	}
	// A bad tool call ends with VALIDATION_FAILED; the door's answer is unchanged.
	resp, body := e.do("POST", "/api/tools/file_write_text", strings.NewReader(`{"id":"w.txt"}`), nil)
	errCode(t, resp, body, 400, "VALIDATION_FAILED")
	frames = fs.untilStop(t)
	if stop := frames[len(frames)-1].data; stop["status"] != "error" || stop["error"].(map[string]any)["code"] != "VALIDATION_FAILED" {
		t.Fatalf("bad tool stop %v", stop)
	}
	lastID := frames[len(frames)-1].id
	// The page's viewer reads stay out of the feed.
	resp, body = e.do("POST", "/api/tools/file_read_text", strings.NewReader(`{"id":"w.txt"}`), map[string]string{"X-Metaclaw-Feed": "off"})
	if resp.StatusCode != 200 || !strings.Contains(string(body), "hello") {
		t.Fatalf("quiet read: %d %s", resp.StatusCode, body)
	}

	// GET /api/runs/{id} answers the message; an unknown one is NOT_FOUND.
	got := e.json("GET", "/api/runs/"+runID, nil, 200)
	if got["id"] != runID || got["status"] != "ok" || len(got["attachments"].([]any)) != 1 || got["content"].([]any)[0].(map[string]any)["type"] != "tool_use" {
		t.Fatalf("run %v", got)
	}
	resp, body = e.do("GET", "/api/runs/msg_nope", nil, nil)
	errCode(t, resp, body, 404, "NOT_FOUND")

	// Resuming after the last frame replays nothing old; a later run arrives.
	fs.cancel()
	fs2 := e.feed(lastID)
	e.runAs("s2", map[string]any{"code": `return 1`})
	frames = fs2.untilStop(t)
	if frames[0].typ != "message_start" || frames[0].data["message"].(map[string]any)["session_id"] != "s2" {
		t.Fatalf("resumed feed starts with %s %v", frames[0].typ, frames[0].data)
	}
	// Resuming from an id this process never gave starts with a gap.
	fs3 := e.feed("0000-5")
	select {
	case f := <-fs3.frames:
		if f.typ != "feed:gap" {
			t.Fatalf("want feed:gap first, got %s", f.typ)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no gap frame")
	}
}

func TestHistory(t *testing.T) {
	e := start(t, opts{})
	e.upload("data.csv", []byte("a,b\n1,2\n"), "")
	_, runID := e.runAs("s1", map[string]any{"code": `await files.create("out/report.md", {content: "# R\n"}); return 1`})
	e.runAs("s2", map[string]any{"code": `return 2`})
	h := e.json("GET", "/api/history", nil, 200)
	ws := h["workspace"].(map[string]any)
	if ws["name"] != "default" || ws["auth_required"] != false {
		t.Fatalf("workspace %v", ws)
	}
	byName := map[string]map[string]any{}
	for _, f := range ws["workspace_files"].([]any) {
		m := f.(map[string]any)
		byName[m["filename"].(string)] = m
	}
	up, gen := byName["data.csv"], byName["report.md"]
	if up["source"] != "upload" || up["path"] != "/data.csv" || up["icon_type"] != "csv" || up["url"] != "/api/files/"+up["id"].(string)+"/download" ||
		up["session_id"] != "http" || up["message_id"] != nil || up["size"] != float64(8) {
		t.Fatalf("uploaded file %v", up)
	}
	if gen["source"] != "generated" || gen["path"] != "/out/report.md" || gen["message_id"] != runID || gen["session_id"] != "s1" || gen["has_backup"] != false {
		t.Fatalf("generated file %v", gen)
	}
	msgs := h["messages"].([]any)
	if len(msgs) != 2 || msgs[0].(map[string]any)["id"] != runID {
		t.Fatalf("messages %v", msgs)
	}
	first := msgs[0].(map[string]any)
	if att := first["attachments"].([]any); len(att) != 1 || att[0].(map[string]any)["filename"] != "report.md" {
		t.Fatalf("attachments %v", first)
	}
	// One session's messages.
	h = e.json("GET", "/api/history?session_id=s2", nil, 200)
	if msgs := h["messages"].([]any); len(msgs) != 1 || msgs[0].(map[string]any)["session_id"] != "s2" {
		t.Fatalf("s2 messages %v", msgs)
	}
	h = e.json("GET", "/api/history?session_id=nobody", nil, 200)
	if msgs := h["messages"].([]any); len(msgs) != 0 {
		t.Fatalf("nobody's messages %v", msgs)
	}
	// Workspaces do not see each other's feed.
	tok := start(t, opts{cfg: func(c *Config) {
		c.Tokens = []Token{{Secret: "secret-one-1234", Workspace: "one"}, {Secret: "secret-two-1234", Workspace: "two"}}
	}})
	tok.runAs("s", map[string]any{"code": `await files.create("only-one.txt", {content: "1"}); return 1`})
	tok.token = "secret-two-1234"
	h = tok.json("GET", "/api/history", nil, 200)
	if len(h["messages"].([]any)) != 0 || len(h["workspace"].(map[string]any)["workspace_files"].([]any)) != 0 || h["workspace"].(map[string]any)["auth_required"] != true {
		t.Fatalf("workspace two sees %v", h)
	}
	resp, body := tok.do("GET", "/api/runs/"+runID, nil, nil)
	errCode(t, resp, body, 404, "NOT_FOUND")
	tok.token = ""
	resp, body = tok.do("GET", "/api/history", nil, nil)
	errCode(t, resp, body, 401, "UNAUTHORIZED")
}

func TestInstructions(t *testing.T) {
	e := start(t, opts{})
	e.upload("q3.csv", []byte("a\n1\n"), "")
	fs := e.feed("")
	res, runID := e.runAs("me", map[string]any{"code": `return {summary: "ok", save: {requiresFrontendExecution: true, type: "file_operation", operation: "save", file: "q3.csv", filename: "quarter.csv"}}`})
	if res["ok"] != true {
		t.Fatalf("run %v", res)
	}
	frames := fs.untilStop(t)
	ins := frames[len(frames)-1].data["instructions"].([]any)
	if len(ins) != 1 {
		t.Fatalf("instructions %v", ins)
	}
	in := ins[0].(map[string]any)
	file := in["file"].(map[string]any)
	if in["status"] != "pending" || in["operation"] != "save" || in["suggested_name"] != "quarter.csv" || in["session_id"] != "me" || in["message_id"] != runID ||
		file["path"] != "/q3.csv" || file["url"] != "/api/files/"+file["id"].(string)+"/download" || in["mime_type"] != "text/csv" {
		t.Fatalf("instruction %v", in)
	}
	id := in["id"].(string)
	// The run answers them too.
	got := e.json("GET", "/api/runs/"+runID, nil, 200)
	if got["instructions"].([]any)[0].(map[string]any)["id"] != id {
		t.Fatalf("run instructions %v", got["instructions"])
	}
	// Reporting back: done, streamed and kept.
	rep := e.json("POST", "/api/instructions/"+id, map[string]any{"status": "done", "method": "download"}, 200)
	if rep["status"] != "done" || rep["method"] != "download" || rep["reported_at"] == "" {
		t.Fatalf("report %v", rep)
	}
	select {
	case f := <-fs.frames:
		if f.typ != "instruction_result" || f.data["instruction"].(map[string]any)["status"] != "done" || f.data["message_id"] != runID {
			t.Fatalf("frame %s %v", f.typ, f.data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no instruction_result frame")
	}
	e.json("POST", "/api/instructions/"+id, map[string]any{"status": "done", "method": "download"}, 200) // same again: fine
	for body, want := range map[string]string{
		`{"status":"failed"}`:                    "ALREADY_EXISTS",
		`{"status":"maybe"}`:                     "VALIDATION_FAILED",
		`{"status":"done","method":"telepathy"}`: "VALIDATION_FAILED",
		`{`:                                      "VALIDATION_FAILED",
	} {
		resp, b := e.do("POST", "/api/instructions/"+id, strings.NewReader(body), nil)
		var eb errorBody
		json.Unmarshal(b, &eb)
		if string(eb.Error.Code) != want {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
	resp, b := e.do("POST", "/api/instructions/instr_nope", strings.NewReader(`{"status":"done"}`), nil)
	errCode(t, resp, b, 404, "NOT_FOUND")
	h := e.json("GET", "/api/history", nil, 200)
	if st := h["messages"].([]any)[0].(map[string]any)["instructions"].([]any)[0].(map[string]any)["status"]; st != "done" {
		t.Fatalf("history keeps the report: %v", st)
	}

	// Inline content, a missing file, an unknown operation, and a list.
	e.runAs("me", map[string]any{"code": `return [
		{requiresFrontendExecution: true, content: "hello", filename: "hi.txt"},
		{requiresFrontendExecution: true, file: "nope.csv"},
		{requiresFrontendExecution: true, operation: "delete", file: "q3.csv"},
		{requires_frontend_execution: true, fileId: "q3.csv"},
		{content: "not an instruction"}]`})
	frames = fs.untilStop(t)
	ins = frames[len(frames)-1].data["instructions"].([]any)
	if len(ins) != 4 {
		t.Fatalf("instructions %v", ins)
	}
	i0, i1, i2, i3 := ins[0].(map[string]any), ins[1].(map[string]any), ins[2].(map[string]any), ins[3].(map[string]any)
	if i0["content"] != "hello" || i0["suggested_name"] != "hi.txt" || i0["mime_type"] != "text/plain" || i0["status"] != "pending" || i0["file"] != nil {
		t.Fatalf("inline %v", i0)
	}
	if i1["status"] != "failed" || i1["error"].(map[string]any)["code"] != "NOT_FOUND" {
		t.Fatalf("missing file %v", i1)
	}
	if i2["status"] != "failed" || i2["error"].(map[string]any)["code"] != "VALIDATION_FAILED" || !strings.Contains(i2["error"].(map[string]any)["message"].(string), "delete") {
		t.Fatalf("unknown operation %v", i2)
	}
	if i3["status"] != "pending" || i3["suggested_name"] != "q3.csv" {
		t.Fatalf("snake case flag %v", i3)
	}
	// A meta-tool result can carry one as well (a saved tool here).
	e.json("POST", "/api/tools/tool_save", map[string]any{"name": "save_it", "description": "Ask the page to save a file",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}},
		"code":         `return {requiresFrontendExecution: true, file: input.name}`}, 200)
	fs.untilStop(t) // tool_save itself
	e.json("POST", "/api/tools/save_it", map[string]any{"name": "q3.csv"}, 200)
	frames = fs.untilStop(t)
	if ins := frames[len(frames)-1].data["instructions"].([]any); len(ins) != 1 || ins[0].(map[string]any)["file"].(map[string]any)["filename"] != "q3.csv" {
		t.Fatalf("tool instructions %v", frames[len(frames)-1].data)
	}
}

// MCP tool calls are feed messages, and a tool saved by another host of
// the same store (here: a second host on the data directory) reaches this
// server's MCP clients as tools/list_changed through the store's events.
func TestFeedMCPAndToolsFromElsewhere(t *testing.T) {
	var dataDir string
	e := start(t, opts{hostCfg: func(c *hostapi.Config) { dataDir = t.TempDir(); c.DataDir = dataDir }})
	changed := make(chan struct{}, 10)
	cs := mcpHTTP(t, e, "", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	fs := e.feed("")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "file_create", Arguments: map[string]any{"name": "from-mcp.md", "content": "# hi"}})
	if err != nil || res.IsError {
		t.Fatalf("file_create: %v %s", err, textOf(res))
	}
	frames := fs.untilStop(t)
	msg := frames[0].data["message"].(map[string]any)
	if msg["door"] != "mcp" || msg["name"] != "file_create" || !strings.HasPrefix(msg["session_id"].(string), "mcp") {
		t.Fatalf("mcp message %v", msg)
	}
	var att []any
	for _, f := range frames {
		if b := block(f); b != nil && b["type"] == "attachments" {
			att = b["files"].([]any)
		}
	}
	if len(att) != 1 || att[0].(map[string]any)["filename"] != "from-mcp.md" {
		t.Fatalf("mcp attachments %v", att)
	}

	other, err := hostapi.NewHost(hostapi.Config{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otherTools, err := agenttools.Register(other)
	if err != nil {
		t.Fatal(err)
	}
	_ = otherTools
	_, err = other.Registry.CallTool(context.Background(), other.Env("default", "elsewhere"), "tool_save", map[string]any{
		"name": "from_elsewhere", "description": "Saved by another process", "input_schema": map[string]any{"type": "object"}, "code": "return 1"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed for a tool saved elsewhere")
	}
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range lt.Tools {
		found = found || tl.Name == "from_elsewhere"
	}
	if !found {
		t.Fatal("the tool saved elsewhere is not listed")
	}
}
