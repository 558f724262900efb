package main

import (
	"context"
	"fmt"
)

func cmdFsck(g *globals, args []string) int {
	fs := newFlags("fsck", g)
	repair := fs.Bool("repair", false, "fix what can be fixed")
	if _, err := parseFlags(fs, args); err != nil {
		return usageError("fsck: %v", err)
	}
	h, err := g.openHost()
	if err != nil {
		return fail(g, err, g.json)
	}
	defer h.Close()
	rep, err := h.Store.Fsck(context.Background(), *repair)
	if err != nil {
		return fail(g, err, g.json)
	}
	if g.json {
		printJSON(rep)
	} else {
		fmt.Fprintf(stdout, "checked %d files, %d problems", rep.FilesChecked, len(rep.Problems))
		if *repair {
			fmt.Fprintf(stdout, ", %d repaired", len(rep.Problems)-rep.Unrepaired())
		}
		fmt.Fprintln(stdout)
		for _, p := range rep.Problems {
			state := ""
			if p.Repaired {
				state = " (repaired)"
			}
			where := p.Name
			if where == "" {
				where = p.Path
			}
			fmt.Fprintf(stdout, "  %-14s %s: %s%s\n", p.Kind, where, p.Detail, state)
		}
	}
	if rep.Unrepaired() > 0 {
		return 1
	}
	return 0
}
