package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 11's hostile requests against a real server: each ends with a
// bounded, coded outcome, and the host's CPU and memory come back to idle.

// cpuTicks is this process's user+system CPU time in clock ticks (1/100 s).
func cpuTicks(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip("no /proc/self/stat on this system")
	}
	// Fields after the command name (which may hold spaces) start after ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// waitIdle asserts that within 5 s the process uses under 20 % of a core
// over half a second and its RSS (after a GC) is back within 48 MB of base.
func waitIdle(t *testing.T, base int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var ticks, rss int64
	for time.Now().Before(deadline) {
		t0 := cpuTicks(t)
		time.Sleep(500 * time.Millisecond) // the measuring window, not a wait for an event
		ticks = cpuTicks(t) - t0
		runtime.GC()
		debug.FreeOSMemory()
		rss = rssBytes()
		if ticks < 10 && rss < base+48<<20 {
			return
		}
	}
	t.Fatalf("not idle 5 s after the deadline: %d CPU ticks in 0.5 s, RSS %d MB (base %d MB)", ticks, rss>>20, base>>20)
}

func idleBase(t *testing.T) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return rssBytes()
}

// TestConvertBounded: the 244-byte 31-column table converts; a long
// document stops at the conversion deadline with TIMEOUT; a client that
// leaves stops its conversion; the host is idle again within 5 s and the
// server still answers.
func TestConvertBounded(t *testing.T) {
	e := start(t, opts{cfg: func(c *Config) { c.ConvertTimeout = 400 * time.Millisecond; c.ConvertMaxPages = 1_000_000 }})
	md, err := os.ReadFile("convert/testdata/wide-table.md")
	if err != nil {
		t.Fatal(err)
	}
	e.upload("wide.md", md, "")
	res := e.json("POST", "/api/files/wide.md/convert", map[string]any{"convert_type": "pdf"}, 201)
	if res["name"] != "wide.pdf" || res["mime_type"] != "application/pdf" || res["size"].(float64) < 1000 {
		t.Fatalf("wide table: %v", res)
	}
	// 1.5 MB: parsing it (which cannot be interrupted) is quick, laying it
	// out (which stops at the deadline) takes many seconds.
	long := bytes.Repeat([]byte("A paragraph of text that fills a line or two of the page when it is laid out, again and again.\n\n"), 15_000)
	e.upload("long.md", long, "")
	base := idleBase(t)
	started := time.Now()
	resp, b := e.do("POST", "/api/files/long.md/convert", strings.NewReader(`{"convert_type":"pdf"}`), nil)
	errCode(t, resp, b, 408, "TIMEOUT")
	if d := time.Since(started); d > 5*time.Second {
		t.Fatalf("TIMEOUT after %v for a 400 ms limit", d)
	} else {
		t.Logf("TIMEOUT after %v for a 400 ms limit", d.Round(time.Millisecond))
	}
	if !strings.Contains(string(b), "long.md") {
		t.Fatalf("message does not name the file: %s", b)
	}
	waitIdle(t, base)

	// The client leaves: the conversion stops and gives its slot back.
	e.srv.cfg.ConvertTimeout = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/api/files/long.md/convert", strings.NewReader(`{"convert_type":"pdf","output":"long-abandoned.pdf"}`))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, 5*time.Second, "the conversion to start", func() bool { return e.srv.metrics.runsInFlight.Load() == 1 })
	cancel()
	<-done
	waitFor(t, 5*time.Second, "the conversion to stop after the client left", func() bool { return e.srv.metrics.runsInFlight.Load() == 0 })
	waitIdle(t, base)
	if _, err := e.h.Store.Workspace("default").Resolve(context.Background(), "long-abandoned.pdf"); err == nil {
		t.Fatal("an abandoned conversion stored its output")
	}
	e.json("GET", "/api/files", nil, 200)
}

