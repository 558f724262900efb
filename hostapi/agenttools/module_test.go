package agenttools

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/runtime/wasm"
)

// moduleArg reads the wasm argument exactly as the runtime's ModuleArg
// does (this package may not import the runtime, so the reading is kept
// twice and held equal here).
func TestModuleArgAgreesWithTheRuntime(t *testing.T) {
	mod := []byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00")
	for _, in := range []string{
		"tools/echo.wasm", " echo.wasm ", "0b5c6a3e-1111-4222-8333-944455556666",
		base64.StdEncoding.EncodeToString(mod), base64.RawStdEncoding.EncodeToString(mod),
		base64.URLEncoding.EncodeToString(mod), base64.RawURLEncoding.EncodeToString(mod),
		"AGFz bQEA\nAAA=", "AGFzbQ!!!", "", "   ",
	} {
		got, gotErr := moduleArg(in)
		want, wantErr := wasm.ModuleArg(in)
		if apierr.CodeOf(gotErr) != apierr.CodeOf(wantErr) {
			t.Fatalf("%q: error %v, the runtime says %v", in, gotErr, wantErr)
		}
		if gotErr != nil {
			if apierr.CodeOf(gotErr) != apierr.ValidationFailed {
				t.Fatalf("%q: %v, want VALIDATION_FAILED", in, gotErr)
			}
			continue
		}
		if !bytes.Equal(got.Wasm, want.Module) || got.WasmRef != want.Ref {
			t.Fatalf("%q: (%x, %q), the runtime reads (%x, %q)", in, got.Wasm, got.WasmRef, want.Module, want.Ref)
		}
	}
	if r, _ := moduleArg(base64.StdEncoding.EncodeToString(mod)); !bytes.Equal(r.Wasm, mod) {
		t.Fatalf("base64 decodes to %x", r.Wasm)
	}
}
