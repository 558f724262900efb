package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// load parses args with the flags of command bound and loads the
// configuration with env as the whole environment.
func load(t *testing.T, command string, env map[string]string, args ...string) (*Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet(command, pflag.ContinueOnError)
	BindGlobal(fs)
	Bind(fs, command)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return Load(Options{Flags: fs, Getenv: func(k string) string { return env[k] }})
}

func write(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaults(t *testing.T) {
	c, err := load(t, "serve", nil, "--data", filepath.Join(t.TempDir(), "none"))
	if err != nil {
		t.Fatal(err)
	}
	if c.File != "" {
		t.Errorf("file %q, want none", c.File)
	}
	checks := map[string]any{
		"max_file_size": int64(50 << 20), "max_workspace_size": int64(1 << 30), "run_timeout": 30 * time.Second,
		"run_memory": int64(256 << 20), "max_runs": int64(64), "addr": "127.0.0.1:8080", "log_format": "text",
		"allow_private_downloads": false, "workspace": "default",
	}
	for k, want := range checks {
		v := c.Get(k)
		if v.Value != want || v.Source != FromDefault {
			t.Errorf("%s = %v (%s), want %v from the default", k, v.Value, v.Source, want)
		}
	}
	if got := c.Get("data"); got.Source != FromFlag || got.Origin != "--data" {
		t.Errorf("data from %s %s", got.Source, got.Origin)
	}
}

// TestPrecedence sets one value in every layer and checks that flag > env
// > file > default, and that each value says where it came from.
func TestPrecedence(t *testing.T) {
	data := t.TempDir()
	file := write(t, filepath.Join(data, DataFileName), `
max_file_size: 10MB
run_timeout: 5s
max_runs: 3
log_format: json
tokens: [secret-one-1:ws1, secret-two-2:ws2]
`)
	env := map[string]string{"METACLAW_RUN_TIMEOUT": "7s", "METACLAW_MAX_RUNS": "4"}
	c, err := load(t, "serve", env, "--data", data, "--max-runs", "5")
	if err != nil {
		t.Fatal(err)
	}
	if c.File != file {
		t.Fatalf("file %q, want %q", c.File, file)
	}
	cases := []struct {
		key    string
		value  any
		source Source
		origin string
	}{
		{"max_file_size", int64(10_000_000), FromFile, file + ":2"},
		{"run_timeout", 7 * time.Second, FromEnv, "METACLAW_RUN_TIMEOUT"},
		{"max_runs", int64(5), FromFlag, "--max-runs"},
		{"log_format", "json", FromFile, file + ":5"},
		{"max_workspace_size", int64(1 << 30), FromDefault, ""},
	}
	for _, tc := range cases {
		v := c.Get(tc.key)
		if v.Value != tc.value || v.Source != tc.source || v.Origin != tc.origin {
			t.Errorf("%s = %v from %s %q, want %v from %s %q", tc.key, v.Value, v.Source, v.Origin, tc.value, tc.source, tc.origin)
		}
	}
	if got := c.List("tokens"); strings.Join(got, " ") != "secret-one-1:ws1 secret-two-2:ws2" {
		t.Errorf("tokens %v", got)
	}
	if got := c.Get("tokens").Text(); got != "****:ws1,****:ws2" {
		t.Errorf("tokens shown as %q, want the secrets masked", got)
	}
	// A repeated flag adds up; the environment takes a comma list.
	c, err = load(t, "serve", map[string]string{"METACLAW_TOKENS": "aaaaaaaa:x, bbbbbbbb:y"}, "--data", data)
	if err != nil || strings.Join(c.List("tokens"), " ") != "aaaaaaaa:x bbbbbbbb:y" {
		t.Fatalf("env tokens: %v %v", c.List("tokens"), err)
	}
	c, err = load(t, "serve", nil, "--data", data, "--token", "cccccccc:a", "--token", "dddddddd:b")
	if err != nil || strings.Join(c.List("tokens"), " ") != "cccccccc:a dddddddd:b" {
		t.Fatalf("flag tokens: %v %v", c.List("tokens"), err)
	}
}

// TestConfigFile covers --config and METACLAW_CONFIG, which may also say
// where the data directory is, while the data directory's own file may not.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := write(t, filepath.Join(dir, "etc", "mc.yaml"), "data: "+filepath.Join(dir, "d")+"\nallow_private_downloads: yes\n")
	for _, how := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--config", file}, nil},
		{nil, map[string]string{"METACLAW_CONFIG": file}},
	} {
		c, err := load(t, "tool", how.env, how.args...)
		if err != nil {
			t.Fatal(err)
		}
		if c.File != file || c.String("data") != filepath.Join(dir, "d") || !c.Bool("allow_private_downloads") {
			t.Errorf("%v %v: file %q data %q private %v", how.args, how.env, c.File, c.String("data"), c.Bool("allow_private_downloads"))
		}
	}
	// The flag still beats the file for data.
	c, err := load(t, "tool", nil, "--config", file, "--data", "elsewhere")
	if err != nil || c.String("data") != "elsewhere" {
		t.Fatalf("data %q %v", c.String("data"), err)
	}
	// A named file that does not exist is an error; a missing data-dir file is not.
	if _, err := load(t, "tool", nil, "--config", filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing --config: %v", err)
	}
	data := filepath.Join(dir, "data2")
	write(t, filepath.Join(data, DataFileName), "data: /other\n")
	if _, err := load(t, "tool", nil, "--data", data); err == nil || !strings.Contains(err.Error(), "cannot be set in the data directory's own metaclaw.yaml") {
		t.Fatalf("data in the data dir's file: %v", err)
	}
	// An empty file is fine.
	write(t, filepath.Join(dir, "empty.yaml"), "")
	if c, err := load(t, "tool", nil, "--config", filepath.Join(dir, "empty.yaml")); err != nil || c.Int("max_file_size") != 50<<20 {
		t.Fatalf("empty file: %v", err)
	}
}

