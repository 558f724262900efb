// Package hostapi is the host API every door (JS stubs, WASM ABI, meta-tools,
// HTTP, MCP, CLI) calls into: the operation registry, the call context and
// the Host that ties the store and the format packages together.
//
// Every operation is declared once as an Op. Its JS stub, meta-tool schema,
// HTTP route, MCP tool and TypeScript declaration are all derived from that
// declaration; nothing else names an operation or its parameters.
package hostapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Schema is a JSON Schema document as a plain map.
type Schema = map[string]any

// Param is one parameter of an operation.
type Param struct {
	// Name is the snake_case name; it is the meta-tool argument name and,
	// camel-cased, the key inside a JS group object.
	Name     string
	Schema   Schema
	Doc      string
	Required bool
	// Group gathers parameters into one JS object argument placed where the
	// group's first parameter stands: readText(id, {startLine, endLine}) has
	// start_line and end_line in group "options". Meta-tools flatten groups
	// into top-level arguments (SPEC 4). Empty means a positional argument.
	Group string
}

// Op declares one host operation.
type Op struct {
	// Name is the JS path below the sandbox globals, e.g. "files.readText"
	// or "files.spreadsheet.readRange". Empty: not callable from scripts.
	Name string
	// Tool is the meta-tool name, e.g. "file_read_text". Empty: not a
	// meta-tool (only callable from scripts).
	Tool   string
	Doc    string
	Params []Param
	// Result is a zero value of the handler's result type; the TypeScript
	// declarations are derived from it.
	Result any
	// ToolResult reshapes the result for meta-tool callers where a seed
	// gives a different shape (file_list answers {files:[…]}).
	ToolResult func(v any) any
	// Annotations for MCP clients.
	ReadOnly, Destructive, Idempotent bool
	// OpenWorld marks an op that reaches outside the workspace (a download).
	OpenWorld bool
	// Examples are calls that show the op at work. Models and people read
	// them in the tool lists; the door test runs every one through every
	// door (JS, CLI, HTTP, MCP) and requires the same answer from each.
	Examples []Example
	Handler  func(ctx context.Context, c *Call) (any, error)

	inputSchema Schema
	compiled    *compiledSchema
}

// compiledSchema is an op's input schema, compiled once on first use.
type compiledSchema struct {
	once   sync.Once
	schema *jsonschema.Schema
	err    error
}

// validator compiles op's input schema on first use.
func (op *Op) validator() (*jsonschema.Schema, error) {
	c := op.compiled
	c.once.Do(func() {
		c.schema, c.err = CompileSchema(op.inputSchema)
		if c.err != nil {
			c.err = fmt.Errorf("op %s: the input schema does not compile: %w", op.Label(), c.err)
		}
	})
	return c.schema, c.err
}

// CompileAll compiles every op's input schema and reports the first that
// does not compile.
func (r *Registry) CompileAll() error {
	for _, op := range r.Ops() {
		if _, err := op.validator(); err != nil {
			return err
		}
	}
	return nil
}

// Example is one call of an op.
type Example struct {
	// Doc says in one line what the call does.
	Doc string `json:"doc,omitempty"`
	// Args are the meta-tool arguments (snake_case), as a model sends them.
	Args map[string]any `json:"args"`
	// Want is what the meta-tool result (snake_case) must contain: objects
	// are compared key by key as subsets, arrays element by element (the
	// result may be longer), other values exactly.
	Want any `json:"want,omitempty"`
	// Files are the fixtures (testdata/examples) the call works on; the
	// door test uploads them into a fresh workspace first.
	Files []string `json:"files,omitempty"`
	// Setup are meta-tool calls that run first, in order, on the same
	// workspace, where the fixtures alone are not enough (a revert needs
	// an edit before it).
	Setup []SetupCall `json:"setup,omitempty"`
}

// SetupCall is one meta-tool call that prepares an example.
type SetupCall struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args"`
}

// JSName is the method name inside its namespace ("readRange").
func (op *Op) JSName() string { return op.Name[strings.LastIndexByte(op.Name, '.')+1:] }

