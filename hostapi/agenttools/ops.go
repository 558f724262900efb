package agenttools

import (
	"context"
	"encoding/json"
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
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			return t.get(ctx, c.WS.Name(), c.Args.String("name"))
		},
	}, {
		Name: "tools.save", Tool: "tool_save",
		Doc: "Save JavaScript as a reusable tool (or a new version of one). The code is the body of an async function: it reads its " +
			"validated arguments from `input`, may call files.* and tools.*, and returns the tool's result. Saved tools appear in the " +
			"tool list and are callable by name.",
		Params: []hostapi.Param{
			{Name: "name", Schema: hostapi.Schema{"type": "string", "pattern": "^[a-z][a-z0-9_]{2,63}$"}, Doc: "Tool name: lower case, digits and underscores, 3-64 characters", Required: true, Group: "tool"},
			{Name: "description", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "What the tool does and when to use it", Required: true, Group: "tool"},
			{Name: "input_schema", Schema: hostapi.Schema{"type": "object"}, Doc: "JSON Schema of the tool's arguments (an object schema)", Group: "tool"},
			{Name: "code", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "JavaScript body; `input` holds the arguments; `return` the result", Required: true, Group: "tool"},
		},
		Result: Saved{}, Idempotent: true,
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			tool := &Tool{Name: c.Args.String("name"), Description: c.Args.String("description"), Code: c.Args.String("code")}
			if c.Args.Has("input_schema") {
				if err := c.Args.Decode("input_schema", &tool.InputSchema); err != nil {
					return nil, err
				}
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
	}, {
		Tool: "run_script",
		Doc: "Run JavaScript in the sandbox. The code is the body of an async function (top-level await and return work) with globals " +
			"files (files.*, files.spreadsheet.*, files.pdf.*, files.image.*, files.table.*), tools, input, session and console. " +
			"Returns {ok, result, logs, error?, files, duration_ms}; `files` lists what the run created, modified or deleted.",
		Params: []hostapi.Param{
			{Name: "code", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "JavaScript body, e.g. `const f = await files.list(\"*.csv\"); return f.length;`", Required: true},
			{Name: "input", Schema: hostapi.AnyValue(), Doc: "JSON value the script sees as `input`"},
			{Name: "timeout_ms", Schema: hostapi.Schema{"type": "integer", "minimum": 1}, Doc: "Time limit in milliseconds (default 30000)"},
		},
		Result: hostapi.RunResult{},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			if c.Host.Runner == nil {
				return nil, apierr.New(apierr.ToolWorkerUnavailable, "no script runner is configured on this host")
			}
			req := hostapi.RunRequest{Code: c.Args.String("code"), Input: c.Args.Raw("input")}
			if ms, ok := c.Args.Int("timeout_ms"); ok {
				req.Limits.Timeout = time.Duration(ms) * time.Millisecond
			}
			child := *c.Env
			child.Depth++
			res := c.Host.Runner.Run(ctx, &child, req)
			if raw, ok := res.Result.(json.RawMessage); ok {
				var v any
				json.Unmarshal(raw, &v)
				res.Result = v
			}
			return res, nil
		},
	}}
}
