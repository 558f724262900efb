package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/server/toolspec"
)

// toolLine is what the tools table shows of a tool.
type toolLine struct{ Name, Description string }

func newToolsCmd(g *globals) *cobra.Command {
	var q toolQuery
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "list the meta-tools (names, descriptions, schemas, examples)",
		Long: `List the meta-tools: a table of names and first sentences, or with --json every
tool's description, input schema and example calls. Without a data directory only the
built-in tools are listed (nothing is created); with one, its saved tools too.`,
		Example: `  metaclaw tools
  metaclaw tools --json
  metaclaw tools --json --format openai --strict   # OpenAI function calling, strict schemas
  metaclaw tools --profile code --format anthropic # the 3-tool code-mode surface
  metaclaw tools --server http://127.0.0.1:8080 --token $TOKEN`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			q.Profile = g.cfg.String("profile")
			if _, err := toolspec.CheckFormat(q.Format, q.API); err != nil {
				return usageError(cmd, "%s", apierr.Of(err).Message)
			}
			show := func(ctx context.Context, b toolBackend) error {
				res, lines, err := b.Tools(ctx, q)
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
	cmd.Flags().StringVar(&q.Format, "format", "", "with --json: the list in an API's shape: anthropic, openai, openai-responses or mcp (default: metaclaw's own, with examples)")
	cmd.Flags().StringVar(&q.API, "api", "", "with --format openai: chat (default) or responses")
	cmd.Flags().BoolVar(&q.Strict, "strict", false, "with --json: schemas valid under OpenAI's strict mode (optional arguments nullable)")
	return cmd
}
