package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"
	"github.com/metaclaw/metaclaw/server/mcpserver"
)

// newMCPCmd serves the workspace's meta-tools over MCP on stdin/stdout.
// Logs go to stderr: stdout carries the protocol.
func newMCPCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "serve the meta-tools over MCP on stdin/stdout",
		Long: `Serve the workspace's meta-tools (built-in and saved) over the Model Context Protocol on
stdin and stdout, for MCP clients that start their servers as child processes.`,
		Example: `  metaclaw mcp --data ~/metaclaw-data --workspace default
  metaclaw mcp --profile code    # run_script, search_api and file_list only
  # in an MCP client's configuration:
  #   {"command": "metaclaw", "args": ["mcp", "--data", "/srv/metaclaw"]}`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			log := g.logger(true)
			h, parts, err := g.assemble(log, false)
			if err != nil {
				return fail(g, err, false)
			}
			defer g.closeHost(h)
			// Workers start with the first script, then stay warm: many
			// MCP sessions only list and read files.
			newLazyPool(h, int(g.cfg.Int("workers")))
			m := mcpserver.New(h, mcpserver.Options{Log: log, Version: buildVersion(), Profile: g.cfg.String("profile")})
			parts.Tools.OnChange(m.ToolsChanged)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := m.RunStdio(ctx, g.workspace); err != nil && ctx.Err() == nil {
				fmt.Fprintf(stderr, "metaclaw mcp: %v\n", err)
				return exitCode(1)
			}
			return nil
		},
	}
	config.Bind(cmd.Flags(), "mcp")
	return cmd
}
