package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/server/client"
)

// remoteBackend is remote mode: with --server URL (and --token), the file,
// run and tool commands talk to a running `metaclaw serve`. It hands back
// the server's JSON answers as they are, so --json prints what the server
// says.
type remoteBackend struct {
	c       *client.Client
	session string
	// base and token are --server and --token, for the one request the
	// client has no call for (tools with a query).
	base, token string
}

func (g *globals) remote() (*remoteBackend, error) {
	c, err := client.New(g.server, g.token)
	if err != nil {
		return nil, err
	}
	c.Session = g.session
	if g.cfg != nil && g.cfg.Get("workspace").Source == config.FromFlag {
		fmt.Fprintf(stderr, "metaclaw: --workspace %q is ignored with --server: the token decides the workspace\n", g.workspace)
	}
	return &remoteBackend{c: c, session: g.session, base: g.server, token: g.token}, nil
}

func (r *remoteBackend) Close() error {
	r.c.HTTP.CloseIdleConnections()
	return nil
}

func (r *remoteBackend) Upload(ctx context.Context, body io.Reader, u upload) (map[string]any, error) {
	if u.TTL <= 0 {
		return r.c.Upload(ctx, body, client.UploadOptions{Name: u.Name, Filename: u.Filename, Overwrite: u.Overwrite, Size: u.Size})
	}
	res, err := r.uploadTTL(ctx, body, u)
	if err != nil {
		return nil, err
	}
	if exp, ok := res["expires_on"]; ok && exp != nil {
		return res, nil
	}
	// A server that does not know the ttl field stores the file for good:
	// say so rather than let a scratch file stay unnoticed.
	info, err := r.c.Info(ctx, fmt.Sprint(res["id"]))
	if err != nil {
		return nil, err
	}
	exp, ok := info["expires_on"]
	if !ok || exp == nil {
		return nil, apierr.New(apierr.UnsupportedFormat, "the server at %s stored %v but ignored --ttl (it is older than this CLI): "+
			"the file will not expire; delete it with `metaclaw files delete %v` when done, or upgrade the server", r.base, res["name"], res["name"])
	}
	res["expires_on"] = exp
	return res, nil
}

// uploadTTL is POST /api/files/upload with a ttl form field (seconds)
// before the file part, streaming the body. The client's Upload has no
// time to live, so the form is written here.
func (r *remoteBackend) uploadTTL(ctx context.Context, body io.Reader, u upload) (map[string]any, error) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if err := mw.WriteField("ttl", strconv.FormatInt(int64(u.TTL/time.Second), 10)); err != nil {
		return nil, apierr.New(apierr.Internal, "cannot write the upload form: %v", err)
	}
	filename := u.Filename
	if filename == "" {
		filename = path.Base(u.Name)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(filename)))
	h.Set("Content-Type", "application/octet-stream")
	if _, err := mw.CreatePart(h); err != nil {
		return nil, apierr.New(apierr.Internal, "cannot write the upload form: %v", err)
	}
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	q := url.Values{}
	if u.Name != "" {
		q.Set("name", u.Name)
	}
	if u.Overwrite {
		q.Set("overwrite", "true")
	}
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimRight(r.base, "/")+"/api/files/upload?"+q.Encode(),
		io.MultiReader(&head, body, strings.NewReader(tail)))
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "bad request: %v", err)
	}
	req.ContentLength = int64(head.Len()) + u.Size + int64(len(tail))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return r.send(ctx, req)
}

func (r *remoteBackend) Download(ctx context.Context, ref string, open func(name string, size int64) (io.Writer, error)) (map[string]any, error) {
	name, n, err := r.c.Download(ctx, ref, open)
	if err != nil {
		return nil, err
	}
	// The download route sends no id: name and size are what is known.
	return map[string]any{"name": name, "size": n}, nil
}

func (r *remoteBackend) List(ctx context.Context, pattern string) (map[string]any, error) {
	res, err := r.c.List(ctx, pattern)
	if err != nil {
		return nil, err
	}
	// The token decides the workspace; the CLI does not show it.
	delete(res, "workspace")
	return res, nil
}

