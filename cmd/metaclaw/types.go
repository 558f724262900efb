package main

import (
	"fmt"

	"github.com/metaclaw/metaclaw/bindings/ts"
)

func cmdTypes(g *globals, args []string) int {
	fs := newFlags("types", g)
	if _, err := parseFlags(fs, args); err != nil {
		return usageError("types: %v", err)
	}
	h, err := g.openHost()
	if err != nil {
		return fail(g, err, false)
	}
	defer h.Close()
	fmt.Fprint(stdout, ts.Declarations(h.Registry))
	return 0
}
