package main

import (
	"context"
	"fmt"
	"strings"
)

// toolLine is what the tools table shows of a tool.
type toolLine struct{ Name, Description string }

func cmdTools(g *globals, args []string) int {
	fs := newFlags("tools", g)
	if _, err := parseFlags(fs, args); err != nil {
		return usageError("tools: %v", err)
	}
	return g.withBackend(true, func(ctx context.Context, b backend) int {
		res, lines, err := b.Tools(ctx)
		if err != nil {
			return fail(g, err, g.json)
		}
		if g.json {
			printJSON(res)
			return 0
		}
		for _, t := range lines {
			doc := t.Description
			if i := strings.Index(doc, ". "); i > 0 {
				doc = doc[:i+1]
			}
			fmt.Fprintf(stdout, "%-32s %s\n", t.Name, doc)
		}
		return 0
	})
}
