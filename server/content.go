package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/textenc"
	"github.com/metaclaw/metaclaw/server/convert"
)

// ContentResult is seed 002's file-content answer: text inline, anything
// else as a signed download URL valid for SignedURLTTL.
type ContentResult struct {
	Content     *string `json:"content"`
	Filename    string  `json:"filename"`
	FilePath    string  `json:"file_path"`
	DownloadURL *string `json:"download_url"`
	ExpiresAt   *string `json:"expires_at,omitempty"`
	ID          string  `json:"id"`
	MimeType    string  `json:"mime_type"`
	Size        int64   `json:"size"`
	IconType    string  `json:"icon_type"`
	// Encoding is the character encoding the inline text was decoded from
	// ("utf-8", "utf-8-bom", "utf-16le", "windows-1252", …).
	Encoding string `json:"encoding,omitempty"`
}

// isTextMIME reports whether a file of this type is shown inline.
func isTextMIME(m string) bool {
	if strings.HasPrefix(m, "text/") {
		return true
	}
	switch m {
	case "application/json", "application/javascript", "application/xml", "application/x-ndjson",
		"application/x-yaml", "application/yaml", "application/toml", "application/x-sh", "application/sql":
		return true
	}
	return false
}

func (s *Server) handleContent(w http.ResponseWriter, r *http.Request) {
	ref, err := refVar(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p := principalOf(r)
	ws := s.workspace(r)
	f, err := ws.Resolve(r.Context(), ref)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := ContentResult{Filename: path.Base(f.Name), FilePath: "/" + f.Name, ID: f.ID, MimeType: f.MimeType, Size: f.Size, IconType: f.IconType()}
	if f.Size <= s.cfg.InlineTextLimit && (isTextMIME(f.MimeType) || f.MimeType == "application/octet-stream") {
		text, enc, ok, err := s.inlineText(r, ws, f)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if ok {
			out.Content, out.Encoding = &text, enc
			writeJSON(w, http.StatusOK, out)
			return
		}
	}
	u, exp := s.signedURL(r, p.Workspace, f.ID)
	e := exp.UTC().Format(time.RFC3339)
	out.DownloadURL, out.ExpiresAt = &u, &e
	writeJSON(w, http.StatusOK, out)
}

// inlineText reads a small text file as UTF-8, whatever its encoding
// (UTF-8 with or without a byte order mark, UTF-16, Windows-1252 and the
// other legacy encodings textenc knows). ok is false for content that is
// not text, which the caller sends as a download URL instead. A file of
// unknown type is shown only when its encoding is certain (a byte order
// mark, UTF-16's pattern, valid UTF-8): a legacy guess on binary bytes
// would be noise.
func (s *Server) inlineText(r *http.Request, ws *store.Workspace, f *store.File) (text, encoding string, ok bool, err error) {
	rd, err := ws.Open(r.Context(), f.ID)
	if err != nil {
		return "", "", false, err
	}
	b, err := io.ReadAll(io.LimitReader(rd, s.cfg.InlineTextLimit+1))
	rd.Close()
	if err != nil {
		return "", "", false, apierr.Wrap(apierr.FileReadFailed, err, "reading %q failed: %v", f.Name, err)
	}
	if int64(len(b)) > s.cfg.InlineTextLimit {
		return "", "", false, nil
	}
	enc, err := textenc.DetectBytes(b)
	if err != nil {
		return "", "", false, nil // binary
	}
	if !isTextMIME(f.MimeType) && enc.Confidence < 0.9 {
		return "", "", false, nil
	}
	text, err = enc.Decode(b)
	if err != nil {
		return "", "", false, nil
	}
	return text, enc.String(), true, nil
}

// convertRequest is POST /api/files/{ref}/convert's body (seed 002).
type convertRequest struct {
	ConvertType string `json:"convert_type"`
	// Output names the new file (default: the source name with the new
	// extension). Overwrite replaces an existing file of that name; an
	// earlier conversion (a derived file) is replaced without it.
	Output    string `json:"output"`
	Overwrite bool   `json:"overwrite"`
}

// ConvertResult is the convert answer: seed 002's {download_url, filename}
// plus the new file's metadata.
type ConvertResult struct {
	DownloadURL string `json:"download_url"`
	Filename    string `json:"filename"`
	ExpiresAt   string `json:"expires_at"`
	ID          string `json:"id"`
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	MimeType    string `json:"mime_type"`
	SHA256      string `json:"sha256"`
	Source      string `json:"source"`
}

// maxConvertInput bounds the markdown a conversion reads into memory.
const maxConvertInput = convert.DefaultMaxInput

func isMarkdownLike(f *store.File) bool {
	switch strings.ToLower(path.Ext(f.Name)) {
	case ".md", ".markdown", ".mdown", ".mkd", ".txt", ".text":
		return true
	}
	return f.MimeType == "text/markdown" || f.MimeType == "text/x-markdown"
}

func (s *Server) handleConvert(w http.ResponseWriter, r *http.Request) {
	ref, err := refVar(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req convertRequest
	if err := decodeJSON(w, r, 64<<10, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	ct := strings.ToLower(strings.TrimSpace(req.ConvertType))
	if ct != "pdf" && ct != "docx" && ct != "md" {
		s.writeError(w, r, apierr.New(apierr.ValidationFailed, "convert_type %q is not supported; use \"pdf\", \"docx\" or \"md\"", req.ConvertType))
		return
	}
	p := principalOf(r)
	ws := s.workspace(r)
	src, err := ws.Resolve(r.Context(), ref)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !isMarkdownLike(src) {
		s.writeError(w, r, apierr.New(apierr.UnsupportedFormat, "%q is %s; only markdown (.md) files can be converted", src.Name, src.MimeType))
		return
	}
	if ct == "md" {
		u, exp := s.signedURL(r, p.Workspace, src.ID)
		writeJSON(w, http.StatusOK, ConvertResult{DownloadURL: u, Filename: path.Base(src.Name), ExpiresAt: exp.UTC().Format(time.RFC3339),
			ID: src.ID, Name: src.Name, Size: src.Size, MimeType: src.MimeType, SHA256: src.SHA256, Source: src.Source})
		return
	}
	if src.Size > maxConvertInput {
		s.writeError(w, r, apierr.New(apierr.TooLarge, "%q is %d bytes; markdown conversion reads at most %d bytes", src.Name, src.Size, maxConvertInput))
		return
	}
	rd, err := ws.Open(r.Context(), src.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	md, err := io.ReadAll(io.LimitReader(rd, maxConvertInput+1))
	rd.Close()
	if err != nil {
		s.writeError(w, r, apierr.Wrap(apierr.FileReadFailed, err, "reading %q failed: %v", src.Name, err))
		return
	}
	if !utf8.Valid(md) {
		s.writeError(w, r, apierr.New(apierr.UnsupportedFormat, "%q is not UTF-8 text; only UTF-8 markdown can be converted", src.Name))
		return
	}
	outName := req.Output
	if outName == "" {
		outName = strings.TrimSuffix(src.Name, path.Ext(src.Name)) + "." + ct
	}
	outName, err = store.CleanName(outName)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	overwrite := req.Overwrite
	if existing, err := ws.Resolve(r.Context(), outName); err == nil {
		if existing.ID == src.ID {
			s.writeError(w, r, apierr.New(apierr.ValidationFailed, "the output %q is the source file itself; choose another output name", outName))
			return
		}
		if existing.Source == store.SourceDerived {
			overwrite = true
		}
	}
	// A conversion is CPU work like a run: it takes a run slot, has a
	// deadline, and stops when the client goes away (r.Context ends).
	release, ok := s.acquireRun()
	if !ok {
		s.writeError(w, r, apierr.New(apierr.Busy, "the server is busy with %d runs and conversions already; retry shortly", s.cfg.MaxConcurrentRuns))
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ConvertTimeout)
	defer cancel()
	title := strings.TrimSuffix(path.Base(src.Name), path.Ext(src.Name))
	opt := convert.Options{Title: title, MaxPages: s.cfg.ConvertMaxPages}
	var out []byte
	var mimeType string
	switch ct {
	case "pdf":
		out, err = convert.MarkdownToPDF(ctx, md, opt)
		mimeType = "application/pdf"
	case "docx":
		out, err = convert.MarkdownToDOCX(ctx, md, opt)
		mimeType = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	}
	if err != nil {
		e := apierr.Of(err)
		s.writeError(w, r, &apierr.Error{Code: e.Code, Message: fmt.Sprintf("converting %q to %s: %s", src.Name, ct, e.Message)})
		return
	}
	f, err := ws.Create(s.actorCtx(r, sessionOf(r)), store.CreateOptions{Name: outName, MimeType: mimeType, Source: store.SourceDerived, Overwrite: overwrite}, bytes.NewReader(out))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	u, exp := s.signedURL(r, p.Workspace, f.ID)
	writeJSON(w, http.StatusCreated, ConvertResult{DownloadURL: u, Filename: path.Base(f.Name), ExpiresAt: exp.UTC().Format(time.RFC3339),
		ID: f.ID, Name: f.Name, Size: f.Size, MimeType: f.MimeType, SHA256: f.SHA256, Source: f.Source})
}
