package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/files"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// uploadSlack is what a multipart body may carry beyond the file itself
// (boundaries, part headers, small fields).
const uploadSlack = 1 << 20

// UploadResult is POST /api/files/upload's answer (SPEC 9).
type UploadResult struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	MimeType string `json:"mime_type"`
	SHA256   string `json:"sha256"`
}

func asMaxBytes(err error, target **http.MaxBytesError) bool { return errors.As(err, target) }

// sessionOf is the provenance session of a request: X-Session-Id, or "http".
func sessionOf(r *http.Request) string {
	if s := strings.TrimSpace(r.Header.Get("X-Session-Id")); s != "" && len(s) <= 200 && utf8.ValidString(s) {
		return s
	}
	return "http"
}

func (s *Server) actorCtx(r *http.Request, session string) context.Context {
	return store.WithActor(r.Context(), store.Actor{Session: session})
}

func (s *Server) workspace(r *http.Request) *store.Workspace {
	return s.h.Store.Workspace(principalOf(r).Workspace)
}

// handleUpload streams one multipart file part into the store. The body is
// never held in memory: the part is copied straight into the store's body
// writer, which hashes, sniffs and enforces the size limit and the quota
// while bytes arrive; on failure the partial body is removed and its quota
// released. Fields "name", "overwrite" and "session_id" may precede the file
// part (or be given as query parameters).
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	maxFile, _ := s.h.Store.Limits()
	limit := maxFile + uploadSlack
	if r.ContentLength > limit {
		s.writeError(w, r, apierr.New(apierr.TooLarge, "the upload is %d bytes; files may be at most %d bytes", r.ContentLength, maxFile))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	mr, err := r.MultipartReader()
	if err != nil {
		s.writeError(w, r, apierr.New(apierr.ValidationFailed, "send the file as multipart/form-data with a part named \"file\" (%v)", err))
		return
	}
	q := r.URL.Query()
	name := q.Get("name")
	overwrite, _ := strconv.ParseBool(q.Get("overwrite"))
	session := sessionOf(r)
	if v := q.Get("session_id"); v != "" {
		session = v
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			s.writeError(w, r, apierr.New(apierr.ValidationFailed, "the multipart body has no file part; send the file in a part named \"file\" with a filename"))
			return
		}
		if err != nil {
			s.writeError(w, r, uploadReadError(err, maxFile))
			return
		}
		filename, hasFile, err := partFilename(part)
		if err != nil {
			part.Close()
			s.writeError(w, r, err)
			return
		}
		if !hasFile {
			v, err := readField(part)
			part.Close()
			if err != nil {
				s.writeError(w, r, uploadReadError(err, maxFile))
				return
			}
			switch part.FormName() {
			case "name":
				name = v
			case "overwrite":
				overwrite, _ = strconv.ParseBool(v)
			case "session_id":
				session = v
			}
			continue
		}
		target := name
		if target == "" {
			target = filename
		}
		hint := part.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(hint); err != nil || mt == "application/octet-stream" {
			hint = ""
		} else {
			hint = mt
		}
		ctx := s.actorCtx(r, session)
		f, err := s.workspace(r).Create(ctx, store.CreateOptions{Name: target, MimeType: hint, Source: store.SourceUpload, Overwrite: overwrite},
			&uploadBody{r: part, max: maxFile})
		part.Close()
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.metrics.uploadBytes.Add(f.Size)
		writeJSON(w, http.StatusCreated, UploadResult{ID: f.ID, Name: f.Name, Size: f.Size, MimeType: f.MimeType, SHA256: f.SHA256})
		return
	}
}

// uploadBody turns the errors of a request body being read into coded ones
// the store passes through.
type uploadBody struct {
	r   io.Reader
	max int64
}

func (u *uploadBody) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	if err != nil && err != io.EOF {
		err = uploadReadError(err, u.max)
	}
	return n, err
}

func uploadReadError(err error, maxFile int64) error {
	var mbe *http.MaxBytesError
	if asMaxBytes(err, &mbe) {
		return apierr.New(apierr.TooLarge, "the upload is larger than the %d-byte per-file limit", maxFile)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return apierr.New(apierr.ValidationFailed, "the multipart body ended before its closing boundary (truncated upload); nothing was stored")
	}
	return apierr.New(apierr.ValidationFailed, "malformed multipart body: %v; nothing was stored", err)
}

// readField reads a small non-file form field.
func readField(p *multipart.Part) (string, error) {
	b, err := io.ReadAll(io.LimitReader(p, 4097))
	if err != nil {
		return "", err
	}
	if len(b) > 4096 {
		return "", apierr.New(apierr.ValidationFailed, "form field %q is longer than 4096 bytes", p.FormName())
	}
	return string(b), nil
}

// partFilename is the filename a part declares, checked without the
// silent base-name cleaning of multipart.Part.FileName: a name that tries to
// climb out ("../x") or carries control characters is refused, not
// rewritten.
func partFilename(p *multipart.Part) (string, bool, error) {
	cd := p.Header.Get("Content-Disposition")
	if cd == "" {
		return "", false, apierr.New(apierr.ValidationFailed, "a multipart part has no Content-Disposition header")
	}
	disp, params, err := mime.ParseMediaType(cd)
	if err != nil || disp != "form-data" {
		return "", false, apierr.New(apierr.ValidationFailed, "a multipart part has a malformed Content-Disposition header (%q)", cd)
	}
	fn, ok := params["filename"]
	if !ok {
		return "", false, nil
	}
	if err := checkUploadName(fn); err != nil {
		return "", true, err
	}
	return fn, true, nil
}

