package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	ID, Event, Data string
}

// followEvents reads GET url/api/events (with lastID as Last-Event-ID when
// given) and sends each event on the channel it returns, once the stream
// has said it is connected (so that nothing after the return is missed).
func followEvents(t *testing.T, ctx context.Context, url, lastID string) <-chan sseEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("events: %s", resp.Status)
	}
	connected := make(chan struct{})
	out := make(chan sseEvent, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == ": connected":
				close(connected)
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[6:]
			case line == "" && ev.Event != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	select {
	case <-connected:
	case <-ctx.Done():
		t.Fatal("the event stream did not connect")
	}
	return out
}

// nextEvent waits for the next event of the given type naming name.
func nextEvent(t *testing.T, ctx context.Context, events <-chan sseEvent, typ, name string) sseEvent {
	t.Helper()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the event stream ended before %s %s", typ, name)
			}
			if ev.Event == typ && strings.Contains(ev.Data, `"name":"`+name+`"`) {
				return ev
			}
		case <-ctx.Done():
			t.Fatalf("no %s event for %s", typ, name)
		}
	}
}

// post sends JSON to url and returns the answer's body, failing on an
// error status.
func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %s %s", url, resp.Status, b)
	}
	return strings.TrimSpace(string(b))
}

var natsLine = regexp.MustCompile(`takes other hosts at (nats://\S+)`)

