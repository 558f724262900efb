package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/server"
)

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func cmdServe(g *globals, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	g.registerLocal(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on; a non-loopback address needs tokens")
	var tokens repeated
	fs.Var(&tokens, "token", "bearer token bound to a workspace, SECRET:WORKSPACE (repeatable)")
	tokensFile := fs.String("tokens-file", "", "file with one SECRET:WORKSPACE per line")
	allowPrivate := fs.Bool("allow-private-downloads", false, "let files.download reach loopback and private addresses (local testing only)")
	maxRuns := fs.Int("max-runs", 64, "script runs and tool calls in flight before requests get 503 BUSY")
	publicURL := fs.String("public-url", "", "scheme://host[:port] used in signed download URLs (default: from each request)")
	logJSON := fs.Bool("log-json", false, "write logs as JSON lines instead of key=value text")
	pos, err := parseFlags(fs, args)
	if err != nil {
		if isFlagHelp(err) {
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return 0
		}
		return usageError("serve: %v", err)
	}
	if len(pos) != 0 {
		return usageError("usage: metaclaw serve [--addr 127.0.0.1:8080] [--token SECRET:WORKSPACE]… [--tokens-file PATH]")
	}
	var toks []server.Token
	for _, t := range tokens {
		tok, err := server.ParseToken(t)
		if err != nil {
			return usageError("serve: --token: %v", err)
		}
		toks = append(toks, tok)
	}
	if *tokensFile != "" {
		more, err := server.ReadTokensFile(*tokensFile)
		if err != nil {
			return usageError("serve: --tokens-file: %v", err)
		}
		toks = append(toks, more...)
	}
	if err := server.CheckBind(*addr, len(toks) > 0); err != nil {
		fmt.Fprintf(stderr, "metaclaw serve: %v\n", err)
		return 2
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	if *logJSON {
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	}
	log := slog.New(handler)
	h, parts, err := host.Open(hostapi.Config{DataDir: g.data, AllowPrivateDownloads: *allowPrivate, Log: log})
	if err != nil {
		return fail(g, err, g.json)
	}
	defer h.Close()
	h.Runner = jsrt.New(h)
	srv, err := server.New(server.Config{Host: h, Tools: parts.Tools, Tokens: toks, Workspace: g.workspace,
		MaxConcurrentRuns: *maxRuns, PublicURL: *publicURL, Log: log})
	if err != nil {
		fmt.Fprintf(stderr, "metaclaw serve: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(toks) == 0 {
		fmt.Fprintf(stderr, "metaclaw: serving workspace %q on http://%s/ (no tokens: loopback only)\n", g.workspace, *addr)
	} else {
		fmt.Fprintf(stderr, "metaclaw: serving %d token(s) on http://%s/\n", len(toks), *addr)
	}
	if err := srv.ListenAndServe(ctx, *addr); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "metaclaw serve: %v\n", err)
		return 1
	}
	return 0
}
