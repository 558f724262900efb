// Package agenttools keeps agent-authored reusable tools (SPEC 6): saved in
// the store's tool store (SQLite's agent_tools, or a shared backend's tool
// records, so that a tool saved on one host is callable on every other)
// with a version that increments on every save, listed beside the built-in
// meta-tools, and callable from scripts, HTTP, MCP and the CLI.
// It also loads the built-in script tools of the scripts/ folder and offers
// run_script, the meta-tool that runs code.
package agenttools

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja/parser"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/scripts"
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{2,63}$`)

// MaxToolBytes caps one saved tool: its code, input schema and description
// together. A tool is a script, not a place for data; data belongs in
// workspace files, which the quota counts and the text API pages through.
const MaxToolBytes = 256 << 10

// maxDescription caps a tool's description, which every tool list repeats
// to the model.
const maxDescription = 4096

// Tool is a reusable tool: JavaScript code, or a WebAssembly module kept
// as a workspace file.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema hostapi.Schema `json:"inputSchema"`
	Code        string         `json:"code,omitempty"`
	// Wasm is the id of the workspace file holding the tool's module.
	Wasm      string    `json:"wasm,omitempty"`
	Version   int       `json:"version"`
	Builtin   bool      `json:"builtin"`
	UpdatedOn time.Time `json:"updatedOn,omitempty"`
}

// Summary is one entry of tools.list.
type Summary struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema hostapi.Schema `json:"inputSchema"`
	// Wasm is the module's file id for a WebAssembly tool.
	Wasm    string `json:"wasm,omitempty"`
	Version int    `json:"version"`
	Builtin bool   `json:"builtin"`
}

// Tools is the saved-tool store of one host; it is the registry's
// DynamicTools.
type Tools struct {
	host     *hostapi.Host
	store    *store.ToolStore
	builtins map[string]*Tool
	schemas  schemaCache
	mu       sync.Mutex
	watchers []func(workspace string)
}

// Register loads the built-in script tools, adds the tools.* operations,
// tool_* meta-tools and run_script, and follows the store's tool changes
// (this host's, other processes' and other hosts') for OnChange.
func Register(h *hostapi.Host) (*Tools, error) {
	t := &Tools{host: h, store: h.Store.Tools(), builtins: map[string]*Tool{}}
	if err := t.loadBuiltins(scripts.FS); err != nil {
		return nil, err
	}
	h.Registry.Dynamic = t
	h.Registry.Add(t.ops()...)
	stop := t.store.Watch(func(c store.ToolChange) { t.changed(c.Workspace) })
	h.OnClose(func() error { stop(); return nil })
	return t, nil
}

// OnChange registers fn to be told when a workspace's tool list changes
// (MCP sends tools/list_changed), whichever host or process changed it. fn
// is called on one goroutine, shortly after the change commits.
func (t *Tools) OnChange(fn func(workspace string)) {
	t.mu.Lock()
	t.watchers = append(t.watchers, fn)
	t.mu.Unlock()
}

func (t *Tools) changed(ws string) {
	t.mu.Lock()
	ws2 := append([]func(string){}, t.watchers...)
	t.mu.Unlock()
	for _, fn := range ws2 {
		fn(ws)
	}
}

// loadBuiltins reads every .js file of fsys; a file without a valid header
// is a build mistake and stops start-up. Only the header is read here, to
// keep start-up cheap: that every built-in's schema compiles and its code
// parses is checked by the package's tests (TestBuiltinScriptsAreValid).
func (t *Tools) loadBuiltins(fsys fs.FS) error {
	paths, err := fs.Glob(fsys, "*.js")
	if err != nil {
		return err
	}
	for _, p := range paths {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		tool, err := ParseHeader(string(b))
		if err != nil {
			return fmt.Errorf("scripts/%s: %w", p, err)
		}
		tool.Builtin, tool.Version = true, 1
		if !nameRE.MatchString(tool.Name) || t.builtins[tool.Name] != nil {
			return fmt.Errorf("scripts/%s: tool name %q is invalid or taken twice", p, tool.Name)
		}
		t.builtins[tool.Name] = tool
	}
	return nil
}

// ParseHeader reads a script tool's header comment:
//
//	// @tool name
//	// @description what it does
//	// @input {"type":"object",...}
func ParseHeader(code string) (*Tool, error) {
	tool := &Tool{Code: code}
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "//") {
			if line == "" {
				continue
			}
			break
		}
		key, val, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "//")), " ")
		val = strings.TrimSpace(val)
		switch key {
		case "@tool":
			tool.Name = val
		case "@description":
			tool.Description = val
		case "@input":
			if err := json.Unmarshal([]byte(val), &tool.InputSchema); err != nil {
				return nil, fmt.Errorf("@input is not JSON: %w", err)
			}
		}
	}
	if tool.Name == "" || tool.Description == "" {
		return nil, fmt.Errorf("header must declare @tool and @description")
	}
	if tool.InputSchema == nil {
		tool.InputSchema = hostapi.Schema{"type": "object"}
	}
	return tool, nil
}

// check validates a tool definition.
func (t *Tools) check(tool *Tool) error {
	if !nameRE.MatchString(tool.Name) {
		return apierr.New(apierr.ValidationFailed, "tool name %q must match ^[a-z][a-z0-9_]{2,63}$ (lower case, digits, underscores)", tool.Name)
	}
	if t.host.Registry.IsBuiltin(tool.Name) {
		return apierr.New(apierr.ValidationFailed, "tool name %q is a built-in meta-tool; choose another name", tool.Name)
	}
	if strings.TrimSpace(tool.Description) == "" {
		return apierr.New(apierr.ValidationFailed, "a tool needs a description that tells an LLM when to use it")
	}
	if n := utf8.RuneCountInString(tool.Description); n > maxDescription {
		return apierr.New(apierr.ValidationFailed, "the description is %d characters; keep it under %d (it is shown in every tool list)", n, maxDescription)
	}
	if tool.InputSchema == nil {
		tool.InputSchema = hostapi.Schema{"type": "object"}
	}
	if n := tool.size(); n > MaxToolBytes {
		return apierr.New(apierr.TooLarge, "tool %q is %d bytes (code, input schema and description); the limit is %d KB: "+
			"keep data in workspace files and read it from the code (files.readText, files.table.query)", tool.Name, n, MaxToolBytes>>10)
	}
	if typ, ok := tool.InputSchema["type"]; ok && typ != "object" {
		return apierr.New(apierr.ValidationFailed, "inputSchema must describe an object (\"type\": \"object\"), got %v", typ)
	}
	if _, err := hostapi.CompileSchema(tool.InputSchema); err != nil {
		return apierr.New(apierr.ValidationFailed, "inputSchema is not a valid JSON Schema: %v", err)
	}
	switch {
	case tool.Wasm != "" && tool.Code != "":
		return apierr.New(apierr.ValidationFailed, "a tool is either JavaScript (code) or a WebAssembly module (wasm), not both")
	case tool.Wasm != "":
		return nil // the module is checked by the WebAssembly runtime
	case tool.Code == "":
		return apierr.New(apierr.ValidationFailed, "a tool needs code (a JavaScript body) or wasm (a workspace .wasm file)")
	case strings.HasPrefix(tool.Code, wasmMarker):
		return apierr.New(apierr.ValidationFailed, "the tool's code may not begin with %q; give a module as wasm instead", wasmMarker)
	}
	if _, err := parser.ParseFile(nil, tool.Name+".js", "(async function() {\n"+tool.Code+"\n})()", 0); err != nil {
		return apierr.New(apierr.ValidationFailed, "the tool's code does not parse: %v", err)
	}
	return nil
}

// wasmMarker begins the stored code of a WebAssembly tool, followed by its
// module's file id. The tool store keeps one code column; a JavaScript
// tool can never start with it (the text cannot parse inside the async
// function a tool's code runs in, and check refuses it).
const wasmMarker = "#!wasm "

// storedCode is what the tool store keeps as tool's code.
func (tool *Tool) storedCode() string {
	if tool.Wasm != "" {
		return wasmMarker + tool.Wasm
	}
	return tool.Code
}

// fromStored splits stored code into a tool's code or module file id.
func fromStored(code string) (js, wasm string) {
	if id, ok := strings.CutPrefix(code, wasmMarker); ok {
		return "", strings.TrimSpace(id)
	}
	return code, ""
}

// size is what the tool stores: its code, schema and description.
func (tool *Tool) size() int {
	b, _ := json.Marshal(tool.InputSchema)
	return len(tool.storedCode()) + len(b) + len(tool.Description)
}

func (t *Tools) get(ctx context.Context, ws, name string) (*Tool, error) {
	if b := t.builtins[name]; b != nil {
		return b, nil
	}
	r, err := t.store.Get(ctx, ws, name)
	if err != nil {
		return nil, err
	}
	tool := &Tool{Name: r.Name, Description: r.Description, Version: r.Version, UpdatedOn: r.UpdatedOn}
	tool.Code, tool.Wasm = fromStored(r.Code)
	if err := json.Unmarshal(r.InputSchema, &tool.InputSchema); err != nil {
		return nil, apierr.New(apierr.Internal, "saved tool %q has a damaged input schema (%v); save it again", name, err)
	}
	return tool, nil
}

func (t *Tools) list(ctx context.Context, ws string) ([]Summary, error) {
	out := []Summary{}
	for _, b := range t.builtins {
		out = append(out, Summary{Name: b.Name, Description: b.Description, InputSchema: b.InputSchema, Version: b.Version, Builtin: true})
	}
	saved, err := t.store.List(ctx, ws)
	if err != nil {
		return nil, err
	}
	for _, r := range saved {
		s := Summary{Name: r.Name, Description: r.Description, Version: r.Version}
		_, s.Wasm = fromStored(r.Code)
		json.Unmarshal(r.InputSchema, &s.InputSchema)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// save stores a tool (or a new version of it) and charges its size to the
// workspace's quota in the same step (store.ToolStore): a tool that does
// not fit is QUOTA_EXCEEDED and nothing is stored.
func (t *Tools) save(ctx context.Context, ws string, tool *Tool) (int, error) {
	if err := t.check(tool); err != nil {
		return 0, err
	}
	if t.builtins[tool.Name] != nil {
		return 0, apierr.New(apierr.ValidationFailed, "tool name %q is a built-in script tool; choose another name", tool.Name)
	}
	schemaJSON, _ := json.Marshal(tool.InputSchema)
	saved, err := t.store.Save(ctx, ws, store.ToolRecord{Name: tool.Name, Description: tool.Description,
		InputSchema: schemaJSON, Code: tool.storedCode()})
	if err != nil {
		return 0, err
	}
	return saved.Version, nil
}

func (t *Tools) remove(ctx context.Context, ws, name string) error {
	if t.builtins[name] != nil {
		return apierr.New(apierr.ValidationFailed, "%q is a built-in script tool and cannot be deleted", name)
	}
	return t.store.Delete(ctx, ws, name)
}

// run executes a reusable tool one level deeper than env and returns its
// result, or its error as a coded error.
func (t *Tools) run(ctx context.Context, env *hostapi.Env, tool *Tool, args map[string]any) (any, error) {
	sch, err := t.schemas.compile(tool.InputSchema)
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "tool %q has an invalid input schema: %v", tool.Name, err)
	}
	// Arguments arrive canonical from every door; decoding them against the
	// tool's own schema makes null mean absent for its optional arguments.
	canon, err := hostapi.Canonical(args, tool.InputSchema)
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "arguments of %q: %s", tool.Name, apierr.Of(err).Message)
	}
	args, _ = canon.(map[string]any)
	if args == nil {
		args = map[string]any{}
	}
	if err := sch.Validate(args); err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "arguments of %q: %v", tool.Name, oneLine(err.Error()))
	}
	if t.host.Runner == nil {
		return nil, apierr.New(apierr.ToolWorkerUnavailable, "no script runner is configured on this host")
	}
	req := hostapi.RunRequest{Code: tool.Code, Input: args, Name: tool.Name + ".js"}
	if tool.Wasm != "" {
		// Said here rather than by the runner, which would only name an id.
		if _, err := env.WS.Resolve(ctx, tool.Wasm); apierr.Is(err, apierr.NotFound) {
			return nil, apierr.New(apierr.NotFound, "tool %q runs the WebAssembly module in file %s, which was deleted; "+
				"upload the module again and save the tool with it (tools.save({..., wasm: \"name.wasm\"}))", tool.Name, tool.Wasm)
		}
		req = hostapi.RunRequest{WasmRef: tool.Wasm, Input: args, Name: tool.Name + ".wasm"}
	}
	child := *env
	child.Depth++
	res := t.host.Runner.Run(ctx, &child, req)
	if !res.OK {
		return nil, &apierr.Error{Code: res.Error.Code, Message: fmt.Sprintf("tool %q failed: %s", tool.Name, res.Error.Message)}
	}
	return res.Result, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ListTools implements hostapi.DynamicTools.
func (t *Tools) ListTools(ctx context.Context, env *hostapi.Env) ([]hostapi.ToolInfo, error) {
	list, err := t.list(ctx, env.WS.Name())
	if err != nil {
		return nil, err
	}
	out := make([]hostapi.ToolInfo, len(list))
	for i, s := range list {
		out[i] = hostapi.ToolInfo{Name: s.Name, Description: s.Description, InputSchema: s.InputSchema}
	}
	return out, nil
}

// CallTool implements hostapi.DynamicTools.
func (t *Tools) CallTool(ctx context.Context, env *hostapi.Env, name string, args map[string]any) (any, bool, error) {
	tool, err := t.get(ctx, env.WS.Name(), name)
	if apierr.Is(err, apierr.NotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	res, err := t.run(ctx, env, tool, args)
	return res, true, err
}

// schemaCache keeps compiled input schemas by their JSON text, so that a
// tool called again does not compile its schema again (≈0.5 ms each).
type schemaCache struct {
	mu sync.Mutex
	m  map[string]*jsonschema.Schema
}

// maxCachedSchemas bounds the cache; it is emptied when full.
const maxCachedSchemas = 512

func (c *schemaCache) compile(s hostapi.Schema) (*jsonschema.Schema, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	key := string(b)
	c.mu.Lock()
	sch := c.m[key]
	c.mu.Unlock()
	if sch != nil {
		return sch, nil
	}
	sch, err = hostapi.CompileSchema(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedSchemas {
		c.m = map[string]*jsonschema.Schema{}
	}
	c.m[key] = sch
	c.mu.Unlock()
	return sch, nil
}
