// Command metaclaw is the CLI of the metaclaw host (SPEC 10): it runs
// scripts and tools, manages workspace files, serves the HTTP API and MCP,
// and checks the store. Local commands work on the data directory
// directly; with --server they talk to a running `metaclaw serve`.
//
// The command tree is cobra's (help, suggestions, completion); settings
// come from internal/config (flag > environment > file > default). A
// command opens only what it uses: help, --version, config, types and
// tools without a data directory never touch one.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/metaclaw/metaclaw/bindings/ts"
	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"
	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/host"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise it comes from the module's build information.
var version = ""

// globals are what every command shares once its flags are parsed: the
// effective configuration and the values read from it on every run.
type globals struct {
	cfg       *config.Config
	data      string
	workspace string
	json      bool
	session   string
	// server and token switch the file, run and tool commands to remote
	// mode: they talk to a running `metaclaw serve` instead of the data
	// directory.
	server string
	token  string
	// shared is the NATS backend of the host this command opened, if any;
	// closeHost undoes it once the host has closed.
	shared *sharedStore
}

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

var stdout io.Writer = os.Stdout
var stderr io.Writer = os.Stderr

// exitCode ends a command with a status other than 0 (1: the operation
// failed, 2: the command line was wrong), its message already printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// usageErr is a command-line mistake: printed with a pointer to --help,
// exit status 2.
type usageErr struct{ msg, cmd string }

func (e *usageErr) Error() string { return e.msg }

func usageError(cmd *cobra.Command, format string, args ...any) error {
	return &usageErr{msg: fmt.Sprintf(format, args...), cmd: cmd.CommandPath()}
}

func realMain(args []string, out, errOut io.Writer) int {
	stdout, stderr = out, errOut
	g := &globals{}
	root := newRoot(g)
	root.SetArgs(reorder(root, args))
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.Execute()
	var code exitCode
	var ue *usageErr
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "metaclaw: %s\nRun '%s --help' for usage.\n", ue.msg, ue.cmd)
		return 2
	}
	// Cobra's own errors: an unknown command (with its suggestions) or a
	// wrong argument count.
	fmt.Fprintf(stderr, "metaclaw: %s\n", strings.TrimSpace(err.Error()))
	if strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintln(stderr, "Run 'metaclaw --help' for the list of commands.")
	}
	return 2
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "metaclaw",
		Short: "a host for agent-authored code",
		Long: `metaclaw runs JavaScript written by LLM agents in a sandbox whose only way out is
files.* and tools.*, and offers the same operations as meta-tools over HTTP, MCP and
this CLI. Local commands work on the data directory; --server URL sends them to a
running 'metaclaw serve'.

Settings come from flags, METACLAW_* variables and a config file (--config FILE, or
metaclaw.yaml in the data directory), in that order; 'metaclaw config' shows them.`,
		Example: `  metaclaw files upload sales.xlsx
  metaclaw tool spreadsheet_read_range '{"id":"sales.xlsx","sheet":1,"range":"A1:D5"}'
  metaclaw run report.js --input '{"month":"2024-05"}'
  metaclaw serve --addr 127.0.0.1:8080`,
		Version:       buildVersion(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Settings are read once the flags are parsed, for every command
		// except help and completion.
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return g.load(cmd)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(stderr)
			cmd.Usage()
			return exitCode(2)
		},
	}
	root.SetVersionTemplate("metaclaw {{.Version}}\n")
	pf := root.PersistentFlags()
	config.BindGlobal(pf)
	pf.BoolVar(&g.json, "json", false, "machine-readable JSON output")
	pf.StringVar(&g.session, "session", "cli", "session id recorded as the provenance of changes")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		newRunCmd(g), newToolCmd(g), newToolsCmd(g), newFilesCmd(g),
		newServeCmd(g), newMCPCmd(g), newTypesCmd(g), newFsckCmd(g), newConfigCmd(g),
	)
	return root
}

