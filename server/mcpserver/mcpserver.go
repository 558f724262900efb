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
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/server/redact"
	"github.com/metaclaw/metaclaw/server/toolspec"
)

// Options configure a Manager.
type Options struct {
	Log     *slog.Logger
	Version string
	// Profile is the tool profile of Server and RunStdio (toolspec's
	// "full", the default, or "code"); HTTP callers choose theirs per
	// request.
	Profile string
	// Gate, when set, is asked for a slot before each tool call; a call
	// that gets none answers BUSY.
	Gate func() (release func(), ok bool)
	// Observe, when set, is told about calls of saved (dynamic) tools; the
	// registry observes the compiled-in ones itself.
	Observe func(workspace, name string, d time.Duration, err error)
	// Redact, when set, removes server paths from error messages (the
	// default redacts the host's data, temp and working directories).
	Redact func(string) string
	// ResourceLimit is the largest file resources/read returns (default
	// 8 MB); larger files answer with an error naming the tools to use.
	ResourceLimit int64
	// SessionTimeout closes idle streamable-HTTP sessions (default 30 min).
	SessionTimeout time.Duration
	// Around, when set, runs every tool call: it calls call (with the
	// environment it wants the call to run in, e.g. one that records the
	// call's files) and returns its result. The server's run feed uses it.
	Around func(ctx context.Context, workspace, session, name string, args map[string]any, call CallFunc) (any, error)
}

// CallFunc runs one tool call in env.
type CallFunc func(ctx context.Context, env *hostapi.Env) (any, error)

// Manager holds the MCP server of each workspace and profile.
type Manager struct {
	h      *hostapi.Host
	opts   Options
	sdkLog *slog.Logger

	mu      sync.Mutex
	servers map[serverKey]*workspaceServer
	// watching holds, per served workspace, the cancel of its subscription
	// to the store's events (saved-tool changes from any host).
	watching map[string]func()
	closed   chan struct{}
}

type serverKey struct{ workspace, profile string }

type workspaceServer struct {
	workspace, profile string
	srv                *mcp.Server
	httpOnce           sync.Once
	http               *mcp.StreamableHTTPHandler

	syncMu sync.Mutex
	// tools are the tools currently offered, to diff against on a change.
	tools map[string]hostapi.ToolInfo

	res resources
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
	if opts.ResourceLimit <= 0 {
		opts.ResourceLimit = 8 << 20
	}
	if p, err := toolspec.CheckProfile(opts.Profile); err == nil {
		opts.Profile = p
	} else {
		opts.Profile = toolspec.ProfileFull
	}
	return &Manager{h: h, opts: opts, sdkLog: slog.New(minLevel{opts.Log.Handler(), slog.LevelWarn}),
		servers: map[serverKey]*workspaceServer{}, watching: map[string]func(){}, closed: make(chan struct{})}
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

// Server returns workspace's MCP server in the manager's profile,
// building it on first use.
func (m *Manager) Server(workspace string) (*mcp.Server, error) {
	ws, err := m.get(workspace, m.opts.Profile)
	if err != nil {
		return nil, err
	}
	return ws.srv, nil
}

// HTTPHandler returns the streamable-HTTP handler of workspace's server in
// profile ("" is full). Sessions belong to one handler, so a session id
// from one workspace (or profile) is unknown to every other.
func (m *Manager) HTTPHandler(workspace, profile string) (http.Handler, error) {
	profile, err := toolspec.CheckProfile(profile)
	if err != nil {
		return nil, err
	}
	ws, err := m.get(workspace, profile)
	if err != nil {
		return nil, err
	}
	ws.httpOnce.Do(func() {
		ws.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ws.srv },
			&mcp.StreamableHTTPOptions{SessionTimeout: m.opts.SessionTimeout, Logger: m.sdkLog})
	})
	return ws.http, nil
}

