package agenttools

import (
	"context"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// moduleArg reads the wasm argument of run_script and tools.save.
var moduleArg = hostapi.ModuleArg

// savedModule settles the module a WebAssembly tool is saved with: a
// workspace file, which must hold a module this host can run. It returns
// the file's id, which the tool keeps (renaming the file does not break
// the tool; replacing its content changes what the tool runs).
func (t *Tools) savedModule(ctx context.Context, env *hostapi.Env, arg string) (string, error) {
	req, err := moduleArg(arg)
	if err != nil {
		return "", err
	}
	if len(req.Wasm) > 0 {
		return "", apierr.New(apierr.ValidationFailed, "a saved tool runs a module kept as a workspace file, not base64 bytes: "+
			"store the module first (files.writeBytes(\"tools/NAME.wasm\", 0, base64), or `metaclaw files upload mod.wasm`) and save the tool with wasm: \"tools/NAME.wasm\"")
	}
	f, err := env.WS.Resolve(ctx, req.WasmRef)
	if err != nil {
		return "", err
	}
	if err := t.checkModule(ctx, env, hostapi.RunRequest{WasmRef: f.ID}); err != nil {
		return "", err
	}
	return f.ID, nil
}

// checkModule checks a module with the host's WebAssembly runtime (compiled
// and its imports checked, not run), so that a tool that cannot run is
// refused when it is saved rather than when it is first called.
func (t *Tools) checkModule(ctx context.Context, env *hostapi.Env, req hostapi.RunRequest) error {
	var checker hostapi.ModuleChecker
	switch r := t.host.Runner.(type) {
	case hostapi.Runners:
		// Runners checks through its WASM runtime, and lets everything
		// pass when it has none: say so instead.
		if r.WASM != nil {
			checker = r
		}
	case *hostapi.Runners:
		if r != nil && r.WASM != nil {
			checker = r
		}
	case hostapi.ModuleChecker:
		checker = r
	}
	if checker == nil {
		return apierr.New(apierr.ToolWorkerUnavailable, "this host has no WebAssembly runtime, so it cannot run a WebAssembly tool")
	}
	return checker.Check(ctx, env, req)
}
