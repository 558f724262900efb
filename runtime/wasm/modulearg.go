package wasm

import (
	"github.com/metaclaw/metaclaw/hostapi"
)

// ModuleArg reads the one-string form in which callers name a module
// (hostapi.ModuleArg, which every door uses) into a Request with Module or
// Ref set.
func ModuleArg(s string) (Request, error) {
	r, err := hostapi.ModuleArg(s)
	if err != nil {
		return Request{}, err
	}
	return Request{Module: r.Wasm, Ref: r.WasmRef}, nil
}
