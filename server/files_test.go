package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
)

// TestFileLifecycle is the acceptance path: upload → SSE event → download
// byte-identical → Range → content API → delete → event.
func TestFileLifecycle(t *testing.T) {
	e := start(t, opts{})
	ev := e.events("", "")

	data := make([]byte, 3<<20+123)
	rand.New(rand.NewSource(1)).Read(data)
	up := e.upload("blob.bin", data, "")
	uploaded := time.Now()
	if up["name"] != "blob.bin" || up["size"].(float64) != float64(len(data)) || up["sha256"] != sha(data) || up["mime_type"] != "application/octet-stream" {
		t.Fatalf("upload answer %v", up)
	}
	id := up["id"].(string)
	got := ev.next(t, 2*time.Second)
	if got.typ != "file:created" || got.data["id"] != id || got.data["name"] != "blob.bin" || got.data["size"].(float64) != float64(len(data)) ||
		got.data["mime_type"] != "application/octet-stream" || got.data["source_session_id"] != "http" || got.id == "" {
		t.Fatalf("created event %+v", got)
	}
	if lag := got.at.Sub(uploaded); lag > 100*time.Millisecond {
		t.Fatalf("upload event arrived %v after the upload answered", lag)
	}

	// Download: byte-identical, ETag, Content-Disposition.
	resp, body := e.do("GET", "/api/files/"+id+"/download", nil, nil)
	if resp.StatusCode != 200 || sha(body) != sha(data) {
		t.Fatalf("download: %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp.Header.Get("ETag") != `"`+sha(data)+`"` || !strings.Contains(resp.Header.Get("Content-Disposition"), `filename="blob.bin"`) ||
		resp.Header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("download headers %v", resp.Header)
	}
	// By name too.
	if resp, body := e.do("GET", "/api/files/blob.bin/download", nil, nil); resp.StatusCode != 200 || len(body) != len(data) {
		t.Fatalf("download by name: %d", resp.StatusCode)
	}
	// Range: the middle of the file.
	resp, body = e.do("GET", "/api/files/"+id+"/download", nil, map[string]string{"Range": "bytes=1000000-1000999"})
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[1000000:1001000]) ||
		resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 1000000-1000999/%d", len(data)) {
		t.Fatalf("range: %d %q %d bytes", resp.StatusCode, resp.Header.Get("Content-Range"), len(body))
	}
	// Conditional: the ETag answers 304.
	if resp, _ := e.do("GET", "/api/files/"+id+"/download", nil, map[string]string{"If-None-Match": `"` + sha(data) + `"`}); resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", resp.StatusCode)
	}
	// An unsatisfiable range.
	if resp, _ := e.do("GET", "/api/files/"+id+"/download", nil, map[string]string{"Range": "bytes=99999999-"}); resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("bad range: %d", resp.StatusCode)
	}

	// Metadata: GET, HEAD, list.
	info := e.json("GET", "/api/files/"+id, nil, 200)
	if info["sha256"] != sha(data) || info["source"] != "upload" || info["icon_type"] != "file" || info["mime_type"] != "application/octet-stream" {
		t.Fatalf("info %v", info)
	}
	resp, body = e.do("HEAD", "/api/files/"+id, nil, nil)
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("X-File-Size") != strconv.Itoa(len(data)) || resp.Header.Get("X-File-Sha256") != sha(data) ||
		resp.Header.Get("X-File-Name") != "blob.bin" {
		t.Fatalf("HEAD: %d %v", resp.StatusCode, resp.Header)
	}
	list := e.json("GET", "/api/files?pattern=*.bin", nil, 200)
	if fs := list["files"].([]any); len(fs) != 1 || fs[0].(map[string]any)["id"] != id {
		t.Fatalf("list %v", list)
	}
	if fs := e.json("GET", "/api/files?pattern=*.csv", nil, 200)["files"].([]any); len(fs) != 0 {
		t.Fatalf("pattern list %v", fs)
	}

	// Content API: binary → signed URL that works without a token.
	c := e.json("GET", "/api/files/"+id+"/content", nil, 200)
	if c["content"] != nil || c["filename"] != "blob.bin" || c["file_path"] != "/blob.bin" {
		t.Fatalf("content %v", c)
	}
	u := c["download_url"].(string)
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	signed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || sha(signed) != sha(data) {
		t.Fatalf("signed download: %d", resp.StatusCode)
	}
	// Text → inline.
	text := e.upload("notes/readme.md", []byte("# Hello\n\nworld ✓\n"), "")
	c = e.json("GET", "/api/files/"+url.PathEscape("notes/readme.md")+"/content", nil, 200)
	if c["content"] != "# Hello\n\nworld ✓\n" || c["download_url"] != nil || c["file_path"] != "/notes/readme.md" || c["filename"] != "readme.md" {
		t.Fatalf("text content %v", c)
	}
	ev.next(t, 2*time.Second) // created notes/readme.md

	// Delete → event → gone.
	resp, body = e.do("DELETE", "/api/files/"+id, nil, nil)
	deleted := time.Now()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"deleted":true`) {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	got = ev.next(t, 2*time.Second)
	if got.typ != "file:deleted" || got.data["id"] != id || len(got.data) != 1 {
		t.Fatalf("deleted event %+v", got)
	}
	if lag := got.at.Sub(deleted); lag > 100*time.Millisecond {
		t.Fatalf("delete event arrived %v after the delete answered", lag)
	}
	resp, body = e.do("GET", "/api/files/"+id+"/download", nil, nil)
	errCode(t, resp, body, 404, "NOT_FOUND")
	resp, body = e.do("GET", "/api/files/"+id, nil, nil)
	errCode(t, resp, body, 404, "NOT_FOUND")
	_ = text
}

// TestEventsScriptEditResumeHeartbeat: a script's edit reaches the stream,
// Last-Event-ID replays what a client missed, heartbeats flow.
func TestEventsScriptEditResumeHeartbeat(t *testing.T) {
	e := start(t, opts{cfg: func(c *Config) { c.Heartbeat = 40 * time.Millisecond }})
	ev := e.events("", "")
	res := e.json("POST", "/api/run", map[string]any{"code": `await files.create("todo.md", {content: "- a\n"}); return 1`, "session_id": "s1"}, 200)
	if res["ok"] != true {
		t.Fatalf("run %v", res)
	}
	created := ev.next(t, 2*time.Second)
	if created.typ != "file:created" || created.data["source_session_id"] != "s1" {
		t.Fatalf("created %+v", created)
	}
	e.json("POST", "/api/run", map[string]any{"code": `await files.insertLines("todo.md", 1, "- b"); return 2`}, 200)
	edited := time.Now()
	mod := ev.next(t, 2*time.Second)
	if mod.typ != "file:modified" || mod.data["name"] != "todo.md" || mod.data["size"].(float64) != 8 || mod.data["modified_on"] == nil {
		t.Fatalf("modified %+v", mod)
	}
	if lag := mod.at.Sub(edited); lag > 100*time.Millisecond {
		t.Fatalf("edit event arrived %v after the run answered", lag)
	}
	// Heartbeats.
	select {
	case <-ev.pings:
	case <-time.After(2 * time.Second):
		t.Fatal("no heartbeat")
	}
	// Disconnect, change things, reconnect with Last-Event-ID: replay.
	ev.close()
	e.json("POST", "/api/tools/file_write_text", map[string]any{"id": "todo.md", "content": "x"}, 200)
	e.json("POST", "/api/tools/file_delete", map[string]any{"id": "todo.md"}, 200)
	ev2 := e.events(mod.id, "")
	a, b := ev2.next(t, 2*time.Second), ev2.next(t, 2*time.Second)
	if a.typ != "file:modified" || b.typ != "file:deleted" || a.id <= mod.id {
		t.Fatalf("replay %+v %+v", a, b)
	}
	ev2.none(t, 100*time.Millisecond)
	// A malformed Last-Event-ID is a coded error.
	resp, body := e.do("GET", "/api/events", nil, map[string]string{"Last-Event-ID": "abc"})
	errCode(t, resp, body, 400, "VALIDATION_FAILED")
}

func TestUploadBadInput(t *testing.T) {
	const maxFile = 256 << 10
	e := start(t, opts{hostCfg: func(c *hostapi.Config) { c.MaxFileSize = maxFile; c.MaxWorkspaceSize = 600 << 10 }})
	post := func(body io.Reader, ct string, query string, length int64) (*http.Response, []byte) {
		req, _ := http.NewRequest("POST", e.url+"/api/files/upload"+query, body)
		req.Header.Set("Content-Type", ct)
		req.ContentLength = length
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, []byte(err.Error())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	cases := []struct {
		name, code string
		status     int
		body       func() (io.Reader, string)
	}{
		{"not multipart", "VALIDATION_FAILED", 400, func() (io.Reader, string) { return strings.NewReader("{}"), "application/json" }},
		{"no boundary", "VALIDATION_FAILED", 400, func() (io.Reader, string) { return strings.NewReader("x"), "multipart/form-data" }},
		{"malformed", "VALIDATION_FAILED", 400, func() (io.Reader, string) {
			return strings.NewReader("garbage without boundaries"), "multipart/form-data; boundary=XYZ"
		}},
		{"truncated", "VALIDATION_FAILED", 400, func() (io.Reader, string) {
			return strings.NewReader("--XYZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nhello, no closing boundary"), "multipart/form-data; boundary=XYZ"
		}},
		{"missing file part", "VALIDATION_FAILED", 400, func() (io.Reader, string) {
			return multipartBody(t, map[string]string{"name": "x.txt"}, "", nil)
		}},
		{"dot-dot", "VALIDATION_FAILED", 400, func() (io.Reader, string) { return multipartBody(t, nil, "../../etc/passwd", []byte("x")) }},
		{"dot-dot backslash", "VALIDATION_FAILED", 400, func() (io.Reader, string) { return multipartBody(t, nil, `..\\..\\boot.ini`, []byte("x")) }},
		{"control chars", "VALIDATION_FAILED", 400, func() (io.Reader, string) { return multipartBody(t, nil, "a\x01b.txt", []byte("x")) }},
		{"name field dot-dot", "VALIDATION_FAILED", 400, func() (io.Reader, string) {
			return multipartBody(t, map[string]string{"name": "../x.txt"}, "ok.txt", []byte("x"))
		}},
		{"empty filename", "VALIDATION_FAILED", 400, func() (io.Reader, string) { return multipartBody(t, nil, " ", []byte("x")) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, ct := c.body()
			resp, b := post(body, ct, "", -1)
			if resp == nil {
				t.Fatalf("request failed: %s", b)
			}
			errCode(t, resp, b, c.status, c.code)
		})
	}

	// Too large, announced by Content-Length: refused before reading.
	big := bytes.Repeat([]byte("a"), maxFile+uploadSlack+10)
	body, ct := multipartBody(t, nil, "big.txt", big)
	buf, _ := io.ReadAll(body)
	resp, b := post(bytes.NewReader(buf), ct, "", int64(len(buf)))
	errCode(t, resp, b, 413, "TOO_LARGE")

	// Too large, streamed without a length: stopped while streaming.
	body, ct = multipartBody(t, nil, "big2.txt", bytes.Repeat([]byte("b"), maxFile+1))
	resp, b = post(io.NopCloser(body), ct, "", -1)
	if resp != nil {
		errCode(t, resp, b, 413, "TOO_LARGE")
	} else {
		t.Logf("streamed too-large upload: the connection was cut (%s)", b)
	}

	// Quota: 600 KB workspace; two files of 256 KB fit, a third does not.
	for i := 0; i < 2; i++ {
		e.upload(fmt.Sprintf("f%d.bin", i), bytes.Repeat([]byte{byte(i)}, maxFile), "")
	}
	body, ct = multipartBody(t, nil, "f3.bin", bytes.Repeat([]byte("c"), maxFile))
	resp, b = post(io.NopCloser(body), ct, "", -1)
	errCode(t, resp, b, 507, "QUOTA_EXCEEDED")

	// Nothing of the refused uploads is stored, no temp file is left, the
	// quota was released: exactly what fits still fits.
	list := e.json("GET", "/api/files", nil, 200)["files"].([]any)
	if len(list) != 2 {
		t.Fatalf("stored %v", list)
	}
	if tmp := tempFiles(t, e.h.Config.DataDir); len(tmp) != 0 {
		t.Fatalf("temp files left: %v", tmp)
	}
	used, limit, _ := e.h.Store.Workspace("default").Usage()
	e.upload("fits.bin", bytes.Repeat([]byte("d"), int(limit-used)), "")

	// Existing name: 409 unless overwrite.
	body, ct = multipartBody(t, nil, "f0.bin", []byte("new"))
	resp, b = post(body, ct, "", -1)
	errCode(t, resp, b, 409, "ALREADY_EXISTS")
	// (An overwrite keeps the old body as the backup, which counts against
	// the quota: make room for it first.)
	e.json("DELETE", "/api/files/fits.bin", nil, 200)
	up := e.upload("f0.bin", []byte("new"), "?overwrite=true")
	if up["size"].(float64) != 3 {
		t.Fatalf("overwrite %v", up)
	}
	// A "name" field before the file part names the file.
	body, ct = multipartBody(t, map[string]string{"name": "dir/renamed.txt"}, "orig.txt", []byte("named"))
	resp, b = post(body, ct, "", -1)
	var out map[string]any
	json.Unmarshal(b, &out)
	if resp.StatusCode != 201 || out["name"] != "dir/renamed.txt" || out["mime_type"] != "text/plain" {
		t.Fatalf("named upload %d %s", resp.StatusCode, b)
	}
}

func TestConvert(t *testing.T) {
	e := start(t, opts{})
	md := "# Report\n\nSome **bold** text and a list:\n\n- one\n- two\n\n| k | v |\n|---|---|\n| a | 1 |\n"
	src := e.upload("report.md", []byte(md), "")
	res := e.json("POST", "/api/files/report.md/convert", map[string]any{"convert_type": "pdf"}, 201)
	if res["name"] != "report.pdf" || res["filename"] != "report.pdf" || res["source"] != "derived" || res["mime_type"] != "application/pdf" {
		t.Fatalf("convert pdf %v", res)
	}
	resp, err := http.Get(res["download_url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	pdf, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) || sha(pdf) != res["sha256"] {
		t.Fatalf("pdf download: %d %q", resp.StatusCode, pdf[:min(len(pdf), 10)])
	}
	if bin, err := execLookPath("pdftotext"); err == nil {
		text := runPdftotext(t, bin, pdf)
		for _, w := range []string{"Report", "Some bold text", "one", "two", "a", "1"} {
			if !strings.Contains(text, w) {
				t.Errorf("pdf text lacks %q: %s", w, text)
			}
		}
	} else {
		t.Log("pdftotext not installed; PDF text checked in server/convert when it is")
	}
	// Converting again replaces the earlier derived file.
	again := e.json("POST", "/api/files/"+src["id"].(string)+"/convert", map[string]any{"convert_type": "pdf"}, 201)
	if again["id"] != res["id"] {
		t.Fatalf("reconversion made a new file: %v vs %v", again["id"], res["id"])
	}
	docx := e.json("POST", "/api/files/report.md/convert", map[string]any{"convert_type": "docx"}, 201)
	if docx["name"] != "report.docx" || !strings.Contains(docx["mime_type"].(string), "wordprocessingml") {
		t.Fatalf("docx %v", docx)
	}
	raw := e.json("POST", "/api/files/report.md/convert", map[string]any{"convert_type": "md"}, 200)
	if raw["id"] != src["id"] || raw["filename"] != "report.md" {
		t.Fatalf("md %v", raw)
	}
	resp, err = http.Get(raw["download_url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != md {
		t.Fatalf("md download %q", b)
	}
	// An upload named like the output is not overwritten silently.
	e.upload("notes.md", []byte("# n"), "")
	e.upload("notes.pdf", []byte("%PDF-1.4 user file"), "")
	r2, b2 := e.do("POST", "/api/files/notes.md/convert", strings.NewReader(`{"convert_type":"pdf"}`), nil)
	errCode(t, r2, b2, 409, "ALREADY_EXISTS")
	// Bad input.
	r2, b2 = e.do("POST", "/api/files/report.md/convert", strings.NewReader(`{"convert_type":"html"}`), nil)
	errCode(t, r2, b2, 400, "VALIDATION_FAILED")
	r2, b2 = e.do("POST", "/api/files/report.md/convert", strings.NewReader(`{"convert_type":`), nil)
	errCode(t, r2, b2, 400, "VALIDATION_FAILED")
	r2, b2 = e.do("POST", "/api/files/report.pdf/convert", strings.NewReader(`{"convert_type":"docx"}`), nil)
	errCode(t, r2, b2, 415, "UNSUPPORTED_FORMAT")
	r2, b2 = e.do("POST", "/api/files/missing.md/convert", strings.NewReader(`{"convert_type":"pdf"}`), nil)
	errCode(t, r2, b2, 404, "NOT_FOUND")
}

func TestSignedURLs(t *testing.T) {
	e := start(t, opts{cfg: func(c *Config) { c.Tokens = []Token{{Secret: "secret-a-123", Workspace: "a"}} }})
	f := e.upload("x.bin", []byte{0, 1, 2, 3}, "")
	g := e.upload("y.bin", []byte{9, 9}, "")
	c := e.json("GET", "/api/files/x.bin/content", nil, 200)
	u, _ := url.Parse(c["download_url"].(string))
	get := func(u string) (*http.Response, []byte) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, b := get(u.String()); resp.StatusCode != 200 || !bytes.Equal(b, []byte{0, 1, 2, 3}) {
		t.Fatalf("signed: %d", resp.StatusCode)
	}
	tamper := func(mut func(q url.Values, path *string)) string {
		v := *u
		q := v.Query()
		p := v.Path
		mut(q, &p)
		v.RawQuery, v.Path = q.Encode(), p
		return v.String()
	}
	for name, bad := range map[string]string{
		"other file": tamper(func(q url.Values, p *string) { *p = strings.Replace(*p, f["id"].(string), g["id"].(string), 1) }),
		"other ws":   tamper(func(q url.Values, p *string) { q.Set("ws", "b") }),
		"later": tamper(func(q url.Values, p *string) {
			q.Set("expires", strconv.FormatInt(time.Now().Add(48*time.Hour).Unix(), 10))
		}),
		"bad sig":   tamper(func(q url.Values, p *string) { q.Set("sig", "AAAA"+q.Get("sig")[4:]) }),
		"no expiry": tamper(func(q url.Values, p *string) { q.Del("expires") }),
		"by name":   tamper(func(q url.Values, p *string) { *p = "/api/files/x.bin/download" }),
	} {
		resp, b := get(bad)
		if resp.StatusCode != 401 || !strings.Contains(string(b), "UNAUTHORIZED") {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
	}
	// Expired: sign with a past expiry using the server's own key.
	past := time.Now().Add(-time.Minute).Unix()
	exp := fmt.Sprintf("%s/api/files/%s/download?ws=a&expires=%d&sig=%s", e.url, f["id"], past, e.srv.sign("a", f["id"].(string), past))
	resp, b := get(exp)
	if resp.StatusCode != 401 || !strings.Contains(string(b), "expired") {
		t.Fatalf("expired: %d %s", resp.StatusCode, b)
	}
	// The key survives a restart: a second server on the same data dir
	// accepts the URL.
	srv2, err := New(Config{Host: e.h, Tokens: []Token{{Secret: "secret-a-123", Workspace: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(srv2.secret, e.srv.secret) {
		t.Fatal("signing key changed across restarts")
	}
	st, _ := os.Stat(filepath.Join(e.h.Config.DataDir, "secret"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("secret mode %v", st.Mode())
	}
}

func TestContentDisposition(t *testing.T) {
	for name, want := range map[string]string{
		"report.pdf":           `attachment; filename="report.pdf"; filename*=UTF-8''report.pdf`,
		"dir/a \"b\";c.txt":    `attachment; filename="a _b__c.txt"; filename*=UTF-8''a%20%22b%22%3Bc.txt`,
		"báo-cáo.pdf":          `attachment; filename="b_o-c_o.pdf"; filename*=UTF-8''b%C3%A1o-c%C3%A1o.pdf`,
		"x\r\nSet-Cookie: a=b": `attachment; filename="x__Set-Cookie: a=b"; filename*=UTF-8''x%0D%0ASet-Cookie%3A%20a%3Db`,
	} {
		if got := contentDisposition("attachment", name); got != want {
			t.Errorf("%q: %s, want %s", name, got, want)
		}
	}
}
