package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/server/mcpserver"
)

// cmdMCP serves the workspace's meta-tools over MCP on stdin/stdout. Logs go
// to stderr: stdout carries the protocol.
func cmdMCP(g *globals, args []string) int {
	fs := newFlags("mcp", g)
	allowPrivate := fs.Bool("allow-private-downloads", false, "let files.download reach loopback and private addresses (local testing only)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return usageError("mcp: %v", err)
	}
	if len(pos) != 0 {
		return usageError("usage: metaclaw mcp [--data DIR] [--workspace NAME]")
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, parts, err := host.Open(hostapi.Config{DataDir: g.data, AllowPrivateDownloads: *allowPrivate, Log: log})
	if err != nil {
		return fail(g, err, false)
	}
	defer h.Close()
	h.Runner = jsrt.New(h)
	m := mcpserver.New(h, mcpserver.Options{Log: log})
	parts.Tools.OnChange(m.ToolsChanged)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := m.RunStdio(ctx, g.workspace); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "metaclaw mcp: %v\n", err)
		return 1
	}
	return 0
}
