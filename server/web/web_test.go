package web

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// The page carries boot.js inline, first in the head (before the
// stylesheet, which would hold an inline script back), and its CSP allows
// exactly that script by hash and no other inline script.
func TestIndexInlinesBoot(t *testing.T) {
	rec := httptest.NewRecorder()
	Index().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body := rec.Body.String()
	boot, err := files.ReadFile("static/boot.js")
	if err != nil {
		t.Fatal(err)
	}
	inline := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllStringSubmatch(body, -1)
	if len(inline) != 1 || inline[0][1] != string(boot) {
		t.Fatalf("want boot.js inline once, got %d inline scripts", len(inline))
	}
	if strings.Contains(body, "/static/boot.js") {
		t.Error("the page still loads boot.js by URL")
	}
	if i, j := strings.Index(body, "<script>"), strings.Index(body, `rel="stylesheet"`); i < 0 || j < 0 || i > j {
		t.Errorf("the inline script comes after the stylesheet (%d > %d)", i, j)
	}
	sum := sha256.Sum256([]byte(inline[0][1]))
	csp := rec.Header().Get("Content-Security-Policy")
	want := "script-src 'self' 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "';"
	if !strings.Contains(csp, want) || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("CSP %q, want %q", csp, want)
	}
	// Assets keep the strict policy.
	rec = httptest.NewRecorder()
	Static().ServeHTTP(rec, httptest.NewRequest("GET", "/static/app.js", nil))
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self';") || rec.Code != 200 {
		t.Fatalf("asset: %d, CSP %q", rec.Code, csp)
	}
}
