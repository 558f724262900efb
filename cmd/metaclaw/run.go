package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"
)

// script is one run of a script file or a WebAssembly module.
type script struct {
	Name    string // the file name, shown in stack traces
	Code    string
	Wasm    []byte          // a module's bytes, instead of Code
	Input   json.RawMessage // valid JSON or empty
	Timeout time.Duration   // 0: the host's default (run_timeout)
}

// wasmMagic begins every WebAssembly module.
var wasmMagic = []byte("\x00asm")

// isModule reports whether a file given to run is a WebAssembly module:
// by its magic bytes, or by its name (a damaged module then gets the
// runtime's explanation rather than a JavaScript syntax error).
func isModule(name string, b []byte) bool {
	return bytes.HasPrefix(b, wasmMagic) || strings.EqualFold(filepath.Ext(name), ".wasm")
}

func newRunCmd(g *globals) *cobra.Command {
	var input string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "run SCRIPT.js|MODULE.wasm",
		Short: "run a script or a WebAssembly module; prints the run result JSON (exit 1 if it failed)",
		Long: `Run a JavaScript file in the sandbox. The script is the body of an async function:
top-level await and return work; files.*, tools.*, input and session are its globals.

A WebAssembly module (a .wasm file, or any file starting with the \0asm magic) runs as a
WASI preview 1 command: --input is its stdin (JSON), its stdout is the result, its stderr
lines are the logs, and the metaclaw import module reaches the same operations
(bindings/wasm/README.md; Go programs: GOOS=wasip1 GOARCH=wasm go build).

The run result {ok, result, logs, error?, files, durationMs} is printed as JSON.`,
		Example: `  metaclaw run report.js
  metaclaw run report.js --input '{"month":"2024-05"}' --timeout 5s
  metaclaw run summary.wasm --input '{"path":"sales.csv"}'
  metaclaw run report.js --server http://127.0.0.1:8080 --token $TOKEN`,
		Args: positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := os.ReadFile(args[0])
			if err != nil {
				return usageError(cmd, "run: %v", err)
			}
			s := script{Name: args[0], Code: string(code), Timeout: timeout}
			if isModule(args[0], code) {
				if len(code) == 0 {
					return usageError(cmd, "run: %s is empty; a WebAssembly module begins with \\0asm", args[0])
				}
				s.Code, s.Wasm = "", code
			}
			if input != "" {
				var in any
				if err := json.Unmarshal([]byte(input), &in); err != nil {
					return usageError(cmd, "run: --input is not valid JSON: %v", err)
				}
				s.Input = json.RawMessage(input)
			}
			return g.withBackend(true, func(ctx context.Context, b backend) error {
				res, ok, err := b.Run(ctx, s)
				if err != nil {
					return fail(g, err, true)
				}
				printJSON(res)
				if !ok {
					return exitCode(1)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&input, "input", "", "`JSON` value the script reads as its input global")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "wall-clock limit of this run (default: run_timeout, 30s)")
	config.Bind(cmd.Flags(), "run")
	return cmd
}
