// Package mcpserver offers the host's meta-tools over MCP with the official
// Go SDK: one MCP server per workspace, its tools generated from the
// registry (built-in operations and saved tools, with read-only, destructive
// and idempotent annotations), kept in step with saved-tool changes so that
// clients get notifications/tools/list_changed. The same server runs over
// streamable HTTP (the /mcp route) and over stdio (`metaclaw mcp`).
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/server/redact"
)

// Options configure a Manager.
type Options struct {
	Log     *slog.Logger
	Version string
	// Gate, when set, is asked for a slot before each tool call; a call
	// that gets none answers BUSY.
	Gate func() (release func(), ok bool)
	// Observe, when set, is told about calls of saved (dynamic) tools; the
	// registry observes the compiled-in ones itself.
	Observe func(workspace, name string, d time.Duration, err error)
	// Redact, when set, removes server paths from error messages (the
	// default redacts the host's data, temp and working directories).
	Redact func(string) string
	// SessionTimeout closes idle streamable-HTTP sessions (default 30 min).
	SessionTimeout time.Duration
}

// Manager holds the MCP server of each workspace.
type Manager struct {
	h      *hostapi.Host
	opts   Options
	sdkLog *slog.Logger

	mu      sync.Mutex
	servers map[string]*workspaceServer
}

type workspaceServer struct {
	workspace string
	srv       *mcp.Server
	httpOnce  sync.Once
	http      *mcp.StreamableHTTPHandler

	syncMu sync.Mutex
	// tools are the tools currently offered, to diff against on a change.
	tools map[string]hostapi.ToolInfo
}

// New returns a manager for h.
func New(h *hostapi.Host, opts Options) *Manager {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	if opts.Redact == nil {
		opts.Redact = redact.ForDataDir(h.Config.DataDir).Message
	}
	return &Manager{h: h, opts: opts, sdkLog: slog.New(minLevel{opts.Log.Handler(), slog.LevelWarn}), servers: map[string]*workspaceServer{}}
}

// minLevel drops records below a level: the SDK reports every session
// start and end at INFO, which would drown the request log.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(a), m.min}
}
func (m minLevel) WithGroup(n string) slog.Handler { return minLevel{m.Handler.WithGroup(n), m.min} }

// Server returns workspace's MCP server, building it on first use.
func (m *Manager) Server(workspace string) (*mcp.Server, error) {
	ws, err := m.get(workspace)
	if err != nil {
		return nil, err
	}
	return ws.srv, nil
}

// HTTPHandler returns the streamable-HTTP handler of workspace's server.
// Sessions belong to one handler, so a session id from one workspace is
// unknown to every other.
func (m *Manager) HTTPHandler(workspace string) (http.Handler, error) {
	ws, err := m.get(workspace)
	if err != nil {
		return nil, err
	}
	ws.httpOnce.Do(func() {
		ws.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ws.srv },
			&mcp.StreamableHTTPOptions{SessionTimeout: m.opts.SessionTimeout, Logger: m.sdkLog})
	})
	return ws.http, nil
}

func (m *Manager) get(workspace string) (*workspaceServer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ws := m.servers[workspace]
	if ws != nil {
		return ws, nil
	}
	ws = &workspaceServer{workspace: workspace, tools: map[string]hostapi.ToolInfo{}}
	ws.srv = mcp.NewServer(&mcp.Implementation{Name: "metaclaw", Title: "metaclaw workspace " + workspace, Version: m.opts.Version},
		&mcp.ServerOptions{
			Logger: m.sdkLog,
			Instructions: "Tools over the files of metaclaw workspace \"" + workspace + "\": list, read and edit files " +
				"(text, spreadsheets, PDFs, images, CSV tables), run JavaScript against them with run_script, and save scripts as new tools.",
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		})
	if err := m.sync(ws); err != nil {
		return nil, err
	}
	m.servers[workspace] = ws
	return ws, nil
}

// ToolsChanged re-reads workspace's tool list and updates its MCP server,
// which notifies connected clients (tools/list_changed).
func (m *Manager) ToolsChanged(workspace string) {
	m.mu.Lock()
	ws := m.servers[workspace]
	m.mu.Unlock()
	if ws == nil {
		return
	}
	if err := m.sync(ws); err != nil {
		m.opts.Log.Warn("mcp: refreshing the tool list failed", "workspace", workspace, "error", err)
	}
}

