package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metaclaw/metaclaw/bindings/ts"
	"github.com/metaclaw/metaclaw/server/mcpserver"
)

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// mcpHTTP connects the official Go SDK client to e's /mcp.
func mcpHTTP(t *testing.T, e *env, token string, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, copts)
	tr := &mcp.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("mcp connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func textOf(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// exerciseMCP lists the tools and calls file_list and file_read_text.
func exerciseMCP(t *testing.T, cs *mcp.ClientSession, wantTools int) {
	t.Helper()
	ctx := context.Background()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != wantTools {
		t.Fatalf("%d tools over MCP, registry has %d", len(lt.Tools), wantTools)
	}
	by := map[string]*mcp.Tool{}
	for _, tl := range lt.Tools {
		by[tl.Name] = tl
	}
	fl, del := by["file_list"], by["file_delete"]
	if fl == nil || del == nil || by["file_read_text"] == nil || by["run_script"] == nil {
		t.Fatalf("tools missing: %v", lt.Tools)
	}
	if !fl.Annotations.ReadOnlyHint || !fl.Annotations.IdempotentHint || fl.Annotations.DestructiveHint == nil || *fl.Annotations.DestructiveHint {
		t.Fatalf("file_list annotations %+v", fl.Annotations)
	}
	if del.Annotations.ReadOnlyHint || del.Annotations.DestructiveHint == nil || !*del.Annotations.DestructiveHint {
		t.Fatalf("file_delete annotations %+v", del.Annotations)
	}
	schema, _ := json.Marshal(by["file_read_text"].InputSchema)
	if !strings.Contains(string(schema), `"start_line"`) {
		t.Fatalf("file_read_text schema %s", schema)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_list", Arguments: map[string]any{"pattern": "*.csv"}})
	if err != nil || res.IsError {
		t.Fatalf("file_list: %v %s", err, textOf(res))
	}
	var list struct {
		Files []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(textOf(res)), &list); err != nil || len(list.Files) != 1 || list.Files[0].Name != "some.csv" {
		t.Fatalf("file_list result %s", textOf(res))
	}
	if sc, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(sc), `"some.csv"`) {
		t.Fatalf("structured content %s", sc)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_read_text", Arguments: map[string]any{"id": "some.csv", "start_line": 2, "end_line": 3}})
	if err != nil || res.IsError || textOf(res) != `{"content":"apple,3\npear,5\n","total_lines":4}` {
		t.Fatalf("file_read_text: %v %s", err, textOf(res))
	}
	// Errors come back as tool results the model can read.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_read_text", Arguments: map[string]any{"id": "some.csv", "start_line": "x"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), `"VALIDATION_FAILED"`) || !strings.Contains(textOf(res), "start_line") {
		t.Fatalf("bad call: %v %s", err, textOf(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_info", Arguments: map[string]any{"id": "nope"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), `"NOT_FOUND"`) {
		t.Fatalf("missing file: %v %s", err, textOf(res))
	}
}

func TestMCPStreamableHTTP(t *testing.T) {
	e := start(t, opts{})
	e.upload("some.csv", []byte("name,qty\napple,3\npear,5\nplum,7\n"), "")
	changed := make(chan struct{}, 4)
	cs := mcpHTTP(t, e, "", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	reg, _ := e.h.Registry.Tools(context.Background(), e.h.Env("default", "t"))
	exerciseMCP(t, cs, len(reg))

	// Saving a tool (here over plain HTTP) notifies the MCP client, and the
	// new tool is listed and callable over MCP.
	e.json("POST", "/api/tools/tool_save", map[string]any{"name": "twice", "description": "Double a number",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}},
		"code":         "return {value: input.n * 2}"}, 200)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed notification")
	}
	lt, _ := cs.ListTools(context.Background(), nil)
	if len(lt.Tools) != len(reg)+1 {
		t.Fatalf("after save: %d tools", len(lt.Tools))
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "twice", Arguments: map[string]any{"n": 21}})
	if err != nil || res.IsError || textOf(res) != `{"value":42}` {
		t.Fatalf("saved tool over MCP: %v %s", err, textOf(res))
	}
	// Deleting it removes it again.
	e.json("POST", "/api/tools/tool_delete", map[string]any{"name": "twice"}, 200)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification after delete")
	}
	if lt, _ := cs.ListTools(context.Background(), nil); len(lt.Tools) != len(reg) {
		t.Fatalf("after delete: %d tools", len(lt.Tools))
	}
}

// TestMCPStdio runs the same server over the stdio transport's framing
// (newline-delimited JSON on a pair of pipes); cmd/metaclaw tests the real
// `metaclaw mcp` process.
func TestMCPStdio(t *testing.T) {
	h, tools := newHost(t, hostConfig(t))
	defer h.Close()
	m := mcpserver.New(h, mcpserver.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tools.OnChange(m.ToolsChanged)
	srv, err := m.Server("default")
	if err != nil {
		t.Fatal(err)
	}
	ws := h.Store.Workspace("default")
	if _, err := ws.Create(context.Background(), storeCreate("some.csv"), strings.NewReader("name,qty\napple,3\npear,5\nplum,7\n")); err != nil {
		t.Fatal(err)
	}
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Run(ctx, &mcp.IOTransport{Reader: c2sR, Writer: s2cW})
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	reg, _ := h.Registry.Tools(ctx, h.Env("default", "t"))
	exerciseMCP(t, cs, len(reg))
}

// TestMCPStdioCodeProfile: `metaclaw mcp --profile code` is the Manager's
// Profile option: three tools over stdio.
func TestMCPStdioCodeProfile(t *testing.T) {
	h, _ := newHost(t, hostConfig(t))
	defer h.Close()
	ts.Register(h)
	m := mcpserver.New(h, mcpserver.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Profile: "code"})
	srv, err := m.Server("default")
	if err != nil {
		t.Fatal(err)
	}
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Run(ctx, &mcp.IOTransport{Reader: c2sR, Writer: s2cW})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "file_list,run_script,search_api" {
		t.Fatalf("code profile over stdio: %v", names)
	}
}