// Namespace is the JS object path holding the method ("files.spreadsheet").
func (op *Op) Namespace() string {
	if i := strings.LastIndexByte(op.Name, '.'); i >= 0 {
		return op.Name[:i]
	}
	return ""
}

// InputSchema is the meta-tool JSON Schema: an object whose properties are
// the flattened parameters.
func (op *Op) InputSchema() Schema {
	props := Schema{}
	required := []any{}
	for _, p := range op.Params {
		s := Schema{}
		for k, v := range p.Schema {
			s[k] = v
		}
		if p.Doc != "" {
			s["description"] = p.Doc
		}
		props[p.Name] = s
		if p.Required {
			required = append(required, p.Name)
		}
	}
	return Schema{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

// Registry holds every operation.
type Registry struct {
	mu     sync.RWMutex
	ops    []*Op
	byName map[string]*Op
	byTool map[string]*Op
	// Dynamic, when set, supplies meta-tools that are not compiled in
	// (saved agent tools).
	Dynamic   DynamicTools
	observers atomic.Pointer[[]Observer]
}

// Observer is told about every finished call (metrics).
type Observer func(op string, d time.Duration, err error)

// AddObserver registers fn; it is safe while calls are running.
func (r *Registry) AddObserver(fn Observer) {
	for {
		old := r.observers.Load()
		var next []Observer
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, fn)
		if r.observers.CompareAndSwap(old, &next) {
			return
		}
	}
}

// DynamicTools lists and runs tools defined at run time.
type DynamicTools interface {
	ListTools(ctx context.Context, env *Env) ([]ToolInfo, error)
	// CallTool runs the named tool; ok is false when no such tool exists.
	CallTool(ctx context.Context, env *Env, name string, args map[string]any) (result any, ok bool, err error)
}

// ToolInfo describes a meta-tool to LLM clients.
type ToolInfo struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	InputSchema Schema    `json:"input_schema"`
	Examples    []Example `json:"examples,omitempty"`
	ReadOnly    bool      `json:"-"`
	Destructive bool      `json:"-"`
	Idempotent  bool      `json:"-"`
	OpenWorld   bool      `json:"-"`
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]*Op{}, byTool: map[string]*Op{}}
}

// Add registers ops; a duplicate name is a programming error and panics at
// start-up. Schemas compile on an op's first call (compiling them all costs
// start-up ~0.5 ms per op, which every CLI command would pay);
// CompileAll checks them all, and a test runs it over the whole host.
func (r *Registry) Add(ops ...Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range ops {
		op := ops[i]
		if op.Name == "" && op.Tool == "" {
			panic("hostapi: op without a name or a tool name")
		}
		if op.Handler == nil {
			panic("hostapi: op " + op.Name + op.Tool + " has no handler")
		}
		if op.Name != "" {
			if _, dup := r.byName[op.Name]; dup {
				panic("hostapi: duplicate op " + op.Name)
			}
		}
		if op.Tool != "" {
			if _, dup := r.byTool[op.Tool]; dup {
				panic("hostapi: duplicate tool " + op.Tool)
			}
		}
		op.inputSchema = op.InputSchema()
		op.compiled = &compiledSchema{}
		p := &op
		r.ops = append(r.ops, p)
		if op.Name != "" {
			r.byName[op.Name] = p
		}
		if op.Tool != "" {
			r.byTool[op.Tool] = p
		}
	}
}

// Ops lists every operation in registration order.
func (r *Registry) Ops() []*Op {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*Op(nil), r.ops...)
}

// Len is how many ops are registered; registration only adds, so a change
// of Len is a change of the registry.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.ops)
}

// ByName finds an op by its JS path.
func (r *Registry) ByName(name string) *Op {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byName[name]
}

// ByTool finds an op by its meta-tool name.
func (r *Registry) ByTool(name string) *Op {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byTool[name]
}

// IsBuiltin reports whether name is taken by a compiled-in meta-tool.
func (r *Registry) IsBuiltin(name string) bool { return r.ByTool(name) != nil }

