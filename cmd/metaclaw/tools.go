package main

import (
	"context"
	"fmt"
	"strings"
)

func cmdTools(g *globals, args []string) int {
	fs := newFlags("tools", g)
	if _, err := parseFlags(fs, args); err != nil {
		return usageError("tools: %v", err)
	}
	if g.server != "" {
		return remoteTools(g)
	}
	h, err := g.openHost()
	if err != nil {
		return fail(g, err, true)
	}
	defer h.Close()
	list, err := h.Registry.Tools(context.Background(), h.Env(g.workspace, g.session))
	if err != nil {
		return fail(g, err, g.json)
	}
	if g.json {
		printJSON(map[string]any{"tools": list})
		return 0
	}
	for _, t := range list {
		doc := t.Description
		if i := strings.Index(doc, ". "); i > 0 {
			doc = doc[:i+1]
		}
		fmt.Fprintf(stdout, "%-32s %s\n", t.Name, doc)
	}
	return 0
}
