package agenttools

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// base64Magic is how every module's base64 begins: "\0asm" encoded.
const base64Magic = "AGFzbQ"

// moduleArg reads the wasm argument of run_script and tools.save: a
// module's bytes in base64 (standard or URL alphabet, padded or not, which
// always begins "AGFzbQ", the encoding of the magic "\0asm"), or else the
// name or id of a workspace file holding one. It reads the argument as
// runtime/wasm.ModuleArg does, which this package may not import (hostapi
// sits below the runtimes); a test holds the two to the same answers.
func moduleArg(s string) (hostapi.RunRequest, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return hostapi.RunRequest{}, apierr.New(apierr.ValidationFailed, "wasm is empty: give a workspace .wasm file (name or id) or the module's bytes in base64")
	}
	if !strings.HasPrefix(s, base64Magic) {
		return hostapi.RunRequest{WasmRef: s}, nil
	}
	clean := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\n', '\r', '\t':
			return -1
		}
		return r
	}, s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(clean); err == nil {
			return hostapi.RunRequest{Wasm: b}, nil
		}
	}
	return hostapi.RunRequest{}, apierr.New(apierr.ValidationFailed, "wasm starts like a base64 module (%s…) but is not valid base64; send the file's bytes base64-encoded, or a workspace file name", base64Magic)
}

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