// load reads the configuration for cmd.
func (g *globals) load(cmd *cobra.Command) error {
	cfg, err := config.Load(config.Options{Flags: cmd.Flags()})
	if err != nil {
		return usageError(cmd, "%v", err)
	}
	g.cfg = cfg
	// Format packages read the shared cache's place from the environment
	// (and worker processes inherit it), wherever the setting came from.
	if dir := cfg.String("cache_dir"); dir != "" {
		os.Setenv(cfg.Get("cache_dir").EnvName(), dir)
	}
	g.data = cfg.String("data")
	g.workspace = cfg.String("workspace")
	g.server = cfg.String("server")
	g.token = cfg.String("token")
	return nil
}

// flagError explains a flag the command does not know, with the nearest
// one it does.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if near := config.Nearest(name, names); near != "" {
			msg += "; did you mean --" + near + "?"
		}
	}
	return usageError(cmd, "%s", msg)
}

// reorder moves flags that stand before a command word behind it, so that
// `metaclaw --server URL tool NAME` parses like `metaclaw tool NAME
// --server URL` (cobra only looks for subcommands among the root's own
// flags). Arguments behind the command words stay where they are: flags
// and positional arguments mix freely there.
func reorder(root *cobra.Command, args []string) []string {
	cmd := root
	var path, flags []string
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
			i++
			if !strings.Contains(a, "=") && takesValue(root, a) && i < len(args) {
				flags = append(flags, args[i])
				i++
			}
			continue
		}
		var sub *cobra.Command
		for _, c := range cmd.Commands() {
			if c.Name() == a || c.HasAlias(a) {
				sub = c
			}
		}
		if sub == nil {
			break
		}
		path = append(path, a)
		cmd = sub
		i++
	}
	out := append(path, flags...)
	return append(out, args[i:]...)
}

// takesValue reports whether the flag arg (-o, --data) takes a value in
// any command of the tree.
func takesValue(root *cobra.Command, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	short := !strings.HasPrefix(arg, "--")
	found := false
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			var f *pflag.Flag
			if short {
				f = fs.ShorthandLookup(name)
			} else {
				f = fs.Lookup(name)
			}
			if f != nil && f.NoOptDefVal == "" {
				found = true
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return found
}

// buildVersion says which build this is: the -X version, else the module
// version and VCS revision recorded by the Go toolchain.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	switch {
	case !ok && version == "":
		return "dev"
	case !ok:
		return version
	case version != "":
		return version + " " + info.GoVersion
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " (" + rev + modified + ")"
	}
	return v + " " + info.GoVersion
}

