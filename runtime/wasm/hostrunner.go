package wasm

import (
	"context"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// HostRunner is a Runner seen through the host's run request: the
// WebAssembly side of hostapi.Runners, which hands it every run whose
// request carries a module (RunRequest.Wasm or WasmRef). It also checks
// modules for tools.save through hostapi.ModuleChecker.
type HostRunner struct{ r *Runner }

// ForHost returns r as a hostapi.ScriptRunner and hostapi.ModuleChecker.
func (r *Runner) ForHost() *HostRunner { return &HostRunner{r: r} }

var (
	_ hostapi.ScriptRunner  = (*HostRunner)(nil)
	_ hostapi.ModuleChecker = (*HostRunner)(nil)
)

// Run implements hostapi.ScriptRunner.
func (h *HostRunner) Run(ctx context.Context, env *hostapi.Env, req hostapi.RunRequest) *hostapi.RunResult {
	r, err := request(req)
	if err != nil {
		res := &hostapi.RunResult{Logs: []hostapi.LogEntry{}, Files: []hostapi.Artifact{}}
		fail(res, apierr.Of(err), "")
		return res
	}
	return h.r.Run(ctx, env, r)
}

// Check implements hostapi.ModuleChecker.
func (h *HostRunner) Check(ctx context.Context, env *hostapi.Env, req hostapi.RunRequest) error {
	r, err := request(req)
	if err != nil {
		return err
	}
	return h.r.Check(ctx, env, r)
}

// request turns a host run request into a module run. A request with code
// as well as a module is refused rather than half obeyed.
func request(req hostapi.RunRequest) (Request, error) {
	switch {
	case !req.IsWasm():
		return Request{}, apierr.New(apierr.ValidationFailed, "no module to run: give a WebAssembly module's bytes or the name of a workspace .wasm file")
	case req.Code != "":
		return Request{}, apierr.New(apierr.ValidationFailed, "give either JavaScript code or a WebAssembly module, not both")
	case len(req.Wasm) > 0 && req.WasmRef != "":
		return Request{}, apierr.New(apierr.ValidationFailed, "give the module either as bytes or as a workspace file, not both")
	}
	return Request{Module: req.Wasm, Ref: req.WasmRef, Input: req.Input, Limits: req.Limits}, nil
}
