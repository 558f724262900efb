package server

import (
	"bufio"
	"bytes"
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
	"time"
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

// UploadResult is POST /api/files/upload's answer (SPEC 9); ExpiresOn is
// set when the upload gave a ttl.
type UploadResult struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Size      int64      `json:"size"`
	MimeType  string     `json:"mime_type"`
	SHA256    string     `json:"sha256"`
	ExpiresOn *time.Time `json:"expires_on,omitempty"`
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

// uploadOptions are where an upload goes and how long it stays: from the
// query string and the form fields, in any order.
type uploadOptions struct {
	name, session         string
	overwrite             bool
	hasName, hasOverwrite bool
	// ttl, when positive, is the file's time to live (seed 003).
	ttl time.Duration
	// fromQuery: the query string gave name or overwrite, which settles
	// where the file goes before the form is read.
	fromQuery bool
}

// uploadFields are the options an upload reads from the query string or
// the form.
var uploadFields = []string{"name", "overwrite", "ttl", "session_id"}

func (o *uploadOptions) set(field, v string) error {
	switch field {
	case "name":
		o.name, o.hasName = v, true
	case "overwrite":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return apierr.New(apierr.ValidationFailed, "overwrite %q is not a boolean; send true or false", v)
		}
		o.overwrite, o.hasOverwrite = b, true
	case "ttl":
		ttl, err := parseTTL(v)
		if err != nil {
			return err
		}
		o.ttl = ttl
	case "session_id":
		o.session = v
	}
	return nil
}

// parseTTL reads an upload's ttl: whole seconds, 1 to a year (as
// files.create takes it).
func parseTTL(v string) (time.Duration, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 1 || n > files.MaxTTLSeconds {
		return 0, apierr.New(apierr.ValidationFailed, "ttl %q is not a time to live the server takes: give whole seconds from 1 to %d (a year), e.g. ttl=3600 for an hour", v, files.MaxTTLSeconds)
	}
	return time.Duration(n) * time.Second, nil
}

// handleUpload streams one multipart file part into the store. The body is
// never held in memory. Options (name, overwrite, ttl in seconds,
// session_id) come from the query string or from form fields, in any
// order; a field overrides the query. With ttl the file is deleted that
// long after the upload (the answer and the file's info say when:
// expires_on).
//
// When the query string (or the fields before the file) settle where the
// file goes, the part is copied straight into the store's body writer,
// which hashes, sniffs and enforces the size limit and the quota while
// bytes arrive; the fields after the file are read before the store
// commits, and one that would send the file elsewhere stops the upload.
// Otherwise (curl -F file=@x -F name=y) a field after the file part may
// still decide where it goes, so the part is spooled (1 MB in memory, the
// rest in an unlinked temporary file), the rest of the form is read, and
// the file is stored from the spool. Either way a failed upload leaves
// nothing behind.
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
	var opt uploadOptions
	q := r.URL.Query()
	opt.session = sessionOf(r)
	for _, k := range uploadFields {
		if q.Has(k) {
			if err := opt.set(k, q.Get(k)); err != nil {
				s.writeError(w, r, err)
				return
			}
			opt.fromQuery = opt.fromQuery || k == "name" || k == "overwrite"
		}
	}
	f, err := s.readUpload(r, mr, maxFile, &opt)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.ws(principalOf(r).Workspace).uploadBytes.Add(f.Size)
	res := UploadResult{ID: f.ID, Name: f.Name, Size: f.Size, MimeType: f.MimeType, SHA256: f.SHA256}
	if !f.ExpiresOn.IsZero() {
		t := f.ExpiresOn
		res.ExpiresOn = &t
	}
	writeJSON(w, http.StatusCreated, res)
}

// readUpload reads the form and stores its file part.
func (s *Server) readUpload(r *http.Request, mr *multipart.Reader, maxFile int64, opt *uploadOptions) (*store.File, error) {
	var spooled *spool
	var filename, hint string
	defer func() {
		if spooled != nil {
			spooled.Close()
		}
	}()
	var stored *store.File
	formDone := false // the whole form was read while the file streamed
	for !formDone {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, uploadReadError(err, maxFile)
		}
		fn, hasFile, err := partFilename(part)
		if err != nil {
			part.Close()
			return nil, err
		}
		if !hasFile {
			v, err := readField(part)
			part.Close()
			if err != nil {
				return nil, uploadReadError(err, maxFile)
			}
			if err := opt.set(part.FormName(), v); err != nil {
				return nil, err
			}
			continue
		}
		if filename != "" {
			part.Close()
			return nil, apierr.New(apierr.ValidationFailed, "the form has more than one file part; upload one file per request")
		}
		filename = fn
		hint = part.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(hint); err != nil || mt == "application/octet-stream" {
			hint = ""
		} else {
			hint = mt
		}
		if (opt.hasName && opt.hasOverwrite) || opt.fromQuery {
			// Settled: stream straight into the store. The rest of the form
			// is read when the part ends, before the store commits, and a
			// field there that would send the file elsewhere stops it.
			settled := *opt
			body := &uploadBody{r: part, max: maxFile, atEnd: func() error {
				err := trailingFields(mr, maxFile, settled)
				formDone = err == nil
				return err
			}}
			stored, err = s.storeUpload(r, filename, hint, opt, body)
			part.Close()
			if err != nil {
				return nil, err
			}
			continue
		}
		spooled, err = spoolPart(part, maxFile)
		part.Close()
		if err != nil {
			return nil, err
		}
	}
	switch {
	case stored != nil:
		return stored, nil
	case spooled == nil:
		return nil, apierr.New(apierr.ValidationFailed, "the multipart body has no file part; send the file in a part named \"file\" with a filename")
	}
	return s.storeUpload(r, filename, hint, opt, spooled)
}

