package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

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
	return r.c.Upload(ctx, body, client.UploadOptions{Name: u.Name, Filename: u.Filename, Overwrite: u.Overwrite, Size: u.Size})
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
	res, err := r.c.Run(ctx, client.RunRequest{Code: s.Code, Input: s.Input, TimeoutMs: s.Timeout.Milliseconds(), SessionID: r.session})
	if err != nil {
		return nil, false, err
	}
	ok, _ := res["ok"].(bool)
	return res, ok, nil
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
// for a query, so the request is made here with its HTTP client, its
// bearer token and its error shape.
func (r *remoteBackend) tools(ctx context.Context, q toolQuery) (map[string]any, error) {
	v := q.values()
	if len(v) == 0 {
		return r.c.Tools(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(r.base, "/")+"/api/tools?"+v.Encode(), nil)
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "bad request: %v", err)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := r.c.HTTP.Do(req)
	if err != nil {
		return nil, apierr.New(apierr.ToolWorkerUnavailable, "cannot reach the server at %s: %v", r.base, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	decErr := dec.Decode(&out)
	if resp.StatusCode != http.StatusOK {
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
