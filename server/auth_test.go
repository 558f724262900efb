package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	tokA = "token-aaaa-1111"
	tokB = "token-bbbb-2222"
)

// TestIsolation: workspace B's token never sees, lists, downloads, streams
// events of or runs against workspace A's files, on every route; no token
// or a wrong one gets 401 everywhere.
func TestIsolation(t *testing.T) {
	e := start(t, opts{cfg: func(c *Config) {
		c.Tokens = []Token{{Secret: tokA, Workspace: "a"}, {Secret: tokB, Workspace: "b"}}
	}})
	evB := e.events("", tokB)
	a := e.upload("secret.md", []byte("# A's secret\n"), "")
	idA := a["id"].(string)
	e.token = tokB
	e.upload("mine.txt", []byte("B's file"), "")
	if got := evB.next(t, 2*time.Second); got.data["name"] != "mine.txt" {
		t.Fatalf("B saw %+v", got) // A's upload must not appear on B's stream
	}
	evB.none(t, 50*time.Millisecond)

	// B, file routes: A's file does not exist for B, by id or by name.
	for _, ref := range []string{idA, "secret.md"} {
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/api/files/" + ref, ""},
			{"HEAD", "/api/files/" + ref, ""},
			{"GET", "/api/files/" + ref + "/download", ""},
			{"GET", "/api/files/" + ref + "/content", ""},
			{"POST", "/api/files/" + ref + "/convert", `{"convert_type":"pdf"}`},
			{"DELETE", "/api/files/" + ref, ""},
		} {
			resp, b := e.do(r.method, r.path, strings.NewReader(r.body), nil)
			if r.method == "HEAD" {
				if resp.StatusCode != 404 {
					t.Errorf("B %s %s: %d", r.method, r.path, resp.StatusCode)
				}
				continue
			}
			if resp.StatusCode != 404 || !strings.Contains(string(b), "NOT_FOUND") || strings.Contains(string(b), "secret") && ref == idA {
				t.Errorf("B %s %s: %d %s", r.method, r.path, resp.StatusCode, b)
			}
		}
	}
	list := e.json("GET", "/api/files", nil, 200)
	if fs := list["files"].([]any); len(fs) != 1 || fs[0].(map[string]any)["name"] != "mine.txt" || list["workspace"] != "b" {
		t.Fatalf("B's list %v", list)
	}
	// B's runs and tools see only B's workspace.
	run := e.json("POST", "/api/run", map[string]any{"code": `return (await files.list()).map(f => f.name)`}, 200)
	if r, _ := json.Marshal(run["result"]); string(r) != `["mine.txt"]` {
		t.Fatalf("B's run saw %s", r)
	}
	run = e.json("POST", "/api/run", map[string]any{"code": `return await files.readText("` + idA + `")`}, 200)
	if run["ok"] != false || run["error"].(map[string]any)["code"] != "NOT_FOUND" {
		t.Fatalf("B read A's file: %v", run)
	}
	tl := e.json("POST", "/api/tools/file_list", map[string]any{}, 200)
	if fs := tl["files"].([]any); len(fs) != 1 {
		t.Fatalf("B's file_list %v", tl)
	}
	resp, b := e.do("POST", "/api/tools/file_read_text", strings.NewReader(`{"id":"`+idA+`"}`), nil)
	errCode(t, resp, b, 404, "NOT_FOUND")
	// B's MCP sees B's workspace only.
	cs := mcpHTTP(t, e, tokB, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "file_list", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "mine.txt") || strings.Contains(textOf(res), "secret") {
		t.Fatalf("B's MCP file_list: %v %s", err, textOf(res))
	}
	// A signed URL minted for B cannot be turned into one for A's file.
	bc := e.json("GET", "/api/files/mine.txt/content", nil, 200)
	if bc["content"] != "B's file" {
		t.Fatalf("B content %v", bc)
	}
	// A's saved tool is not B's.
	e.token = tokA
	e.json("POST", "/api/tools/tool_save", map[string]any{"name": "a_only", "description": "A's tool", "code": "return 1"}, 200)
	e.token = tokB
	tools := e.json("GET", "/api/tools", nil, 200)
	if strings.Contains(mustJSON(tools), `"a_only"`) {
		t.Fatal("B lists A's saved tool")
	}
	resp, b = e.do("POST", "/api/tools/a_only", nil, nil)
	errCode(t, resp, b, 404, "NOT_FOUND")

	// A still has its file, untouched by B's delete attempts.
	e.token = tokA
	if info := e.json("GET", "/api/files/"+idA, nil, 200); info["name"] != "secret.md" {
		t.Fatalf("A's file %v", info)
	}

	// No token, a wrong token, a malformed header: 401 on every route.
	routes := []struct{ method, path string }{
		{"POST", "/api/files/upload"}, {"GET", "/api/files"}, {"GET", "/api/files/" + idA}, {"HEAD", "/api/files/" + idA},
		{"GET", "/api/files/" + idA + "/download"}, {"GET", "/api/files/" + idA + "/content"}, {"POST", "/api/files/" + idA + "/convert"},
		{"DELETE", "/api/files/" + idA}, {"GET", "/api/events"}, {"POST", "/api/run"}, {"GET", "/api/tools"},
		{"POST", "/api/tools/file_list"}, {"POST", "/mcp"}, {"GET", "/mcp"}, {"GET", "/metrics"},
	}
	for _, auth := range []string{"", "Bearer wrong-token-xyz", "Basic dXNlcjpwYXNz", "Bearer"} {
		for _, r := range routes {
			req, _ := http.NewRequest(r.method, e.url+r.path, bytes.NewReader([]byte(`{}`)))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body errorBody
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode != 401 || (r.method != "HEAD" && body.Error.Code != "UNAUTHORIZED") {
				t.Errorf("%q %s %s: %d %v", auth, r.method, r.path, resp.StatusCode, body)
			}
		}
	}
	// A's file is still there after all of that.
	if info := e.json("GET", "/api/files/"+idA, nil, 200); info["sha256"] != sha([]byte("# A's secret\n")) {
		t.Fatalf("A's file changed: %v", info)
	}
	// Liveness needs no token.
	e.token = ""
	if resp, _ := e.do("GET", "/healthz", nil, nil); resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	// Tokens are never logged.
	if logs := e.logs.String(); strings.Contains(logs, tokA) || strings.Contains(logs, tokB) || strings.Contains(logs, "sig=") {
		t.Fatal("a token or signature reached the logs")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestTokens(t *testing.T) {
	for in, want := range map[string]Token{
		"abcdefgh:ws1":  {"abcdefgh", "ws1"},
		"abcdefgh":      {"abcdefgh", "default"},
		" abcdefgh:a_b": {"abcdefgh", "a_b"},
	} {
		got, err := ParseToken(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, bad := range []string{"short:ws", "abcdefgh:", "abcdefgh:a/b", "abcdefgh:..", "abc defgh:ws"} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := newTokenSet([]Token{{"abcdefgh", "a"}, {"abcdefgh", "b"}}); err == nil {
		t.Error("one token for two workspaces accepted")
	}
	dir := t.TempDir()
	p := dir + "/tokens"
	writeFile(t, p, "# comment\n\nabcdefgh1:alpha\nabcdefgh2 beta\n")
	toks, err := ReadTokensFile(p)
	if err != nil || len(toks) != 2 || toks[1] != (Token{"abcdefgh2", "beta"}) {
		t.Fatalf("tokens file: %v %v", toks, err)
	}
	writeFile(t, p, "abc:x\n")
	if _, err := ReadTokensFile(p); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Fatalf("bad tokens file: %v", err)
	}
}

func TestCheckBind(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:0": true, "[::1]:80": true, "127.0.0.2:9": true,
		"0.0.0.0:8080": false, ":8080": false, "192.168.1.5:80": false, "[::]:80": false, "example.com:80": false,
	} {
		if err := CheckBind(addr, false); (err == nil) != ok {
			t.Errorf("%s without tokens: %v", addr, err)
		}
		if err := CheckBind(addr, true); err != nil {
			t.Errorf("%s with tokens: %v", addr, err)
		}
	}
	// The server itself refuses too.
	h, _ := newHost(t, hostConfig(t))
	defer h.Close()
	srv, err := New(Config{Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.ListenAndServe(context.Background(), "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "without API tokens") {
		t.Fatalf("non-loopback bind without tokens: %v", err)
	}
}

// TestBrowserProtection: another site cannot make a browser change the
// workspace, and a token-less server ignores requests addressed to other
// names (DNS rebinding).
func TestBrowserProtection(t *testing.T) {
	e := start(t, opts{})
	resp, b := e.do("POST", "/api/run", strings.NewReader(`{"code":"return 1"}`),
		map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"})
	errCode(t, resp, b, 401, "UNAUTHORIZED")
	resp, b = e.do("DELETE", "/api/files/x", nil, map[string]string{"Origin": "https://evil.example"})
	errCode(t, resp, b, 401, "UNAUTHORIZED")
	// Same-origin page requests and plain clients pass.
	if resp, _ := e.do("POST", "/api/run", strings.NewReader(`{"code":"return 1"}`), map[string]string{"Sec-Fetch-Site": "same-origin"}); resp.StatusCode != 200 {
		t.Fatalf("same-origin: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", e.url+"/api/files", nil)
	req.Host = "rebind.evil.example"
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 401 {
		t.Fatalf("rebinding host: %d", r2.StatusCode)
	}
	req.Host = "localhost:1234"
	if r3, err := http.DefaultClient.Do(req); err != nil || r3.StatusCode != 200 {
		t.Fatalf("localhost host: %v", err)
	}
}