func (m *Manager) get(workspace, profile string) (*workspaceServer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := serverKey{workspace, profile}
	if ws := m.servers[key]; ws != nil {
		return ws, nil
	}
	ws := &workspaceServer{workspace: workspace, profile: profile, tools: map[string]hostapi.ToolInfo{}}
	instructions := "Tools over the files of metaclaw workspace \"" + workspace + "\": list, read and edit files " +
		"(text, spreadsheets, PDFs, images, CSV tables), run JavaScript against them with run_script, and save scripts as new tools. " +
		"The workspace's files are also resources (metaclaw://files/NAME) that can be read and subscribed to."
	if profile == toolspec.ProfileCode {
		instructions = "Work on the files of metaclaw workspace \"" + workspace + "\" by writing JavaScript: call search_api to find the " +
			"typed API (files.*, files.spreadsheet.*, files.pdf.*, files.image.*, files.table.*, tools.*), then run_script to run code " +
			"against it; file_list shows the files. The files are also resources (metaclaw://files/NAME)."
	}
	ws.srv = mcp.NewServer(&mcp.Implementation{Name: "metaclaw", Title: "metaclaw workspace " + workspace, Version: m.opts.Version},
		&mcp.ServerOptions{
			Logger:       m.sdkLog,
			Instructions: instructions,
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Resources: &mcp.ResourceCapabilities{Subscribe: true}},
			SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
				return m.subscribe(ctx, ws, req.Params.URI)
			},
			UnsubscribeHandler: func(ctx context.Context, req *mcp.UnsubscribeRequest) error { return m.unsubscribe(ws, req.Params.URI) },
		})
	m.addResources(ws)
	if err := m.sync(ws); err != nil {
		return nil, err
	}
	m.servers[key] = ws
	m.watchTools(workspace)
	return ws, nil
}

// watchTools follows workspace's store events while the manager serves it:
// a saved tool changed on any host that shares the store (its
// store.EventToolChanged) refreshes the workspace's servers, which send
// tools/list_changed when the list really changed. m.mu is held.
func (m *Manager) watchTools(workspace string) {
	if _, ok := m.watching[workspace]; ok {
		return
	}
	select {
	case <-m.closed:
		return
	default:
	}
	events, cancel := m.h.Store.Bus().Subscribe(workspace, 0)
	m.watching[workspace] = cancel
	go func() {
		for e := range events {
			if e.Type == store.EventToolChanged {
				m.ToolsChanged(workspace)
			}
		}
		// The bus dropped a subscriber that fell behind, or the manager
		// closed: follow again from now on (after a refresh, since a
		// change may have been missed) unless closing.
		m.mu.Lock()
		defer m.mu.Unlock()
		select {
		case <-m.closed:
			return
		default:
		}
		delete(m.watching, workspace)
		go m.ToolsChanged(workspace)
		m.watchTools(workspace)
	}()
}

// ToolsChanged re-reads workspace's tool list and updates its MCP servers,
// which notify connected clients (tools/list_changed).
func (m *Manager) ToolsChanged(workspace string) {
	m.mu.Lock()
	var list []*workspaceServer
	for k, ws := range m.servers {
		if k.workspace == workspace {
			list = append(list, ws)
		}
	}
	m.mu.Unlock()
	for _, ws := range list {
		if err := m.sync(ws); err != nil {
			m.opts.Log.Warn("mcp: refreshing the tool list failed", "workspace", workspace, "error", err)
		}
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
	list = toolspec.Filter(list, ws.profile)
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
		a.Idempotent == b.Idempotent && a.OpenWorld == b.OpenWorld && reflect.DeepEqual(a.InputSchema, b.InputSchema)
}

// Tool converts a registry tool to its MCP description: the input schema
// (an object schema), the output schema of its result (for a saved tool:
// any value, as {"result": …}) and annotations generated from the
// registry.
func Tool(t hostapi.ToolInfo, op *hostapi.Op) *mcp.Tool {
	out := toolspec.Wrap(hostapi.Schema{})
	if op != nil {
		out, _ = toolspec.OutputSchema(op)
	}
	readOnly, destructive := t.ReadOnly, t.Destructive && !t.ReadOnly
	openWorld := t.OpenWorld
	return &mcp.Tool{
		Name: t.Name, Description: t.Description, InputSchema: toolspec.InputSchema(t), OutputSchema: out,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly, DestructiveHint: &destructive, IdempotentHint: t.Idempotent, OpenWorldHint: &openWorld},
	}
}

func (m *Manager) addTool(ws *workspaceServer, t hostapi.ToolInfo) (err error) {
	defer func() {
		if p := recover(); p != nil { // the SDK panics on schemas it cannot use
			err = fmt.Errorf("%v", p)
		}
	}()
	op := m.h.Registry.ByTool(t.Name)
	ws.srv.AddTool(Tool(t, op), m.handler(ws.workspace, t.Name, op))
	return nil
}

