package agenttools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Saved is tools.save's answer.
type Saved struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

// Deleted is tools.delete's answer.
type Deleted struct {
	Deleted bool `json:"deleted"`
}

func (t *Tools) ops() []hostapi.Op {
	name := hostapi.Param{Name: "name", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "Tool name", Required: true}
	return []hostapi.Op{{
		Name: "tools.list", Tool: "tool_list",
		Doc:    "List the reusable tools: built-in script tools and the tools saved in this workspace, with their input schemas.",
		Result: []Summary(nil), ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:  "List the tools (built-in script tools come first alphabetically in a new workspace)",
			Args: map[string]any{},
			Want: map[string]any{"tools": []any{map[string]any{"name": "csv_preview", "builtin": true}}},
		}},
		ToolResult: func(v any) any {
			return struct {
				Tools []Summary `json:"tools"`
			}{v.([]Summary)}
		},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) { return t.list(ctx, c.WS.Name()) },
	}, {
		Name: "tools.get", Tool: "tool_get",
		Doc:    "Get one reusable tool with its code, description, input schema and version.",
		Params: []hostapi.Param{name},
		Result: Tool{}, ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:  "Read a built-in tool's code and input schema",
			Args: map[string]any{"name": "csv_preview"},
			Want: map[string]any{"name": "csv_preview", "builtin": true, "version": 1,
				"input_schema": map[string]any{"type": "object", "required": []any{"id"}}},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			return t.get(ctx, c.WS.Name(), c.Args.String("name"))
		},
	}, {
		Name: "tools.save", Tool: "tool_save",
		Doc: "Save JavaScript as a reusable tool (or a new version of one). The code is the body of an async function: it reads its " +
			"validated arguments from `input` (numbers as numbers; an optional argument sent as null is absent), may call files.* and tools.*, " +
			"and returns the tool's result. Instead of code, wasm names a workspace .wasm file (a WASI command module: its JSON arguments " +
			"on stdin, its result on stdout); the module is checked when the tool is saved. Saved tools appear in the tool list and are " +
			"callable by name. Code, input schema and description together may be at most 256 KB (TOO_LARGE beyond) and count toward " +
			"the workspace quota; keep data in files.",
		Params: []hostapi.Param{
			{Name: "name", Schema: hostapi.Schema{"type": "string", "pattern": "^[a-z][a-z0-9_]{2,63}$"}, Doc: "Tool name: lower case, digits and underscores, 3-64 characters", Required: true, Group: "tool"},
			{Name: "description", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "What the tool does and when to use it", Required: true, Group: "tool"},
			{Name: "input_schema", Schema: hostapi.Schema{"type": "object"}, Doc: "JSON Schema of the tool's arguments (an object schema)", Group: "tool"},
			{Name: "code", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "JavaScript body; `input` holds the arguments; `return` the result. Give code or wasm", Group: "tool"},
			{Name: "wasm", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "Instead of code: a workspace .wasm file (name or id) holding a WASI command module", Group: "tool"},
		},
		Result: Saved{}, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc: "Save a tool that adds two numbers; call it afterwards as add_nums {\"a\": 2, \"b\": 3}",
			Args: map[string]any{"name": "add_nums", "description": "Add two numbers a and b",
				"input_schema": map[string]any{"type": "object", "required": []any{"a", "b"}, "properties": map[string]any{
					"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}},
				"code": "return input.a + input.b;"},
			Want: map[string]any{"name": "add_nums", "version": 1},
		}, {
			Doc: "Save a WebAssembly module (a workspace .wasm file) as a tool; echo_input answers with its arguments",
			Args: map[string]any{"name": "echo_input", "description": "Answer with the arguments it is given",
				"input_schema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
				"wasm":         "echo.wasm"},
			Want:  map[string]any{"name": "echo_input", "version": 1},
			Files: []string{"echo.wasm"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			tool := &Tool{Name: c.Args.String("name"), Description: c.Args.String("description"), Code: c.Args.String("code")}
			if c.Args.Has("input_schema") {
				if err := c.Args.Decode("input_schema", &tool.InputSchema); err != nil {
					return nil, err
				}
			}
			if c.Args.Has("wasm") {
				if tool.Code != "" {
					return nil, apierr.New(apierr.ValidationFailed, "give the tool either code (JavaScript) or wasm (a module file), not both")
				}
				// Name and schema first: a bad tool is refused before its
				// module is compiled.
				tool.Wasm = "-"
				if err := t.check(tool); err != nil {
					return nil, err
				}
				id, err := t.savedModule(ctx, c.Env, c.Args.String("wasm"))
				if err != nil {
					return nil, err
				}
				tool.Wasm = id
			}
			v, err := t.save(ctx, c.WS.Name(), tool)
			if err != nil {
				return nil, err
			}
			return Saved{tool.Name, v}, nil
		},
	}, {
		Name: "tools.delete", Tool: "tool_delete",
		Doc:    "Delete a saved tool from this workspace.",
		Params: []hostapi.Param{name},
		Result: Deleted{}, Destructive: true,
		Examples: []hostapi.Example{{
			Doc:  "Delete the saved tool add_nums (built-in tools cannot be deleted)",
			Args: map[string]any{"name": "add_nums"},
			Want: map[string]any{"deleted": true},
			Setup: []hostapi.SetupCall{{Tool: "tool_save", Args: map[string]any{"name": "add_nums",
				"description": "Add two numbers a and b", "code": "return input.a + input.b;"}}},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			if err := t.remove(ctx, c.WS.Name(), c.Args.String("name")); err != nil {
				return nil, err
			}
			return Deleted{true}, nil
		},
	}, {
		Name: "tools.call",
		Doc:  "Call a tool by name with arguments: a saved or built-in script tool, or any meta-tool (e.g. \"file_list\").",
		Params: []hostapi.Param{name,
			{Name: "args", Schema: hostapi.Schema{"type": "object"}, Doc: "The tool's arguments"}},
		Result: any(nil),
		Examples: []hostapi.Example{{
			Doc:   "Preview a CSV with the built-in csv_preview tool",
			Args:  map[string]any{"name": "csv_preview", "args": map[string]any{"id": "people.csv", "rows": 2}},
			Want:  map[string]any{"shownRows": 2, "totalLines": 4},
			Files: []string{"people.csv"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			var args map[string]any
			if c.Args.Has("args") {
				args, _ = c.Args.Raw("args").(map[string]any)
			}
			n := c.Args.String("name")
			if c.Host.Registry.IsBuiltin(n) {
				return c.Host.Registry.CallTool(ctx, c.Env, n, args)
			}
			tool, err := t.get(ctx, c.WS.Name(), n)
			if err != nil {
				return nil, err
			}
			return t.run(ctx, c.Env, tool, args)
		},
	}, t.runScriptOp()}
}

// runScriptOp is the meta-tool that runs code. Its description is what a
// model reads before writing a script, so it states the globals and the
// limits of this host (read from its configuration, so they stay true) and
// points to search_api for the typed API; it is kept short because it is
// part of the small "code" tool profile.
func (t *Tools) runScriptOp() hostapi.Op {
	lim, max := t.host.Config.Limits, t.host.Config.MaxLimits
	maxMs := max.Timeout.Milliseconds()
	doc := fmt.Sprintf("Run JavaScript in a sandbox. The code is the body of an async function: top-level await and return work. "+
		"Globals: files (files.*, files.spreadsheet.*, files.pdf.*, files.image.*, files.table.*; each call returns a Promise), "+
		"tools (tools.call(name, args)), input (the input argument), session ({id}), console (log/info/warn/error, captured). "+
		"No require, process, network or timers. Limits per run: %s (timeout_ms raises it up to %s), %s memory, %s of console output, %s result. "+
		"Call search_api first for the TypeScript signatures of the operations you need. "+
		"Returns {ok, result, logs, error?, files, duration_ms}; files lists what the run created, modified or deleted.",
		humanDuration(lim.Timeout), humanDuration(max.Timeout), humanBytes(lim.MemoryBytes), humanBytes(int64(lim.LogBytes)), humanBytes(int64(lim.ResultBytes)))
	return hostapi.Op{
		Tool: "run_script",
		Doc:  doc,
		Params: []hostapi.Param{
			{Name: "code", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "JavaScript body (or give wasm)"},
			{Name: "wasm", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "Instead of code: a WASI module (.wasm file or base64); input on stdin, result from stdout"},
			{Name: "input", Schema: hostapi.AnyValue(), Doc: "JSON value the script sees as `input`"},
			{Name: "timeout_ms", Schema: hostapi.Schema{"type": "integer", "minimum": 1, "maximum": maxMs},
				Doc: fmt.Sprintf("Time limit in milliseconds (default %d)", lim.Timeout.Milliseconds())},
		},
		Result: hostapi.RunResult{},
		Examples: []hostapi.Example{{
			Doc:  "Sum numbers passed as input",
			Args: map[string]any{"code": "return input.a + input.b;", "input": map[string]any{"a": 2, "b": 3}},
			Want: map[string]any{"ok": true, "result": 5},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			if c.Host.Runner == nil {
				return nil, apierr.New(apierr.ToolWorkerUnavailable, "no script runner is configured on this host")
			}
			req := hostapi.RunRequest{Code: c.Args.String("code")}
			switch has := c.Args.Has("wasm"); {
			case has && req.Code != "":
				return nil, apierr.New(apierr.ValidationFailed, "run_script: give either code (JavaScript) or wasm (a module), not both")
			case has:
				var err error
				if req, err = moduleArg(c.Args.String("wasm")); err != nil {
					return nil, err
				}
			case req.Code == "":
				return nil, apierr.New(apierr.ValidationFailed, "run_script: missing required argument code (the JavaScript body), or give wasm (a module) instead")
			}
			req.Input = c.Args.Raw("input")
			if ms, ok := c.Args.Int("timeout_ms"); ok {
				req.Limits.Timeout = time.Duration(ms) * time.Millisecond
			}
			child := *c.Env
			child.Depth++
			res := c.Host.Runner.Run(ctx, &child, req)
			// The runner hands the script's return value over as JSON text
			// (JSON.stringify); the meta-tool answer carries it as a value.
			// Its numbers are JS numbers, so float64 holds every one exactly.
			if raw, ok := res.Result.(json.RawMessage); ok {
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					return nil, apierr.New(apierr.Internal, "the script's result could not be read back: %v", err)
				}
				res.Result = v
			}
			return res, nil
		},
	}
}

// humanDuration writes a time limit the way people say it (30 s, 10 min).
func humanDuration(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d >= time.Second && d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return d.String()
}

// humanBytes writes a limit the way people say it (256 MB, 1 MB, 512 KB).
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