// waitFor polls cond (a condition of the server's own state) until it
// holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSlowUpload: an overwrite that trickles in (1 byte a second against a
// 1 KB/s floor) ends with TIMEOUT soon after the grace period; meanwhile
// readers see the old body; afterwards nothing is left: no temp file, no
// quota held, the old content in place.
func TestSlowUpload(t *testing.T) {
	e := start(t, opts{cfg: func(c *Config) {
		c.BodyMinRate, c.BodyGrace, c.BodyIdleTimeout = 1024, 500*time.Millisecond, 3*time.Second
	}})
	e.upload("a.txt", []byte("old content\n"), "")
	usedBefore, _, _ := e.h.Store.Workspace("default").Usage()
	pr, pw := io.Pipe()
	type result struct {
		status int
		body   []byte
		err    error
	}
	done := make(chan result, 1)
	started := time.Now()
	go func() {
		req, _ := http.NewRequest("POST", e.url+"/api/files/upload?overwrite=true&name=a.txt", pr)
		req.Header.Set("Content-Type", "multipart/form-data; boundary=B")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, body: b}
	}()
	pw.Write([]byte("--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nn"))
	// A reader is never held up by the trickling writer.
	resp, b := e.do("GET", "/api/files/a.txt/download", nil, nil)
	if resp.StatusCode != 200 || string(b) != "old content\n" {
		t.Fatalf("read during the slow upload: %d %q", resp.StatusCode, b)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var r result
wait:
	for {
		select {
		case r = <-done:
			break wait
		case <-tick.C:
			pw.Write([]byte("x"))
		case <-time.After(10 * time.Second):
			t.Fatal("the slow upload was not cut off")
		}
	}
	pw.CloseWithError(io.ErrClosedPipe)
	if d := time.Since(started); d > 5*time.Second {
		t.Fatalf("cut off after %v", d)
	}
	if r.err == nil {
		errCode(t, &http.Response{StatusCode: r.status}, r.body, 408, "TIMEOUT")
		if !strings.Contains(string(r.body), "too slowly") {
			t.Fatalf("message: %s", r.body)
		}
	} else {
		t.Logf("the client saw the connection closed: %v", r.err)
	}
	waitFor(t, 5*time.Second, "the upload's temp files to go", func() bool { return len(tempFiles(t, e.h.Config.DataDir)) == 0 })
	if used, _, _ := e.h.Store.Workspace("default").Usage(); used != usedBefore {
		t.Fatalf("quota %d after the refused upload, %d before", used, usedBefore)
	}
	if _, b := e.do("GET", "/api/files/a.txt/download", nil, nil); string(b) != "old content\n" {
		t.Fatalf("content after: %q", b)
	}
	// A fast upload on the same server is unaffected.
	if up := e.upload("fast.bin", bytes.Repeat([]byte("f"), 2<<20), ""); up["size"].(float64) != 2<<20 {
		t.Fatalf("fast upload %v", up)
	}
}

// TestEventStreamCaps: streams beyond the per-workspace and the total caps
// get BUSY; a closed stream frees its slot.
func TestEventStreamCaps(t *testing.T) {
	e := start(t, opts{cfg: func(c *Config) {
		c.Tokens = []Token{{Secret: "token-aaaa", Workspace: "a"}, {Secret: "token-bbbb", Workspace: "b"}}
		c.MaxEventStreamsPerWorkspace, c.MaxEventStreams = 2, 3
	}})
	a1 := e.events("", "token-aaaa")
	e.events("", "token-aaaa")
	busy := func(token string) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url+"/api/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		errCode(t, resp, b, 503, "BUSY")
		if resp.Header.Get("Retry-After") == "" {
			t.Fatal("BUSY without Retry-After")
		}
	}
	busy("token-aaaa") // the workspace's cap
	e.events("", "token-bbbb")
	busy("token-bbbb") // the total cap, though b has one stream only
	// MCP's standalone stream counts too.
	req, _ := http.NewRequest("GET", e.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer token-bbbb")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	errCode(t, resp, b, 503, "BUSY")
	a1.close()
	waitFor(t, 5*time.Second, "the closed stream's slot", func() bool { return e.srv.metrics.streams.Load() == 2 })
	e.events("", "token-bbbb")
}

