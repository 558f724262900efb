// Command metaclaw is the CLI of the metaclaw host (SPEC 10): it runs
// scripts and tools, manages workspace files and checks the store, working
// on the data directory directly.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/host"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
)

// globals are the flags every subcommand takes.
type globals struct {
	data      string
	workspace string
	json      bool
	session   string
	// server and token switch the file, run and tool commands to remote
	// mode: they talk to a running `metaclaw serve` instead of the data
	// directory.
	server string
	token  string
}

func (g *globals) register(fs *flag.FlagSet) {
	g.registerLocal(fs)
	fs.StringVar(&g.server, "server", os.Getenv("METACLAW_SERVER"), "work against the metaclaw server at this URL (env METACLAW_SERVER)")
	fs.StringVar(&g.token, "token", os.Getenv("METACLAW_TOKEN"), "bearer token for --server (env METACLAW_TOKEN)")
}

// registerLocal registers the flags of commands that only work locally.
func (g *globals) registerLocal(fs *flag.FlagSet) {
	def := os.Getenv("METACLAW_DATA")
	if def == "" {
		def = "data"
	}
	fs.StringVar(&g.data, "data", def, "data directory (env METACLAW_DATA)")
	fs.StringVar(&g.workspace, "workspace", "default", "workspace name")
	fs.BoolVar(&g.json, "json", false, "machine-readable JSON output")
	fs.StringVar(&g.session, "session", "cli", "session id recorded as provenance")
}

// openHost opens the data directory with every operation and the JS runner.
func (g *globals) openHost() (*hostapi.Host, error) {
	h, _, err := host.Open(hostapi.Config{DataDir: g.data, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	h.Runner = jsrt.New(h)
	return h, nil
}

type command struct {
	name, usage, summary string
	run                  func(g *globals, args []string) int
}

var commands = []command{
	{"run", "run SCRIPT.js [--input JSON] [--timeout 30s]", "run a script; prints the run result JSON (exit 1 if it failed)", cmdRun},
	{"tool", "tool NAME [JSON]", "call a meta-tool with JSON arguments; prints its result JSON", cmdTool},
	{"tools", "tools [--json]", "list the meta-tools (names, descriptions, schemas)", cmdTools},
	{"files", "files upload|download|list|info|delete|revert …", "manage workspace files", cmdFiles},
	{"serve", "serve [--addr 127.0.0.1:8080] [--token SECRET:WS]…", "run the HTTP server (API, live events, MCP, web page)", cmdServe},
	{"mcp", "mcp", "serve the meta-tools over MCP on stdin/stdout", cmdMCP},
	{"types", "types", "print the TypeScript declarations of the sandbox API", cmdTypes},
	{"fsck", "fsck [--repair]", "check (and repair) metadata against the file bodies on disk", cmdFsck},
}

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

var stdout io.Writer = os.Stdout
var stderr io.Writer = os.Stderr

func realMain(args []string, out, errOut io.Writer) int {
	stdout, stderr = out, errOut
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	// Global flags may stand before the command: find the command word.
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if valueFlags[strings.TrimLeft(args[i], "-")] {
			i++
		}
		i++
	}
	if i >= len(args) {
		usage()
		return 2
	}
	rest := append(append([]string{}, args[:i]...), args[i+1:]...)
	for _, c := range commands {
		if c.name == args[i] {
			return c.run(&globals{}, rest)
		}
	}
	fmt.Fprintf(stderr, "metaclaw: unknown command %q\n\n", args[i])
	usage()
	return 2
}

// valueFlags are the global flags that take a value (for finding the
// command word behind them).
var valueFlags = map[string]bool{"data": true, "workspace": true, "session": true, "server": true, "token": true}

func usage() {
	fmt.Fprintln(stderr, "metaclaw — a host for agent-authored code\n\nUsage:")
	for _, c := range commands {
		fmt.Fprintf(stderr, "  metaclaw %-48s %s\n", c.usage, c.summary)
	}
	fmt.Fprintln(stderr, "\nGlobal flags: --data DIR (env METACLAW_DATA, default ./data), --workspace NAME, --json, --session ID")
	fmt.Fprintln(stderr, "Remote mode (files, run, tool, tools): --server URL --token TOKEN (env METACLAW_SERVER, METACLAW_TOKEN)")
}

// parseFlags parses fs from args allowing flags before and after the
// positional arguments (`metaclaw run s.js --timeout 5s`).
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newFlags makes a flag set with the global flags registered.
func newFlags(name string, g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	g.register(fs)
	return fs
}

func printJSON(v any) {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// fail prints a coded error: JSON on stdout with --json (or always for
// commands whose output is JSON), a sentence on stderr otherwise.
func fail(g *globals, err error, jsonOut bool) int {
	e := apierr.Of(err)
	if jsonOut || g.json {
		printJSON(map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message}})
	} else {
		fmt.Fprintf(stderr, "metaclaw: %s: %s\n", e.Code, e.Message)
	}
	return 1
}

func usageError(format string, args ...any) int {
	fmt.Fprintf(stderr, "metaclaw: "+format+"\n", args...)
	return 2
}

func isFlagHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }

func joinLines(s []string) string { return strings.Join(s, "\n") }
