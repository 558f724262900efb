package server

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/server/mcpserver"
	"github.com/metaclaw/metaclaw/server/runfeed"
)

// The run feed (seed 002): every top-level call of a door — POST /api/run,
// POST /api/tools/{name}, an MCP tool call — is tracked by runfeed, with
// the files it touches recorded live through the calling environment's
// Record hook (the same hook that builds a run result's artifact list),
// and streamed to the page over GET /api/runs/events. GET /api/history
// restores the page after a reload.

// quiet reports whether a request asks to stay out of the feed
// (X-Metaclaw-Feed: off): the page's viewer reads files through the tool
// route, and browsing is not a run.
func quiet(r *http.Request) bool { return strings.EqualFold(r.Header.Get("X-Metaclaw-Feed"), "off") }

// fileURL is a file's download path on this server.
func fileURL(id string) string { return "/api/files/" + url.PathEscape(id) + "/download" }

// artifactOf describes a store file as seed 002's artifact.
func artifactOf(f store.File, action string) runfeed.Artifact {
	src := "generated"
	if f.Source == store.SourceUpload {
		src = "upload"
	}
	return runfeed.Artifact{ID: f.ID, Path: "/" + f.Name, Filename: path.Base(f.Name), IconType: f.IconType(), Source: src,
		Action: action, URL: fileURL(f.ID), MimeType: f.MimeType, Size: f.Size}
}

// tracked runs call as one feed message: env records the files it touches
// (and still tells a Record that was there before).
func (s *Server) tracked(ctx context.Context, c runfeed.Call, call func(ctx context.Context, env *hostapi.Env) (any, error)) (*runfeed.Handle, any, error, float64) {
	h := s.feed.Begin(c)
	env := s.h.Env(c.Workspace, c.Session)
	env.Record = func(f store.File, action string) { h.Artifact(artifactOf(f, action)) }
	env.OnCall = s.hostCalls(h, c)
	start := time.Now()
	res, err := call(ctx, env)
	return h, res, err, float64(time.Since(start).Microseconds()) / 1000
}

// hostCalls streams each operation a call makes — a script's files.* and
// tools.* calls, a saved tool's, run_script's over MCP — as its own
// tool_use/tool_result pair in the call's message (runfeed bounds and
// summarises them). A door's own tool call is the message itself and is
// not repeated.
func (s *Server) hostCalls(h *runfeed.Handle, c runfeed.Call) func(op *hostapi.Op, args map[string]any, res any, err error, d time.Duration) {
	return func(op *hostapi.Op, args map[string]any, res any, err error, d time.Duration) {
		if c.Kind == "tool" && op.Tool == c.Name {
			return
		}
		hc := runfeed.HostCall{Name: op.Name, Args: args, Result: res, DurationMs: float64(d.Microseconds()) / 1000}
		if hc.Name == "" {
			hc.Name = op.Tool
		}
		if err != nil {
			e := apierr.Of(err)
			hc.Error, hc.Result = &runfeed.ErrorInfo{Code: string(e.Code), Message: s.redact.Message(e.Message)}, nil
		}
		h.HostCall(hc)
	}
}

// trackTool is the tool-call hook of the HTTP tool route and of MCP.
func (s *Server) trackTool(door string) func(ctx context.Context, workspace, session, name string, args map[string]any, call mcpserver.CallFunc) (any, error) {
	return func(ctx context.Context, workspace, session, name string, args map[string]any, call mcpserver.CallFunc) (any, error) {
		h, res, err, ms := s.tracked(ctx, runfeed.Call{Workspace: workspace, Session: session, Kind: "tool", Name: name, Door: door, Input: args}, call)
		o := runfeed.Outcome{OK: err == nil, DurationMs: ms}
		if err != nil {
			e := apierr.Of(err)
			o.Error = &runfeed.ErrorInfo{Code: string(e.Code), Message: s.redact.Message(e.Message)}
		} else {
			o.Summary = map[string]any{"result": runfeed.Clip(res)}
			o.Instructions = s.instructionsIn(ctx, workspace, res)
		}
		h.End(o)
		return res, err
	}
}

// runTracked runs a script as one feed message and returns its result.
func (s *Server) runTracked(ctx context.Context, workspace, session string, rr hostapi.RunRequest, input any) (*hostapi.RunResult, string) {
	var out *hostapi.RunResult
	kind := "script"
	if rr.IsWasm() {
		kind = "module"
	}
	h, _, _, ms := s.tracked(ctx, runfeed.Call{Workspace: workspace, Session: session, Kind: kind, Name: rr.Name, Door: "http",
		Input: runLabel(rr, input)},
		func(ctx context.Context, env *hostapi.Env) (any, error) {
			out = s.h.Runner.Run(ctx, env, rr)
			return nil, nil
		})
	if out.Error != nil {
		out.Error.Message, out.Error.Stack = s.redact.Message(out.Error.Message), s.redact.Message(out.Error.Stack)
	}
	o := runfeed.Outcome{OK: out.OK, DurationMs: ms, Summary: map[string]any{"logs": len(out.Logs), "files": len(out.Files)}}
	if out.Error != nil {
		o.Error = &runfeed.ErrorInfo{Code: string(out.Error.Code), Message: out.Error.Message, Stack: out.Error.Stack}
	}
	if out.OK {
		o.Summary["result"] = runfeed.Clip(resultValue(out.Result))
		o.Instructions = s.instructionsIn(ctx, workspace, out.Result)
	}
	h.End(o)
	return out, h.RunID()
}

