// Package guest is the Go SDK for metaclaw WebAssembly modules: programs
// built with GOOS=wasip1 GOARCH=wasm that metaclaw runs under WASI preview 1
// with the run's JSON input on stdin, its result on stdout and logs on
// stderr, and the host's operations behind the metaclaw import module
// (bindings/wasm/README.md describes that ABI).
//
//	package main
//
//	import "github.com/metaclaw/metaclaw/bindings/wasm/guest"
//
//	type input struct {
//		Path string `json:"path"`
//	}
//
//	func main() {
//		guest.Run(func(in input) (any, error) {
//			text, err := guest.Files.ReadText(in.Path, &guest.FilesReadTextOptions{EndLine: guest.Ptr(int64(50))})
//			if err != nil {
//				return nil, err // the run fails with the host's code (NOT_FOUND …)
//			}
//			return map[string]any{"lines": text.TotalLines}, nil
//		})
//	}
//
// Build it with the Go toolchain alone:
//
//	GOOS=wasip1 GOARCH=wasm go build -o mod.wasm .
//
// Call and CallRaw reach any operation by name with its meta-tool
// arguments (snake_case JSON, as `metaclaw tools --json` lists them) and
// return its meta-tool result. The typed helpers (Files, Spreadsheet, PDF,
// Image, Table, Tools; ops.go) are generated from the host's registry:
// required arguments are positional, optional ones sit in an Options
// struct (nil for none), and results are Go structs.
//
// Everything but this comment builds for GOOS=wasip1 only.
package guest
