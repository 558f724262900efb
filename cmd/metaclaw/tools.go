package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"
)

// toolLine is what the tools table shows of a tool.
type toolLine struct{ Name, Description string }

func newToolsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "list the meta-tools (names, descriptions, schemas, examples)",
		Long: `List the meta-tools: a table of names and first sentences, or with --json every
tool's description, input schema and example calls. Without a data directory only the
built-in tools are listed (nothing is created); with one, its saved tools too.`,
		Example: `  metaclaw tools
  metaclaw tools --json
  metaclaw tools --server http://127.0.0.1:8080 --token $TOKEN`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			show := func(ctx context.Context, b toolBackend) error {
				res, lines, err := b.Tools(ctx)
				if err != nil {
					return fail(g, err, g.json)
				}
				if g.json {
					printJSON(res)
					return nil
				}
				for _, t := range lines {
					doc := t.Description
					if i := strings.Index(doc, ". "); i > 0 {
						doc = doc[:i+1]
					}
					fmt.Fprintf(stdout, "%-32s %s\n", t.Name, doc)
				}
				return nil
			}
			if g.server != "" {
				return g.withBackend(true, func(ctx context.Context, b backend) error { return show(ctx, b) })
			}
			h, cleanup, err := g.openRegistry(true)
			if err != nil {
				return fail(g, err, g.json)
			}
			defer cleanup()
			return show(cmd.Context(), &localBackend{h: h, env: h.Env(g.workspace, g.session)})
		},
	}
	config.Bind(cmd.Flags(), "tools")
	return cmd
}