// Tools lists the meta-tools: the compiled-in ones, then dynamic ones.
func (r *Registry) Tools(ctx context.Context, env *Env) ([]ToolInfo, error) {
	var out []ToolInfo
	for _, op := range r.Ops() {
		if op.Tool == "" {
			continue
		}
		out = append(out, ToolInfo{Name: op.Tool, Description: op.Doc, InputSchema: op.InputSchema(), Examples: op.Examples,
			ReadOnly: op.ReadOnly, Destructive: op.Destructive, Idempotent: op.Idempotent, OpenWorld: op.OpenWorld})
	}
	if r.Dynamic != nil && env != nil {
		dyn, err := r.Dynamic.ListTools(ctx, env)
		if err != nil {
			return nil, err
		}
		sort.Slice(dyn, func(i, j int) bool { return dyn[i].Name < dyn[j].Name })
		out = append(out, dyn...)
	}
	return out, nil
}

// CallToolJSON runs a meta-tool with its arguments as a JSON object: the
// entry point of every door that receives JSON (HTTP, MCP, the CLI).
func (r *Registry) CallToolJSON(ctx context.Context, env *Env, name string, raw []byte) (any, error) {
	args, err := ParseArgs(raw)
	if err != nil {
		return nil, err
	}
	return r.CallTool(ctx, env, name, args)
}

// InvokeJSON runs op with its arguments as a JSON object (a sandbox
// worker's host call, a WASM module's call).
func (r *Registry) InvokeJSON(ctx context.Context, env *Env, op *Op, raw []byte) (any, error) {
	args, err := ParseArgs(raw)
	if err != nil {
		return nil, r.labelled(op, err)
	}
	return r.Invoke(ctx, env, op, args)
}

// CallTool runs a meta-tool by name with snake_case arguments and returns
// its snake_case result, the shape every non-JS door answers with. Args
// may hold any Go values the decoder reads (decode.go).
func (r *Registry) CallTool(ctx context.Context, env *Env, name string, args map[string]any) (any, error) {
	if op := r.ByTool(name); op != nil {
		res, err := r.Invoke(ctx, env, op, args)
		if err != nil {
			return nil, withExample(op, err)
		}
		if op.ToolResult != nil {
			res = op.ToolResult(res)
		}
		return Project(res, SnakeCase), nil
	}
	if r.Dynamic != nil {
		// A saved tool checks its own schema; numbers are made canonical
		// here so that every tool sees numbers as numbers.
		canon, err := canonicalArgs(args, nil)
		if err != nil {
			return nil, apierr.New(apierr.ValidationFailed, "%s: %s", name, apierr.Of(err).Message)
		}
		res, ok, err := r.Dynamic.CallTool(ctx, env, name, canon)
		if ok {
			if err != nil {
				return nil, apierr.From(err)
			}
			return Project(res, SnakeCase), nil
		}
	}
	return nil, apierr.New(apierr.NotFound, "no tool named %q; list the tools with GET /api/tools or `metaclaw tools`", name)
}

