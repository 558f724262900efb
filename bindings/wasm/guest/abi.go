//go:build wasip1

package guest

import "unsafe"

// The host module's functions (bindings/wasm/README.md describes them).

//go:wasmimport metaclaw call
func hostCall(namePtr unsafe.Pointer, nameLen uint32, argsPtr unsafe.Pointer, argsLen uint32, outPtr unsafe.Pointer, outCap uint32) uint64

//go:wasmimport metaclaw take
func hostTake(outPtr unsafe.Pointer, outCap uint32) int32

//go:wasmimport metaclaw log
func hostLog(level uint32, msgPtr unsafe.Pointer, msgLen uint32)
