package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gorilla/mux"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/server/convert"
)

// The viewers' server side: markdown rendered to safe HTML, and PDF pages
// rendered to images by the registry's pdf_render_page (the same operation
// agents call), without adding files to the user's workspace.

// maxRenderMarkdown bounds the markdown GET …/html renders.
const maxRenderMarkdown = 4 << 20

// handleMarkdownHTML renders a markdown file as a sanitized HTML fragment.
func (s *Server) handleMarkdownHTML(w http.ResponseWriter, r *http.Request) {
	ref, err := refVar(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ws := s.workspace(r)
	rd, err := ws.Open(r.Context(), ref)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer rd.Close()
	f := rd.Meta
	if !isMarkdownLike(f) {
		s.writeError(w, r, apierr.New(apierr.UnsupportedFormat, "%q is %s; only markdown files render as HTML (GET /api/files/{ref}/content gives text)", f.Name, f.MimeType))
		return
	}
	if f.Size > maxRenderMarkdown {
		s.writeError(w, r, apierr.New(apierr.TooLarge, "%q is %d bytes; markdown renders up to %d bytes — read it as text instead", f.Name, f.Size, maxRenderMarkdown))
		return
	}
	src, err := io.ReadAll(io.LimitReader(rd, maxRenderMarkdown+1))
	if err != nil {
		s.writeError(w, r, apierr.Wrap(apierr.FileReadFailed, err, "reading %q failed: %v", f.Name, err))
		return
	}
	out, err := convert.MarkdownToHTML(r.Context(), src)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	// The fragment is inserted into the page; opened on its own it may not
	// run anything.
	h.Set("Content-Security-Policy", "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox")
	h.Set("Cache-Control", "private, no-cache")
	h.Set("ETag", `"`+f.SHA256+`"`)
	w.Write(out)
}

// previewWorkspace holds the copies of PDFs that pages are rendered from.
// Its name contains "/", which no token can name (ParseToken refuses it),
// so no client ever sees it.
const previewWorkspace = "metaclaw/previews"

// keepPreviewPDFs is how many PDF copies the preview workspace keeps, and
// keepPreviewPages how many rendered pages.
const (
	keepPreviewPDFs  = 16
	keepPreviewPages = 2000
)

// pages renders PDF pages for the viewer. The images are the rendering
// op's own output files in the preview workspace, named by the PDF's
// content hash, page and width: they are the cache.
type pages struct {
	s *Server

	mu       sync.Mutex
	inflight map[string]*pageCall
	copyMu   sync.Mutex
	renders  int
}

type pageCall struct {
	done chan struct{}
	err  error
}

func newPages(s *Server) *pages {
	return &pages{s: s, inflight: map[string]*pageCall{}}
}

// handlePDFPage answers page {page} of a PDF as a PNG, width pixels wide
// (?width=, 100–2400, default 1200).
func (s *Server) handlePDFPage(w http.ResponseWriter, r *http.Request) {
	ref, err := refVar(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := strconv.Atoi(mux.Vars(r)["page"])
	if err != nil || page < 1 {
		s.writeError(w, r, apierr.New(apierr.ValidationFailed, "page %q is not a page number (1, 2, …)", mux.Vars(r)["page"]))
		return
	}
	width := 1200
	if v := r.URL.Query().Get("width"); v != "" {
		width, err = strconv.Atoi(v)
		if err != nil || width < 100 || width > 2400 {
			s.writeError(w, r, apierr.New(apierr.ValidationFailed, "width %q must be a whole number of pixels from 100 to 2400", v))
			return
		}
	}
	f, err := s.workspace(r).Resolve(r.Context(), ref)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if f.MimeType != "application/pdf" {
		s.writeError(w, r, apierr.New(apierr.UnsupportedFormat, "%q is %s, not a PDF", f.Name, f.MimeType))
		return
	}
	if s.h.Registry.ByTool("pdf_render_page") == nil {
		s.writeError(w, r, apierr.New(apierr.UnsupportedFormat, "this host has no PDF engine (pdf_render_page is not registered)"))
		return
	}
	key := fmt.Sprintf("%s-p%d-w%d", f.SHA256, page, width)
	etag := `"` + key + `"`
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	scratch := s.h.Store.Workspace(previewWorkspace)
	rd, err := scratch.Open(r.Context(), key+".png")
	if apierr.Is(err, apierr.NotFound) {
		release, ok := s.acquireRun()
		if !ok {
			s.writeError(w, r, apierr.New(apierr.Busy, "the server is busy with %d runs already; retry shortly", s.cfg.MaxConcurrentRuns))
			return
		}
		err = s.pages.render(r.Context(), principalOf(r).Workspace, f, page, width, key)
		release()
		if err == nil {
			rd, err = scratch.Open(r.Context(), key+".png")
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer rd.Close()
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("Content-Length", strconv.FormatInt(rd.Meta.Size, 10))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, max-age=3600")
	h.Set("ETag", etag)
	io.Copy(w, rd)
}

// render makes the image key.png of f's page in the preview workspace; one
// render per key runs at a time, others wait for it.
func (p *pages) render(ctx context.Context, ws string, f *store.File, page, width int, key string) error {
	p.mu.Lock()
	if c := p.inflight[key]; c != nil {
		p.mu.Unlock()
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return apierr.From(ctx.Err())
		}
	}
	c := &pageCall{done: make(chan struct{})}
	p.inflight[key] = c
	p.renders++
	trim := p.renders%100 == 0
	p.mu.Unlock()
	// The render finishes even when this client leaves: others may wait
	// for it, and the image is kept.
	c.err = p.renderNow(context.WithoutCancel(ctx), ws, f, page, width, key)
	p.mu.Lock()
	delete(p.inflight, key)
	p.mu.Unlock()
	close(c.done)
	if trim {
		go p.trim(context.Background())
	}
	return c.err
}

func (p *pages) renderNow(ctx context.Context, ws string, f *store.File, page, width int, key string) error {
	scratch := p.s.h.Store.Workspace(previewWorkspace)
	src := f.SHA256 + ".pdf"
	if err := p.ensureCopy(ctx, ws, f, scratch, src); err != nil {
		return err
	}
	env := p.s.h.Env(previewWorkspace, "preview")
	_, err := p.s.h.Registry.CallTool(ctx, env, "pdf_render_page", map[string]any{"id": src, "page": page, "width": width, "format": "png", "output": key + ".png", "overwrite": true})
	if err != nil {
		// Messages name the copy; say the user's file instead.
		e := apierr.Of(err)
		msg := strings.ReplaceAll(e.Message, src, f.Name)
		if i := strings.Index(msg, "; example: "); i >= 0 {
			msg = msg[:i]
		}
		return &apierr.Error{Code: e.Code, Message: msg}
	}
	return nil
}

// ensureCopy puts f's body into the preview workspace as name, keeping
// only the most recently used copies.
func (p *pages) ensureCopy(ctx context.Context, ws string, f *store.File, scratch *store.Workspace, name string) error {
	p.copyMu.Lock()
	defer p.copyMu.Unlock()
	if _, err := scratch.Resolve(ctx, name); err == nil {
		return nil
	}
	rd, err := p.s.h.Store.Workspace(ws).Open(ctx, f.ID)
	if err != nil {
		return err
	}
	defer rd.Close()
	if _, err := scratch.Create(ctx, store.CreateOptions{Name: name, MimeType: "application/pdf", Source: store.SourceUpload, Overwrite: true}, rd); err != nil {
		return err
	}
	list, err := scratch.List(ctx, "*.pdf")
	if err != nil || len(list) <= keepPreviewPDFs {
		return nil
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ModifiedOn.After(list[j].ModifiedOn) })
	for _, old := range list[keepPreviewPDFs:] {
		if old.Name != name {
			scratch.Delete(ctx, old.ID)
		}
	}
	return nil
}

// trim removes the oldest rendered pages beyond keepPreviewPages.
func (p *pages) trim(ctx context.Context) {
	scratch := p.s.h.Store.Workspace(previewWorkspace)
	list, err := scratch.List(ctx, "*.png")
	if err != nil || len(list) <= keepPreviewPages {
		return
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ModifiedOn.Before(list[j].ModifiedOn) })
	for _, old := range list[:len(list)-keepPreviewPages*9/10] {
		scratch.Delete(ctx, old.ID)
	}
}
