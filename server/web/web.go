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
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var files embed.FS

// Index serves the page.
func Index() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := files.ReadFile("static/index.html")
		if err != nil {
			http.Error(w, "page missing", http.StatusInternalServerError)
			return
		}
		setHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(b)
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
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
}