// TestBadValues: every malformed value is refused with a message naming
// its source and what would be accepted.
func TestBadValues(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		file string
		env  map[string]string
		args []string
		want string
	}{
		{name: "unknown key", file: "max_filesize: 1MB\n", want: `:1: unknown setting "max_filesize"; did you mean "max_file_size"?`},
		{name: "bad size in file", file: "\n\nmax_file_size: lots\n", want: `metaclaw.yaml:3: max_file_size: "lots" is not a size such as 50MB, 512KiB or 1GiB`},
		{name: "not YAML", file: "max_file_size: [1\n", want: "not valid YAML"},
		{name: "list for a scalar", file: "run_timeout: [1s, 2s]\n", want: "run_timeout: expected one value (a duration such as 30s, 5m or 1h30m), got a list"},
		{name: "not a mapping", file: "- a\n- b\n", want: "the file must be a mapping of settings"},
		{name: "twice", file: "max_runs: 1\nmax_runs: 2\n", want: ":2: max_runs is set twice (also on line 1)"},
		{name: "bad env duration", env: map[string]string{"METACLAW_RUN_TIMEOUT": "soon"}, want: `environment variable METACLAW_RUN_TIMEOUT: "soon" is not a duration such as 30s, 5m or 1h30m`},
		{name: "negative duration", env: map[string]string{"METACLAW_RUN_TIMEOUT": "-5s"}, want: `"-5s" must be longer than zero`},
		{name: "bad bool", env: map[string]string{"METACLAW_ALLOW_PRIVATE_DOWNLOADS": "maybe"}, want: `"maybe" is not true or false`},
		{name: "bad enum flag", args: []string{"--log-format", "xml"}, want: `flag --log-format: "xml" is not one of text, json`},
		{name: "bad int flag", args: []string{"--max-runs", "many"}, want: `flag --max-runs: "many" is not a whole number`},
		{name: "zero runs", args: []string{"--max-runs", "0"}, want: "flag --max-runs: 0 is too small: the least is 1"},
		{name: "tiny run memory", args: []string{"--run-memory", "1KB"}, want: "flag --run-memory: 1000 is too small: the least is 1MiB"},
		{name: "timeout over max", args: []string{"--run-timeout", "20m"}, want: "run_timeout (20m, from --run-timeout) is larger than run_timeout_max (10m, from the default)"},
		{name: "memory over max", env: map[string]string{"METACLAW_RUN_MEMORY_MAX": "128MiB"}, want: "run_memory (256MiB, from the default) is larger than run_memory_max (128MiB, from METACLAW_RUN_MEMORY_MAX)"},
		{name: "file over quota", args: []string{"--max-file-size", "2GiB"}, want: "max_file_size (2GiB, from --max-file-size) is larger than max_workspace_size (1GiB"},
		{name: "bad addr", args: []string{"--addr", "localhost"}, want: `addr "localhost" (from --addr) is not host:port`},
		{name: "bad public url", args: []string{"--public-url", "files.example.com"}, want: `public_url "files.example.com" (from --public-url) is not an http(s) URL`},
		{name: "quota without a size", args: []string{"--workspace-quota", "team"}, want: `flag --workspace-quota: "team" is not NAME=SIZE (e.g. team=5GB)`},
		{name: "quota with a bad size", env: map[string]string{"METACLAW_WORKSPACE_QUOTAS": "team=5GB,guests=lots"}, want: `environment variable METACLAW_WORKSPACE_QUOTAS: guests: "lots" is not a size`},
		{name: "quota twice", args: []string{"--workspace-quota", "team=5GB", "--workspace-quota", "team=1GB"}, want: `"team" is given twice`},
		{name: "zero quota", file: "workspace_quotas: {team: 0}\n", want: "workspace_quotas: team: a quota of 0 holds nothing"},
		{name: "quota list of mappings", file: "workspace_quotas:\n  - {team: 1GB}\n", want: "list items must be plain values"},
		{name: "quota name with a comma", file: "workspace_quotas: {\"a,b\": 1GB}\n", want: `the name "a,b" may not contain a comma or =`},
		{name: "bad nats url", args: []string{"--nats", "localhost:4222"}, want: `nats "localhost:4222" (from --nats) is not a NATS URL such as nats://host:4222`},
		{name: "bad nats url in a list", env: map[string]string{"METACLAW_NATS": "nats://a:4222, http://b:4222"}, want: `nats "http://b:4222" (from METACLAW_NATS) is not a NATS URL`},
		{name: "bad nats listen", args: []string{"--nats-listen", "4222"}, want: `nats_listen "4222" (from --nats-listen) is not host:port`},
		{name: "nats password alone", env: map[string]string{"METACLAW_NATS_PASSWORD": "pw"}, want: "nats_password (from METACLAW_NATS_PASSWORD) needs nats_user"},
		{name: "zero replicas", args: []string{"--nats-replicas", "0"}, want: "flag --nats-replicas: 0 is too small: the least is 1"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(dir, "d", string(rune('a'+i)))
			if err := os.MkdirAll(data, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.file != "" {
				write(t, filepath.Join(data, DataFileName), tc.file)
			}
			_, err := load(t, "serve", tc.env, append([]string{"--data", data}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestSizes(t *testing.T) {
	good := map[string]int64{
		"0": 0, "1048576": 1 << 20, "50MB": 50_000_000, "50MiB": 50 << 20, "50 mib": 50 << 20, "1.5GiB": 3 << 29,
		"512K": 512 << 10, "2GB": 2_000_000_000, "1TiB": 1 << 40, "1_000B": 1000, "10kb": 10_000,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "1.2.3MB", "5 parsecs", "-1MB", "0.5B", "99999999TiB"} {
		if n, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, n)
		}
	}
	for n, want := range map[int64]string{50 << 20: "50MiB", 1 << 30: "1GiB", 2e9: "2GB", 1000: "1KB", 1001: "1001", 0: "0"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{time.Minute: "1m", 90 * time.Minute: "1h30m", time.Hour: "1h", 1500 * time.Millisecond: "1.5s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestTable keeps the settings table coherent: unique keys, flags and
// variables; defaults that parse; a doc for each.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Settings {
		for _, name := range []string{"key " + s.Key, "env " + s.EnvName()} {
			if seen[name] {
				t.Errorf("duplicate %s", name)
			}
			seen[name] = true
		}
		if s.Doc == "" {
			t.Errorf("%s has no doc", s.Key)
		}
		if _, err := parse(s, s.Default); err != nil && s.Default != "" {
			t.Errorf("%s: default %q: %v", s.Key, s.Default, err)
		}
		if len(s.Commands) == 0 {
			t.Errorf("%s: no command takes it as a flag", s.Key)
		}
	}
}

func TestNearest(t *testing.T) {
	names := []string{"timeout", "input", "token", "tokens-file", "max-file-size"}
	for in, want := range map[string]string{"tiemout": "timeout", "inptu": "input", "max-filesize": "max-file-size", "tok": "token", "zzz": "", "tokensfile": "tokens-file"} {
		if got := Nearest(in, names); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWorkspaceQuotas: per-workspace quotas from the file (a mapping or a
// list), the environment (comma-separated) and the flag (repeated), with
// the usual precedence, shown as NAME=SIZE.
func TestWorkspaceQuotas(t *testing.T) {
	data := t.TempDir()
	file := write(t, filepath.Join(data, DataFileName), "workspace_quotas:\n  team: 5GB\n  guests: 100MiB\n")
	c, err := load(t, "serve", nil, "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	v := c.Get("workspace_quotas")
	if q := c.SizeMap("workspace_quotas"); len(q) != 2 || q["team"] != 5e9 || q["guests"] != 100<<20 || v.Source != FromFile || v.Origin != file+":1" {
		t.Fatalf("from the file: %v from %s %s", q, v.Source, v.Origin)
	}
	if got := v.Text(); got != "guests=100MiB,team=5GB" {
		t.Fatalf("shown as %q", got)
	}
	write(t, filepath.Join(data, DataFileName), "workspace_quotas: [team=2GB, guests=1GB]\n")
	if c, err := load(t, "serve", nil, "--data", data); err != nil || c.SizeMap("workspace_quotas")["team"] != 2e9 {
		t.Fatalf("a list in the file: %v %v", c.SizeMap("workspace_quotas"), err)
	}
	// The environment replaces the file's quotas, the flag the environment's.
	env := map[string]string{"METACLAW_WORKSPACE_QUOTAS": "ws=5GB, ws2=1GB"}
	c, err = load(t, "serve", env, "--data", data)
	if q := c.SizeMap("workspace_quotas"); err != nil || len(q) != 2 || q["ws"] != 5e9 || q["ws2"] != 1e9 {
		t.Fatalf("from the environment: %v %v", q, err)
	}
	c, err = load(t, "tool", env, "--data", data, "--workspace-quota", "a=1MB", "--workspace-quota", "b=2KiB")
	if q := c.SizeMap("workspace_quotas"); err != nil || len(q) != 2 || q["a"] != 1e6 || q["b"] != 2048 || c.Get("workspace_quotas").Source != FromFlag {
		t.Fatalf("from the flags: %v %v", q, err)
	}
	// None by default.
	c, err = load(t, "serve", nil, "--data", t.TempDir())
	if err != nil || c.SizeMap("workspace_quotas") != nil || c.Get("workspace_quotas").Text() != "" {
		t.Fatalf("default: %v %v", c.SizeMap("workspace_quotas"), err)
	}
}

// TestNATSSettings: the NATS settings read from every source, secrets
// masked, credentials in URLs hidden.
func TestNATSSettings(t *testing.T) {
	data := t.TempDir()
	write(t, filepath.Join(data, DataFileName), "nats: nats://alice:s3cret@n1:4222,nats://tok3n@n2:4222\nnats_replicas: 3\nnats_prefix: team\n")
	c, err := load(t, "files", map[string]string{"METACLAW_NATS_USER": "bob", "METACLAW_NATS_PASSWORD": "hunter2"}, "--data", data, "--nats-token", "abc")
	if err != nil {
		t.Fatal(err)
	}
	if c.String("nats") != "nats://alice:s3cret@n1:4222,nats://tok3n@n2:4222" || c.Int("nats_replicas") != 3 || c.String("nats_prefix") != "team" ||
		c.String("nats_user") != "bob" || c.String("nats_password") != "hunter2" || c.String("nats_token") != "abc" {
		t.Fatalf("values: %q %d %q %q %q %q", c.String("nats"), c.Int("nats_replicas"), c.String("nats_prefix"), c.String("nats_user"), c.String("nats_password"), c.String("nats_token"))
	}
	for key, want := range map[string]string{"nats": "nats://alice:****@n1:4222,nats://****@n2:4222", "nats_password": "****", "nats_token": "****", "nats_user": "bob"} {
		if got := c.Get(key).Text(); got != want {
			t.Errorf("%s shown as %q, want %q", key, got, want)
		}
	}
	c, err = load(t, "serve", nil, "--data", t.TempDir(), "--nats", "embedded", "--nats-listen", "0.0.0.0:4333")
	if err != nil || c.String("nats") != "embedded" || c.String("nats_listen") != "0.0.0.0:4333" || c.Int("nats_replicas") != 1 || c.String("nats_prefix") != "metaclaw" {
		t.Fatalf("embedded: %v", err)
	}
}