// TestMetricsScoped: a token sees its own workspace's series and the
// server-wide ones, never another workspace's names or sizes.
func TestMetricsScoped(t *testing.T) {
	e := start(t, opts{cfg: func(c *Config) {
		c.Tokens = []Token{{Secret: "token-aaaa", Workspace: "alpha"}, {Secret: "token-bbbb", Workspace: "bravo"}}
	}})
	e.token = "token-bbbb"
	e.upload("bravo-secret-plan.txt", bytes.Repeat([]byte("s"), 12345), "")
	e.json("POST", "/api/tools/tool_save", map[string]any{"name": "bravo_secret_tool", "description": "d", "code": "return {n: 1}"}, 200)
	e.json("POST", "/api/tools/bravo_secret_tool", map[string]any{}, 200)
	e.json("POST", "/api/run", map[string]any{"code": "return 1"}, 200)
	e.token = "token-aaaa"
	e.upload("a.txt", []byte("abc"), "")
	resp, b := e.do("GET", "/metrics", nil, nil)
	m := string(b)
	if resp.StatusCode != 200 || !strings.Contains(m, `metaclaw_stored_bytes{workspace="alpha"} 3`) || !strings.Contains(m, `metaclaw_upload_bytes_total{workspace="alpha"} 3`) {
		t.Fatalf("alpha's metrics:\n%s", m)
	}
	for _, leak := range []string{"bravo", "secret", "12345"} {
		if strings.Contains(m, leak) {
			t.Fatalf("alpha sees %q:\n%s", leak, m)
		}
	}
	e.token = "token-bbbb"
	_, b = e.do("GET", "/metrics", nil, nil)
	if m := string(b); !strings.Contains(m, `metaclaw_saved_tool_calls_total{workspace="bravo",tool="bravo_secret_tool",outcome="ok"} 1`) ||
		!strings.Contains(m, `metaclaw_runs_total{workspace="bravo",outcome="ok"} 1`) || strings.Contains(m, "alpha") {
		t.Fatalf("bravo's metrics:\n%s", m)
	}
	e.token = ""
	resp, b = e.do("GET", "/metrics", nil, nil)
	errCode(t, resp, b, 401, "UNAUTHORIZED")
}

// TestEventIDsPerWorkspace: each workspace numbers its events from 1, and
// resuming with Last-Event-ID replays exactly the missed ones.
func TestEventIDsPerWorkspace(t *testing.T) {
	e := start(t, opts{cfg: func(c *Config) {
		c.Tokens = []Token{{Secret: "token-aaaa", Workspace: "a"}, {Secret: "token-bbbb", Workspace: "b"}}
	}})
	e.token = "token-bbbb"
	for i := 0; i < 3; i++ {
		e.upload(fmt.Sprintf("b%d.txt", i), []byte("b"), "")
	}
	e.token = "token-aaaa"
	ev := e.events("", "token-aaaa")
	e.upload("a0.txt", []byte("a"), "")
	e.upload("a1.txt", []byte("a"), "")
	first, second := ev.next(t, 5*time.Second), ev.next(t, 5*time.Second)
	if first.id != "1" || second.id != "2" || first.data["name"] != "a0.txt" {
		t.Fatalf("workspace a's ids: %s %s %v", first.id, second.id, first.data)
	}
	ev.close()
	e.upload("a2.txt", []byte("a"), "")
	resumed := e.events("1", "token-aaaa")
	if got := resumed.next(t, 5*time.Second); got.id != "2" || got.data["name"] != "a1.txt" {
		t.Fatalf("resume after 1: %s %v", got.id, got.data)
	}
	if got := resumed.next(t, 5*time.Second); got.id != "3" || got.data["name"] != "a2.txt" {
		t.Fatalf("resume: %s %v", got.id, got.data)
	}
}

