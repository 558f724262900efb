package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// maxJSONBody bounds the JSON bodies of runs and tool calls (base64 chunks
// of file_write_bytes are up to 4 MB of data).
const maxJSONBody = 32 << 20

// RunRequest is POST /api/run's body (SPEC 9).
type RunRequest struct {
	Code      string          `json:"code"`
	Input     json.RawMessage `json:"input,omitempty"`
	TimeoutMs int64           `json:"timeout_ms,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	Wasm      any             `json:"wasm,omitempty"`
}

// handleRun runs a script and answers the SPEC 5 run result. A run that
// fails inside the sandbox is still a 200 with ok:false; refusals before a
// run starts (bad JSON, BUSY) are coded errors.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	if err := decodeJSON(w, r, maxJSONBody, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Wasm != nil {
		s.writeError(w, r, apierr.New(apierr.UnsupportedFormat, "this host has no WebAssembly runtime yet; send JavaScript as \"code\""))
		return
	}
	if strings.TrimSpace(req.Code) == "" {
		s.writeError(w, r, apierr.New(apierr.ValidationFailed, "\"code\" is required: the JavaScript body to run"))
		return
	}
	if req.TimeoutMs < 0 {
		s.writeError(w, r, apierr.New(apierr.ValidationFailed, "\"timeout_ms\" must be positive"))
		return
	}
	if s.h.Runner == nil {
		s.writeError(w, r, apierr.New(apierr.ToolWorkerUnavailable, "no script runner is configured on this host"))
		return
	}
	release, ok := s.acquireRun()
	if !ok {
		s.metrics.observeRun(principalOf(r).Workspace, "busy", 0)
		s.writeError(w, r, apierr.New(apierr.Busy, "the server is running %d scripts already; retry shortly", s.cfg.MaxConcurrentRuns))
		return
	}
	defer release()
	session := req.SessionID
	if session == "" {
		session = sessionOf(r)
	}
	rr := hostapi.RunRequest{Code: req.Code, Name: "script.js"}
	if len(req.Input) > 0 {
		rr.Input = req.Input
	}
	rr.Limits.Timeout = time.Duration(req.TimeoutMs) * time.Millisecond
	start := time.Now()
	res := s.h.Runner.Run(r.Context(), s.h.Env(principalOf(r).Workspace, session), rr)
	outcome := "ok"
	if !res.OK {
		outcome = "error"
		if res.Error != nil {
			outcome = string(res.Error.Code)
		}
	}
	s.metrics.observeRun(principalOf(r).Workspace, outcome, time.Since(start))
	if res.Error != nil {
		res.Error.Message, res.Error.Stack = s.redact.Message(res.Error.Message), s.redact.Message(res.Error.Stack)
	}
	writeJSON(w, http.StatusOK, res)
}

// OpenAITool is a tool in OpenAI's function-calling list format.
type OpenAITool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  hostapi.Schema `json:"parameters"`
	} `json:"function"`
}

// MCPTool is a tool in MCP's tools/list format, with annotations.
type MCPTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema hostapi.Schema `json:"inputSchema"`
	Annotations map[string]any `json:"annotations"`
}

// handleTools lists every meta-tool of the workspace (built-in and saved).
// The default answer {tools:[{name,description,input_schema}]} is
// Anthropic's tool list; ?format=openai gives OpenAI's
// {type:"function",function:{name,description,parameters}} and
// ?format=mcp MCP's shape with annotations.
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	list, err := s.h.Registry.Tools(r.Context(), s.h.Env(principalOf(r).Workspace, sessionOf(r)))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	switch f := r.URL.Query().Get("format"); f {
	case "", "anthropic":
		writeJSON(w, http.StatusOK, map[string]any{"tools": list})
	case "openai":
		out := make([]OpenAITool, len(list))
		for i, t := range list {
			out[i].Type = "function"
			out[i].Function.Name, out[i].Function.Description, out[i].Function.Parameters = t.Name, t.Description, t.InputSchema
		}
		writeJSON(w, http.StatusOK, map[string]any{"tools": out})
	case "mcp":
		out := make([]MCPTool, len(list))
		for i, t := range list {
			out[i] = MCPTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Annotations: map[string]any{
				"readOnlyHint": t.ReadOnly, "destructiveHint": t.Destructive, "idempotentHint": t.Idempotent, "openWorldHint": false}}
		}
		writeJSON(w, http.StatusOK, map[string]any{"tools": out})
	default:
		s.writeError(w, r, apierr.New(apierr.ValidationFailed, "format %q is not known; use anthropic (default), openai or mcp", f))
	}
}

// handleCallTool calls one meta-tool with a JSON object of arguments and
// answers its snake_case result.
func (s *Server) handleCallTool(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["name"]
	args, err := decodeArgs(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	release, ok := s.acquireRun()
	if !ok {
		s.writeError(w, r, apierr.New(apierr.Busy, "the server is busy with %d calls already; retry shortly", s.cfg.MaxConcurrentRuns))
		return
	}
	defer release()
	res, err := s.h.Registry.CallTool(r.Context(), s.h.Env(principalOf(r).Workspace, sessionOf(r)), name, args)
	if s.h.Registry.ByTool(name) == nil {
		s.metrics.observeDynamicTool(principalOf(r).Workspace, name, err)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleMCP serves MCP over streamable HTTP; each workspace has its own MCP
// server and its own sessions, so a token only ever reaches its workspace's
// tools and sessions.
func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request) {
	h, err := s.mcp.HTTPHandler(principalOf(r).Workspace)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A standalone GET stream lives until the client leaves: it takes a
	// stream slot, and it ends when the server shuts down so that shutdown
	// waits only for real work.
	if r.Method == http.MethodGet {
		release, err := s.streams.acquire(principalOf(r).Workspace)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer release()
		s.metrics.streams.Add(1)
		defer s.metrics.streams.Add(-1)
	}
	ctx, cancel := contextUntil(r.Context(), s.closing)
	defer cancel()
	h.ServeHTTP(w, r.WithContext(ctx))
}

// decodeArgs reads a tool call's JSON object of arguments; an empty body
// means no arguments. The registry's decoder keeps numbers exact.
func decodeArgs(w http.ResponseWriter, r *http.Request) (map[string]any, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if asMaxBytes(err, &mbe) {
			return nil, apierr.New(apierr.TooLarge, "the arguments are larger than %d bytes", maxJSONBody)
		}
		return nil, apierr.New(apierr.ValidationFailed, "reading the request body failed: %v", err)
	}
	return hostapi.ParseArgs(b)
}

// contextUntil is ctx, also cancelled when done closes.
func contextUntil(ctx context.Context, done <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