func (r *remoteBackend) Info(ctx context.Context, ref string) (any, error) {
	return r.c.Info(ctx, ref)
}

func (r *remoteBackend) Delete(ctx context.Context, ref string) error {
	return r.c.Delete(ctx, ref)
}

func (r *remoteBackend) Revert(ctx context.Context, ref string) (map[string]any, error) {
	// Revert has no REST route of its own: it is the file_revert tool.
	res, err := r.c.CallTool(ctx, "file_revert", map[string]any{"id": ref})
	if err != nil {
		return nil, err
	}
	m, _ := res.(map[string]any)
	return m, nil
}

func (r *remoteBackend) Run(ctx context.Context, s script) (any, bool, error) {
	var res map[string]any
	var err error
	if s.Wasm != nil {
		res, err = r.runModule(ctx, s)
	} else {
		res, err = r.c.Run(ctx, client.RunRequest{Code: s.Code, Input: s.Input, TimeoutMs: s.Timeout.Milliseconds(), SessionID: r.session})
	}
	if err != nil {
		return nil, false, err
	}
	ok, _ := res["ok"].(bool)
	return res, ok, nil
}

// runModule is POST /api/run {wasm: base64, …}; the client has no call
// for a module, so the request is made here.
func (r *remoteBackend) runModule(ctx context.Context, s script) (map[string]any, error) {
	body := map[string]any{"wasm": base64.StdEncoding.EncodeToString(s.Wasm), "session_id": r.session}
	if len(s.Input) > 0 {
		body["input"] = s.Input
	}
	if s.Timeout > 0 {
		body["timeout_ms"] = s.Timeout.Milliseconds()
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "the run request cannot be encoded: %v", err)
	}
	return r.do(ctx, "POST", "/api/run", bytes.NewReader(b), "application/json")
}

func (r *remoteBackend) CallTool(ctx context.Context, name string, args map[string]any) (any, error) {
	return r.c.CallTool(ctx, name, args)
}

func (r *remoteBackend) Tools(ctx context.Context, q toolQuery) (any, []toolLine, error) {
	res, err := r.tools(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	list, _ := res["tools"].([]any)
	lines := make([]toolLine, len(list))
	for i, x := range list {
		t, _ := x.(map[string]any)
		lines[i] = toolLine{Name: fmt.Sprint(t["name"]), Description: fmt.Sprint(t["description"])}
	}
	return res, lines, nil
}

// tools is GET /api/tools with q as its query. The client has no call
// for a query, so the request is made here.
func (r *remoteBackend) tools(ctx context.Context, q toolQuery) (map[string]any, error) {
	v := q.values()
	if len(v) == 0 {
		return r.c.Tools(ctx)
	}
	return r.do(ctx, "GET", "/api/tools?"+v.Encode(), nil, "")
}

// do makes a request the client has no call for, with the client's HTTP
// client, the bearer token and the server's error shape, and reads the
// JSON object it answers.
func (r *remoteBackend) do(ctx context.Context, method, path string, body io.Reader, contentType string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(r.base, "/")+path, body)
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "bad request: %v", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return r.send(ctx, req)
}

// send sends req with the bearer token and session and reads its answer.
func (r *remoteBackend) send(ctx context.Context, req *http.Request) (map[string]any, error) {
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.session != "" {
		req.Header.Set("X-Session-Id", r.session)
	}
	resp, err := r.c.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, apierr.From(ctx.Err())
		}
		return nil, apierr.New(apierr.ToolWorkerUnavailable, "cannot reach the server at %s: %v", r.base, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	decErr := dec.Decode(&out)
	if resp.StatusCode/100 != 2 {
		if e, ok := out["error"].(map[string]any); ok {
			return nil, apierr.New(apierr.Code(fmt.Sprint(e["code"])), "%v", e["message"])
		}
		return nil, apierr.New(apierr.Internal, "the server answered %s", resp.Status)
	}
	if decErr != nil {
		return nil, apierr.New(apierr.Internal, "the server's answer is not JSON: %v", decErr)
	}
	return out, nil
}