// handler calls tool name through the registry: the MCP arguments are the
// meta-tool's snake_case arguments (NAME_json from strict schemas is
// accepted for NAME) and the result is its snake_case result, as JSON
// text and as structured content matching the tool's output schema; an
// image result is also image content, so that a vision model sees it.
// Errors come back as a tool result with isError and SPEC 7's
// {"error":{"code","message"}}, so that the model sees what to fix.
func (m *Manager) handler(workspace, name string, op *hostapi.Op) mcp.ToolHandler {
	wrapped := true
	if op != nil {
		_, wrapped = toolspec.OutputSchema(op)
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := hostapi.ParseArgs(req.Params.Arguments)
		if err == nil && op != nil && toolspec.HasJSONArgs(args) {
			args, err = toolspec.StrictArgs(args, op.InputSchema())
		}
		if err != nil {
			return m.errorResult(withExample(op, err)), nil
		}
		if m.opts.Gate != nil {
			release, ok := m.opts.Gate()
			if !ok {
				return m.errorResult(apierr.New(apierr.Busy, "the server is busy; retry shortly")), nil
			}
			defer release()
		}
		session := "mcp"
		if req.Session != nil && req.Session.ID() != "" {
			session = "mcp:" + req.Session.ID()
		}
		// Every call is bounded by the longest run a caller may ask for.
		ctx, cancel := context.WithTimeout(ctx, CallTimeout(m.h))
		defer cancel()
		start := time.Now()
		call := func(ctx context.Context, env *hostapi.Env) (any, error) {
			return m.h.Registry.CallTool(ctx, env, name, args)
		}
		var res any
		if m.opts.Around != nil {
			res, err = m.opts.Around(ctx, workspace, session, name, args, call)
		} else {
			res, err = call(ctx, m.h.Env(workspace, session))
		}
		if m.opts.Observe != nil && op == nil {
			m.opts.Observe(workspace, name, time.Since(start), err)
		}
		if err != nil {
			return m.errorResult(err), nil
		}
		return m.okResult(res, wrapped), nil
	}
}

// CallTimeout bounds one meta-tool call from a door: the longest run a
// caller may ask for (the host's maximum run timeout; 10 minutes when
// unset).
func CallTimeout(h *hostapi.Host) time.Duration {
	if d := h.Config.MaxLimits.Timeout; d > 0 {
		return d
	}
	return 10 * time.Minute
}

// withExample adds op's first example to a VALIDATION_FAILED raised at
// this door (the registry adds it to its own).
func withExample(op *hostapi.Op, err error) error {
	e := apierr.Of(err)
	if op == nil || e.Code != apierr.ValidationFailed || len(op.Examples) == 0 || strings.Contains(e.Message, "; example: ") {
		return err
	}
	b, mErr := json.Marshal(op.Examples[0].Args)
	if mErr != nil {
		return err
	}
	return &apierr.Error{Code: e.Code, Message: e.Message + "; example: " + op.Tool + " " + string(b)}
}

func (m *Manager) okResult(res any, wrapped bool) *mcp.CallToolResult {
	b, err := marshal(res)
	if err != nil {
		return m.errorResult(apierr.Wrap(apierr.Internal, err, "the result cannot be encoded as JSON: %v", err))
	}
	out := &mcp.CallToolResult{}
	obj, isObject := res.(map[string]any)
	if img := imageOf(obj); img != nil {
		// The picture itself, and its metadata as text without the base64
		// (which would cost the model its size in tokens a second time).
		meta := map[string]any{}
		for k, v := range obj {
			if k != "base64" {
				meta[k] = v
			}
		}
		mb, _ := marshal(meta)
		out.Content = []mcp.Content{img, &mcp.TextContent{Text: string(mb)}}
	} else {
		out.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
	}
	switch {
	case isObject && !wrapped:
		out.StructuredContent = json.RawMessage(b)
	default:
		wb, err := marshal(map[string]any{"result": res})
		if err == nil {
			out.StructuredContent = json.RawMessage(wb)
		}
	}
	return out
}

// imageOf is the image in a result of the {base64, mime_type: "image/…"}
// shape (image_to_base64, and any other that answers a picture).
func imageOf(res map[string]any) *mcp.ImageContent {
	b64, _ := res["base64"].(string)
	mt, _ := res["mime_type"].(string)
	if b64 == "" || !strings.HasPrefix(mt, "image/") {
		return nil
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil
	}
	return &mcp.ImageContent{Data: data, MIMEType: mt}
}

func (m *Manager) errorResult(err error) *mcp.CallToolResult {
	e := apierr.Of(err)
	b, _ := marshal(map[string]any{"error": map[string]any{"code": e.Code, "message": m.opts.Redact(e.Message)}})
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

// Close forgets every server (their sessions end with their connections)
// and stops following file events for resource subscriptions.
func (m *Manager) Close() {
	m.mu.Lock()
	servers := m.servers
	m.servers = map[serverKey]*workspaceServer{}
	select {
	case <-m.closed:
	default:
		close(m.closed)
	}
	watching := m.watching
	m.watching = map[string]func(){}
	m.mu.Unlock()
	for _, cancel := range watching {
		cancel()
	}
	for _, ws := range servers {
		ws.res.stop()
	}
}
