// Package wasm is the host side of the metaclaw WebAssembly ABI: the
// "metaclaw" import module through which a module calls the host's
// operations (call, take, log), and the generator of the Go guest SDK's
// typed helpers (guest/ops.go) from the registry. README.md in this
// directory is the ABI's reference: the functions, memory ownership, how a
// response of unknown size comes back, the run's channels and limits.
//
// An operation called from a module goes through the registry's JSON entry
// points (Registry.CallToolJSON, Registry.InvokeJSON) with the run's
// environment, so its arguments are decoded and validated, its workspace
// bound and its file changes recorded exactly as for every other door;
// the answer is the meta-tool's (snake_case), whichever name the module
// used.
//
// The runtime (runtime/wasm) instantiates the host module once per wazero
// runtime (Instantiate) and gives every run a Caller in the context its
// module runs under (WithCaller).
package wasm
