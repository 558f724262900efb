// Package runfeed is the live run feed of the workspace page (seed 002):
// every top-level call a door makes — a script run, a meta-tool call from
// HTTP or MCP — becomes a "message" whose progress streams as seed 002's
// frames: message_start, a tool_use block, one tool_result block with an
// artifact for each file the call creates, modifies or deletes (as it
// happens), a closing tool_result with the outcome, an attachments block
// listing the files the call left behind, and message_stop. Frames are
// numbered per workspace and kept in a bounded ring, so a page that
// reconnects resumes where it stopped; finished calls are kept (bounded)
// for the history route that restores the page after a reload.
//
// A call may also carry instructions for the client (seed 004's
// requiresFrontendExecution: save this file to the user's disk); the page
// carries them out and reports back, and the report is a frame too.
//
// The feed lives in the memory of one server process: it shows the calls
// this process served. File changes made elsewhere (another host of a
// shared store, the CLI) reach the page through the store's file events.
package runfeed

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Frame types: seed 002's message frames, the feed's own notice that a
// client must reload the history instead of trusting a replay, and the
// outcome of a client-side instruction.
const (
	FrameMessageStart      = "message_start"
	FrameBlockStart        = "content_block_start"
	FrameBlockStop         = "content_block_stop"
	FrameMessageStop       = "message_stop"
	FrameInstructionResult = "instruction_result"
	FrameGap               = "feed:gap"
)

// Defaults of Options.
const (
	DefaultKeepRuns   = 200
	DefaultKeepFrames = 4096
	// maxArtifacts bounds the artifacts one call lists; a call that
	// touches more (a split into thousands of pages) reports the count.
	maxArtifacts = 1000
	// maxInputBytes bounds the input a tool_use block shows.
	maxInputBytes = 4096
	// discarded marks a file the call created and deleted again.
	discarded = "discarded"
)

