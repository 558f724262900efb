package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// The page carries boot.js and the stylesheet inline: the style in the
// head, every script after the body's content (so that the first frame is
// drawn before any script runs); its CSP allows exactly that script and
// that style by hash and no other inline code; the assets it loads carry
// this build's version.
func TestIndexInlinesBootAndStyle(t *testing.T) {
	rec := httptest.NewRecorder()
	Index().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body := rec.Body.String()
	boot, style := mustRead("static/boot.js"), mustRead("static/style.css")
	scripts := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllStringSubmatch(body, -1)
	if len(scripts) != 1 || scripts[0][1] != string(boot) {
		t.Fatalf("want boot.js inline once, got %d inline scripts", len(scripts))
	}
	styles := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindAllStringSubmatch(body, -1)
	if len(styles) != 1 || styles[0][1] != string(style) {
		t.Fatalf("want style.css inline once, got %d inline styles", len(styles))
	}
	if strings.Contains(body, "/static/boot.js") || strings.Contains(body, "/static/style.css") {
		t.Error("the page still loads boot.js or style.css by URL")
	}
	head, rest, _ := strings.Cut(body, "</head>")
	if !strings.Contains(head, "<style>") || strings.Contains(head, "<script") || strings.Contains(head, "modulepreload") {
		t.Errorf("the head should hold the style and no script:\n%s", head)
	}
	if i, j := strings.Index(rest, `id="toast"`), strings.Index(rest, "<script"); i < 0 || j < i {
		t.Errorf("a script comes before the body's content (%d < %d)", j, i)
	}
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self' " + cspHash(string(boot)) + ";", "style-src 'self' " + cspHash(string(style)) + ";"} {
		if !strings.Contains(csp, want) || strings.Contains(csp, "unsafe-inline") {
			t.Fatalf("CSP %q, want %q", csp, want)
		}
	}
	if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(body)) {
		t.Errorf("Content-Length %q for %d bytes", cl, len(body))
	}
	// Gzipped for browsers that take it, the same page; 304 on a reload.
	zreq := httptest.NewRequest("GET", "/", nil)
	zreq.Header.Set("Accept-Encoding", "gzip, deflate, br")
	zrec := httptest.NewRecorder()
	Index().ServeHTTP(zrec, zreq)
	zr, err := gzip.NewReader(zrec.Body)
	if err != nil || zrec.Header().Get("Content-Encoding") != "gzip" || zrec.Header().Get("Content-Security-Policy") != rec.Header().Get("Content-Security-Policy") {
		t.Fatalf("gzip: %v, %q", err, zrec.Header().Get("Content-Encoding"))
	}
	if plain, _ := io.ReadAll(zr); string(plain) != body {
		t.Fatal("the gzipped page differs from the plain one")
	}
	again := httptest.NewRequest("GET", "/", nil)
	again.Header.Set("If-None-Match", rec.Header().Get("ETag"))
	arec := httptest.NewRecorder()
	Index().ServeHTTP(arec, again)
	if arec.Code != 304 || arec.Body.Len() != 0 || arec.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("reload: %d, %d bytes, Cache-Control %q", arec.Code, arec.Body.Len(), arec.Header().Get("Cache-Control"))
	}
	app := `<script type="module" src="/static/app.js?v=` + version() + `"></script>`
	if !strings.Contains(body, app) || !strings.Contains(body, `href="/static/api.js?v=`+version()+`"`) {
		t.Fatalf("the page does not load versioned modules:\n%s", body)
	}
}

// Assets: the strict CSP, imports versioned like the page's URLs, kept for
// good under this build's version and revalidated (ETag, 304) otherwise,
// gzipped for clients that take it; index.html and unknown names are 404.
func TestStatic(t *testing.T) {
	get := func(url string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", url, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		Static().ServeHTTP(rec, req)
		return rec
	}
	rec := get("/static/app.js?v=" + version())
	if rec.Code != 200 || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self';") {
		t.Fatalf("asset: %d, CSP %q", rec.Code, rec.Header().Get("Content-Security-Policy"))
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
		t.Errorf("versioned asset Cache-Control %q", cc)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("Content-Type %q", ct)
	}
	js := rec.Body.String()
	if !strings.Contains(js, `from "./api.js?v=`+version()+`"`) || !strings.Contains(js, `import("./viewer.js?v=`+version()+`")`) {
		t.Errorf("app.js imports are not versioned")
	}
	if strings.Contains(js, `"./api.js"`) {
		t.Errorf("an unversioned import is left")
	}
	etag := rec.Header().Get("ETag")
	if len(etag) < 10 {
		t.Fatalf("ETag %q", etag)
	}
	for _, v := range []string{"", "?v=old"} {
		if cc := get("/static/app.js" + v).Header().Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("unversioned %q: Cache-Control %q", v, cc)
		}
	}
	if rec := get("/static/app.js", "If-None-Match", etag); rec.Code != 304 || rec.Body.Len() != 0 {
		t.Errorf("If-None-Match: %d, %d bytes", rec.Code, rec.Body.Len())
	}
	zrec := get("/static/app.js", "Accept-Encoding", "br, gzip")
	if zrec.Header().Get("Content-Encoding") != "gzip" || zrec.Header().Get("ETag") == etag || zrec.Body.Len() >= len(js)/2 {
		t.Fatalf("gzip: %q, ETag %q, %d bytes", zrec.Header().Get("Content-Encoding"), zrec.Header().Get("ETag"), zrec.Body.Len())
	}
	zr, err := gzip.NewReader(bytes.NewReader(zrec.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if string(plain) != js {
		t.Fatal("the gzipped asset differs from the plain one")
	}
	if rec := get("/static/app.js", "Accept-Encoding", "gzip;q=0"); rec.Header().Get("Content-Encoding") != "" {
		t.Error("gzip sent to a client that refuses it")
	}
	if rec := get("/static/style.css"); rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/css") || rec.Body.String() != string(mustRead("static/style.css")) {
		t.Errorf("style.css: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	for _, p := range []string{"/static/index.html", "/static/nope.js", "/static/.hidden"} {
		if rec := get(p); rec.Code != 404 {
			t.Errorf("%s: %d", p, rec.Code)
		}
	}
}
