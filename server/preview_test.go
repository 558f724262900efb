package server

import (
	"strings"
	"testing"
)

func TestMarkdownHTML(t *testing.T) {
	e := start(t, opts{})
	e.upload("notes.md", []byte("# Quarterly *plan*\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<script>alert(1)</script>\n<img src=x onerror=alert(1)>\n\n"+
		"[click](javascript:alert(1)) [ok](https://example.com/x)\n\n- [x] done\n"), "")
	resp, body := e.do("GET", "/api/files/notes.md/html", nil, nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("html: %d %v", resp.StatusCode, resp.Header)
	}
	html := string(body)
	for _, want := range []string{"<h1>Quarterly <em>plan</em></h1>", "<td>1</td>", `href="https://example.com/x"`, `type="checkbox"`, "raw HTML omitted"} {
		if !strings.Contains(html, want) {
			t.Errorf("missing %q in %s", want, html)
		}
	}
	for _, bad := range []string{"<script", "onerror", "javascript:"} {
		if strings.Contains(html, bad) {
			t.Errorf("unsafe %q kept in %s", bad, html)
		}
	}
	e.upload("data.bin", []byte{0, 1, 2, 3}, "")
	resp, body = e.do("GET", "/api/files/data.bin/html", nil, nil)
	errCode(t, resp, body, 415, "UNSUPPORTED_FORMAT")
	resp, body = e.do("GET", "/api/files/nope.md/html", nil, nil)
	errCode(t, resp, body, 404, "NOT_FOUND")
	// Nesting that the parser would take too long over is refused.
	e.upload("deep.md", []byte(strings.Repeat(">", 5000)+" x\n"), "")
	resp, body = e.do("GET", "/api/files/deep.md/html", nil, nil)
	errCode(t, resp, body, 415, "UNSUPPORTED_FORMAT")
}

// The page route refuses what it cannot render; rendering itself is tested
// with the PDF engine in web/e2e.
func TestPDFPageRefusals(t *testing.T) {
	e := start(t, opts{})
	e.upload("a.txt", []byte("hello"), "")
	e.upload("b.pdf", []byte("%PDF-1.4\n%%EOF\n"), "")
	for path, want := range map[string]string{
		"/api/files/a.txt/pages/1":             "UNSUPPORTED_FORMAT",
		"/api/files/b.pdf/pages/1":             "UNSUPPORTED_FORMAT", // no PDF engine in this host
		"/api/files/b.pdf/pages/0":             "VALIDATION_FAILED",
		"/api/files/b.pdf/pages/x":             "VALIDATION_FAILED",
		"/api/files/b.pdf/pages/1?width=50":    "VALIDATION_FAILED",
		"/api/files/b.pdf/pages/1?width=99999": "VALIDATION_FAILED",
		"/api/files/none.pdf/pages/1":          "NOT_FOUND",
	} {
		resp, body := e.do("GET", path, nil, nil)
		if !strings.Contains(string(body), `"`+want+`"`) {
			t.Errorf("%s: %d %s, want %s", path, resp.StatusCode, body, want)
		}
	}
}
