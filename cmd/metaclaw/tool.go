package main

import (
	"context"

	"github.com/metaclaw/metaclaw/hostapi"
)

// toolBackend runs scripts and tools for the run, tool and tools commands
// (localBackend, remoteBackend). Results are that side's own JSON, printed
// as is, so each mode prints what it always has.
type toolBackend interface {
	// Run runs s; ok is the run result's "ok".
	Run(ctx context.Context, s script) (res any, ok bool, err error)
	CallTool(ctx context.Context, name string, args map[string]any) (any, error)
	// Tools answers the --json list and the lines of the table.
	Tools(ctx context.Context) (res any, lines []toolLine, err error)
}

func cmdTool(g *globals, args []string) int {
	fs := newFlags("tool", g)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return usageError("tool: %v", err)
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usageError("usage: metaclaw tool NAME ['{\"arg\":…}']")
	}
	var toolArgs map[string]any
	if len(pos) == 2 {
		if toolArgs, err = hostapi.ParseArgs([]byte(pos[1])); err != nil {
			return fail(g, err, true)
		}
	}
	return g.withBackend(true, func(ctx context.Context, b backend) int {
		res, err := b.CallTool(ctx, pos[0], toolArgs)
		if err != nil {
			return fail(g, err, true)
		}
		printJSON(res)
		return 0
	})
}
