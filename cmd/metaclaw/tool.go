package main

import (
	"context"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"
	"github.com/metaclaw/metaclaw/hostapi"
)

// toolBackend runs scripts and tools for the run, tool and tools commands
// (localBackend, remoteBackend). Results are that side's own JSON, printed
// as is, so each mode prints what it always has.
type toolBackend interface {
	// Run runs s; ok is the run result's "ok".
	Run(ctx context.Context, s script) (res any, ok bool, err error)
	CallTool(ctx context.Context, name string, args map[string]any) (any, error)
	// Tools answers the --json list, in the shape q asks for, and the
	// lines of the table.
	Tools(ctx context.Context, q toolQuery) (res any, lines []toolLine, err error)
}

// toolQuery chooses a tool list as GET /api/tools does: which tools
// (profile) and in which API's shape (format, api, strict).
type toolQuery struct {
	Profile, Format, API string
	Strict               bool
}

// values are q as GET /api/tools's query.
func (q toolQuery) values() url.Values {
	v := url.Values{}
	for k, x := range map[string]string{"profile": q.Profile, "format": q.Format, "api": q.API} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if q.Strict {
		v.Set("strict", "true")
	}
	return v
}

func newToolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tool NAME [JSON]",
		Short: "call a meta-tool with JSON arguments; prints its result JSON",
		Long: `Call one meta-tool (see 'metaclaw tools') with its snake_case arguments as a JSON
object. The result is printed as JSON; an error prints {"error":{"code","message"}}
on stdout and exits 1.`,
		Example: `  metaclaw tool file_list '{}'
  metaclaw tool file_read_text '{"id":"notes.md","start_line":1,"end_line":20}'
  metaclaw tool table_query '{"path":"sales.csv","query":"SELECT count(*) FROM data"}'`,
		Args: positional(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var toolArgs map[string]any
			if len(args) == 2 {
				var err error
				if toolArgs, err = hostapi.ParseArgs([]byte(args[1])); err != nil {
					return fail(g, err, true)
				}
			}
			return g.withBackend(true, func(ctx context.Context, b backend) error {
				res, err := b.CallTool(ctx, args[0], toolArgs)
				if err != nil {
					return fail(g, err, true)
				}
				printJSON(res)
				return nil
			})
		},
	}
	config.Bind(cmd.Flags(), "tool")
	return cmd
}
