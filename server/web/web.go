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
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
)

//go:embed static
var files embed.FS

// bootTag is where index.html loads boot.js; the served page has the
// script inline there instead.
const bootTag = `<script src="/static/boot.js" async></script>`

// page is index.html as served: boot.js inline at the top of the head,
// so that the workspace's first request (GET /api/history) leaves while
// the stylesheet and the modules are still loading (as a separate async
// script it left only after its own round trip, and after first paint on
// a busy machine), and the page's CSP with that script's hash.
var page = sync.OnceValues(func() (body []byte, csp string) {
	index, err := files.ReadFile("static/index.html")
	if err != nil {
		panic("web: static/index.html is not embedded")
	}
	boot, err := files.ReadFile("static/boot.js")
	if err != nil || !bytes.Contains(index, []byte(bootTag)) {
		panic("web: index.html does not load static/boot.js as " + bootTag)
	}
	sum := sha256.Sum256(boot)
	body = bytes.Replace(index, []byte(bootTag), append(append([]byte("<script>"), boot...), "</script>"...), 1)
	return body, pageCSP("'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'")
})

// Index serves the page.
func Index() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, csp := page()
		setHeaders(w)
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(body)
	})
}

// Static serves the page's assets under /static/.
func Static() http.Handler {
	sub, _ := fs.Sub(files, "static")
	fsrv := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := path.Base(r.URL.Path)
		if name == "index.html" || strings.HasPrefix(name, ".") {
			http.NotFound(w, r)
			return
		}
		setHeaders(w)
		w.Header().Set("Cache-Control", "public, max-age=300")
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		fsrv.ServeHTTP(w, r2)
	})
}

func setHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", pageCSP(""))
}

// pageCSP is the page's content security policy; inline names the one
// inline script allowed (by its hash), if any.
func pageCSP(inline string) string {
	script := "'self'"
	if inline != "" {
		script += " " + inline
	}
	return "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src " + script + "; connect-src 'self'; frame-ancestors 'none'"
}
