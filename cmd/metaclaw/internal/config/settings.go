package config

import (
	"fmt"
	"strings"
)

// Kind is how a setting's text is read.
type Kind int

const (
	String   Kind = iota
	Bool          // true/false, 1/0, yes/no, on/off
	Int           // a whole number
	Size          // bytes: 50MB, 1GiB, 1048576
	Duration      // Go duration: 30s, 10m, 1h30m
	List          // strings; repeatable flag, comma-separated env, YAML sequence
	Enum          // one of Setting.Enum
	// SizeMap is sizes by name (per-workspace quotas): NAME=SIZE, as a
	// repeatable flag, comma-separated in the environment, or a YAML
	// mapping ({team: 5GB}).
	SizeMap
)

// Setting declares one configuration value. Its config-file key, flag and
// environment variable are all derived from Key, so that the three always
// agree: max_file_size ↔ --max-file-size ↔ METACLAW_MAX_FILE_SIZE.
type Setting struct {
	Key     string
	Kind    Kind
	Default string // in the text form a user would write
	Enum    []string
	Doc     string
	// Flag overrides the flag name derived from Key (tokens → --token).
	Flag string
	// Commands are the subcommands that take the flag ("serve", "tool", …);
	// every command reads the setting from the file and environment.
	Commands []string
	// Secret values are masked when the configuration is printed.
	Secret bool
	// Min bounds numeric kinds from below (inclusive).
	Min int64
	// NotInDataFile settings decide where the data directory is, so the
	// data directory's own metaclaw.yaml cannot set them.
	NotInDataFile bool
}

// FlagName is the setting's command-line flag, without dashes.
func (s *Setting) FlagName() string {
	if s.Flag != "" {
		return s.Flag
	}
	return strings.ReplaceAll(s.Key, "_", "-")
}

// EnvName is the setting's environment variable.
func (s *Setting) EnvName() string { return "METACLAW_" + strings.ToUpper(s.Key) }

// Takes reports whether command accepts the setting as a flag of its own.
// Settings that every command takes ("*") are global flags instead.
func (s *Setting) Takes(command string) bool {
	for _, c := range s.Commands {
		if c == command {
			return true
		}
	}
	return false
}

// Global reports whether every command takes the setting.
func (s *Setting) Global() bool { return len(s.Commands) == 1 && s.Commands[0] == "*" }

// Command groups, named once so that the table stays readable.
var (
	everyCommand = []string{"*"}
	hostCommands = []string{"serve", "mcp", "run", "tool", "config"}
	serveOnly    = []string{"serve", "config"}
	// remoteCommands can talk to a running server instead of a data dir.
	remoteCommands = []string{"files", "run", "tool", "tools", "config"}
	// storeCommands open the workspaces' store: on the data directory, or
	// on the NATS deployment the nats settings name.
	storeCommands = []string{"serve", "mcp", "run", "tool", "tools", "files", "fsck", "config"}
)