func (s *Server) storeUpload(r *http.Request, filename, hint string, opt *uploadOptions, body io.Reader) (*store.File, error) {
	target := opt.name
	if target == "" {
		target = filename
	}
	return s.workspace(r).Create(s.actorCtx(r, opt.session), store.CreateOptions{Name: target, MimeType: hint, Source: store.SourceUpload,
		Overwrite: opt.overwrite, TTL: opt.ttl}, body)
}

// spool holds a file part while the rest of its form is read: in memory
// up to spoolMemory, then in a temporary file that Close removes.
type spool struct {
	mem  bytes.Buffer
	file *os.File
	rd   io.Reader
}

const spoolMemory = 1 << 20

func spoolPart(part io.Reader, maxFile int64) (*spool, error) {
	sp := &spool{}
	body := &uploadBody{r: part, max: maxFile}
	n, err := io.CopyN(&sp.mem, body, spoolMemory+1)
	if err == io.EOF {
		sp.rd = bytes.NewReader(sp.mem.Bytes())
		return sp, nil
	}
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "metaclaw-upload-*")
	if err != nil {
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot spool the upload to a temporary file; retry, or give name and overwrite before the file part")
	}
	sp.file = f
	// The file is removed at once: it lives only as long as it is open,
	// and a crash leaves nothing behind.
	os.Remove(f.Name())
	if _, err := f.Write(sp.mem.Bytes()); err != nil {
		sp.Close()
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "spooling the upload failed; retry")
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	rest, err := io.Copy(bw, io.LimitReader(body, maxFile-n+1))
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		sp.Close()
		return nil, uploadReadError(err, maxFile)
	}
	if n+rest > maxFile {
		sp.Close()
		return nil, apierr.New(apierr.TooLarge, "the upload is larger than the %d-byte per-file limit", maxFile)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		sp.Close()
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "spooling the upload failed; retry")
	}
	sp.mem = bytes.Buffer{}
	sp.rd = f
	return sp, nil
}

func (sp *spool) Read(p []byte) (int, error) { return sp.rd.Read(p) }

func (sp *spool) Close() {
	if sp.file != nil {
		sp.file.Close()
		sp.file = nil
	}
}

// uploadBody turns the errors of a request body being read into coded ones
// the store passes through.
type uploadBody struct {
	r   io.Reader
	max int64
	// atEnd, when set, runs once when the part ends, before EOF reaches
	// the store; an error it returns aborts the write.
	atEnd func() error
}

func (u *uploadBody) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	if err != nil && err != io.EOF {
		err = uploadReadError(err, u.max)
	}
	if err == io.EOF && u.atEnd != nil {
		check := u.atEnd
		u.atEnd = nil
		if cerr := check(); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}

// trailingFields reads the parts after a file that streams straight into
// the store: repeating an option, or giving session_id, is fine; a field
// that would change where the file goes, or a second file, stops the
// upload (nothing is stored).
func trailingFields(mr *multipart.Reader, maxFile int64, settled uploadOptions) error {
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return uploadReadError(err, maxFile)
		}
		_, hasFile, err := partFilename(part)
		if err != nil {
			part.Close()
			return err
		}
		if hasFile {
			part.Close()
			return apierr.New(apierr.ValidationFailed, "the form has more than one file part; upload one file per request")
		}
		v, err := readField(part)
		part.Close()
		if err != nil {
			return uploadReadError(err, maxFile)
		}
		after := settled
		if err := after.set(part.FormName(), v); err != nil {
			return err
		}
		if after.name != settled.name || after.overwrite != settled.overwrite || after.ttl != settled.ttl {
			return apierr.New(apierr.ValidationFailed,
				"the form field %q comes after the file but the query string (or the fields before the file) already said where the file goes and how long it stays; "+
					"give name, overwrite and ttl in the query, or as fields before the file, or as fields (in any order) without name and overwrite in the query; nothing was stored", part.FormName())
		}
	}
}

func uploadReadError(err error, maxFile int64) error {
	if e, ok := errors.AsType[*apierr.Error](err); ok {
		return e // the body's own coded error (a read deadline, say)
	}
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
		if !f.ExpiresOn.IsZero() {
			h.Set("X-File-Expires-On", f.ExpiresOn.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		}
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
	if rh := r.Header.Get("Range"); rh != "" {
		if err := checkRanges(rh, meta.Size); err != nil {
			h.Set("Content-Range", "bytes */"+strconv.FormatInt(meta.Size, 10))
			s.writeErrorStatus(w, r, err, http.StatusRequestedRangeNotSatisfiable)
			return
		}
	}
	// Serve the *os.File itself so that the body goes out with sendfile.
	rec, _ := w.(*recorder)
	var before int64
	if rec != nil {
		before = rec.bytes
	}
	http.ServeContent(w, r, "", meta.ModifiedOn, fh)
	if rec != nil {
		s.metrics.ws(p.Workspace).downloadBytes.Add(rec.bytes - before)
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
