package hostapi

import (
	"encoding/base64"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// base64Magic is how every module's base64 begins: "\0asm" encoded.
const base64Magic = "AGFzbQ"

// ModuleArg reads the one-string form in which callers name a WebAssembly
// module (the wasm argument of POST /api/run and run_script, a saved
// tool's wasm): either the module's bytes in base64 — standard or URL
// alphabet, padded or not, line breaks allowed, which always begins
// "AGFzbQ", the encoding of the magic "\0asm" — or else the name or id of
// a workspace file holding it. It returns a RunRequest with Wasm or
// WasmRef set. Every door reads the argument through this one function.
func ModuleArg(s string) (RunRequest, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return RunRequest{}, apierr.New(apierr.ValidationFailed, "wasm is empty: give a workspace .wasm file (name or id) or the module's bytes in base64")
	}
	if !strings.HasPrefix(s, base64Magic) {
		return RunRequest{WasmRef: s}, nil
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
			return RunRequest{Wasm: b}, nil
		}
	}
	return RunRequest{}, apierr.New(apierr.ValidationFailed, "wasm starts like a base64 module (%s…) but is not valid base64; send the file's bytes base64-encoded, or a workspace file name", base64Magic)
}
