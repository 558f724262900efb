package server

import (
	"fmt"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// runRequestOf checks POST /api/run's body and turns it into the host's
// run request: JavaScript (code) or a WebAssembly module (wasm), exactly
// one of them. hostapi.Runners sends the run to the runtime it needs.
func runRequestOf(req RunRequest) (hostapi.RunRequest, error) {
	hasCode := strings.TrimSpace(req.Code) != ""
	switch {
	case req.Wasm != nil && hasCode:
		return hostapi.RunRequest{}, apierr.New(apierr.ValidationFailed, "give either \"code\" (JavaScript) or \"wasm\" (a WebAssembly module), not both")
	case req.Wasm == nil && !hasCode:
		return hostapi.RunRequest{}, apierr.New(apierr.ValidationFailed, "\"code\" is required: the JavaScript body to run (or \"wasm\": a WebAssembly module, as a workspace file name or base64 bytes)")
	case hasCode:
		return hostapi.RunRequest{Code: req.Code, Name: "script.js"}, nil
	}
	s, ok := req.Wasm.(string)
	if !ok {
		return hostapi.RunRequest{}, apierr.New(apierr.ValidationFailed, "\"wasm\" is a %s; send a string: the name or id of a workspace .wasm file, or the module's bytes in base64", jsonKind(req.Wasm))
	}
	return moduleArg(s)
}

// moduleArg reads a wasm argument as every door does (hostapi.ModuleArg)
// and names the run after the module.
func moduleArg(s string) (hostapi.RunRequest, error) {
	r, err := hostapi.ModuleArg(s)
	if err != nil {
		return r, err
	}
	r.Name = r.WasmRef
	if r.Name == "" {
		r.Name = "module.wasm"
	}
	return r, nil
}

// jsonKind names the JSON type of a decoded value for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// runLabel is what the run feed shows as a run's input: the script's code,
// or the module that ran (its file, or the size of the bytes sent).
func runLabel(rr hostapi.RunRequest, input any) map[string]any {
	switch {
	case rr.WasmRef != "":
		return map[string]any{"wasm": rr.WasmRef, "input": input}
	case len(rr.Wasm) > 0:
		return map[string]any{"wasm": fmt.Sprintf("(a %d-byte module sent as base64)", len(rr.Wasm)), "input": input}
	}
	return map[string]any{"code": rr.Code, "input": input}
}

// runsModules reports whether a host's runner can run WebAssembly: the
// runtime dispatcher with a WASM runtime. A bare script runner would run a
// module request as an empty script.
func runsModules(r hostapi.ScriptRunner) bool {
	switch x := r.(type) {
	case hostapi.Runners:
		return x.WASM != nil
	case *hostapi.Runners:
		return x != nil && x.WASM != nil
	}
	return false
}
