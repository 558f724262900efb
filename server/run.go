package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/metaclaw/metaclaw/bindings/ts"
	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/server/mcpserver"
	"github.com/metaclaw/metaclaw/server/toolspec"
)

// maxJSONBody bounds the JSON bodies of runs and tool calls (base64 chunks
// of file_write_bytes are up to 4 MB of data).
const maxJSONBody = 32 << 20

// RunRequest is POST /api/run's body (SPEC 9): JavaScript as Code, or a
// WebAssembly module as Wasm (the module's bytes in base64, or the name or
// id of a workspace .wasm file), exactly one of them.
type RunRequest struct {
	Code      string          `json:"code,omitempty"`
	Wasm      any             `json:"wasm,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	TimeoutMs int64           `json:"timeout_ms,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
}

// handleRun runs a script (code) or a WebAssembly module (wasm) and answers
// the SPEC 5 run result. A run that fails inside the sandbox is still a 200
// with ok:false; refusals before a run starts (bad JSON, both or neither of
// code and wasm, BUSY) are coded errors.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	if err := decodeJSON(w, r, maxJSONBody, &req, false); err != nil {
		if apierr.Is(err, apierr.TooLarge) {
			err = apierr.New(apierr.TooLarge, "the request body is larger than %d bytes; upload a big module with POST /api/files/upload and send its name as \"wasm\"", maxJSONBody)
		}
		s.writeError(w, r, err)
		return
	}
	rr, err := runRequestOf(req)
	if err != nil {
		s.writeError(w, r, err)
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
	if rr.IsWasm() && !runsModules(s.h.Runner) {
		s.writeError(w, r, apierr.New(apierr.ToolWorkerUnavailable, "this host has no WebAssembly runtime; send JavaScript as \"code\""))
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
	var input any
	if len(req.Input) > 0 {
		rr.Input = req.Input
		input = resultValue(req.Input)
	}
	rr.Limits.Timeout = time.Duration(req.TimeoutMs) * time.Millisecond
	start := time.Now()
	res, runID := s.runTracked(r.Context(), principalOf(r).Workspace, session, rr, input)
	outcome := "ok"
	if !res.OK {
		outcome = "error"
		if res.Error != nil {
			outcome = string(res.Error.Code)
		}
	}
	s.metrics.observeRun(principalOf(r).Workspace, outcome, time.Since(start))
	// The run's feed message (GET /api/runs/{id}: its blocks and the
	// instructions its result carries for the client).
	w.Header().Set("X-Run-Id", runID)
	writeJSON(w, http.StatusOK, res)
}

// handleTools lists the workspace's meta-tools (built-in and saved).
// ?profile=code narrows the list to run_script, search_api and file_list;
// ?format= picks the shape: metaclaw's own by default ({name, description,
// input_schema, examples}), anthropic, openai (Chat Completions; with
// &api=responses the Responses API), or mcp; &strict=true gives schemas
// valid under OpenAI's strict mode.
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	profile, err := toolspec.CheckProfile(q.Get("profile"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	format, err := toolspec.CheckFormat(q.Get("format"), q.Get("api"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	strict := false
	if v := q.Get("strict"); v != "" {
		if strict, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, apierr.New(apierr.ValidationFailed, "strict %q is not a boolean; send true or false", v))
			return
		}
	}
	list, err := s.h.Registry.Tools(r.Context(), s.h.Env(principalOf(r).Workspace, sessionOf(r)))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := map[string]any{"tools": toolspec.Render(toolspec.Filter(list, profile), toolspec.Options{Format: format, Strict: strict})}
	if profile != toolspec.ProfileFull {
		out["profile"] = profile
	}
	writeJSON(w, http.StatusOK, out)
}

// handleTypes serves the TypeScript declarations of the sandbox API as the
// caller's workspace sees it (its saved tools typed on tools.call).
func (s *Server) handleTypes(w http.ResponseWriter, r *http.Request) {
	d, err := ts.WorkspaceDeclarations(r.Context(), s.h.Registry, s.h.Env(principalOf(r).Workspace, sessionOf(r)))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Disposition", `inline; filename="metaclaw.d.ts"`)
	h.Set("X-Content-Type-Options", "nosniff")
	io.WriteString(w, d)
}

// handleCallTool calls one meta-tool with a JSON object of arguments and
// answers its snake_case result.
func (s *Server) handleCallTool(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["name"]
	args, err := decodeArgs(w, r)
	if err == nil {
		args, err = s.strictArgs(name, args)
	}
	if err != nil {
		s.writeError(w, r, withToolExample(s.h.Registry, name, err))
		return
	}
	release, ok := s.acquireRun()
	if !ok {
		s.writeError(w, r, apierr.New(apierr.Busy, "the server is busy with %d calls already; retry shortly", s.cfg.MaxConcurrentRuns))
		return
	}
	defer release()
	// Every call is bounded, also one that never checks its context's
	// end: the longest run a caller may ask for (run_script's timeout_ms
	// is clamped to it).
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout(s.h))
	defer cancel()
	call := func(ctx context.Context, env *hostapi.Env) (any, error) {
		return s.h.Registry.CallTool(ctx, env, name, args)
	}
	var res any
	if quiet(r) {
		res, err = call(ctx, s.h.Env(principalOf(r).Workspace, sessionOf(r)))
	} else {
		res, err = s.trackTool("http")(ctx, principalOf(r).Workspace, sessionOf(r), name, args, call)
	}
	if s.h.Registry.ByTool(name) == nil {
		s.metrics.observeDynamicTool(principalOf(r).Workspace, name, err)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func callTimeout(h *hostapi.Host) time.Duration { return mcpserver.CallTimeout(h) }

// strictArgs maps a built-in tool's NAME_json arguments (from strict
// schemas) back to NAME.
func (s *Server) strictArgs(name string, args map[string]any) (map[string]any, error) {
	if !toolspec.HasJSONArgs(args) {
		return args, nil
	}
	op := s.h.Registry.ByTool(name)
	if op == nil {
		return args, nil
	}
	return toolspec.StrictArgs(args, op.InputSchema())
}

// withToolExample adds a tool's first example call to a VALIDATION_FAILED
// that a door raised before the registry saw the call (malformed JSON, a
// NAME_json that is not JSON), as the registry does for its own.
func withToolExample(reg *hostapi.Registry, name string, err error) error {
	e := apierr.Of(err)
	op := reg.ByTool(name)
	if e.Code != apierr.ValidationFailed || op == nil || len(op.Examples) == 0 || strings.Contains(e.Message, "; example: ") {
		return err
	}
	b, mErr := json.Marshal(op.Examples[0].Args)
	if mErr != nil {
		return err
	}
	return &apierr.Error{Code: e.Code, Message: e.Message + "; example: " + name + " " + string(b)}
}

// handleMCP serves MCP over streamable HTTP; each workspace has its own MCP
// server and its own sessions, so a token only ever reaches its workspace's
// tools and sessions.
func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request) {
	// The tool profile: ?profile=code on the endpoint URL, or the
	// X-Metaclaw-Profile header for clients that cannot change the URL.
	profile := r.URL.Query().Get("profile")
	if profile == "" {
		profile = r.Header.Get("X-Metaclaw-Profile")
	}
	h, err := s.mcp.HTTPHandler(principalOf(r).Workspace, profile)
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