// TestNoServerPaths: a body missing on disk gives FILE_READ_FAILED from
// every route without the data directory's path.
func TestNoServerPaths(t *testing.T) {
	e := start(t, opts{})
	e.upload("gone.txt", []byte("soon gone"), "")
	f, err := e.h.Store.Workspace("default").Resolve(context.Background(), "gone.txt")
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	filepath.WalkDir(filepath.Join(e.h.Config.DataDir, "files"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && filepath.Base(p) == f.DiskPath {
			removed = os.Remove(p) == nil
		}
		return nil
	})
	if !removed {
		t.Fatalf("body %s not found on disk", f.DiskPath)
	}
	abs, _ := filepath.Abs(e.h.Config.DataDir)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/files/gone.txt/download", ""},
		{"GET", "/api/files/gone.txt/content", ""},
		{"POST", "/api/tools/file_read_text", `{"id":"gone.txt"}`},
		{"POST", "/api/files/gone.txt/convert", `{"convert_type":"pdf"}`},
	} {
		resp, b := e.do(c.method, c.path, strings.NewReader(c.body), nil)
		if resp.StatusCode < 400 || strings.Contains(string(b), abs) || strings.Contains(string(b), e.h.Config.DataDir) || strings.Contains(string(b), os.TempDir()+"/") {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
	// And the redactor catches one that a lower layer would let through.
	rec := httptest.NewRecorder()
	e.srv.writeError(rec, httptest.NewRequest("GET", "/", nil), fmt.Errorf("open %s/files/x: permission denied", abs))
	if strings.Contains(rec.Body.String(), abs) || !strings.Contains(rec.Body.String(), "[server path]") {
		t.Fatalf("redaction: %s", rec.Body.String())
	}
}

// TestRangeLimits: 2,000 one-byte ranges of a 28 KB file are refused with
// a small 416, not answered with ten times the file; reasonable ranges
// still work.
func TestRangeLimits(t *testing.T) {
	e := start(t, opts{})
	content := bytes.Repeat([]byte("0123456789abcdef"), 28<<10/16)
	e.upload("r.bin", content, "")
	var parts []string
	for i := 0; i < 2000; i++ {
		parts = append(parts, fmt.Sprintf("%d-%d", i*13, i*13))
	}
	resp, b := e.do("GET", "/api/files/r.bin/download", nil, map[string]string{"Range": "bytes=" + strings.Join(parts, ",")})
	errCode(t, resp, b, 416, "VALIDATION_FAILED")
	if len(b) > 1024 || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", len(content)) {
		t.Fatalf("416 answer: %d bytes, Content-Range %q", len(b), resp.Header.Get("Content-Range"))
	}
	resp, b = e.do("GET", "/api/files/r.bin/download", nil, map[string]string{"Range": "bytes=0-20000,100-28000"})
	errCode(t, resp, b, 416, "VALIDATION_FAILED")
	resp, b = e.do("GET", "/api/files/r.bin/download", nil, map[string]string{"Range": "bytes=" + strings.Join(parts[:16], ",")})
	if resp.StatusCode != 206 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "multipart/byteranges") || len(b) > 16*200 {
		t.Fatalf("16 ranges: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
	}
	resp, b = e.do("GET", "/api/files/r.bin/download", nil, map[string]string{"Range": "bytes=16-31"})
	if resp.StatusCode != 206 || string(b) != "0123456789abcdef" {
		t.Fatalf("one range: %d %q", resp.StatusCode, b)
	}
	resp, b = e.do("GET", "/api/files/r.bin/download", nil, map[string]string{"Range": "bytes=-16"})
	if resp.StatusCode != 206 || string(b) != "0123456789abcdef" {
		t.Fatalf("suffix range: %d %q", resp.StatusCode, b)
	}
}

