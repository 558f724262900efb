package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// ModuleName is the import module a guest's host calls come from.
const ModuleName = "metaclaw"

// The status half of call's return value (README.md, "call").
const (
	StatusOK    = 0
	StatusError = 1
)

// take's answers besides a length.
const (
	TakeNothing  = -1 // no response is held
	TakeTooSmall = -2 // the buffer is smaller than the held response
)

// Log levels of the log function, in the order of the sandbox console's.
var logLevels = [...]string{"debug", "info", "log", "warn", "error"}

// maxNameBytes bounds an operation name; longer ones cannot name anything.
const maxNameBytes = 256

// Functions lists what the host module exports, for checking a module's
// imports before it is instantiated.
func Functions() []string { return []string{"call", "take", "log"} }

// Caller connects one module instance to the registry: the run's
// environment (workspace, session, artifact log, nesting depth) and its
// limits, and the state of the ABI between calls. The runtime creates one
// per run and puts it in the context the module runs under (WithCaller);
// the host module's functions find it there. It is used from the module's
// goroutine only.
type Caller struct {
	Env *hostapi.Env
	// MaxArgs bounds the argument JSON of one call (TOO_LARGE beyond).
	MaxArgs int
	// MaxResult bounds the response of one call (RESOURCE_EXHAUSTED beyond).
	MaxResult int
	// Log receives the module's log calls; nil drops them.
	Log func(level, message string)

	held  []byte        // a response that did not fit, until taken
	fault *apierr.Error // why the module was stopped, if it misused the ABI
	calls int
}

// Fault is the ABI misuse that ended the module (an out-of-bounds pointer),
// or nil.
func (c *Caller) Fault() *apierr.Error { return c.fault }

// Calls is how many operations the module called.
func (c *Caller) Calls() int { return c.calls }

type callerKey struct{}

// WithCaller returns ctx carrying c for the host functions.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerOf(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// Instantiate defines the host module in rt. Every module instantiated in
// rt afterwards may import it; its functions serve the Caller of the
// context the module runs under.
func Instantiate(ctx context.Context, rt wazero.Runtime) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	_, err := rt.NewHostModuleBuilder(ModuleName).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(call), []api.ValueType{i32, i32, i32, i32, i32, i32}, []api.ValueType{i64}).
		WithParameterNames("name_ptr", "name_len", "args_ptr", "args_len", "out_ptr", "out_cap").WithResultNames("status_len").Export("call").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(take), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("out_ptr", "out_cap").WithResultNames("len").Export("take").
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(logFn), []api.ValueType{i32, i32, i32}, nil).
		WithParameterNames("level", "msg_ptr", "msg_len").Export("log").
		Instantiate(ctx)
	return err
}

// abort records why the module must stop and unwinds it: a panic in a host
// function ends the guest's call with an error, which the runtime replaces
// by the recorded fault.
func (c *Caller) abort(e *apierr.Error) {
	if c.fault == nil {
		c.fault = e
	}
	panic(e)
}

// span reads [ptr, ptr+n) of the module's memory or aborts the module.
func (c *Caller) span(mod api.Module, fn, what string, ptr, n uint32) []byte {
	mem := mod.Memory()
	if mem == nil || reflect.ValueOf(mem).IsNil() { // wazero answers a typed nil
		c.abort(apierr.New(apierr.ValidationFailed, "%s.%s: the module has no memory to pass %s in; export a memory named \"memory\"", ModuleName, fn, what))
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		c.abort(apierr.New(apierr.ValidationFailed, "%s.%s: %s at [%d, %d) lies outside the module's %d bytes of memory; pass a pointer and length inside linear memory",
			ModuleName, fn, what, ptr, uint64(ptr)+uint64(n), mem.Size()))
	}
	return b
}

func mustCaller(ctx context.Context) *Caller {
	c := callerOf(ctx)
	if c == nil {
		// Only a runtime that forgot WithCaller gets here: a bug in the host.
		panic(apierr.New(apierr.Internal, "the %s host module was called outside a run", ModuleName))
	}
	return c
}