// sync makes ws offer exactly the registry's tools for its workspace.
func (m *Manager) sync(ws *workspaceServer) error {
	ws.syncMu.Lock()
	defer ws.syncMu.Unlock()
	list, err := m.h.Registry.Tools(context.Background(), m.h.Env(ws.workspace, "mcp"))
	if err != nil {
		return err
	}
	want := make(map[string]hostapi.ToolInfo, len(list))
	for _, t := range list {
		want[t.Name] = t
	}
	var gone []string
	for name := range ws.tools {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		ws.srv.RemoveTools(gone...)
		for _, n := range gone {
			delete(ws.tools, n)
		}
	}
	for _, t := range list {
		if old, ok := ws.tools[t.Name]; ok && sameTool(old, t) {
			continue
		}
		if err := m.addTool(ws, t); err != nil {
			m.opts.Log.Warn("mcp: tool not offered", "tool", t.Name, "error", err)
			continue
		}
		ws.tools[t.Name] = t
	}
	return nil
}

func sameTool(a, b hostapi.ToolInfo) bool {
	return a.Description == b.Description && a.ReadOnly == b.ReadOnly && a.Destructive == b.Destructive &&
		a.Idempotent == b.Idempotent && reflect.DeepEqual(a.InputSchema, b.InputSchema)
}

// Tool converts a registry tool to its MCP description.
func Tool(t hostapi.ToolInfo) *mcp.Tool {
	schema := hostapi.Schema{}
	for k, v := range t.InputSchema {
		schema[k] = v
	}
	// MCP requires an object schema; a saved tool may have declared none.
	if schema["type"] != "object" {
		schema["type"] = "object"
	}
	destructive := t.Destructive
	openWorld := false
	return &mcp.Tool{
		Name: t.Name, Description: t.Description, InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: t.ReadOnly, DestructiveHint: &destructive, IdempotentHint: t.Idempotent, OpenWorldHint: &openWorld},
	}
}

func (m *Manager) addTool(ws *workspaceServer, t hostapi.ToolInfo) (err error) {
	defer func() {
		if p := recover(); p != nil { // the SDK panics on schemas it cannot use
			err = fmt.Errorf("%v", p)
		}
	}()
	ws.srv.AddTool(Tool(t), m.handler(ws.workspace, t.Name))
	return nil
}

// handler calls tool name through the registry: the MCP arguments are the
// meta-tool's snake_case arguments and the result is its snake_case result,
// as JSON text and (for objects) as structured content. Errors come back as
// a tool result with isError and SPEC 7's {"error":{"code","message"}}, so
// that the model sees what to fix.
func (m *Manager) handler(workspace, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := hostapi.ParseArgs(req.Params.Arguments)
		if err != nil {
			return errorResult(err), nil
		}
		if m.opts.Gate != nil {
			release, ok := m.opts.Gate()
			if !ok {
				return errorResult(apierr.New(apierr.Busy, "the server is busy; retry shortly")), nil
			}
			defer release()
		}
		session := "mcp"
		if req.Session != nil && req.Session.ID() != "" {
			session = "mcp:" + req.Session.ID()
		}
		start := time.Now()
		res, err := m.h.Registry.CallTool(ctx, m.h.Env(workspace, session), name, args)
		if m.opts.Observe != nil && m.h.Registry.ByTool(name) == nil {
			m.opts.Observe(workspace, name, time.Since(start), err)
		}
		if err != nil {
			return errorResult(err), nil
		}
		return okResult(res), nil
	}
}

func okResult(res any) *mcp.CallToolResult {
	b, err := marshal(res)
	if err != nil {
		return errorResult(apierr.Wrap(apierr.Internal, err, "the result cannot be encoded as JSON: %v", err))
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
	if _, isObject := res.(map[string]any); isObject {
		out.StructuredContent = json.RawMessage(b)
	}
	return out
}

func errorResult(err error) *mcp.CallToolResult {
	e := apierr.Of(err)
	b, _ := marshal(map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message}})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// RunStdio serves workspace's tools over stdin/stdout until ctx ends or the
// client disconnects.
func (m *Manager) RunStdio(ctx context.Context, workspace string) error {
	srv, err := m.Server(workspace)
	if err != nil {
		return err
	}
	return srv.Run(ctx, &mcp.StdioTransport{})
}

// Close forgets every server (their sessions end with their connections).
func (m *Manager) Close() {
	m.mu.Lock()
	m.servers = map[string]*workspaceServer{}
	m.mu.Unlock()
}