// Invoke validates args against op's schema and runs its handler. Panics in
// handlers (format libraries panic on some hostile files) become INTERNAL
// errors; the host carries on.
func (r *Registry) Invoke(ctx context.Context, env *Env, op *Op, args map[string]any) (res any, err error) {
	start := time.Now()
	label := op.Label()
	defer func() {
		if p := recover(); p != nil {
			err = apierr.New(apierr.Internal, "%s failed unexpectedly (%v); the input may be malformed", label, p)
			if env != nil && env.Host != nil && env.Host.Log != nil {
				env.Host.Log.Error("handler panic", "op", label, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
		}
		if err != nil {
			err = apierr.From(err)
		}
		d := time.Since(start)
		if obs := r.observers.Load(); obs != nil {
			for _, fn := range *obs {
				fn(label, d, err)
			}
		}
		if env != nil && env.OnCall != nil {
			env.OnCall(op, args, res, err, d)
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	args, err = canonicalArgs(args, op.inputSchema)
	if err != nil {
		return nil, r.labelled(op, err)
	}
	if err := validateArgs(op, args); err != nil {
		return nil, err
	}
	if env != nil {
		ctx = store.WithActor(ctx, store.Actor{Session: env.Session, Record: env.Record})
	}
	return op.Handler(ctx, &Call{Env: env, Op: op, Args: Args(args)})
}

// withExample adds the op's first example call to a VALIDATION_FAILED
// error from a meta-tool door, so that a model sees a call that works.
func withExample(op *Op, err error) error {
	e := apierr.Of(err)
	if e.Code != apierr.ValidationFailed || len(op.Examples) == 0 {
		return err
	}
	b, mErr := json.Marshal(op.Examples[0].Args)
	if mErr != nil {
		return err
	}
	return &apierr.Error{Code: e.Code, Message: e.Message + "; example: " + op.Tool + " " + string(b)}
}

// labelled prefixes a decoding error with the op's name, as validation
// errors are.
func (r *Registry) labelled(op *Op, err error) error {
	e := apierr.Of(err)
	return &apierr.Error{Code: e.Code, Message: op.Label() + ": " + e.Message}
}

// Label is how messages name the op: its tool name, else its JS name.
func (op *Op) Label() string {
	if op.Tool != "" {
		return op.Tool
	}
	return op.Name
}

var printer = message.NewPrinter(language.English)

func validateArgs(op *Op, args map[string]any) error {
	sch, err := op.validator()
	if err != nil {
		return apierr.Wrap(apierr.Internal, err, "%s: its argument schema is broken; this is a bug in the host", op.Label())
	}
	err = sch.Validate(args)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return apierr.New(apierr.ValidationFailed, "invalid arguments: %v", err)
	}
	label := op.Label()
	return apierr.New(apierr.ValidationFailed, "%s: %s", label, describeValidation(op, ve))
}

// describeValidation turns the deepest validation failures into sentences
// that name the argument.
func describeValidation(op *Op, ve *jsonschema.ValidationError) string {
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	var parts []string
	for _, l := range leaves {
		msg := boundMessage(l.ErrorKind)
		if msg == "" {
			msg = l.ErrorKind.LocalizedString(printer)
		}
		loc := l.InstanceLocation
		if len(loc) == 0 {
			// A problem with the argument object itself: a missing or
			// unknown argument. Name them the way a caller writes them.
			msg = strings.NewReplacer("missing properties", "missing required argument",
				"missing property", "missing required argument",
				"additional properties", "unknown argument",
				"additionalProperties", "unknown argument").Replace(msg)
			if strings.Contains(msg, "unknown argument") {
				var names []string
				for _, p := range op.Params {
					names = append(names, p.Name)
				}
				msg += "; the arguments are: " + strings.Join(names, ", ")
			}
			parts = append(parts, msg)
			continue
		}
		parts = append(parts, fmt.Sprintf("argument %q: %s", strings.Join(loc, "."), msg))
	}
	return strings.Join(parts, "; ")
}

// boundMessage words a failed numeric bound with exact numbers (the
// library's own message prints 1048575 as 1.048575×10⁰⁶).
func boundMessage(k jsonschema.ErrorKind) string {
	num := func(r *big.Rat) string {
		if r.IsInt() {
			return r.Num().String()
		}
		f, _ := r.Float64()
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	switch k := k.(type) {
	case *kind.Minimum:
		return fmt.Sprintf("%s is less than the minimum %s", num(k.Got), num(k.Want))
	case *kind.Maximum:
		return fmt.Sprintf("%s is more than the maximum %s", num(k.Got), num(k.Want))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("%s must be more than %s", num(k.Got), num(k.Want))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("%s must be less than %s", num(k.Got), num(k.Want))
	case *kind.MultipleOf:
		return fmt.Sprintf("%s is not a multiple of %s", num(k.Got), num(k.Want))
	}
	return ""
}

// CompileSchema compiles a JSON Schema given as a map.
func CompileSchema(s Schema) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem://schema.json", normalizeSchema(s)); err != nil {
		return nil, err
	}
	return c.Compile("mem://schema.json")
}

// normalizeSchema turns Go slices and ints inside a schema literal into the
// []any / float64 shapes the compiler expects from decoded JSON.
func normalizeSchema(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = normalizeSchema(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normalizeSchema(x)
		}
		return out
	case []string:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = x
		}
		return out
	case int:
		return float64(t)
	case int64:
		return float64(t)
	}
	return v
}