// hostConfig is the host-side part of the configuration.
func (g *globals) hostConfig(log *slog.Logger) hostapi.Config {
	c := g.cfg
	limits := hostapi.RunLimits{
		Timeout:     c.Duration("run_timeout"),
		MemoryBytes: c.Int("run_memory"),
		LogBytes:    int(c.Int("run_log_size")),
		ResultBytes: int(c.Int("run_result_size")),
		MaxDepth:    int(c.Int("run_max_depth")),
	}
	// A caller may raise the log and result caps up to the built-in maxima,
	// or to the configured defaults when those are higher.
	max := hostapi.DefaultMaxLimits()
	max.Timeout = c.Duration("run_timeout_max")
	max.MemoryBytes = c.Int("run_memory_max")
	max.LogBytes = maxInt(max.LogBytes, limits.LogBytes)
	max.ResultBytes = maxInt(max.ResultBytes, limits.ResultBytes)
	max.MaxDepth = limits.MaxDepth
	return hostapi.Config{
		DataDir:               g.data,
		MaxFileSize:           c.Int("max_file_size"),
		MaxWorkspaceSize:      c.Int("max_workspace_size"),
		WorkspaceQuotas:       c.SizeMap("workspace_quotas"),
		AllowPrivateDownloads: c.Bool("allow_private_downloads"),
		MaxImagePixels:        c.Int("max_image_pixels"),
		Limits:                limits,
		MaxLimits:             max,
		Log:                   log,
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// logger writes to stderr in the configured format. One-shot commands
// (quiet: tool, run, files, mcp) write only warnings and worse unless
// debug is asked for, so that their output stays the answer.
func (g *globals) logger(quiet bool) *slog.Logger {
	level := slog.LevelInfo
	switch g.cfg.String("log_level") {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	if quiet && level == slog.LevelInfo {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{Level: level}
	if g.cfg.String("log_format") == "json" {
		return slog.New(slog.NewJSONHandler(stderr, opts))
	}
	return slog.New(slog.NewTextHandler(stderr, opts))
}

// assemble opens the host of a command with every operation: on the data
// directory, or on the NATS deployment of the nats setting (serving: this
// is `metaclaw serve`, which runs an embedded NATS server for others).
// Close it with closeHost. The caller sets its runners.
func (g *globals) assemble(log *slog.Logger, serving bool) (*hostapi.Host, *host.Parts, error) {
	cfg := g.hostConfig(log)
	shared, err := g.openShared(serving)
	if err != nil {
		return nil, nil, err
	}
	if shared != nil {
		cfg.Backend = shared.backend
	}
	h, parts, err := host.Open(cfg)
	if err != nil {
		shared.close()
		return nil, nil, err
	}
	g.shared = shared
	// search_api is a tool of every door, the CLI's too.
	ts.Register(h)
	return h, parts, nil
}

// closeHost closes a host from assemble, then what its store stood on.
func (g *globals) closeHost(h *hostapi.Host) error {
	err := h.Close()
	g.shared.close()
	g.shared = nil
	return err
}

// openHost opens the host of a one-shot command, whose runtimes start with
// the first script or module.
func (g *globals) openHost() (*hostapi.Host, *host.Parts, error) {
	h, parts, err := g.assemble(g.logger(true), false)
	if err != nil {
		return nil, nil, err
	}
	// One-shot commands need one worker, if any.
	newLazyPool(h, 1)
	return h, parts, nil
}

// openRegistry opens a host for commands that only describe the
// operations (types, tools): on the data directory (or NATS deployment)
// when useData and one exists (its saved tools are listed too), else on a
// throwaway directory, so that asking what metaclaw can do never creates
// ./data.
func (g *globals) openRegistry(useData bool) (h *hostapi.Host, cleanup func(), err error) {
	st, statErr := os.Stat(g.data)
	if useData && (statErr == nil && st.IsDir() || g.cfg.String("nats") != "") {
		h, _, err := g.openHost()
		if err != nil {
			return nil, nil, err
		}
		return h, func() { g.closeHost(h) }, nil
	}
	dir, err := os.MkdirTemp("", "metaclaw-registry-")
	if err != nil {
		return nil, nil, apierr.Wrap(apierr.Internal, err, "cannot make a temporary directory: %v", err)
	}
	cfg := g.hostConfig(g.logger(true))
	cfg.DataDir = dir
	h, _, err = host.Open(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	ts.Register(h)
	return h, func() { h.Close(); os.RemoveAll(dir) }, nil
}

func printJSON(v any) {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// fail prints a coded error: JSON on stdout with --json (or always for
// commands whose output is JSON), a sentence on stderr otherwise, and
// ends the command with status 1.
func fail(g *globals, err error, jsonOut bool) error {
	e := apierr.Of(err)
	if jsonOut || g.json {
		printJSON(map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message}})
	} else {
		fmt.Fprintf(stderr, "metaclaw: %s: %s\n", e.Code, e.Message)
	}
	return exitCode(1)
}

// positional checks the number of positional arguments with a message
// that shows the command's usage line.
func positional(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			want := fmt.Sprintf("%d", min)
			if max != min {
				want = fmt.Sprintf("%d to %d", min, max)
			}
			return usageError(cmd, "%s takes %s argument(s), got %d; usage: %s", cmd.CommandPath(), want, len(args), cmd.UseLine())
		}
		return nil
	}
}
