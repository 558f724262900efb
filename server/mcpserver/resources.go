package mcpserver

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/textenc"
)

// A workspace's files are MCP resources: metaclaw://files/NAME (each path
// segment percent-encoded). resources/list pages through the store
// (always current, however many files), resources/read returns text
// inline (decoded from its encoding) and other files as blobs up to
// ResourceLimit, and a subscription gets notifications/resources/updated
// when the file's events arrive (created, modified, deleted), from any
// door or process.

const (
	uriPrefix   = "metaclaw://files/"
	uriTemplate = uriPrefix + "{+name}"
	listPage    = 200
)

// FileURI is the resource URI of a workspace file name.
func FileURI(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return uriPrefix + strings.Join(segs, "/")
}

// fileName is the workspace name in a resource URI.
func fileName(uri string) (string, error) {
	rest, ok := strings.CutPrefix(uri, uriPrefix)
	if !ok || rest == "" {
		return "", apierr.New(apierr.NotFound, "%q is not a workspace file; file resources look like %sreports/q3.xlsx", uri, uriPrefix)
	}
	name, err := url.PathUnescape(rest)
	if err != nil {
		return "", apierr.New(apierr.ValidationFailed, "%q is not valid percent-encoding", uri)
	}
	return name, nil
}

// resources is a workspace server's subscription state.
type resources struct {
	mu     sync.Mutex
	byID   map[string]string // file id → subscribed URI (a delete event names only the id)
	cancel func()
}

func (r *resources) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
}

// addResources installs the file template, the paged file list and the
// reader on ws's server.
func (m *Manager) addResources(ws *workspaceServer) {
	ws.srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "workspace file", URITemplate: uriTemplate,
		Description: "A file of the workspace by its path: text comes inline, other files as a blob (up to " + strconv.FormatInt(m.opts.ResourceLimit>>20, 10) + " MB)."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return m.readResource(ctx, ws, req.Params.URI)
		})
	ws.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "resources/list" {
				return next(ctx, method, req)
			}
			cursor := ""
			if p, ok := req.GetParams().(*mcp.ListResourcesParams); ok && p != nil {
				cursor = p.Cursor
			}
			return m.listResources(ctx, ws, cursor)
		}
	})
}

func (m *Manager) listResources(ctx context.Context, ws *workspaceServer, cursor string) (*mcp.ListResourcesResult, error) {
	offset := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("invalid cursor %q", cursor)
		}
		offset = n
	}
	files, err := m.h.Store.Workspace(ws.workspace).List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	for i := offset; i < len(files) && i < offset+listPage; i++ {
		f := files[i]
		out.Resources = append(out.Resources, &mcp.Resource{URI: FileURI(f.Name), Name: f.Name, MIMEType: f.MimeType, Size: f.Size,
			Description: fmt.Sprintf("%s, %d bytes, modified %s", f.MimeType, f.Size, f.ModifiedOn.UTC().Format("2006-01-02 15:04:05Z"))})
	}
	if offset+listPage < len(files) {
		out.NextCursor = strconv.Itoa(offset + listPage)
	}
	return out, nil
}

func (m *Manager) readResource(ctx context.Context, ws *workspaceServer, uri string) (*mcp.ReadResourceResult, error) {
	name, err := fileName(uri)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	rd, err := m.h.Store.Workspace(ws.workspace).Open(ctx, name)
	if apierr.Is(err, apierr.NotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, fmt.Errorf("%s", m.opts.Redact(apierr.Of(err).Message))
	}
	defer rd.Close()
	f := rd.Meta
	if f.Size > m.opts.ResourceLimit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d-byte resource limit; read parts of it with the tools (file_read_text, file_read_bytes, spreadsheet_read_range, table_query)",
			f.Name, f.Size, m.opts.ResourceLimit)
	}
	b, err := io.ReadAll(io.LimitReader(rd, m.opts.ResourceLimit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s failed; retry", f.Name)
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: f.MimeType}
	if text, ok := asText(f, b); ok {
		c.Text = text
	} else {
		c.Blob = b
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// asText decodes a file that is text (in any encoding textenc knows).
func asText(f *store.File, b []byte) (string, bool) {
	if len(b) == 0 {
		return "", strings.HasPrefix(f.MimeType, "text/")
	}
	enc, err := textenc.DetectBytes(b)
	if err != nil {
		return "", false
	}
	textual := strings.HasPrefix(f.MimeType, "text/") || strings.Contains(f.MimeType, "json") || strings.Contains(f.MimeType, "xml") ||
		strings.Contains(f.MimeType, "javascript") || strings.Contains(f.MimeType, "yaml")
	if !textual && enc.Confidence < 0.9 {
		return "", false
	}
	s, err := enc.Decode(b)
	return s, err == nil
}

// subscribe checks the file exists and makes sure ws follows its
// workspace's file events.
func (m *Manager) subscribe(ctx context.Context, ws *workspaceServer, uri string) error {
	name, err := fileName(uri)
	if err != nil {
		return err
	}
	f, err := m.h.Store.Workspace(ws.workspace).Resolve(ctx, name)
	if err != nil {
		return mcp.ResourceNotFoundError(uri)
	}
	ws.res.mu.Lock()
	defer ws.res.mu.Unlock()
	if ws.res.byID == nil {
		ws.res.byID = map[string]string{}
	}
	ws.res.byID[f.ID] = uri
	if ws.res.cancel == nil {
		events, cancel := m.h.Store.Bus().Subscribe(ws.workspace, 0)
		ws.res.cancel = cancel
		go m.follow(ws, events)
	}
	return nil
}

func (m *Manager) unsubscribe(ws *workspaceServer, uri string) error {
	ws.res.mu.Lock()
	defer ws.res.mu.Unlock()
	for id, u := range ws.res.byID {
		if u == uri {
			delete(ws.res.byID, id)
		}
	}
	return nil
}

// follow turns file events into resource update notifications; the SDK
// sends each to the sessions subscribed to that URI.
func (m *Manager) follow(ws *workspaceServer, events <-chan store.Event) {
	for e := range events {
		var uris []string
		if name, ok := e.Data["name"].(string); ok && name != "" {
			uris = append(uris, FileURI(name))
		}
		if id, ok := e.Data["id"].(string); ok {
			ws.res.mu.Lock()
			if u, ok := ws.res.byID[id]; ok && (len(uris) == 0 || uris[0] != u) {
				uris = append(uris, u) // a delete, or a rename away from the subscribed name
			}
			ws.res.mu.Unlock()
		}
		for _, u := range uris {
			ws.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: u})
		}
	}
	// The bus closed the channel: a subscriber that fell behind. Start
	// again from now on; clients re-read what they follow.
	ws.res.mu.Lock()
	defer ws.res.mu.Unlock()
	if ws.res.cancel != nil {
		events, cancel := m.h.Store.Bus().Subscribe(ws.workspace, 0)
		ws.res.cancel = cancel
		go m.follow(ws, events)
	}
}
