package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
)

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func hostConfig(t *testing.T) hostapi.Config { return hostapi.Config{DataDir: t.TempDir()} }

func TestRun(t *testing.T) {
	e := start(t, opts{})
	e.upload("some.csv", []byte("name,qty\napple,3\npear,5\nplum,7\n"), "")
	res := e.json("POST", "/api/run", map[string]any{
		"code":  `const f = (await files.list("*.csv"))[0]; console.log("hi", input.n); return await files.readText(f.id, {startLine: 2, endLine: 3});`,
		"input": map[string]any{"n": 7},
	}, 200)
	want := `{"durationMs":0,"files":[],"logs":[{"level":"log","message":"hi 7"}],"ok":true,"result":{"content":"apple,3\npear,5\n","totalLines":4}}`
	res["durationMs"] = 0
	if got := mustJSON(res); got != want {
		t.Fatalf("run result\n got %s\nwant %s", got, want)
	}
	// A failing script is a result with ok:false, not an HTTP error.
	res = e.json("POST", "/api/run", map[string]any{"code": `await files.readText("nope.txt")`}, 200)
	if res["ok"] != false || res["error"].(map[string]any)["code"] != "NOT_FOUND" {
		t.Fatalf("failing run %v", res)
	}
	// The run's file artifacts (seed 002).
	res = e.json("POST", "/api/run", map[string]any{"code": `await files.create("out/r.md", {content: "x"}); return 1`}, 200)
	if fs := res["files"].([]any); len(fs) != 1 || fs[0].(map[string]any)["action"] != "created" || fs[0].(map[string]any)["iconType"] != "md" {
		t.Fatalf("artifacts %v", res["files"])
	}
	// timeout_ms bounds the run.
	start := time.Now()
	res = e.json("POST", "/api/run", map[string]any{"code": `while (true) {}`, "timeout_ms": 200}, 200)
	if res["ok"] != false || res["error"].(map[string]any)["code"] != "TIMEOUT" || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout run %v", res)
	}
	// Bad requests.
	for body, code := range map[string]string{
		`{`:                            "VALIDATION_FAILED",
		``:                             "VALIDATION_FAILED",
		`{"code": ""}`:                 "VALIDATION_FAILED",
		`{"code": 5}`:                  "VALIDATION_FAILED",
		`{"code":"1","timeout_ms":-1}`: "VALIDATION_FAILED",
		`{"code":"1"} trailing`:        "VALIDATION_FAILED",
		`{"wasm":"m.wasm"}`:            "TOOL_WORKER_UNAVAILABLE", // a JavaScript runner only
	} {
		resp, b := e.do("POST", "/api/run", strings.NewReader(body), nil)
		var eb errorBody
		json.Unmarshal(b, &eb)
		if string(eb.Error.Code) != code {
			t.Errorf("%q: %d %s", body, resp.StatusCode, b)
		}
	}
}