// Settings is every setting, in the order `metaclaw config` prints them.
var Settings = []*Setting{
	{Key: "data", Kind: String, Default: "data", Commands: everyCommand, NotInDataFile: true,
		Doc: "data directory: metaclaw.db, file bodies, caches, backups"},
	{Key: "workspace", Kind: String, Default: "default", Commands: everyCommand,
		Doc: "workspace the command works on (the server: the workspace served without tokens)"},

	{Key: "addr", Kind: String, Default: "127.0.0.1:8080", Commands: serveOnly,
		Doc: "address the server listens on; a non-loopback address needs tokens"},
	{Key: "public_url", Kind: String, Commands: serveOnly,
		Doc: "scheme://host[:port] used in signed download URLs (default: from each request)"},
	{Key: "tokens", Kind: List, Flag: "token", Commands: []string{"serve"}, Secret: true,
		Doc: "API tokens, each SECRET:WORKSPACE (repeat the flag; comma-separated in the environment)"},
	{Key: "tokens_file", Kind: String, Commands: serveOnly,
		Doc: "file with one SECRET:WORKSPACE per line"},
	{Key: "max_runs", Kind: Int, Default: "64", Min: 1, Commands: serveOnly,
		Doc: "script runs and tool calls in flight before requests get 503 BUSY"},
	{Key: "workers", Kind: Int, Default: "0", Min: 0, Commands: []string{"serve", "mcp", "config"},
		Doc: "warm sandbox worker processes kept ready (0: one per CPU)"},
	{Key: "shutdown_timeout", Kind: Duration, Default: "60s", Commands: serveOnly,
		Doc: "how long the server waits for uploads and runs in flight when it stops"},
	{Key: "signed_url_ttl", Kind: Duration, Default: "1h", Commands: serveOnly,
		Doc: "how long a signed download URL stays valid"},

	{Key: "max_file_size", Kind: Size, Default: "50MiB", Min: 1, Commands: hostCommands,
		Doc: "largest file a workspace may hold"},
	{Key: "max_workspace_size", Kind: Size, Default: "1GiB", Min: 1, Commands: hostCommands,
		Doc: "quota: bytes one workspace may hold"},
	{Key: "max_image_pixels", Kind: Int, Default: "100000000", Min: 1, Commands: hostCommands,
		Doc: "largest image (width × height) that is decoded; larger ones are refused"},
	{Key: "cache_dir", Kind: String, Commands: hostCommands,
		Doc: "cache shared by every data directory, e.g. compiled WebAssembly for PDF text (default: the user's cache directory, ~/.cache/metaclaw)"},
	{Key: "workspace_quotas", Kind: SizeMap, Flag: "workspace-quota", Commands: hostCommands,
		Doc: "per-workspace quotas overriding max_workspace_size: WORKSPACE=SIZE (repeat the flag; comma-separated in the environment; a mapping in the file)"},
	{Key: "allow_private_downloads", Kind: Bool, Default: "false", Commands: hostCommands,
		Doc: "let files.download reach loopback and private addresses (local testing only)"},

	{Key: "nats", Kind: String, Commands: storeCommands,
		Doc: "keep workspaces on NATS JetStream, shared by several hosts: nats://host:4222 (several comma-separated), or embedded (a JetStream server inside serve, stored in DATA/nats)"},
	{Key: "nats_listen", Kind: String, Default: "127.0.0.1:4222", Commands: storeCommands,
		Doc: "where the embedded NATS server (nats: embedded) takes clients: other hosts join with --nats nats://THIS-HOST:PORT; beyond loopback it needs nats_user/nats_password or nats_token"},
	{Key: "nats_creds", Kind: String, Commands: storeCommands,
		Doc: "NATS credentials file (JWT and NKey seed, .creds)"},
	{Key: "nats_user", Kind: String, Commands: storeCommands,
		Doc: "NATS user name (with nats_password); the embedded server requires it of its clients"},
	{Key: "nats_password", Kind: String, Commands: storeCommands, Secret: true,
		Doc: "NATS password"},
	{Key: "nats_token", Kind: String, Commands: storeCommands, Secret: true,
		Doc: "NATS authentication token; the embedded server requires it of its clients"},
	{Key: "nats_replicas", Kind: Int, Default: "1", Min: 1, Commands: storeCommands,
		Doc: "replicas of every NATS bucket and stream (3 in a three-node cluster)"},
	{Key: "nats_prefix", Kind: String, Default: "metaclaw", Commands: storeCommands,
		Doc: "name prefix of the NATS buckets and subjects, so that several deployments can share one NATS"},

	{Key: "run_timeout", Kind: Duration, Default: "30s", Commands: hostCommands,
		Doc: "wall-clock limit of a script run unless the caller asks for another"},
	{Key: "run_timeout_max", Kind: Duration, Default: "10m", Commands: hostCommands,
		Doc: "longest run a caller may ask for"},
	{Key: "run_memory", Kind: Size, Default: "256MiB", Min: 1 << 20, Commands: hostCommands,
		Doc: "memory of a script run unless the caller asks for another"},
	{Key: "run_memory_max", Kind: Size, Default: "1GiB", Min: 1 << 20, Commands: hostCommands,
		Doc: "most memory a caller may ask for"},
	{Key: "run_log_size", Kind: Size, Default: "1MiB", Min: 1, Commands: hostCommands,
		Doc: "console output a run may capture"},
	{Key: "run_result_size", Kind: Size, Default: "10MiB", Min: 1, Commands: hostCommands,
		Doc: "largest result a run may return"},
	{Key: "run_max_depth", Kind: Int, Default: "8", Min: 1, Commands: hostCommands,
		Doc: "nesting depth of tool calls (a tool calling a tool …)"},

	{Key: "profile", Kind: Enum, Default: "full", Enum: []string{"full", "code"}, Commands: []string{"tools", "mcp", "config"},
		Doc: "tools offered to a model: full (every tool) or code (run_script, search_api, file_list; the API is found with search_api)"},
	{Key: "log_format", Kind: Enum, Default: "text", Enum: []string{"text", "json"}, Commands: []string{"serve", "mcp", "config"},
		Doc: "log lines on stderr as key=value text or JSON"},
	{Key: "log_level", Kind: Enum, Default: "info", Enum: []string{"debug", "info", "warn", "error"}, Commands: []string{"serve", "mcp", "config"},
		Doc: "least severe log level written (one-shot commands write warnings and worse unless debug)"},

	{Key: "server", Kind: String, Commands: remoteCommands,
		Doc: "work against the metaclaw server at this URL instead of the data directory"},
	{Key: "token", Kind: String, Commands: remoteCommands, Secret: true,
		Doc: "bearer token for --server"},
}

// Lookup finds a setting by key.
func Lookup(key string) *Setting {
	for _, s := range Settings {
		if s.Key == key {
			return s
		}
	}
	return nil
}

// Nearest returns the candidate closest to word when it is close enough to
// be what was meant ("did you mean --timeout?"), or "". A candidate that
// word begins counts as close.
func Nearest(word string, candidates []string) string {
	limit := 2
	if len([]rune(word)) < 5 {
		limit = 1
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		d := distance(word, c)
		if len(word) >= 3 && strings.HasPrefix(c, word) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func kindExample(k Kind, s *Setting) string {
	switch k {
	case Bool:
		return "true or false"
	case Int:
		return "a whole number"
	case Size:
		return "a size such as 50MB, 512KiB or 1GiB"
	case Duration:
		return "a duration such as 30s, 5m or 1h30m"
	case Enum:
		return "one of " + strings.Join(s.Enum, ", ")
	case SizeMap:
		return "NAME=SIZE pairs such as team=5GB,guests=100MB"
	}
	return "text"
}

func (k Kind) String() string {
	return [...]string{"string", "bool", "int", "size", "duration", "list", "enum", "sizes"}[k]
}

var _ fmt.Stringer = Kind(0)