// call(name_ptr, name_len, args_ptr, args_len, out_ptr, out_cap) -> i64
func call(ctx context.Context, mod api.Module, stack []uint64) {
	c := mustCaller(ctx)
	namePtr, nameLen := uint32(stack[0]), uint32(stack[1])
	argsPtr, argsLen := uint32(stack[2]), uint32(stack[3])
	outPtr, outCap := uint32(stack[4]), uint32(stack[5])
	// Every span is checked before anything runs, so that a bad pointer
	// stops the module without the operation having happened.
	name := c.span(mod, "call", "the operation name", namePtr, nameLen)
	args := c.span(mod, "call", "the arguments", argsPtr, argsLen)
	c.span(mod, "call", "the output buffer", outPtr, outCap)
	c.held = nil
	c.calls++

	body, status := c.respond(ctx, string(name), args)
	if len(body) <= int(outCap) {
		// The memory cannot have shrunk (WebAssembly memories only grow),
		// so the span checked above is still there.
		mod.Memory().Write(outPtr, body)
	} else {
		c.held = body
	}
	stack[0] = uint64(status)<<32 | uint64(len(body))
}

// respond runs one operation and encodes its response.
func (c *Caller) respond(ctx context.Context, name string, args []byte) ([]byte, uint32) {
	res, err := c.invoke(ctx, name, args)
	if err == nil {
		body, mErr := encodeJSON(res)
		if mErr != nil {
			err = apierr.New(apierr.Internal, "the result of %s could not be encoded as JSON: %v", name, mErr)
		} else if c.MaxResult > 0 && len(body) > c.MaxResult {
			err = apierr.New(apierr.ResourceExhausted, "the result of %s is %d bytes; one call may return at most %d: ask for less (a smaller range, fewer rows, a window)",
				name, len(body), c.MaxResult)
		} else {
			return body, StatusOK
		}
	}
	e := apierr.Of(err)
	body, _ := encodeJSON(struct {
		Code    apierr.Code `json:"code"`
		Message string      `json:"message"`
	}{e.Code, e.Message})
	return body, StatusError
}

// invoke runs the operation called name with the JSON arguments args,
// through the registry's JSON entry points, so that arguments are decoded
// and validated exactly as for every other door. A meta-tool name (and a
// saved tool's) answers like the meta-tool; a JS name answers like the
// meta-tool of the same operation, so both spellings of one operation give
// one answer.
func (c *Caller) invoke(ctx context.Context, name string, args []byte) (any, error) {
	if len(name) == 0 || len(name) > maxNameBytes || !utf8.ValidString(name) {
		return nil, apierr.New(apierr.NotFound, "no operation named %q; name one by its meta-tool name (\"file_read_text\") or its JS name (\"files.readText\")", clip(name, 80))
	}
	if c.MaxArgs > 0 && len(args) > c.MaxArgs {
		return nil, apierr.New(apierr.TooLarge, "the arguments of %s are %d bytes; one call may pass at most %d: write big content in parts (files.appendBytes)", name, len(args), c.MaxArgs)
	}
	reg := c.Env.Host.Registry
	if op := reg.ByName(name); op != nil {
		if op.Tool != "" {
			return reg.CallToolJSON(ctx, c.Env, op.Tool, args)
		}
		res, err := reg.InvokeJSON(ctx, c.Env, op, args)
		if err != nil {
			return nil, err
		}
		return hostapi.Project(res, hostapi.SnakeCase), nil
	}
	return reg.CallToolJSON(ctx, c.Env, name, args)
}

// take(out_ptr, out_cap) -> i32
func take(ctx context.Context, mod api.Module, stack []uint64) {
	c := mustCaller(ctx)
	outPtr, outCap := uint32(stack[0]), uint32(stack[1])
	out := c.span(mod, "take", "the output buffer", outPtr, outCap)
	switch {
	case c.held == nil:
		stack[0] = api.EncodeI32(TakeNothing)
	case len(c.held) > len(out):
		stack[0] = api.EncodeI32(TakeTooSmall)
	default:
		n := copy(out, c.held)
		c.held = nil
		stack[0] = uint64(n)
	}
}

// log(level, msg_ptr, msg_len)
func logFn(ctx context.Context, mod api.Module, stack []uint64) {
	c := mustCaller(ctx)
	level := uint32(stack[0])
	msg := c.span(mod, "log", "the message", uint32(stack[1]), uint32(stack[2]))
	if c.Log == nil {
		return
	}
	name := "log"
	if int(level) < len(logLevels) {
		name = logLevels[level]
	}
	c.Log(name, string(bytes.ToValidUTF8(msg, []byte("\uFFFD"))))
}

// encodeJSON writes v without HTML escaping, so that text comes back as
// it was written ("<b>" stays "<b>").
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s…", s[:n])
}
