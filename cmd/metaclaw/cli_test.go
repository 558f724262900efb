package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// commandPaths lists every command of the tree as its words ("files
// upload"), without cobra's own help and completion commands.
func commandPaths() [][]string {
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			p := append(append([]string{}, path...), sub.Name())
			out = append(out, p)
			walk(sub, p)
		}
	}
	walk(newRoot(&globals{}), nil)
	return out
}

// TestHelpEverywhere: every command answers --help with its usage, its
// flags and an example, on stdout, without touching a data directory.
func TestHelpEverywhere(t *testing.T) {
	data := filepath.Join(t.TempDir(), "never")
	paths := commandPaths()
	if len(paths) < 14 {
		t.Fatalf("only %d commands: %v", len(paths), paths)
	}
	for _, p := range paths {
		for _, help := range []string{"--help", "-h"} {
			out, errOut, code := cli(t, append(append([]string{}, p...), help, "--data", data)...)
			name := strings.Join(p, " ")
			if code != 0 || errOut != "" {
				t.Fatalf("%s %s: exit %d, stderr %q", name, help, code, errOut)
			}
			for _, want := range []string{"Usage:\n  metaclaw " + name, "Examples:\n  metaclaw " + p[0], "Flags:", "--help"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s %s: no %q in\n%s", name, help, want, out)
				}
			}
		}
	}
	// help NAME says the same as NAME --help.
	a, _, _ := cli(t, "help", "run")
	b, _, _ := cli(t, "run", "--help")
	if a != b || !strings.Contains(a, "--timeout duration") {
		t.Errorf("help run and run --help differ:\n%s\n%s", a, b)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("--help created the data directory: %v", err)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}} {
		out, _, code := cli(t, args...)
		if code != 0 || !strings.HasPrefix(out, "metaclaw ") || !strings.Contains(out, "go1.") {
			t.Errorf("%v: %d %q", args, code, out)
		}
	}
}

// TestMistakes: an unknown command, subcommand or flag, and a wrong number
// of arguments exit 2 with a message that points at the fix.
func TestMistakes(t *testing.T) {
	data := filepath.Join(t.TempDir(), "never")
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"tols"}, []string{`unknown command "tols"`, "Did you mean this?", "tools"}},
		{[]string{"serv"}, []string{"Did you mean this?", "serve"}},
		{[]string{"run", "s.js", "--tiemout", "5s"}, []string{"unknown flag: --tiemout; did you mean --timeout?", "Run 'metaclaw run --help' for usage."}},
		{[]string{"files", "list", "--patern", "*"}, []string{"did you mean --pattern?"}},
		{[]string{"serve", "--max-run", "5"}, []string{"did you mean --max-runs?"}},
		{[]string{"files", "lst"}, []string{`files: unknown subcommand "lst"; did you mean list?`}},
		{[]string{"files"}, []string{"Available Commands:", "upload"}},
		{[]string{"run"}, []string{"metaclaw run takes 1 argument(s), got 0; usage: metaclaw run SCRIPT.js|MODULE.wasm [flags]"}},
		{[]string{"tool", "a", "b", "c"}, []string{"takes 1 to 2 argument(s), got 3"}},
		{[]string{"serve", "--max-runs", "0"}, []string{"flag --max-runs: 0 is too small: the least is 1"}},
		{[]string{"tool", "file_list", "--run-timeout", "forever"}, []string{`flag --run-timeout: "forever" is not a duration`}},
		{nil, []string{"Usage:", "Available Commands:"}},
	}
	for _, tc := range cases {
		out, errOut, code := cli(t, append(tc.args, "--data", data)...)
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing on stdout", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a mistake created the data directory: %v", err)
	}
}

