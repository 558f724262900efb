// Package web is the workspace page served at GET /: plain HTML, CSS and
// JavaScript modules embedded in the binary (no build step, no library,
// nothing fetched at run time). It lists the workspace's files live from
// the SSE stream; uploads by drop or picker and asks before replacing a
// file; views every format the host handles (markdown rendered on the
// server, text and code with line numbers, CSV and xlsx as paged grids,
// images, PDF pages rendered on the server, JSON); runs scripts; shows the
// live run feed and carries out the results meant for the client (saving a
// file to the user's disk); and says how to connect an agent.
//
// The browser tests are in e2e/ (Playwright driving Debian's Chromium).
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

//go:embed static
var files embed.FS

// bootTag is where index.html loads boot.js, and styleTag its stylesheet;
// the served page has both inline there instead.
const (
	bootTag  = `<script src="/static/boot.js" async></script>`
	styleTag = `<link rel="stylesheet" href="/static/style.css">`
)

// page is index.html as served:
//   - the stylesheet inline in the head, so that nothing but the HTML stands
//     between the response and the first paint;
//   - boot.js inline after the body's content, so that the workspace's
//     first request (GET /api/history) leaves while the modules are still
//     loading (as a separate async script it left only after its own round
//     trip). No script comes before the body's content: in the head, the
//     script (and the module preloads compiled as they were found) held the
//     parser up until its first yield, so that the first frame was drawn
//     empty and the first contentful one waited for the modules and the
//     workspace's answer (FCP ~100 ms later on this machine);
//   - the assets' URLs versioned (see bundle);
//   - the CSP allowing exactly those inline script and style, by hash.
var page = sync.OnceValues(func() (body []byte, csp string) {
	index := mustRead("static/index.html")
	boot, style := mustRead("static/boot.js"), mustRead("static/style.css")
	if !bytes.Contains(index, []byte(bootTag)) || !bytes.Contains(index, []byte(styleTag)) {
		panic("web: index.html does not load static/boot.js as " + bootTag + " and static/style.css as " + styleTag)
	}
	body = bytes.Replace(index, []byte(bootTag), wrap("<script>", boot, "</script>"), 1)
	body = bytes.Replace(body, []byte(styleTag), wrap("<style>", style, "</style>"), 1)
	body = versioned(body, "/static/")
	return body, pageCSP(hashSource(boot), hashSource(style))
})

func mustRead(name string) []byte {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("web: " + name + " is not embedded")
	}
	return b
}

func wrap(open string, body []byte, end string) []byte {
	return append(append([]byte(open), body...), end...)
}

func hashSource(b []byte) string {
	sum := sha256.Sum256(b)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// version names this build's assets: a hash of all of them. Every URL of an
// asset in the page and in the modules' imports carries it (?v=…), so a
// browser may keep them for good (immutable) and a new build is fetched
// anew.
var version = sync.OnceValue(func() string {
	h := sha256.New()
	fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := files.ReadFile(p)
			h.Write([]byte(p))
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
})

// assetRef finds the page's and the modules' references to an asset:
// "/static/app.js" in the HTML, "./api.js" in an import.
var assetRef = regexp.MustCompile(`"(/static/|\./)([a-z0-9_-]+\.(?:js|css))"`)

// versioned adds ?v=version to the asset references in b; prefix is the
// kind of reference to rewrite ("/static/" in the page, "./" in modules).
func versioned(b []byte, prefix string) []byte {
	return assetRef.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := assetRef.FindSubmatch(m)
		if string(sub[1]) != prefix {
			return m
		}
		return []byte(`"` + prefix + string(sub[2]) + "?v=" + version() + `"`)
	})
}

// asset is one embedded file as served: its bytes (imports versioned), a
// gzip copy made once when that is smaller, and a strong ETag.
type asset struct {
	body, gz    []byte
	etag, ctype string
}

var assets = sync.OnceValue(func() map[string]*asset {
	out := map[string]*asset{}
	entries, _ := files.ReadDir("static")
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "index.html" || strings.HasPrefix(name, ".") {
			continue
		}
		b := mustRead("static/" + name)
		if path.Ext(name) == ".js" {
			b = versioned(b, "./")
		}
		ctype := mime.TypeByExtension(path.Ext(name))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		out[name] = newAsset(b, ctype)
	}
	return out
})

// pageAsset is the page as served, gzipped once like the assets.
var pageAsset = sync.OnceValue(func() *asset {
	body, _ := page()
	return newAsset(body, "text/html; charset=utf-8")
})

func newAsset(b []byte, ctype string) *asset {
	sum := sha256.Sum256(b)
	a := &asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ctype}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	if gz.Len() < len(b)*9/10 {
		a.gz = gz.Bytes()
	}
	return a
}

// serve writes a: gzipped for clients that take it, 304 when the client's
// copy is current, in one write with its length.
func (a *asset) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Vary", "Accept-Encoding")
	body, etag := a.body, a.etag
	if a.gz != nil && acceptsGzip(r) {
		body, etag = a.gz, a.etag[:len(a.etag)-1]+`-gz"`
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, etag) {
		h.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", a.ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

// Index serves the page: revalidated on every load (its asset URLs name
// this build), gzipped for browsers that take it (21 KB → 6 KB), in one
// write.
func Index() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, csp := page()
		setHeaders(w)
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Cache-Control", "no-cache")
		pageAsset().serve(w, r)
	})
}

// Static serves the page's assets under /static/: gzipped for browsers that
// take it, kept for good when asked for by this build's version (the page's
// URLs), revalidated by ETag otherwise.
func Static() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := assets()[path.Base(r.URL.Path)]
		if a == nil {
			http.NotFound(w, r)
			return
		}
		setHeaders(w)
		if r.URL.Query().Get("v") == version() {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		a.serve(w, r)
	})
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

func setHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", pageCSP("", ""))
}

// pageCSP is the page's content security policy; script and style name the
// one inline script and stylesheet allowed (by hash), if any.
func pageCSP(script, style string) string {
	src := func(inline string) string {
		if inline == "" {
			return "'self'"
		}
		return "'self' " + inline
	}
	return "default-src 'self'; img-src 'self' blob: data:; style-src " + src(style) + "; script-src " + src(script) +
		"; connect-src 'self'; frame-ancestors 'none'"
}