func checkUploadName(fn string) error {
	if strings.TrimSpace(fn) == "" {
		return apierr.New(apierr.ValidationFailed, "the file part has an empty filename; give it a name or send a \"name\" field first")
	}
	if !utf8.ValidString(fn) {
		return apierr.New(apierr.ValidationFailed, "the filename is not valid UTF-8")
	}
	for _, r := range fn {
		if unicode.IsControl(r) {
			return apierr.New(apierr.ValidationFailed, "the filename %q contains control characters; nothing was stored", fn)
		}
	}
	for _, seg := range strings.FieldsFunc(fn, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." || seg == "." {
			return apierr.New(apierr.ValidationFailed, "the filename %q contains \"..\" or \".\" path segments; nothing was stored", fn)
		}
	}
	if strings.Contains(fn, `\`) {
		return apierr.New(apierr.ValidationFailed, "the filename %q contains a backslash; use \"/\" between folders", fn)
	}
	return nil
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	list, err := s.workspace(r).List(r.Context(), r.URL.Query().Get("pattern"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]files.Summary, len(list))
	for i, f := range list {
		out[i] = files.Summary{ID: f.ID, Name: f.Name, Size: f.Size, MimeType: f.MimeType, ModifiedOn: f.ModifiedOn}
	}
	writeJSON(w, http.StatusOK, hostapi.Project(map[string]any{"files": out, "workspace": principalOf(r).Workspace}, hostapi.SnakeCase))
}

// handleInfo answers a file's metadata (GET) or the same in headers (HEAD).
func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	ref, err := refVar(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f, err := s.workspace(r).Resolve(r.Context(), ref)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.Method == http.MethodHead {
		h := w.Header()
		h.Set("ETag", `"`+f.SHA256+`"`)
		h.Set("Last-Modified", f.ModifiedOn.UTC().Format(http.TimeFormat))
		h.Set("X-File-Id", f.ID)
		h.Set("X-File-Name", url.PathEscape(f.Name))
		h.Set("X-File-Size", strconv.FormatInt(f.Size, 10))
		h.Set("X-File-Mime-Type", f.MimeType)
		h.Set("X-File-Sha256", f.SHA256)
		h.Set("X-File-Source", f.Source)
		h.Set("X-File-Icon-Type", f.IconType())
		h.Set("X-File-Has-Backup", strconv.FormatBool(f.HasBackup))
		h.Set("X-File-Created-On", f.CreatedOn.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		h.Set("X-File-Modified-On", f.ModifiedOn.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		w.WriteHeader(http.StatusOK)
		return
	}
	writeJSON(w, http.StatusOK, hostapi.Project(files.NewInfo(f), hostapi.SnakeCase))
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	ref, err := refVar(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.workspace(r).Delete(s.actorCtx(r, sessionOf(r)), ref); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": true})
}

// handleDownload streams a file's body with Range, ETag (its sha256) and a
// safe Content-Disposition. It takes a bearer token or a signed URL.
func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) {
	ref, err := refVar(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var p principal
	if r.URL.Query().Has("sig") {
		p, err = s.verifySigned(r, ref)
	} else {
		p, err = s.authenticate(r)
	}
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="metaclaw"`)
		s.writeError(w, r, err)
		return
	}
	info(r).workspace, info(r).token = p.Workspace, p.TokenID
	ws := s.h.Store.Workspace(p.Workspace)
	// Bodies are immutable once committed (every write makes a new body), so
	// the open descriptor stays valid after the read lock is released: a slow
	// client never holds a writer up.
	var fh *os.File
	var meta *store.File
	err = ws.View(r.Context(), ref, func(f *store.File, path string) error {
		if p.Signed && f.ID != strings.ToLower(ref) {
			return apierr.New(apierr.NotFound, "file %q not found", ref)
		}
		var oerr error
		fh, oerr = os.Open(path)
		if oerr != nil {
			return apierr.Wrap(apierr.FileReadFailed, oerr, "cannot open %q: %v; run `metaclaw fsck`", f.Name, oerr)
		}
		meta = f
		return nil
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer fh.Close()
	h := w.Header()
	h.Set("ETag", `"`+meta.SHA256+`"`)
	h.Set("Content-Type", meta.MimeType)
	h.Set("Content-Disposition", contentDisposition("attachment", meta.Name))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-cache")
	h.Set("X-File-Id", meta.ID)
	// Serve the *os.File itself so that the body goes out with sendfile.
	rec, _ := w.(*recorder)
	var before int64
	if rec != nil {
		before = rec.bytes
	}
	http.ServeContent(w, r, "", meta.ModifiedOn, fh)
	if rec != nil {
		s.metrics.downloadBytes.Add(rec.bytes - before)
	}
}

// contentDisposition builds a header that cannot be broken by the name: an
// ASCII fallback with unsafe characters replaced, and the exact UTF-8 name
// in filename* (RFC 6266).
func contentDisposition(kind, name string) string {
	base := name
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	var b strings.Builder
	for _, r := range base {
		switch {
		case r < 0x20 || r == 0x7f || r >= 0x80 || r == '"' || r == '\\' || r == ';' || r == '%':
			b.WriteByte('_')
		default:
			b.WriteRune(r)
		}
	}
	ascii := strings.TrimSpace(b.String())
	if ascii == "" {
		ascii = "download"
	}
	return fmt.Sprintf(`%s; filename="%s"; filename*=UTF-8''%s`, kind, ascii, rfc5987(base))
}

// rfc5987 percent-encodes s for an ext-value, keeping only attr-chars.
func rfc5987(s string) string {
	const keep = "!#$&+-.^_`|~"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