// TestNoDataDirNeeded: describing metaclaw (types, tools, config) works
// without a data directory and creates none.
func TestNoDataDirNeeded(t *testing.T) {
	data := filepath.Join(t.TempDir(), "never")
	out, _, code := cli(t, "types", "--data", data)
	if code != 0 || !strings.Contains(out, "declare const files") || !strings.Contains(out, "readText(") {
		t.Fatalf("types: %d %.300s", code, out)
	}
	out, _, code = cli(t, "tools", "--json", "--data", data)
	var list struct {
		Tools []struct {
			Name        string
			InputSchema map[string]any `json:"input_schema"`
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Tools) < 40 {
		t.Fatalf("tools --json: %d %.300s", code, out)
	}
	names := map[string]bool{}
	for _, tl := range list.Tools {
		names[tl.Name] = tl.InputSchema["type"] == "object"
	}
	for _, n := range []string{"file_list", "file_read_text", "run_script", "spreadsheet_read_range", "table_query"} {
		if !names[n] {
			t.Errorf("tools --json lacks %s (or its schema)", n)
		}
	}
	out, _, code = cli(t, "tools", "--data", data)
	if code != 0 || !strings.Contains(out, "file_read_text") {
		t.Fatalf("tools: %d %.300s", code, out)
	}
	out, _, code = cli(t, "config", "--data", data)
	if code != 0 || !strings.Contains(out, "max_file_size") || !strings.Contains(out, "# no config file") {
		t.Fatalf("config: %d %s", code, out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data directory was created: %v", err)
	}
}

// TestConfigCommand: `metaclaw config` shows each value with its source:
// default, the data directory's file (with the line), a variable, a flag.
func TestConfigCommand(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(data, "metaclaw.yaml")
	os.WriteFile(file, []byte("# limits\nmax_file_size: 10MB\nrun_timeout: 5s\ntokens:\n  - file-secret-1:team\n"), 0o644)
	t.Setenv("METACLAW_RUN_TIMEOUT", "7s")
	t.Setenv("METACLAW_LOG_FORMAT", "json")
	out, errOut, code := cli(t, "config", "--data", data, "--max-runs", "5", "--json")
	if code != 0 {
		t.Fatalf("config: %d %s", code, errOut)
	}
	var res struct {
		File     string
		Settings map[string]struct {
			Value  any
			Source string
			Origin string
			Env    string
			Flag   string
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.File != file {
		t.Errorf("file %q, want %q", res.File, file)
	}
	want := map[string][3]string{
		"max_file_size":      {"10000000", "file", file + ":2"},
		"run_timeout":        {"7s", "env", "METACLAW_RUN_TIMEOUT"},
		"log_format":         {"json", "env", "METACLAW_LOG_FORMAT"},
		"max_runs":           {"5", "flag", "--max-runs"},
		"max_workspace_size": {"1073741824", "default", ""},
		"data":               {data, "flag", "--data"},
		"tokens":             {"****:team", "file", file + ":4"},
	}
	for k, w := range want {
		s := res.Settings[k]
		if got := strings.TrimSpace(jsonText(s.Value)); got != w[0] || s.Source != w[1] || s.Origin != w[2] {
			t.Errorf("%s: %s from %s %q; want %s from %s %q", k, got, s.Source, s.Origin, w[0], w[1], w[2])
		}
	}
	if s := res.Settings["max_file_size"]; s.Env != "METACLAW_MAX_FILE_SIZE" || s.Flag != "--max-file-size" {
		t.Errorf("names: %+v", s)
	}
	if strings.Contains(out, "file-secret-1") {
		t.Error("config printed a token's secret")
	}
	// The table says the same for people.
	out, _, _ = cli(t, "config", "--data", data)
	for _, w := range []string{"# config file: " + file, "run_timeout", "7s", "env METACLAW_RUN_TIMEOUT", "file " + file + ":2"} {
		if !strings.Contains(out, w) {
			t.Errorf("config table lacks %q:\n%s", w, out)
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if u, err := jsonUnquote(s); err == nil {
		return u
	}
	return s
}

func jsonUnquote(s string) (string, error) {
	var out string
	err := json.Unmarshal([]byte(s), &out)
	return out, err
}

// TestConfigReachesHost: limits from the config file, a variable and a
// flag are the limits the host enforces.
func TestConfigReachesHost(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o755)
	os.WriteFile(filepath.Join(data, "metaclaw.yaml"), []byte("max_file_size: 10KB\nmax_workspace_size: 15KB\n"), 0o644)
	big := filepath.Join(dir, "big.txt")
	os.WriteFile(big, []byte(strings.Repeat("x", 12_000)), 0o644)
	small := filepath.Join(dir, "small.txt")
	os.WriteFile(small, []byte(strings.Repeat("y", 8_000)), 0o644)

	out, _, code := cli(t, "files", "upload", big, "--data", data, "--json")
	if code != 1 || !strings.Contains(out, `"code": "TOO_LARGE"`) {
		t.Fatalf("12 KB upload with a 10 KB limit: %d %s", code, out)
	}
	if out, _, code = cli(t, "files", "upload", small, "--data", data, "--json"); code != 0 {
		t.Fatalf("8 KB upload: %d %s", code, out)
	}
	out, _, code = cli(t, "tool", "file_create", `{"name":"more.txt","content":"`+strings.Repeat("z", 8_000)+`"}`, "--data", data)
	if code != 1 || !strings.Contains(out, `"code": "QUOTA_EXCEEDED"`) {
		t.Fatalf("over the 15 KB quota: %d %s", code, out)
	}
	// A flag beats the file.
	if out, _, code = cli(t, "tool", "file_create", `{"name":"more.txt","content":"`+strings.Repeat("z", 8_000)+`"}`, "--data", data, "--max-workspace-size", "1MB"); code != 0 {
		t.Fatalf("with --max-workspace-size 1MB: %d %s", code, out)
	}

	// The run timeout from the environment ends an endless script.
	script := filepath.Join(dir, "loop.js")
	os.WriteFile(script, []byte("while (true) {}"), 0o644)
	t.Setenv("METACLAW_RUN_TIMEOUT", "300ms")
	out, _, code = cli(t, "run", script, "--data", data)
	if code != 1 || !strings.Contains(out, `"code": "TIMEOUT"`) {
		t.Fatalf("endless script with METACLAW_RUN_TIMEOUT=300ms: %d %s", code, out)
	}
}

// TestDownloadKeepsLocalFiles: files download never replaces a local file
// without --force, in either mode; -o DIR writes inside it; - is stdout.
func TestDownloadKeepsLocalFiles(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "report.csv")
	os.WriteFile(src, []byte("a,b\n1,2\n"), 0o644)
	modes := map[string][]string{
		"local":  {"--data", filepath.Join(dir, "data")},
		"remote": testServer(t, filepath.Join(dir, "server-data")),
	}
	for mode, flags := range modes {
		t.Run(mode, func(t *testing.T) {
			run := func(args ...string) (string, string, int) { return cli(t, append(args, flags...)...) }
			if _, e, code := run("files", "upload", src); code != 0 {
				t.Fatalf("upload: %s", e)
			}
			out := filepath.Join(dir, mode)
			os.MkdirAll(out, 0o755)
			target := filepath.Join(out, "mine.csv")
			os.WriteFile(target, []byte("precious"), 0o644)

			_, errOut, code := run("files", "download", "report.csv", "-o", target)
			if code != 1 || !strings.Contains(errOut, "metaclaw: ALREADY_EXISTS: "+target+" already exists; pass --force to overwrite it") {
				t.Fatalf("download over a file: %d %s", code, errOut)
			}
			if b, _ := os.ReadFile(target); string(b) != "precious" {
				t.Fatalf("the local file changed: %q", b)
			}
			o, _, code := run("files", "download", "report.csv", "-o", target, "--json")
			if code != 1 || !strings.Contains(o, `"code": "ALREADY_EXISTS"`) {
				t.Fatalf("--json: %d %s", code, o)
			}
			if _, errOut, code = run("files", "download", "report.csv", "-o", target, "--force"); code != 0 {
				t.Fatalf("--force: %d %s", code, errOut)
			}
			if b, _ := os.ReadFile(target); string(b) != "a,b\n1,2\n" {
				t.Fatalf("after --force: %q", b)
			}
			// A directory: the file's name inside it, then refused again.
			if _, errOut, code = run("files", "download", "report.csv", "-o", out); code != 0 || !strings.Contains(errOut, "wrote "+filepath.Join(out, "report.csv")) {
				t.Fatalf("-o DIR: %d %s", code, errOut)
			}
			if _, errOut, code = run("files", "download", "report.csv", "-o", out+"/"); code != 1 || !strings.Contains(errOut, "ALREADY_EXISTS") {
				t.Fatalf("-o DIR again: %d %s", code, errOut)
			}
			if o, _, code = run("files", "download", "report.csv", "-o", "-"); code != 0 || o != "a,b\n1,2\n" {
				t.Fatalf("-o -: %d %q", code, o)
			}
			// Nothing but the two files is left in the folder.
			entries, _ := os.ReadDir(out)
			if len(entries) != 2 {
				t.Fatalf("left in %s: %v", out, entries)
			}
		})
	}
}

// TestToolProfiles: `tools` and `mcp` offer the code profile and the API
// shapes that GET /api/tools offers.
func TestToolProfiles(t *testing.T) {
	data := filepath.Join(t.TempDir(), "never")
	out, _, code := cli(t, "tools", "--json", "--profile", "code", "--data", data)
	var list struct {
		Profile string
		Tools   []struct{ Name string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || list.Profile != "code" || len(list.Tools) != 3 {
		t.Fatalf("tools --profile code: %d %s", code, out)
	}
	names := list.Tools[0].Name + " " + list.Tools[1].Name + " " + list.Tools[2].Name
	for _, n := range []string{"run_script", "search_api", "file_list"} {
		if !strings.Contains(names, n) {
			t.Errorf("code profile lacks %s: %s", n, names)
		}
	}
	out, _, code = cli(t, "tools", "--json", "--format", "openai", "--strict", "--data", data)
	var openai struct {
		Tools []struct {
			Type     string
			Function struct {
				Name       string
				Strict     bool
				Parameters map[string]any
			}
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &openai) != nil || len(openai.Tools) < 40 {
		t.Fatalf("--format openai: %d %.300s", code, out)
	}
	for _, tl := range openai.Tools {
		if tl.Type != "function" || !tl.Function.Strict || tl.Function.Parameters["additionalProperties"] != false {
			t.Errorf("%s is not a strict OpenAI function: %+v", tl.Function.Name, tl)
		}
	}
	// The environment chooses the profile too; a bad one is refused.
	t.Setenv("METACLAW_PROFILE", "code")
	if out, _, code = cli(t, "tools", "--data", data); code != 0 || strings.Count(out, "\n") != 3 {
		t.Fatalf("METACLAW_PROFILE=code: %d %s", code, out)
	}
	_, errOut, code := cli(t, "tools", "--profile", "tiny", "--data", data)
	if code != 2 || !strings.Contains(errOut, `flag --profile: "tiny" is not one of full, code`) {
		t.Fatalf("bad profile: %d %s", code, errOut)
	}
	if _, errOut, code = cli(t, "tools", "--json", "--format", "xml", "--data", data); code != 2 || !strings.Contains(errOut, `format "xml" is not known`) {
		t.Fatalf("bad format: %d %s", code, errOut)
	}
	// search_api is a tool of the CLI as of every door.
	out, _, code = cli(t, "tool", "search_api", `{"query":"spreadsheet write","limit":1}`, "--data", filepath.Join(t.TempDir(), "d"))
	if code != 0 || !strings.Contains(out, "files.spreadsheet.writeRange") {
		t.Fatalf("search_api: %d %s", code, out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the data directory was created: %v", err)
	}
}
