package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/server"
)

// TestMain lets a test run this binary as the metaclaw command itself
// (METACLAW_TEST_MAIN=1), for `metaclaw mcp` over real stdio and `serve`.
func TestMain(m *testing.M) {
	if os.Getenv("METACLAW_TEST_MAIN") == "1" {
		os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func self(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "METACLAW_TEST_MAIN=1")
	return cmd
}

// TestRemoteMode runs the file, run and tool commands against a server with
// --server and --token.
func TestRemoteMode(t *testing.T) {
	dir := t.TempDir()
	h, parts, err := host.Open(hostapi.Config{DataDir: filepath.Join(dir, "data"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	h.Runner = jsrt.New(h)
	srv, err := server.New(server.Config{Host: h, Tools: parts.Tools, Tokens: []server.Token{{Secret: "remote-token-1", Workspace: "team"}},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	remote := []string{"--server", ts.URL, "--token", "remote-token-1"}
	r := func(args ...string) (string, string, int) {
		t.Helper()
		return cli(t, append(args, remote...)...)
	}

	csv := filepath.Join(dir, "some.csv")
	os.WriteFile(csv, []byte("name,qty\napple,3\npear,5\nplum,7\n"), 0o644)
	out, errOut, code := r("files", "upload", csv, "--json")
	var up map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &up) != nil || up["name"] != "some.csv" || up["mime_type"] != "text/csv" {
		t.Fatalf("upload: %d %s %s", code, out, errOut)
	}
	// It landed in the token's workspace on the server.
	if f, err := h.Store.Workspace("team").Resolve(context.Background(), "some.csv"); err != nil || f.Source != "upload" {
		t.Fatalf("server side: %v %v", f, err)
	}
	out, _, code = r("files", "upload", csv, "--name", "dir/copy.csv")
	if code != 0 || !strings.Contains(out, "uploaded dir/copy.csv") {
		t.Fatalf("upload --name: %d %s", code, out)
	}
	out, _, code = r("files", "list", "--json")
	if code != 0 || !strings.Contains(out, `"name": "dir/copy.csv"`) || strings.Contains(out, "workspace") {
		t.Fatalf("list: %d %s", code, out)
	}
	out, _, code = r("files", "list", "--pattern", "dir/*")
	if code != 0 || !strings.Contains(out, "dir/copy.csv") || strings.Contains(out, "some.csv ") {
		t.Fatalf("list --pattern: %d %s", code, out)
	}
	out, _, code = r("files", "info", "some.csv")
	if code != 0 || !strings.Contains(out, `"sha256"`) || !strings.Contains(out, `"source": "upload"`) {
		t.Fatalf("info: %d %s", code, out)
	}
	dl := filepath.Join(dir, "back.csv")
	_, errOut, code = r("files", "download", "some.csv", "-o", dl)
	if b, _ := os.ReadFile(dl); code != 0 || string(b) != "name,qty\napple,3\npear,5\nplum,7\n" {
		t.Fatalf("download: %d %s %q", code, errOut, b)
	}
	out, _, code = r("files", "download", "some.csv", "-o", "-")
	if code != 0 || out != "name,qty\napple,3\npear,5\nplum,7\n" {
		t.Fatalf("download to stdout: %d %q", code, out)
	}
	// run, tool, tools.
	script := filepath.Join(dir, "s.js")
	os.WriteFile(script, []byte(`const f = (await files.list("*.csv")); return {n: f.length, in: input.x, s: session.id}`), 0o644)
	out, errOut, code = r("run", script, "--input", `{"x":5}`, "--session", "sess-9")
	var res struct {
		OK     bool
		Result struct {
			N  int
			In int
			S  string
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || !res.OK || res.Result.N != 2 || res.Result.In != 5 || res.Result.S != "sess-9" {
		t.Fatalf("run: %d %s %s", code, out, errOut)
	}
	os.WriteFile(script, []byte(`throw new Error("boom")`), 0o644)
	if out, _, code = r("run", script); code != 1 || !strings.Contains(out, `"ok": false`) {
		t.Fatalf("failing run: %d %s", code, out)
	}
	out, _, code = r("tool", "file_read_text", `{"id":"some.csv","start_line":2,"end_line":3}`)
	if code != 0 || !strings.Contains(out, `"total_lines": 4`) {
		t.Fatalf("tool: %d %s", code, out)
	}
	out, _, code = r("tool", "file_read_text", `{"id":"missing.csv"}`)
	if code != 1 || !strings.Contains(out, `"code": "NOT_FOUND"`) {
		t.Fatalf("tool error: %d %s", code, out)
	}
	out, _, code = r("tools", "--json")
	if code != 0 || !strings.Contains(out, `"file_read_text"`) || !strings.Contains(out, `"input_schema"`) {
		t.Fatalf("tools: %d %.200s", code, out)
	}
	out, _, code = r("tools")
	if code != 0 || !strings.Contains(out, "file_list") {
		t.Fatalf("tools text: %d %.200s", code, out)
	}
	// revert and delete.
	r("tool", "file_write_text", `{"id":"some.csv","content":"changed"}`)
	out, _, code = r("files", "revert", "some.csv", "--json")
	if code != 0 || !strings.Contains(out, `"size": 31`) {
		t.Fatalf("revert: %d %s", code, out)
	}
	out, _, code = r("files", "delete", "some.csv")
	if code != 0 || !strings.Contains(out, "deleted some.csv") {
		t.Fatalf("delete: %d %s", code, out)
	}
	_, errOut, code = r("files", "info", "some.csv")
	if code != 1 || !strings.Contains(errOut, "NOT_FOUND") {
		t.Fatalf("info after delete: %d %s", code, errOut)
	}
	// A wrong token and an unreachable server are coded errors.
	out, _, code = cli(t, "files", "list", "--json", "--server", ts.URL, "--token", "wrong-token-0")
	if code != 1 || !strings.Contains(out, `"UNAUTHORIZED"`) {
		t.Fatalf("wrong token: %d %s", code, out)
	}
	out, _, code = cli(t, "tool", "file_list", "--server", "http://127.0.0.1:1", "--token", "x")
	if code != 1 || !strings.Contains(out, `"code"`) {
		t.Fatalf("unreachable: %d %s", code, out)
	}
	out, _, code = cli(t, "tool", "file_list", "--server", "ftp://x")
	if code != 1 || !strings.Contains(out, "VALIDATION_FAILED") {
		t.Fatalf("bad URL: %d %s", code, out)
	}
}

// TestMCPStdioProcess speaks MCP to a real `metaclaw mcp` process with the
// official client.
func TestMCPStdioProcess(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	csv := filepath.Join(dir, "some.csv")
	os.WriteFile(csv, []byte("name,qty\napple,3\npear,5\nplum,7\n"), 0o644)
	if _, errOut, code := cli(t, "files", "upload", csv, "--data", data); code != 0 {
		t.Fatalf("upload: %s", errOut)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: self("mcp", "--data", data)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range lt.Tools {
		names[tl.Name] = true
	}
	if !names["file_list"] || !names["file_read_text"] || !names["run_script"] {
		t.Fatalf("tools: %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_list", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(text(res), `"some.csv"`) {
		t.Fatalf("file_list: %v %v", err, text(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_read_text", Arguments: map[string]any{"id": "some.csv", "start_line": 2, "end_line": 3}})
	if err != nil || res.IsError || text(res) != `{"content":"apple,3\npear,5\n","total_lines":4}` {
		t.Fatalf("file_read_text: %v %v", err, text(res))
	}
}

func text(r *mcp.CallToolResult) string {
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

// TestServeCommand starts `metaclaw serve`, checks it answers, and stops it
// with SIGTERM; a non-loopback address without tokens is refused.
func TestServeCommand(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := cli(t, "serve", "--addr", "0.0.0.0:0", "--data", filepath.Join(dir, "d0"))
	if code != 2 || !strings.Contains(errOut, "without API tokens") {
		t.Fatalf("non-loopback bind: %d %s", code, errOut)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := self("--data", filepath.Join(dir, "data"), "serve", "--addr", addr, "--token", "serve-token-1:ws1")
	var stderrBuf strings.Builder
	cmd.Stderr = &stderrBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not come up: %s", stderrBuf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	req, _ := http.NewRequest("GET", base+"/api/files", nil)
	req.Header.Set("Authorization", "Bearer serve-token-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"workspace":"ws1"`) {
		t.Fatalf("files: %d %s", resp.StatusCode, b)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exit: %v\n%s", err, stderrBuf.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	if s := stderrBuf.String(); !strings.Contains(s, "shutting down") || strings.Contains(s, "serve-token-1") {
		t.Fatalf("serve logs: %s", s)
	}
}
