package main

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

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
	if len(pos) == 2 && strings.TrimSpace(pos[1]) != "" {
		dec := json.NewDecoder(strings.NewReader(pos[1]))
		dec.UseNumber()
		if err := dec.Decode(&toolArgs); err != nil {
			return fail(g, apierr.New(apierr.ValidationFailed, "arguments are not a JSON object: %v", err), true)
		}
	}
	if g.server != "" {
		return remoteTool(g, pos[0], toolArgs)
	}
	h, err := g.openHost()
	if err != nil {
		return fail(g, err, true)
	}
	defer h.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := h.Registry.CallTool(ctx, h.Env(g.workspace, g.session), pos[0], toolArgs)
	if err != nil {
		return fail(g, err, true)
	}
	printJSON(res)
	return 0
}