// TestServeOnNATS: two `metaclaw serve` processes share workspaces through
// NATS JetStream — host A runs the embedded server, host B joins it. What
// one host changes the other serves, announces and replays.
func TestServeOnNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers and a NATS server")
	}
	dir := t.TempDir()
	a := startServe(t, "--data", filepath.Join(dir, "a"), "--addr", "127.0.0.1:0", "--workers", "1",
		"--nats", "embedded", "--nats-listen", "127.0.0.1:0")
	if a.url == "" {
		t.Fatalf("host A exited: %s", a.logs.String())
	}
	m := natsLine.FindStringSubmatch(a.logs.String())
	if m == nil {
		t.Fatalf("host A does not say where NATS listens: %s", a.logs.String())
	}
	b := startServe(t, "--data", filepath.Join(dir, "b"), "--addr", "127.0.0.1:0", "--workers", "1", "--nats", m[1])
	if b.url == "" {
		t.Fatalf("host B exited: %s", b.logs.String())
	}
	if !strings.Contains(b.logs.String(), "workspaces on NATS at "+m[1]) {
		t.Fatalf("host B's start: %s", b.logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eventsA := followEvents(t, ctx, a.url, "")
	eventsB := followEvents(t, ctx, b.url, "")

	// An MCP client on B, told when the tool list changes.
	listChanged := make(chan struct{}, 8)
	mc := mcp.NewClient(&mcp.Implementation{Name: "nats-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
	})
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.url + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	// Upload on A (a 300 KB body: several NATS chunks).
	var body bytes.Buffer
	for i := 0; body.Len() < 300<<10; i++ {
		fmt.Fprintf(&body, "line %d of the shared notes\n", i)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "notes.md")
	fw.Write(body.Bytes())
	mw.Close()
	resp, err := http.Post(a.url+"/api/files/upload", mw.FormDataContentType(), &form)
	if err != nil {
		t.Fatal(err)
	}
	up, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var uploaded struct{ ID, Name string }
	if json.Unmarshal(up, &uploaded); resp.StatusCode != http.StatusCreated || uploaded.Name != "notes.md" {
		t.Fatalf("upload on A: %s %s", resp.Status, up)
	}

	// B's events announce it, with A's file id; A's too, with the id B will
	// resume from.
	created := nextEvent(t, ctx, eventsB, "file:created", "notes.md")
	if !strings.Contains(created.Data, `"id":"`+uploaded.ID+`"`) {
		t.Fatalf("B's file:created: %+v", created)
	}
	createdOnA := nextEvent(t, ctx, eventsA, "file:created", "notes.md")

	// B downloads what A stored, byte for byte.
	resp, err = http.Get(b.url + "/api/files/notes.md/download")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, body.Bytes()) {
		t.Fatalf("download on B: %s, %d bytes of %d", resp.Status, len(got), body.Len())
	}

	// B edits through a tool call; A reads the edit.
	if out := post(t, b.url+"/api/tools/file_write_text", `{"id": "notes.md", "content": "edited on B\n"}`); !strings.Contains(out, `"ok":true`) {
		t.Fatalf("edit on B: %s", out)
	}
	updatedOnA := nextEvent(t, ctx, eventsA, "file:modified", "notes.md")
	if out := post(t, a.url+"/api/tools/file_read_text", `{"id": "notes.md"}`); out != `{"content":"edited on B\n","total_lines":1}` {
		t.Fatalf("A reads B's edit: %s", out)
	}

	// A tool saved on A: B's MCP client hears the list change, and calls it;
	// so does B's HTTP API.
	if out := post(t, a.url+"/api/tools/tool_save", `{"name": "add_nums", "description": "Add a and b", "code": "return input.a + input.b;",
		"input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}`); out != `{"name":"add_nums","version":1}` {
		t.Fatalf("tool_save on A: %s", out)
	}
	select {
	case <-listChanged:
	case <-ctx.Done():
		t.Fatal("B's MCP client got no tools/list_changed")
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, tl := range lt.Tools {
		listed = listed || tl.Name == "add_nums"
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_nums", Arguments: map[string]any{"a": 2, "b": 40}})
	if !listed || err != nil || res.IsError || text(res) != "42" {
		t.Fatalf("add_nums over MCP on B (listed %v): %v %s", listed, err, text(res))
	}
	if out := post(t, b.url+"/api/tools/add_nums", `{"a": 1.5, "b": 2}`); out != "3.5" {
		t.Fatalf("add_nums over HTTP on B: %s", out)
	}
	toolOnA := nextEvent(t, ctx, eventsA, "tool:changed", "add_nums")

	// B resumes a stream from an id A issued: it replays what came after
	// (the edit and the tool), with A's ids, and not the event itself.
	resumed := followEvents(t, ctx, b.url, createdOnA.ID)
	if ev := nextEvent(t, ctx, resumed, "file:modified", "notes.md"); ev.ID != updatedOnA.ID {
		t.Fatalf("resumed on B: %+v, A said %+v", ev, updatedOnA)
	}
	if ev := nextEvent(t, ctx, resumed, "tool:changed", "add_nums"); ev.ID != toolOnA.ID {
		t.Fatalf("resumed on B: %+v, A said %+v", ev, toolOnA)
	}

	// A one-shot command joins the deployment too, and fsck checks it.
	if out, errOut, code := cli(t, "files", "list", "--data", filepath.Join(dir, "c"), "--nats", m[1], "--json"); code != 0 || !strings.Contains(out, `"notes.md"`) {
		t.Fatalf("files list on NATS: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "fsck", "--data", filepath.Join(dir, "c"), "--nats", m[1]); code != 0 || !strings.Contains(out, "checked 1 files, 0 problems") {
		t.Fatalf("fsck on NATS: %d %s %s", code, out, errOut)
	}
	// A one-shot command on A's data directory cannot guess the port A
	// chose, and says how to join.
	if _, errOut, code := cli(t, "files", "list", "--data", filepath.Join(dir, "a"), "--nats", "embedded", "--nats-listen", "127.0.0.1:0"); code != 1 || !strings.Contains(errOut, "join it with --nats nats://127.0.0.1:PORT") {
		t.Fatalf("embedded beside the server: %d %s", code, errOut)
	}

	cs.Close()
	cancel()
	if err := b.stop(t); err != nil {
		t.Fatalf("B's exit: %v\n%s", err, b.logs.String())
	}
	if err := a.stop(t); err != nil {
		t.Fatalf("A's exit: %v\n%s", err, a.logs.String())
	}
}

// TestServeWarmsPDF: serve starts the PDF engine in the background (it
// logs when ready), and a PDF request then works on it.
func TestServeWarmsPDF(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the PDF engine")
	}
	s := startServe(t, "--data", filepath.Join(t.TempDir(), "data"), "--addr", "127.0.0.1:0", "--workers", "1", "--log-level", "debug")
	if s.url == "" {
		t.Fatalf("serve exited: %s", s.logs.String())
	}
	// On a new machine the engine compiles first (up to a minute on a
	// loaded CI runner); with the user's cache warm it loads in a second.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The banner says where to go next, and its curl works as printed.
	if s.logs.waitFor(ctx, regexp.MustCompile(`MCP endpoint +`+regexp.QuoteMeta(s.url)+`/mcp`)) == "" {
		t.Fatalf("the banner does not name the MCP endpoint: %s", s.logs.String())
	}
	if out := post(t, s.url+"/api/tools/file_list", `{}`); out != `{"files":[]}` {
		t.Fatalf("the banner's curl: %s", out)
	}
	if s.logs.waitFor(ctx, regexp.MustCompile(`PDF engine ready`)) == "" {
		t.Fatalf("serve did not say the PDF engine is ready: %s", s.logs.String())
	}
	pdf, err := os.ReadFile(filepath.Join(fixtureDir, "report.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "report.pdf")
	fw.Write(pdf)
	mw.Close()
	resp, err := http.Post(s.url+"/api/files/upload", mw.FormDataContentType(), &form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %s", resp.Status)
	}
	if out := post(t, s.url+"/api/tools/pdf_extract_text", `{"id": "report.pdf", "pages": [2]}`); !strings.Contains(out, "South: 2.3 million euros") || strings.Contains(out, "Outlook") {
		t.Fatalf("pdf_extract_text: %s", out)
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("exit: %v\n%s", err, s.logs.String())
	}
}

// TestNATSSettingsRefused: NATS settings that cannot work are refused
// before anything starts, each saying what to do; an embedded server with
// a token lets in only the hosts that give it.
func TestNATSSettingsRefused(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"serve", "--nats", "embedded", "--nats-replicas", "3"}, "needs a cluster of at least 3 NATS servers"},
		{[]string{"serve", "--nats", "embedded", "--nats-listen", "0.0.0.0:0"}, "set nats_user and nats_password (or nats_token)"},
		{[]string{"serve", "--nats", "embedded", "--nats-creds", "x.creds"}, "nats_creds is for joining a NATS deployment"},
		{[]string{"files", "list", "--nats", "nats://127.0.0.1:1"}, "cannot connect to NATS at nats://127.0.0.1:1"},
	} {
		out, errOut, code := cli(t, append(tc.args, "--data", data)...)
		if code != 1 || !strings.Contains(errOut, tc.says) || out != "" {
			t.Errorf("%v: %d %q %q", tc.args, code, out, errOut)
		}
	}

	a := startServe(t, "--data", filepath.Join(t.TempDir(), "a"), "--addr", "127.0.0.1:0", "--workers", "1",
		"--nats", "embedded", "--nats-listen", "127.0.0.1:0", "--nats-token", "s3cret-nats-token")
	if a.url == "" {
		t.Fatalf("host A exited: %s", a.logs.String())
	}
	m := natsLine.FindStringSubmatch(a.logs.String())
	if m == nil || strings.Contains(a.logs.String(), "s3cret-nats-token") {
		t.Fatalf("host A's start: %s", a.logs.String())
	}
	if _, errOut, code := cli(t, "files", "list", "--data", data, "--nats", m[1]); code != 1 || !strings.Contains(errOut, "NATS") {
		t.Fatalf("joining without the token: %d %s", code, errOut)
	}
	if out, errOut, code := cli(t, "files", "list", "--data", data, "--nats", m[1], "--nats-token", "s3cret-nats-token", "--json"); code != 0 || !strings.Contains(out, `"files": []`) {
		t.Fatalf("joining with the token: %d %s %s", code, out, errOut)
	}
	if err := a.stop(t); err != nil {
		t.Fatalf("A's exit: %v", err)
	}
}
