// Package client talks to a metaclaw server (SPEC 9) for the CLI's remote
// mode (`--server URL --token T`): uploads stream from disk with an exact
// Content-Length, downloads stream to disk, and every error comes back as
// the server's coded error.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Client is a connection to one server with one token.
type Client struct {
	base    string
	token   string
	Session string
	HTTP    *http.Client
}

// New returns a client for the server at base ("http://127.0.0.1:8080").
func New(base, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, apierr.New(apierr.ValidationFailed, "--server %q is not an http(s) URL such as http://127.0.0.1:8080", base)
	}
	return &Client{base: u.String(), token: token, HTTP: &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
		ResponseHeaderTimeout: 0, // runs may take as long as their timeout
	}}}, nil
}

func (c *Client) request(ctx context.Context, method, p string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+p, body)
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "bad request: %v", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.Session != "" {
		req.Header.Set("X-Session-Id", c.Session)
	}
	return req, nil
}

// do sends req and turns a non-2xx answer into the server's coded error.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, apierr.From(ctxErr)
		}
		return nil, apierr.New(apierr.ToolWorkerUnavailable, "cannot reach the server at %s: %v", c.base, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, decodeError(resp)
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e struct {
		Error struct {
			Code    apierr.Code `json:"code"`
			Message string      `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
		return apierr.New(e.Error.Code, "%s", e.Error.Message)
	}
	return apierr.New(apierr.Internal, "the server answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
}

func (c *Client) getJSON(ctx context.Context, method, p string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return apierr.New(apierr.ValidationFailed, "cannot encode the request: %v", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := c.request(ctx, method, p, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return apierr.New(apierr.Internal, "the server's answer is not JSON: %v", err)
	}
	return nil
}

// Ref escapes a file reference as one path segment.
func Ref(ref string) string { return url.PathEscape(strings.TrimLeft(ref, "/")) }

// UploadOptions describe an upload.
type UploadOptions struct {
	Name      string // workspace path; default the file's base name
	Filename  string // the part's filename (a base name)
	Overwrite bool
	Size      int64 // exact body size, or -1 when unknown
	// TTL, when positive, makes the server delete the file that long after
	// the upload (whole seconds, 1 s to a year; the answer's expires_on).
	TTL time.Duration
}

// Upload streams body to POST /api/files/upload and returns the server's
// {id,name,size,mime_type,sha256}.
func (c *Client) Upload(ctx context.Context, body io.Reader, opt UploadOptions) (map[string]any, error) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	filename := opt.Filename
	if filename == "" {
		filename = path.Base(opt.Name)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(filename)))
	h.Set("Content-Type", "application/octet-stream")
	if _, err := mw.CreatePart(h); err != nil {
		return nil, err
	}
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	q := url.Values{}
	if opt.Name != "" {
		q.Set("name", opt.Name)
	}
	if opt.Overwrite {
		q.Set("overwrite", "true")
	}
	if opt.TTL > 0 {
		q.Set("ttl", strconv.FormatInt(int64((opt.TTL+time.Second-1)/time.Second), 10))
	}
	req, err := c.request(ctx, "POST", "/api/files/upload?"+q.Encode(), io.MultiReader(&head, body, strings.NewReader(tail)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if opt.Size >= 0 {
		req.ContentLength = int64(head.Len()) + opt.Size + int64(len(tail))
	} else {
		req.ContentLength = -1
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, apierr.New(apierr.Internal, "the server's answer is not JSON: %v", err)
	}
	return out, nil
}

// Download streams a file's body. open is called with the file's name and
// size once the server answers; the body is copied into what it returns.
func (c *Client) Download(ctx context.Context, ref string, open func(name string, size int64) (io.Writer, error)) (name string, n int64, err error) {
	req, err := c.request(ctx, "GET", "/api/files/"+Ref(ref)+"/download", nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := c.do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	name = ref
	if _, params, perr := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); perr == nil && params["filename"] != "" {
		name = params["filename"]
	}
	w, err := open(name, resp.ContentLength)
	if err != nil {
		return name, 0, err
	}
	n, err = io.Copy(w, resp.Body)
	if err != nil {
		return name, n, apierr.Wrap(apierr.FileReadFailed, err, "download interrupted after %d bytes: %v", n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return name, n, apierr.New(apierr.FileReadFailed, "download ended after %d of %d bytes", n, resp.ContentLength)
	}
	return name, n, nil
}

// List is GET /api/files?pattern=.
func (c *Client) List(ctx context.Context, pattern string) (map[string]any, error) {
	var out map[string]any
	p := "/api/files"
	if pattern != "" {
		p += "?pattern=" + url.QueryEscape(pattern)
	}
	return out, c.getJSON(ctx, "GET", p, nil, &out)
}

// Info is GET /api/files/{ref}.
func (c *Client) Info(ctx context.Context, ref string) (map[string]any, error) {
	var out map[string]any
	return out, c.getJSON(ctx, "GET", "/api/files/"+Ref(ref), nil, &out)
}

// Delete is DELETE /api/files/{ref}.
func (c *Client) Delete(ctx context.Context, ref string) error {
	var out map[string]any
	return c.getJSON(ctx, "DELETE", "/api/files/"+Ref(ref), nil, &out)
}

// CallTool is POST /api/tools/{name}; the answer is the tool's snake_case
// result.
func (c *Client) CallTool(ctx context.Context, name string, args map[string]any) (any, error) {
	if args == nil {
		args = map[string]any{}
	}
	var out any
	return out, c.getJSON(ctx, "POST", "/api/tools/"+url.PathEscape(name), args, &out)
}

// Tools is GET /api/tools.
func (c *Client) Tools(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	return out, c.getJSON(ctx, "GET", "/api/tools", nil, &out)
}

// RunRequest is POST /api/run's body: JavaScript as Code, or a
// WebAssembly module as Wasm (a workspace .wasm file's name or id, or the
// module's bytes in base64), exactly one of them.
type RunRequest struct {
	Code      string          `json:"code,omitempty"`
	Wasm      string          `json:"wasm,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	TimeoutMs int64           `json:"timeout_ms,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
}

// Run is POST /api/run; the answer is the SPEC 5 run result.
func (c *Client) Run(ctx context.Context, r RunRequest) (map[string]any, error) {
	var out map[string]any
	return out, c.getJSON(ctx, "POST", "/api/run", r, &out)
}

// Int reads a JSON number field of a decoded answer.
func Int(m map[string]any, key string) int64 {
	switch v := m[key].(type) {
	case json.Number:
		n, _ := v.Int64()
		return n
	case float64:
		return int64(v)
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}
