package main

import (
	"context"
	"encoding/json"
	"os"
	"time"
)

// script is one run of a script file.
type script struct {
	Name    string // the file name, shown in stack traces
	Code    string
	Input   json.RawMessage // valid JSON or empty
	Timeout time.Duration
}

func cmdRun(g *globals, args []string) int {
	fs := newFlags("run", g)
	input := fs.String("input", "", "JSON input the script sees as `input`")
	timeout := fs.Duration("timeout", 30*time.Second, "wall-clock limit")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return usageError("run: %v", err)
	}
	if len(pos) != 1 {
		return usageError("usage: metaclaw run SCRIPT.js [--input JSON] [--timeout 30s]")
	}
	code, err := os.ReadFile(pos[0])
	if err != nil {
		return usageError("run: %v", err)
	}
	s := script{Name: pos[0], Code: string(code), Timeout: *timeout}
	if *input != "" {
		var in any
		if err := json.Unmarshal([]byte(*input), &in); err != nil {
			return usageError("run: --input is not valid JSON: %v", err)
		}
		s.Input = json.RawMessage(*input)
	}
	return g.withBackend(true, func(ctx context.Context, b backend) int {
		res, ok, err := b.Run(ctx, s)
		if err != nil {
			return fail(g, err, true)
		}
		printJSON(res)
		if !ok {
			return 1
		}
		return 0
	})
}
