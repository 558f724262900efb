package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
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
// (METACLAW_TEST_MAIN=1), for `metaclaw mcp` over real stdio and `serve`,
// and cleans up what the door test shares between tests.
func TestMain(m *testing.M) {
	if os.Getenv("METACLAW_TEST_MAIN") == "1" {
		os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	// The door test's hosts, servers and the metaclaw binary it built.
	if shared != nil {
		shared.close()
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func self(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "METACLAW_TEST_MAIN=1"), selfEnv...)
	return cmd
}

// selfEnv is added to the environment of the next self commands.
var selfEnv []string

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
	// The code profile over stdio: three tools.
	code, err := c.Connect(ctx, &mcp.CommandTransport{Command: self("mcp", "--data", data, "--profile", "code")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer code.Close()
	lt, err = code.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != 3 {
		t.Fatalf("mcp --profile code: %d tools", len(lt.Tools))
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

// serving is a `metaclaw serve` child process.
type serving struct {
	cmd  *exec.Cmd
	url  string
	logs *lockedBuffer // its stderr
	done chan error
}

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
	// grew is closed (and replaced) by every write: the signal that
	// waitFor looks again.
	grew chan struct{}
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.grew != nil {
		close(l.grew)
		l.grew = nil
	}
	return l.b.Write(p)
}

// waitFor returns the first match of re in what was written, waiting for
// writes until ctx ends ("" then).
func (l *lockedBuffer) waitFor(ctx context.Context, re *regexp.Regexp) string {
	for {
		l.mu.Lock()
		m := re.FindString(l.b.String())
		if l.grew == nil {
			l.grew = make(chan struct{})
		}
		grew := l.grew
		l.mu.Unlock()
		if m != "" {
			return m
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return ""
		}
	}
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var servingLine = regexp.MustCompile(`metaclaw: serving .* on (http://[^/ ]+)/`)

// startServe starts `metaclaw serve args…` and waits for the line it
// writes once its port is open (the signal that it is ready), or for its
// exit.
func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	s := &serving{cmd: self(append([]string{"serve"}, args...)...), logs: &lockedBuffer{}, done: make(chan error, 1)}
	pr, pw := io.Pipe()
	s.cmd.Stderr = pw
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.logs.Write([]byte(sc.Text() + "\n"))
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case ready <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		err := s.cmd.Wait()
		pw.Close()
		s.done <- err
	}()
	select {
	case s.url = <-ready:
	case err := <-s.done:
		s.done <- err
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start: %s", s.logs.String())
	}
	return s
}

// stop sends SIGTERM and returns the exit error.
func (s *serving) stop(t *testing.T) error {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM: %s", s.logs.String())
	}
	return nil
}

// TestServeCommand starts `metaclaw serve`, checks it answers, and stops it
// with SIGTERM; a non-loopback address without tokens is refused.
func TestServeCommand(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := cli(t, "serve", "--addr", "0.0.0.0:0", "--data", filepath.Join(dir, "d0"))
	if code != 2 || !strings.Contains(errOut, "without API tokens") {
		t.Fatalf("non-loopback bind: %d %s", code, errOut)
	}
	// Settings from the environment reach the server (the token here).
	s := startServeEnv(t, []string{"METACLAW_TOKENS=serve-token-1:ws1"}, "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0")
	if s.url == "" {
		t.Fatalf("serve exited: %s", s.logs.String())
	}
	req, _ := http.NewRequest("GET", s.url+"/api/files", nil)
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
	if err := s.stop(t); err != nil {
		t.Fatalf("serve exit: %v\n%s", err, s.logs.String())
	}
	if l := s.logs.String(); !strings.Contains(l, "shutting down") || strings.Contains(l, "serve-token-1") {
		t.Fatalf("serve logs: %s", l)
	}
}

// startServeEnv is startServe with extra environment variables.
func startServeEnv(t *testing.T, env []string, args ...string) *serving {
	t.Helper()
	old := selfEnv
	selfEnv = env
	defer func() { selfEnv = old }()
	return startServe(t, args...)
}

// TestOneServerPerDataDir: a second server on a served data directory
// refuses to start, and so does fsck, each saying who holds it; once the
// server stops both work.
func TestOneServerPerDataDir(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	first := startServe(t, "--data", data, "--addr", "127.0.0.1:0")
	if first.url == "" {
		t.Fatalf("serve exited: %s", first.logs.String())
	}
	second := startServe(t, "--data", data, "--addr", "127.0.0.1:0")
	err := <-second.done
	if second.url != "" || err == nil || second.cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("second serve: %v, url %q", err, second.url)
	}
	if l := second.logs.String(); !strings.Contains(l, "BUSY") || !strings.Contains(l, "already served by") ||
		!strings.Contains(l, fmt.Sprintf("process %d", first.cmd.Process.Pid)) {
		t.Fatalf("second serve said: %s", l)
	}
	out, errOut, code := cli(t, "fsck", "--data", data)
	if code != 1 || !strings.Contains(errOut, "BUSY") || out != "" {
		t.Fatalf("fsck beside the server: %d %q %q", code, out, errOut)
	}
	// Local commands still work beside the server.
	if out, _, code := cli(t, "tool", "file_create", `{"name":"a.txt","content":"x"}`, "--data", data); code != 0 {
		t.Fatalf("local tool beside the server: %d %s", code, out)
	}
	if err := first.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if out, _, code := cli(t, "fsck", "--data", data); code != 0 || !strings.Contains(out, "checked 1 files, 0 problems") {
		t.Fatalf("fsck after the server: %d %s", code, out)
	}
	again := startServe(t, "--data", data, "--addr", "127.0.0.1:0")
	if again.url == "" {
		t.Fatalf("serve after the first stopped: %s", again.logs.String())
	}
	again.stop(t)
}
