package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"
	"github.com/metaclaw/metaclaw/hostapi/pdf"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/server"
)

func newServeCmd(g *globals) *cobra.Command {
	var logJSON bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run the HTTP server (API, live events, MCP, web page)",
		Long: `Serve the data directory over HTTP: the file API, live file events (SSE), script runs,
the meta-tools at /api/tools and over MCP at /mcp, and the workspace web page at /.
Without tokens the server serves one workspace and only listens on loopback; with
tokens (SECRET:WORKSPACE) each token sees its own workspace.`,
		Example: `  metaclaw serve
  metaclaw serve --addr 0.0.0.0:8080 --token "$(openssl rand -hex 16):team"
  METACLAW_TOKENS_FILE=/etc/metaclaw/tokens metaclaw serve --config /etc/metaclaw/metaclaw.yaml`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if logJSON {
				if err := g.cfg.Set("log_format", "json", "--log-json"); err != nil {
					return usageError(cmd, "%v", err)
				}
			}
			c := g.cfg
			var toks []server.Token
			for _, t := range c.List("tokens") {
				tok, err := server.ParseToken(t)
				if err != nil {
					return usageError(cmd, "tokens (from %s): %v", c.Get("tokens").Origin, err)
				}
				toks = append(toks, tok)
			}
			if f := c.String("tokens_file"); f != "" {
				more, err := server.ReadTokensFile(f)
				if err != nil {
					return usageError(cmd, "tokens_file: %v", err)
				}
				toks = append(toks, more...)
			}
			addr := c.String("addr")
			if err := server.CheckBind(addr, len(toks) > 0); err != nil {
				fmt.Fprintf(stderr, "metaclaw serve: %v\n", err)
				return exitCode(2)
			}
			// One server per data directory: a second one would serve
			// stale events and race the first one's writes.
			release, err := store.LockServer(g.data)
			if err != nil {
				return fail(g, err, g.json)
			}
			defer release()
			log := g.logger(false)
			// pdfium loads while the host opens (~80 ms sooner).
			pdf.Preload(log)
			h, parts, err := g.assemble(log, true)
			if err != nil {
				return fail(g, err, g.json)
			}
			defer g.closeHost(h)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Everything that takes long starts in the background, and
			// the port opens at once (BenchmarkServeFirstExtract): the PDF
			// engine first, which loads pdfium from the user's cache (on a
			// new machine: compiles it), so that the first PDF request
			// does not wait for it; the sandbox workers once it is ready
			// (or with the first script). Requests that come sooner wait
			// for the same starts.
			pdfReady := make(chan struct{})
			go func() {
				defer close(pdfReady)
				start := time.Now()
				if err := pdf.Warm(ctx, h); err != nil && ctx.Err() == nil {
					log.Warn("the PDF engine did not start; PDF text operations will try again", "error", err)
					return
				}
				log.Debug("PDF engine ready", "took", time.Since(start).Round(time.Millisecond))
			}()
			startPoolInBackground(h, int(c.Int("workers")), int(c.Int("max_runs")), pdfReady)
			srv, err := server.New(server.Config{Host: h, Tools: parts.Tools, Tokens: toks, Workspace: g.workspace,
				MaxConcurrentRuns: int(c.Int("max_runs")), PublicURL: c.String("public_url"),
				ShutdownTimeout: c.Duration("shutdown_timeout"), SignedURLTTL: c.Duration("signed_url_ttl"),
				Version: buildVersion(), Log: log})
			if err != nil {
				fmt.Fprintf(stderr, "metaclaw serve: %v\n", err)
				return exitCode(1)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				fmt.Fprintf(stderr, "metaclaw serve: %v\n", err)
				return exitCode(1)
			}
			if g.shared != nil && g.shared.clientURL != "" {
				fmt.Fprintf(stderr, "metaclaw: embedded NATS JetStream (stored in %s) takes other hosts at %s\n",
					filepath.Join(g.data, "nats"), g.shared.clientURL)
			} else if g.shared != nil {
				fmt.Fprintf(stderr, "metaclaw: workspaces on NATS at %s\n", c.Get("nats").Text())
			}
			// Said once the port is open (with the port chosen for :0), so
			// that whoever starts the server can wait for this line.
			if len(toks) == 0 {
				fmt.Fprintf(stderr, "metaclaw: serving workspace %q on http://%s/ (no tokens: loopback only)\n", g.workspace, ln.Addr())
			} else {
				fmt.Fprintf(stderr, "metaclaw: serving %d token(s) on http://%s/\n", len(toks), ln.Addr())
			}
			// Where to go next: the page, the MCP endpoint, a curl that works.
			fmt.Fprint(stderr, server.ConnectHelp("http://"+ln.Addr().String(), len(toks) > 0))
			if err := srv.Serve(ctx, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintf(stderr, "metaclaw serve: %v\n", err)
				return exitCode(1)
			}
			return nil
		},
	}
	config.Bind(cmd.Flags(), "serve")
	cmd.Flags().BoolVar(&logJSON, "log-json", false, "same as --log-format json")
	cmd.Flags().MarkHidden("log-json")
	return cmd
}