// TestUploadFieldsAnyOrder is issue 12's `-F file=@x -F name=y`: fields
// after the file part count, also for big files (spooled to disk, not
// memory), and the query still works.
func TestUploadFieldsAnyOrder(t *testing.T) {
	e := start(t, opts{})
	post := func(parts []string, query string) (*http.Response, []byte) {
		var buf bytes.Buffer
		for _, p := range parts {
			buf.WriteString("--B\r\n" + p + "\r\n")
		}
		buf.WriteString("--B--\r\n")
		return e.do("POST", "/api/files/upload"+query, &buf, map[string]string{"Content-Type": "multipart/form-data; boundary=B"})
	}
	file := func(name, content string) string {
		return "Content-Disposition: form-data; name=\"file\"; filename=\"" + name + "\"\r\n\r\n" + content
	}
	field := func(name, v string) string {
		return "Content-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + v
	}
	decode := func(b []byte) map[string]any {
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	resp, b := post([]string{file("x.txt", "hello"), field("name", "docs/y.txt")}, "")
	if m := decode(b); resp.StatusCode != 201 || m["name"] != "docs/y.txt" || m["size"].(float64) != 5 {
		t.Fatalf("name after the file: %d %s", resp.StatusCode, b)
	}
	if _, err := e.h.Store.Workspace("default").Resolve(context.Background(), "x.txt"); err == nil {
		t.Fatal("the part's filename was stored too")
	}
	resp, b = post([]string{file("y.txt", "again")}, "?name=docs/y.txt")
	errCode(t, resp, b, 409, "ALREADY_EXISTS")
	resp, b = post([]string{file("y.txt", "replaced"), field("overwrite", "true"), field("session_id", "sess-42"), field("name", "docs/y.txt")}, "")
	if resp.StatusCode != 201 || decode(b)["size"].(float64) != 8 {
		t.Fatalf("overwrite after the file: %d %s", resp.StatusCode, b)
	}
	f, _ := e.h.Store.Workspace("default").Resolve(context.Background(), "docs/y.txt")
	if f.SourceSessionID != "sess-42" && f.SourceSessionID != "http" {
		t.Fatalf("session %q", f.SourceSessionID)
	}
	// The query settles where the file goes (the file then streams
	// straight into the store): a later field may repeat it but not change
	// it, and nothing is stored when it tries.
	resp, b = post([]string{file("q.txt", "from the query"), field("name", "q.txt")}, "?name=q.txt")
	if resp.StatusCode != 201 || decode(b)["name"] != "q.txt" {
		t.Fatalf("repeated field: %d %s", resp.StatusCode, b)
	}
	resp, b = post([]string{file("q2.txt", "x"), field("name", "elsewhere.txt")}, "?name=q2.txt")
	errCode(t, resp, b, 400, "VALIDATION_FAILED")
	if _, err := e.h.Store.Workspace("default").Resolve(context.Background(), "q2.txt"); err == nil {
		t.Fatal("a conflicting upload was stored")
	}
	// A field overrides the query; fields before the file stream directly.
	resp, b = post([]string{field("name", "first.txt"), field("overwrite", "false"), file("ignored.txt", "direct")}, "?name=query.txt")
	if resp.StatusCode != 201 || decode(b)["name"] != "first.txt" {
		t.Fatalf("fields first: %d %s", resp.StatusCode, b)
	}
	// A big file before its name is spooled to disk, and arrives intact.
	big := bytes.Repeat([]byte("0123456789"), 300_000)
	resp, b = post([]string{file("big.bin", string(big)), field("name", "renamed-big.bin")}, "")
	if m := decode(b); resp.StatusCode != 201 || m["name"] != "renamed-big.bin" || m["sha256"] != sha(big) {
		t.Fatalf("big spooled upload: %d %s", resp.StatusCode, b)
	}
	// Bad forms.
	resp, b = post([]string{file("a.txt", "1"), file("b.txt", "2")}, "")
	errCode(t, resp, b, 400, "VALIDATION_FAILED")
	resp, b = post([]string{file("a.txt", "1"), field("overwrite", "maybe")}, "")
	errCode(t, resp, b, 400, "VALIDATION_FAILED")
	resp, b = post([]string{field("name", "n.txt")}, "")
	errCode(t, resp, b, 400, "VALIDATION_FAILED")
	if list := e.json("GET", "/api/files", nil, 200)["files"].([]any); len(list) != 4 {
		t.Fatalf("files after: %v", list)
	}
}

// TestContentEncodings: /content returns small text in any encoding
// inline, decoded, and names the encoding.
func TestContentEncodings(t *testing.T) {
	e := start(t, opts{})
	utf16 := []byte{0xFF, 0xFE}
	for _, r := range "name\nMuñoz\n" {
		utf16 = append(utf16, byte(r), byte(r>>8))
	}
	for name, c := range map[string]struct {
		body []byte
		text string
		enc  string
	}{
		"latin1.csv": {[]byte("name,city\nMu\xf1oz,Bogot\xe1\nSch\xf6n,K\xf6ln \x80 5\n"), "name,city\nMuñoz,Bogotá\nSchön,Köln € 5\n", "windows-1252"},
		"utf16.txt":  {utf16, "name\nMuñoz\n", "utf-16le"},
		"bom.csv":    {append([]byte{0xEF, 0xBB, 0xBF}, "a,b\nñ,1\n"...), "a,b\nñ,1\n", "utf-8-bom"},
		"plain.md":   {[]byte("# Title\n"), "# Title\n", "utf-8"},
	} {
		e.upload(name, c.body, "")
		res := e.json("GET", "/api/files/"+name+"/content", nil, 200)
		if res["content"] != c.text || res["encoding"] != c.enc || res["download_url"] != nil {
			t.Errorf("%s: %v", name, res)
		}
	}
	e.upload("bin.dat", []byte{0, 1, 2, 3, 0xff, 0, 7}, "")
	if res := e.json("GET", "/api/files/bin.dat/content", nil, 200); res["content"] != nil || res["download_url"] == nil {
		t.Fatalf("binary: %v", res)
	}
}