// resultValue decodes a script's JSON result for inspection.
func resultValue(v any) any {
	raw, ok := v.(json.RawMessage)
	if !ok {
		return v
	}
	var out any
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return out
}

// Frontend-executed results (seed 004). A script or tool asks the page to
// do something on the user's side by returning an object with
// requiresFrontendExecution: true — as its result, or as a value one level
// down (in an array, or under any key):
//
//	return { requiresFrontendExecution: true, type: "file_operation",
//	         operation: "save", file: "reports/q3.xlsx", filename: "q3.xlsx" }
//
// file names a workspace file (id or name; also fileId, filePath, path);
// instead of a file, content carries text to save (up to 1 MB, with
// filename and optionally mimeType). The page saves it with the File
// System Access API (showSaveFilePicker) where the browser has it, as a
// download otherwise, and reports the outcome (POST /api/instructions/ID),
// which the feed streams and the history keeps.
const (
	maxInstructions       = 10
	maxInstructionContent = 1 << 20
)

func (s *Server) instructionsIn(ctx context.Context, workspace string, result any) []*runfeed.Instruction {
	v := resultValue(result)
	var found []map[string]any
	consider := func(x any) {
		if m, ok := x.(map[string]any); ok && (m["requiresFrontendExecution"] == true || m["requires_frontend_execution"] == true) {
			found = append(found, m)
		}
	}
	consider(v)
	if len(found) == 0 {
		switch t := v.(type) {
		case []any:
			for _, x := range t {
				consider(x)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				switch x := t[k].(type) {
				case []any:
					for _, y := range x {
						consider(y)
					}
				default:
					consider(x)
				}
			}
		}
	}
	var out []*runfeed.Instruction
	for i, m := range found {
		if i == maxInstructions {
			break
		}
		out = append(out, s.instruction(ctx, workspace, m))
	}
	return out
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// instruction prepares one instruction; one that cannot be carried out is
// failed from the start with the reason, so that the caller sees it in
// the feed and the history.
func (s *Server) instruction(ctx context.Context, workspace string, m map[string]any) *runfeed.Instruction {
	in := &runfeed.Instruction{Type: firstString(m, "type"), Operation: strings.ToLower(firstString(m, "operation")),
		SuggestedName: firstString(m, "filename", "suggestedName", "suggested_name", "name"), MimeType: firstString(m, "mimeType", "mime_type")}
	fail := func(code apierr.Code, format string, args ...any) *runfeed.Instruction {
		e := apierr.New(code, format, args...)
		in.Status, in.Error = runfeed.StatusFailed, &runfeed.ErrorInfo{Code: string(e.Code), Message: e.Message}
		return in
	}
	if in.Type == "" {
		in.Type = "file_operation"
	}
	if in.Operation == "" || in.Operation == "download" || in.Operation == "write" {
		in.Operation = "save"
	}
	if in.Type != "file_operation" || in.Operation != "save" {
		return fail(apierr.ValidationFailed, "the page can carry out type \"file_operation\" with operation \"save\" (save a file to the user's disk); got type %q, operation %q",
			in.Type, in.Operation)
	}
	ref := firstString(m, "file", "fileId", "file_id", "filePath", "file_path", "path", "id")
	if ref != "" {
		f, err := s.h.Store.Workspace(workspace).Resolve(ctx, ref)
		if err != nil {
			e := apierr.Of(err)
			return fail(e.Code, "cannot save %q to the user's disk: %s", ref, e.Message)
		}
		a := artifactOf(*f, "")
		in.File = &a
		if in.SuggestedName == "" {
			in.SuggestedName = path.Base(f.Name)
		}
		if in.MimeType == "" {
			in.MimeType = f.MimeType
		}
		return in
	}
	content, ok := m["content"].(string)
	if !ok {
		return fail(apierr.ValidationFailed, "a save instruction needs file (a workspace file id or name) or content (text to save)")
	}
	if len(content) > maxInstructionContent {
		return fail(apierr.TooLarge, "inline content is %d bytes; save a workspace file (file: NAME) for more than %d bytes", len(content), maxInstructionContent)
	}
	if in.SuggestedName == "" {
		in.SuggestedName = "download.txt"
	}
	if in.MimeType == "" {
		in.MimeType = "text/plain"
	}
	in.Content = &content
	return in
}

// handleRunEvents streams the workspace's run feed as Server-Sent Events
// ("id: EPOCH-SEQ", "event: TYPE", the frame as data), resuming after
// Last-Event-ID (or ?last_event_id=).
func (s *Server) handleRunEvents(w http.ResponseWriter, r *http.Request) {
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last_event_id")
	}
	ws := principalOf(r).Workspace
	release, err := s.streams.acquire(ws)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	s.metrics.streams.Add(1)
	defer s.metrics.streams.Add(-1)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	frames, cancel := s.feed.Subscribe(ws, last)
	defer cancel()
	bw := bufio.NewWriterSize(w, 8192)
	bw.WriteString("retry: 2000\n: connected\n\n")
	if bw.Flush() != nil || rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	write := func(f runfeed.Frame) {
		data, err := json.Marshal(f.Data())
		if err != nil {
			return
		}
		if id := f.ID(); id != "" {
			bw.WriteString("id: " + id + "\n")
		}
		bw.WriteString("event: " + f.Type + "\ndata: ")
		bw.Write(data)
		bw.WriteString("\n\n")
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			bw.WriteString("event: shutdown\ndata: {}\n\n")
			bw.Flush()
			rc.Flush()
			return
		case f, ok := <-frames:
			if !ok {
				return // fell behind: the client resumes with its last id
			}
			write(f)
			for more := true; more; {
				select {
				case f2, ok := <-frames:
					if !ok {
						bw.Flush()
						rc.Flush()
						return
					}
					write(f2)
				default:
					more = false
				}
			}
			if bw.Flush() != nil || rc.Flush() != nil {
				return
			}
		case <-tick.C:
			bw.WriteString(": ping\n\n")
			if bw.Flush() != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// WorkspaceFile is one file of GET /api/history's workspace_files (seed
// 002), with the call that made it when this server saw one.
type WorkspaceFile struct {
	ID         string `json:"id"`
	Path       string `json:"path"`
	Filename   string `json:"filename"`
	IconType   string `json:"icon_type"`
	Source     string `json:"source"`
	URL        string `json:"url"`
	MessageID  string `json:"message_id,omitempty"`
	SessionID  string `json:"session_id,omitempty"`
	MimeType   string `json:"mime_type"`
	Size       int64  `json:"size"`
	CreatedAt  string `json:"created_at"`
	ModifiedOn string `json:"modified_on"`
	HasBackup  bool   `json:"has_backup"`
	// ExpiresOn is when a file with a time to live disappears.
	ExpiresOn string `json:"expires_on,omitempty"`
}

// handleHistory answers seed 002's history: {workspace: {workspace_files},
// messages} — every file of the workspace (uploads and generated files,
// with the run and session that made them) and the recent calls with their
// blocks, attachments and instructions; ?session_id= keeps one session's
// calls (files are shared by all sessions, SPEC 1).
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	ws := principalOf(r).Workspace
	list, err := s.workspace(r).List(r.Context(), "")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	files := make([]WorkspaceFile, len(list))
	for i, f := range list {
		a := artifactOf(f, "")
		wf := WorkspaceFile{ID: f.ID, Path: a.Path, Filename: a.Filename, IconType: a.IconType, Source: a.Source, URL: a.URL,
			SessionID: f.SourceSessionID, MimeType: f.MimeType, Size: f.Size, HasBackup: f.HasBackup,
			CreatedAt: f.CreatedOn.UTC().Format(time.RFC3339Nano), ModifiedOn: f.ModifiedOn.UTC().Format(time.RFC3339Nano)}
		if !f.ExpiresOn.IsZero() {
			wf.ExpiresOn = f.ExpiresOn.UTC().Format(time.RFC3339Nano)
		}
		if run, session, ok := s.feed.MadeBy(ws, f.ID); ok {
			wf.MessageID, wf.SessionID = run, session
		}
		files[i] = wf
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"workspace": map[string]any{"name": ws, "workspace_files": files, "auth_required": !s.tokens.empty()},
		"messages":  s.feed.Runs(ws, r.URL.Query().Get("session_id")),
	})
}

// handleGetRun answers one recent call with its blocks and instructions.
func (s *Server) handleGetRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.feed.Get(principalOf(r).Workspace, mux.Vars(r)["id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

// instructionReport is POST /api/instructions/{id}'s body.
type instructionReport struct {
	Status string `json:"status"`
	Method string `json:"method"`
	Error  string `json:"error"`
}

// handleReportInstruction records what the page did with an instruction.
func (s *Server) handleReportInstruction(w http.ResponseWriter, r *http.Request) {
	var req instructionReport
	if err := decodeJSON(w, r, 16<<10, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	var e *runfeed.ErrorInfo
	if req.Error != "" {
		e = &runfeed.ErrorInfo{Code: "CLIENT", Message: req.Error}
	}
	in, err := s.feed.Report(principalOf(r).Workspace, mux.Vars(r)["id"], req.Status, req.Method, e)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, in)
}