// Options size a Feed.
type Options struct {
	// KeepRuns is how many finished calls of a workspace the history
	// keeps at least (up to a quarter more between trims).
	KeepRuns int
	// KeepFrames is how many frames of a workspace a reconnecting client
	// can replay.
	KeepFrames int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Feed holds the runs and frames of every workspace.
type Feed struct {
	opts  Options
	epoch string

	mu  sync.Mutex
	ws  map[string]*workspace
	ids uint64
}

// New returns an empty feed.
func New(opts Options) *Feed {
	if opts.KeepRuns <= 0 {
		opts.KeepRuns = DefaultKeepRuns
	}
	if opts.KeepFrames <= 0 {
		opts.KeepFrames = DefaultKeepFrames
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b := make([]byte, 4)
	rand.Read(b)
	return &Feed{opts: opts, epoch: hex.EncodeToString(b), ws: map[string]*workspace{}}
}

// Frame is one streamed event: its type, its id and its JSON payload
// (which carries "type" too). Frames are kept by value in a workspace's
// ring and a run's frames point at the run and the block they announce:
// the payload is built when a frame is sent, not for every frame kept
// (seven maps per run were a quarter of what a trivial run allocated in
// the server, and most frames are never sent to anyone).
type Frame struct {
	Type  string
	epoch string
	seq   uint64 // 0: a gap frame, which has no id
	run   *Run   // message_start, content blocks, message_stop
	index int    // a content block's index
	// block is a content block's body; data is the payload of a frame
	// that is not a run's (instruction_result, feed:gap).
	block, data map[string]any
}

// ID is "EPOCH-SEQ", unique for the life of the process; a gap frame has
// none.
func (fr Frame) ID() string {
	if fr.seq == 0 {
		return ""
	}
	return fr.epoch + "-" + strconv.FormatUint(fr.seq, 10)
}

// Data is the frame's JSON payload, a new map each call. What it reads of
// the run is fixed by the time the frame is emitted: the head at Begin,
// the outcome at End (after which a run no longer changes).
func (fr Frame) Data() map[string]any {
	r := fr.run
	var d map[string]any
	switch fr.Type {
	case FrameMessageStart:
		d = map[string]any{"message": map[string]any{
			"id": r.ID, "role": r.Role, "kind": r.Kind, "name": r.Name, "door": r.Door, "session_id": r.SessionID, "started_at": r.StartedAt}}
	case FrameBlockStart:
		d = map[string]any{"message_id": r.ID, "index": fr.index, "content_block": fr.block}
	case FrameBlockStop:
		d = map[string]any{"message_id": r.ID, "index": fr.index}
	case FrameMessageStop:
		d = map[string]any{"message_id": r.ID, "status": r.Status, "duration_ms": r.DurationMs, "session_id": r.SessionID, "name": r.Name}
		if r.Error != nil {
			d["error"] = r.Error
		}
		if len(r.Instructions) > 0 {
			d["instructions"] = r.Instructions
		}
		if r.HostCalls > 0 {
			d["host_calls"] = r.HostCalls
		}
		if r.MoreHostCalls > 0 {
			d["more_host_calls"] = r.MoreHostCalls
		}
	default:
		d = make(map[string]any, len(fr.data)+1)
		for k, v := range fr.data {
			d[k] = v
		}
	}
	d["type"] = fr.Type
	return d
}

// Artifact is a file a call touched, as seed 002 describes it.
type Artifact struct {
	ID       string `json:"id"`
	Path     string `json:"path"`
	Filename string `json:"filename"`
	IconType string `json:"icon_type"`
	// Source is "generated" (a call made or changed it) or "upload".
	Source string `json:"source"`
	// Action is what the call did: created, modified or deleted.
	Action    string `json:"action"`
	URL       string `json:"url,omitempty"`
	MimeType  string `json:"mime_type,omitempty"`
	Size      int64  `json:"size"`
	MessageID string `json:"message_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// Instruction is work a call asks the client to do (seed 004).
type Instruction struct {
	ID        string `json:"id"`
	MessageID string `json:"message_id"`
	SessionID string `json:"session_id,omitempty"`
	Type      string `json:"type"`      // file_operation
	Operation string `json:"operation"` // save
	// File is the workspace file to save (with a download URL), or nil
	// when the instruction carries its Content inline.
	File          *Artifact `json:"file,omitempty"`
	Content       *string   `json:"content,omitempty"`
	MimeType      string    `json:"mime_type,omitempty"`
	SuggestedName string    `json:"suggested_name"`
	// Status is pending until the client reports done, failed or
	// cancelled; an instruction the server could not prepare is failed
	// from the start, with Error saying why.
	Status     string     `json:"status"`
	Method     string     `json:"method,omitempty"` // file_system_access or download
	Error      *ErrorInfo `json:"error,omitempty"`
	ReportedAt string     `json:"reported_at,omitempty"`
}

// Instruction statuses.
const (
	StatusPending   = "pending"
	StatusDone      = "done"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// ErrorInfo is a coded error in a frame.
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Stack   string `json:"stack,omitempty"`
}

// Run is one call and what it did: a history message.
type Run struct {
	ID        string `json:"id"`
	Role      string `json:"role"` // assistant
	Kind      string `json:"kind"` // script or tool
	Name      string `json:"name"`
	Door      string `json:"door"`
	SessionID string `json:"session_id"`
	StartedAt string `json:"started_at"`
	// Status is running, ok or error.
	Status       string           `json:"status"`
	DurationMs   float64          `json:"duration_ms,omitempty"`
	Error        *ErrorInfo       `json:"error,omitempty"`
	Content      []map[string]any `json:"content"`
	Attachments  []Artifact       `json:"attachments"`
	Instructions []*Instruction   `json:"instructions,omitempty"`
	// MoreArtifacts counts artifacts beyond what the run lists.
	MoreArtifacts int `json:"more_artifacts,omitempty"`
	// HostCalls counts the operations a script run called; the first
	// MaxHostCalls are blocks of Content, MoreHostCalls the rest.
	HostCalls     int `json:"host_calls,omitempty"`
	MoreHostCalls int `json:"more_host_calls,omitempty"`

	toolUseID string
	blocks    int
	arts      map[string]*Artifact
	order     []string
}

type workspace struct {
	seq uint64
	// ring holds the last KeepFrames frames, frame n at ring[(n-1) %
	// KeepFrames]: it grows until it holds KeepFrames, then frames are
	// overwritten in place, never copied.
	ring  []Frame
	runs  []*Run // the last KeepRuns runs, oldest first (running ones too)
	byID  map[string]*Run
	instr map[string]*Instruction
	// made maps a file id to the run that last created or changed it.
	made map[string]provenance
	subs map[*subscriber]struct{}
}

type provenance struct{ run, session string }

type subscriber struct {
	ch chan Frame
}

func (f *Feed) workspace(name string) *workspace {
	w := f.ws[name]
	if w == nil {
		w = &workspace{byID: map[string]*Run{}, instr: map[string]*Instruction{}, made: map[string]provenance{}, subs: map[*subscriber]struct{}{}}
		f.ws[name] = w
	}
	return w
}

func (f *Feed) newID(prefix string) string {
	f.ids++
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + "_" + f.epoch + strconv.FormatUint(f.ids, 36) + hex.EncodeToString(b)
}

// emit numbers a frame, keeps it in the ring and hands it to subscribers;
// a subscriber whose buffer is full is dropped (its channel closed) and
// resumes from its last frame id. f.mu is held.
func (f *Feed) emit(w *workspace, fr Frame) {
	w.seq++
	fr.epoch, fr.seq = f.epoch, w.seq
	if i := int((fr.seq - 1) % uint64(f.opts.KeepFrames)); i < len(w.ring) {
		w.ring[i] = fr
	} else {
		// Still filling (i == len): grown by doubling up to KeepFrames,
		// so that a workspace with a few runs keeps a few frames.
		if len(w.ring) == cap(w.ring) {
			grown := make([]Frame, len(w.ring), min(max(2*cap(w.ring), 64), f.opts.KeepFrames))
			copy(grown, w.ring)
			w.ring = grown
		}
		w.ring = append(w.ring, fr)
	}
	for s := range w.subs {
		select {
		case s.ch <- fr:
		default:
			delete(w.subs, s)
			close(s.ch)
		}
	}
}

// Subscribe streams workspace's frames after lastID ("" = from now on)
// until cancel. When frames after lastID are no longer all in the ring (or
// lastID is from an earlier process), a FrameGap comes first: the client
// reloads the history. A subscriber that falls behind has its channel
// closed and resubscribes with its last frame id.
func (f *Feed) Subscribe(ws, lastID string) (frames <-chan Frame, cancel func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.workspace(ws)
	var replay []Frame
	if lastID != "" {
		epoch, n, ok := parseID(lastID)
		switch {
		case !ok || epoch != f.epoch || n > w.seq:
			replay = append(replay, f.gapFrame())
		default:
			kept := uint64(len(w.ring))
			first := w.seq - kept + 1 // the oldest frame kept
			if n+1 < first {
				replay = append(replay, f.gapFrame())
				n = first - 1
			}
			for seq := n + 1; seq <= w.seq; seq++ {
				replay = append(replay, w.ring[(seq-1)%uint64(f.opts.KeepFrames)])
			}
		}
	}
	// A run streams a burst of frames (its host calls, up to
	// MaxHostCalls pairs); the buffer holds one whole such run.
	s := &subscriber{ch: make(chan Frame, 1024+len(replay))}
	for _, fr := range replay {
		s.ch <- fr
	}
	w.subs[s] = struct{}{}
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if _, ok := w.subs[s]; ok {
				delete(w.subs, s)
				close(s.ch)
			}
		})
	}
}

// gapFrame tells a resuming client that frames were lost; its id is the
// current position so that the client resumes from here.
func (f *Feed) gapFrame() Frame {
	return Frame{Type: FrameGap}
}

func parseID(id string) (epoch string, n uint64, ok bool) {
	epoch, num, found := strings.Cut(strings.TrimSpace(id), "-")
	if !found {
		return "", 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	return epoch, n, err == nil
}

// Call describes a call that begins.
type Call struct {
	Workspace string
	Session   string
	Kind      string // script or tool
	Name      string // script.js, or the tool's name
	Door      string // http, mcp
	Input     any    // the script's code and input, or the tool's arguments
}

// Handle reports the progress of one call.
type Handle struct {
	f   *Feed
	ws  string
	run *Run
}

// RunID is the call's message id.
func (h *Handle) RunID() string { return h.run.ID }

// Begin records that a call starts: message_start and its tool_use block.
func (f *Feed) Begin(c Call) *Handle {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.workspace(c.Workspace)
	r := &Run{ID: f.newID("msg"), Role: "assistant", Kind: c.Kind, Name: c.Name, Door: c.Door, SessionID: c.Session,
		StartedAt: f.opts.Now().UTC().Format(time.RFC3339Nano), Status: "running", Content: make([]map[string]any, 0, 2), Attachments: []Artifact{}}
	r.toolUseID = f.newID("toolu")
	w.runs = append(w.runs, r)
	w.byID[r.ID] = r
	f.trimRuns(w)
	f.emit(w, Frame{Type: FrameMessageStart, run: r})
	f.block(w, r, map[string]any{"type": "tool_use", "id": r.toolUseID, "name": r.Name, "input": Clip(c.Input)})
	return &Handle{f: f, ws: c.Workspace, run: r}
}

// trimRuns forgets the oldest finished runs beyond KeepRuns.
func (f *Feed) trimRuns(w *workspace) {
	// Trimmed when a quarter over, in one pass, so that the slice is not
	// copied on every call.
	drop := len(w.runs) - f.opts.KeepRuns
	if drop <= f.opts.KeepRuns/4 {
		return
	}
	kept := w.runs[:0]
	for _, r := range w.runs {
		if drop > 0 && r.Status != "running" {
			drop--
			delete(w.byID, r.ID)
			for _, in := range r.Instructions {
				delete(w.instr, in.ID)
			}
			continue
		}
		kept = append(kept, r)
	}
	clear(w.runs[len(kept):])
	w.runs = kept
}

// block adds a content block to r and emits it as start + stop frames.
func (f *Feed) block(w *workspace, r *Run, b map[string]any) {
	idx := r.blocks
	r.blocks++
	r.Content = append(r.Content, b)
	f.emit(w, Frame{Type: FrameBlockStart, run: r, index: idx, block: b})
	f.emit(w, Frame{Type: FrameBlockStop, run: r, index: idx})
}

// Artifact records that the call did a.Action to a file, and streams it as
// a tool_result block carrying the artifact.
func (h *Handle) Artifact(a Artifact) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.workspace(h.ws)
	r := h.run
	a.MessageID, a.SessionID = r.ID, r.SessionID
	if a.Action != "deleted" {
		w.made[a.ID] = provenance{run: r.ID, session: r.SessionID}
	} else {
		delete(w.made, a.ID)
	}
	// Fold repeated actions on one file as the run result's artifact
	// list does: created then modified stays created; created then
	// deleted leaves nothing behind.
	prev := r.arts[a.ID]
	switch {
	case prev == nil && len(r.order) >= maxArtifacts:
		r.MoreArtifacts++
		return
	case prev == nil:
		if r.arts == nil {
			r.arts = map[string]*Artifact{}
		}
		cp := a
		r.arts[a.ID] = &cp
		r.order = append(r.order, a.ID)
	case prev.Action == "created" && a.Action == "deleted":
		*prev = a
		prev.Action = discarded
	case prev.Action == "created":
		*prev = a
		prev.Action = "created"
	default:
		*prev = a
	}
	f.block(w, r, map[string]any{"type": "tool_result", "tool_use_id": r.toolUseID, "name": r.Name, "status": "success", "artifact": a})
}

// Outcome is how a call ended.
type Outcome struct {
	OK         bool
	Error      *ErrorInfo
	DurationMs float64
	// Summary is a short description of the result for the closing block
	// (the run's logs count, the result's size, …).
	Summary map[string]any
	// Instructions the call's result carries for the client.
	Instructions []*Instruction
}

// End records the outcome: the closing tool_result, the attachments block
// (the files the call created or changed, in the order first touched) and
// message_stop with the instructions for the client.
func (h *Handle) End(o Outcome) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.workspace(h.ws)
	r := h.run
	r.DurationMs = o.DurationMs
	r.Status = "ok"
	status := "success"
	if !o.OK {
		r.Status, status = "error", "error"
		r.Error = o.Error
	}
	res := map[string]any{"type": "tool_result", "tool_use_id": r.toolUseID, "name": r.Name, "status": status}
	if o.Summary != nil {
		res["content"] = o.Summary
	}
	if r.Error != nil {
		res["error"] = r.Error
	}
	f.block(w, r, res)
	r.Attachments = r.Attachments[:0]
	for _, id := range r.order {
		if a := r.arts[id]; a.Action != "deleted" && a.Action != discarded {
			r.Attachments = append(r.Attachments, *a)
		}
	}
	if len(r.Attachments) > 0 {
		f.block(w, r, map[string]any{"type": "attachments", "files": r.Attachments})
	}
	for _, in := range o.Instructions {
		in.ID = f.newID("instr")
		in.MessageID, in.SessionID = r.ID, r.SessionID
		if in.Status == "" {
			in.Status = StatusPending
		}
		r.Instructions = append(r.Instructions, in)
		w.instr[in.ID] = in
	}
	f.emit(w, Frame{Type: FrameMessageStop, run: r})
	f.trimRuns(w)
}

// Get returns a copy of one run of ws.
func (f *Feed) Get(ws, id string) (Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.workspace(ws).byID[id]
	if r == nil {
		return Run{}, apierr.New(apierr.NotFound, "no run %q in this workspace's recent history (the server keeps the last %d calls)", id, f.opts.KeepRuns)
	}
	return r.snapshot(), nil
}

func (r *Run) snapshot() Run {
	c := *r
	c.Content = append([]map[string]any(nil), r.Content...)
	c.Attachments = append([]Artifact{}, r.Attachments...)
	c.Instructions = nil
	for _, in := range r.Instructions {
		cp := *in
		c.Instructions = append(c.Instructions, &cp)
	}
	return c
}

// Runs returns ws's kept runs, oldest first; session, when set, keeps only
// that session's.
func (f *Feed) Runs(ws, session string) []Run {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []Run{}
	for _, r := range f.workspace(ws).runs {
		if session == "" || r.SessionID == session {
			out = append(out, r.snapshot())
		}
	}
	return out
}

// MadeBy returns the run and session that last created or changed file id
// in ws (ok false when this process has not seen a call touch it).
func (f *Feed) MadeBy(ws, fileID string) (run, session string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.workspace(ws).made[fileID]
	return p.run, p.session, ok
}

// Report records the client's outcome of an instruction and streams it.
// Reporting the same final status again is a no-op; a different one after
// a final status is ALREADY_EXISTS.
func (f *Feed) Report(ws, id, status, method string, e *ErrorInfo) (Instruction, error) {
	switch status {
	case StatusDone, StatusFailed, StatusCancelled:
	default:
		return Instruction{}, apierr.New(apierr.ValidationFailed, "status %q is not one of done, failed, cancelled", status)
	}
	switch method {
	case "", "file_system_access", "download":
	default:
		return Instruction{}, apierr.New(apierr.ValidationFailed, "method %q is not one of file_system_access, download", method)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.workspace(ws)
	in := w.instr[id]
	if in == nil {
		return Instruction{}, apierr.New(apierr.NotFound, "no instruction %q in this workspace's recent history", id)
	}
	if in.Status != StatusPending {
		if in.Status == status {
			return *in, nil
		}
		return *in, apierr.New(apierr.AlreadyExists, "instruction %q was already reported %s", id, in.Status)
	}
	in.Status, in.Method, in.Error = status, method, e
	in.ReportedAt = f.opts.Now().UTC().Format(time.RFC3339Nano)
	f.emit(w, Frame{Type: FrameInstructionResult, data: map[string]any{"message_id": in.MessageID, "instruction": *in}})
	return *in, nil
}

// Clip keeps a value shown in a frame small: when its JSON is longer than
// 4 KB, long strings are cut and big values replaced by a note of their
// size.
func Clip(v any) any {
	if v == nil {
		return map[string]any{}
	}
	if jsonAtMost(v, maxInputBytes) {
		return v // most inputs: no need to encode them to know
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) <= maxInputBytes {
		if err != nil {
			return map[string]any{}
		}
		return v
	}
	if m, ok := v.(map[string]any); ok {
		out := make(map[string]any, len(m))
		budget := maxInputBytes / max(len(m), 1)
		for k, x := range m {
			out[k] = clipValue(x, budget)
		}
		return out
	}
	return clipValue(v, maxInputBytes)
}

// jsonAtMost reports whether v's JSON is surely no longer than limit
// bytes, counting each string byte as the 6 it may escape to; false for
// anything it does not know (json.Marshal then decides).
func jsonAtMost(v any, limit int) bool {
	n := 0
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case nil, bool:
			n += 5
		case string:
			n += 6*len(x) + 2
		case int, int64, float64, json.Number:
			n += 24
		case []any:
			n += 2
			for _, e := range x {
				if n++; !walk(e) {
					return false
				}
			}
		case map[string]any:
			n += 2
			for k, e := range x {
				if n += 6*len(k) + 4; !walk(e) {
					return false
				}
			}
		default:
			return false
		}
		return n <= limit
	}
	return walk(v) && n <= limit
}

func clipValue(v any, budget int) any {
	if s, ok := v.(string); ok {
		if len(s) <= budget {
			return s
		}
		cut := budget
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "… (" + strconv.Itoa(len(s)) + " bytes)"
	}
	b, _ := json.Marshal(v)
	if len(b) <= budget {
		return v
	}
	return "(" + strconv.Itoa(len(b)) + " bytes of JSON)"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