func TestRunBusy(t *testing.T) {
	e := start(t, opts{cfg: func(c *Config) { c.MaxConcurrentRuns = 1 }})
	done := make(chan map[string]any)
	go func() {
		req, _ := http.NewRequest("POST", e.url+"/api/run", strings.NewReader(`{"code":"const t = Date.now(); while (Date.now() - t < 600) {} return 'slow'"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- nil
			return
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		done <- m
	}()
	waitFor(t, 5*time.Second, "the slow run to hold the only slot", func() bool { return e.srv.metrics.runsInFlight.Load() > 0 })
	resp, b := e.do("POST", "/api/run", strings.NewReader(`{"code":"return 1"}`), nil)
	errCode(t, resp, b, 503, "BUSY")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on BUSY")
	}
	resp, b = e.do("POST", "/api/tools/file_list", nil, nil)
	errCode(t, resp, b, 503, "BUSY")
	if m := <-done; m == nil || m["result"] != "slow" {
		t.Fatalf("slow run %v", m)
	}
	// The slot is free again.
	if res := e.json("POST", "/api/run", map[string]any{"code": "return 2"}, 200); res["result"].(float64) != 2 {
		t.Fatalf("after busy %v", res)
	}
}

func TestTools(t *testing.T) {
	e := start(t, opts{})
	e.upload("a.txt", []byte("one\ntwo\nthree\n"), "")
	list := e.json("GET", "/api/tools", nil, 200)["tools"].([]any)
	byName := map[string]map[string]any{}
	for _, x := range list {
		m := x.(map[string]any)
		byName[m["name"].(string)] = m
		if m["description"] == "" || m["input_schema"].(map[string]any)["type"] != "object" {
			t.Fatalf("tool entry is not an Anthropic tool: %v", m)
		}
	}
	// Every registry tool is listed, with the registry's schema.
	reg, _ := e.h.Registry.Tools(context.Background(), e.h.Env("default", "t"))
	if len(reg) != len(list) {
		t.Fatalf("%d tools listed, registry has %d", len(list), len(reg))
	}
	for _, want := range []string{"file_list", "file_read_text", "run_script", "tool_save"} {
		if byName[want] == nil {
			t.Fatalf("%s not listed", want)
		}
	}
	props := byName["file_read_text"]["input_schema"].(map[string]any)["properties"].(map[string]any)
	if props["start_line"] == nil || props["id"] == nil {
		t.Fatalf("file_read_text schema %v", props)
	}
	oa := e.json("GET", "/api/tools?format=openai", nil, 200)["tools"].([]any)
	f0 := oa[0].(map[string]any)
	if f0["type"] != "function" || f0["function"].(map[string]any)["parameters"] == nil || len(oa) != len(list) {
		t.Fatalf("openai format %v", f0)
	}
	mc := e.json("GET", "/api/tools?format=mcp", nil, 200)["tools"].([]any)
	for _, x := range mc {
		m := x.(map[string]any)
		if m["name"] == "file_list" && m["annotations"].(map[string]any)["readOnlyHint"] != true {
			t.Fatalf("mcp format %v", m)
		}
	}
	resp, b := e.do("GET", "/api/tools?format=xml", nil, nil)
	errCode(t, resp, b, 400, "VALIDATION_FAILED")

	// Calls answer the snake_case tool result.
	res := e.json("POST", "/api/tools/file_read_text", map[string]any{"id": "a.txt", "start_line": 2, "end_line": 3}, 200)
	if mustJSON(res) != `{"content":"two\nthree\n","total_lines":3}` {
		t.Fatalf("file_read_text %v", res)
	}
	// Bad input gets the SPEC 7 codes.
	for body, want := range map[string][2]string{
		`{"id":"a.txt","start_line":"x"}`: {"400", "VALIDATION_FAILED"},
		`{"start_line":1}`:                {"400", "VALIDATION_FAILED"},
		`{"id":"missing.txt"}`:            {"404", "NOT_FOUND"},
		`[1,2]`:                           {"400", "VALIDATION_FAILED"},
		`{"id":`:                          {"400", "VALIDATION_FAILED"},
	} {
		resp, b := e.do("POST", "/api/tools/file_read_text", strings.NewReader(body), nil)
		errCode(t, resp, b, atoi(want[0]), want[1])
	}
	resp, b = e.do("POST", "/api/tools/no_such_tool", strings.NewReader(`{}`), nil)
	errCode(t, resp, b, 404, "NOT_FOUND")
	// No body means no arguments.
	if r := e.json("POST", "/api/tools/file_list", nil, 200); len(r["files"].([]any)) != 1 {
		t.Fatalf("file_list %v", r)
	}
	// A saved tool appears in the list and is callable.
	e.json("POST", "/api/tools/tool_save", map[string]any{"name": "count_lines", "description": "Count lines",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []string{"id"}},
		"code":         "return await files.lineCount(input.id)"}, 200)
	if !strings.Contains(mustJSON(e.json("GET", "/api/tools", nil, 200)), `"count_lines"`) {
		t.Fatal("saved tool not listed")
	}
	if r, b := e.do("POST", "/api/tools/count_lines", strings.NewReader(`{"id":"a.txt"}`), nil); r.StatusCode != 200 || strings.TrimSpace(string(b)) != "3" {
		t.Fatalf("saved tool call %d %s", r.StatusCode, b)
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

func TestRoutesAndOps(t *testing.T) {
	e := start(t, opts{})
	resp, b := e.do("GET", "/api/nope", nil, nil)
	errCode(t, resp, b, 404, "NOT_FOUND")
	resp, b = e.do("PUT", "/api/files/x", nil, nil)
	errCode(t, resp, b, 405, "VALIDATION_FAILED")
	// A name with a slash, percent-encoded as one segment.
	e.upload("dir/sub/f.txt", []byte("deep"), "")
	if info := e.json("GET", "/api/files/dir%2Fsub%2Ff.txt", nil, 200); info["name"] != "dir/sub/f.txt" {
		t.Fatalf("encoded name %v", info)
	}
	// Request ids: echoed when sane, generated otherwise, and logged.
	resp, _ = e.do("GET", "/healthz", nil, map[string]string{"X-Request-Id": "abc-123"})
	if resp.Header.Get("X-Request-Id") != "abc-123" {
		t.Fatalf("request id %q", resp.Header.Get("X-Request-Id"))
	}
	resp, _ = e.do("GET", "/api/files", nil, map[string]string{"X-Request-Id": "bad id with spaces"})
	rid := resp.Header.Get("X-Request-Id")
	if len(rid) != 16 || !strings.Contains(e.logs.String(), `"request_id":"`+rid+`"`) {
		t.Fatalf("generated id %q not logged", rid)
	}
	// The page and its assets.
	resp, b = e.do("GET", "/", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "<title>metaclaw") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page %d", resp.StatusCode)
	}
	for _, a := range []string{"/static/app.js", "/static/style.css"} {
		if resp, b := e.do("GET", a, nil, nil); resp.StatusCode != 200 || len(b) < 500 {
			t.Fatalf("%s: %d", a, resp.StatusCode)
		}
	}
	if resp, _ := e.do("GET", "/static/index.html", nil, nil); resp.StatusCode != 404 {
		t.Fatalf("index via static: %d", resp.StatusCode)
	}

	// Metrics after some traffic.
	e.json("POST", "/api/run", map[string]any{"code": "return 1"}, 200)
	e.json("POST", "/api/tools/file_list", nil, 200)
	resp, b = e.do("GET", "/metrics", nil, nil)
	m := string(b)
	for _, want := range []string{
		`metaclaw_http_requests_total{method="GET",route="/api/files",status="200"}`,
		`metaclaw_runs_total{workspace="default",outcome="ok"} 1`,
		`metaclaw_run_duration_seconds_count{workspace="default"} 1`,
		`metaclaw_tool_calls_total{tool="file_list",outcome="ok"} 1`,
		`metaclaw_stored_bytes{workspace="default"} 4`,
		`metaclaw_upload_bytes_total{workspace="default"} 4`,
		`metaclaw_http_request_duration_seconds_bucket{route="/api/run",le="+Inf"}`,
		"# TYPE metaclaw_runs_total counter",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics %d", resp.StatusCode)
	}
}

// TestGracefulShutdown: cancelling Serve's context finishes an upload and a
// run already in flight, ends event streams, and refuses new connections.
func TestGracefulShutdown(t *testing.T) {
	h, tools := newHost(t, hostConfig(t))
	defer h.Close()
	srv, err := New(Config{Host: h, Tools: tools, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	e := &env{t: t, h: h, srv: srv, url: base}
	ev := e.events("", "")

	// An upload whose body is still arriving.
	pr, pw := io.Pipe()
	head := "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.txt\"\r\n\r\n"
	upDone := make(chan int)
	go func() {
		req, _ := http.NewRequest("POST", base+"/api/files/upload", pr)
		req.Header.Set("Content-Type", "multipart/form-data; boundary=B")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			upDone <- -1
			return
		}
		resp.Body.Close()
		upDone <- resp.StatusCode
	}()
	pw.Write([]byte(head + "first half,"))
	// A run in flight.
	runDone := make(chan any)
	go func() {
		resp, err := http.Post(base+"/api/run", "application/json", strings.NewReader(`{"code":"const t = Date.now(); while (Date.now() - t < 400) {} return 'finished'"}`))
		if err != nil {
			runDone <- err
			return
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		runDone <- m["result"]
	}()
	// The run is in flight, so the upload is too: its connection carried
	// the first half of its body before the run's was dialled, and the
	// server accepts connections in order.
	waitFor(t, 5*time.Second, "the run to be in flight", func() bool { return srv.metrics.runsInFlight.Load() > 0 })
	cancel()
	// The event stream ends promptly.
	select {
	case _, ok := <-ev.events:
		for ok {
			_, ok = <-ev.events
		}
	case <-time.After(3 * time.Second):
		t.Fatal("event stream not closed on shutdown")
	}
	// New connections are refused while in-flight work finishes.
	waitFor(t, 5*time.Second, "the listener to close", func() bool {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	pw.Write([]byte(" second half\r\n--B--\r\n"))
	pw.Close()
	if code := <-upDone; code != 201 {
		t.Fatalf("in-flight upload: %d", code)
	}
	if r := <-runDone; r != "finished" {
		t.Fatalf("in-flight run: %v", r)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	f, err := h.Store.Workspace("default").Resolve(context.Background(), "slow.txt")
	if err != nil || f.Size != int64(len("first half, second half")) {
		t.Fatalf("uploaded file %v %v", f, err)
	}
}
