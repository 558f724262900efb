package main

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/server"
)

// testServer serves a fresh data directory with one token and returns the
// global flags that point the CLI at it.
func testServer(t *testing.T, data string) []string {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, parts, err := host.Open(hostapi.Config{DataDir: data, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	h.Runner = jsrt.New(h)
	srv, err := server.New(server.Config{Host: h, Tools: parts.Tools, Tokens: []server.Token{{Secret: "files-token-1", Workspace: "default"}}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return []string{"--server", ts.URL, "--token", "files-token-1"}
}

// TestFilesModesPrintAlike runs the same file commands locally and against
// a server: the output is formatted once, so apart from ids and times both
// modes print the same bytes.
func TestFilesModesPrintAlike(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "some.csv")
	os.WriteFile(csv, []byte("name,qty\napple,3\npear,5\nplum,7\n"), 0o644)
	// want is a part of what both modes print (stdout, stderr).
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"files", "upload", csv}, "uploaded some.csv (31 B, text/csv) id "},
		{[]string{"files", "upload", csv, "--name", "dir/copy.csv", "--json"}, `"name": "dir/copy.csv"`},
		{[]string{"files", "upload", csv}, "ALREADY_EXISTS"},
		{[]string{"files", "list"}, "NAME          SIZE  TYPE      MODIFIED"},
		{[]string{"files", "list", "--pattern", "dir/*", "--json"}, `"mime_type": "text/csv"`},
		{[]string{"files", "info", "some.csv"}, `"source": "upload"`},
		{[]string{"files", "revert", "some.csv"}, "NOT_FOUND"},
		{[]string{"tool", "file_write_text", `{"id":"some.csv","content":"changed\n"}`}, `"ok": true`},
		{[]string{"files", "revert", "some.csv"}, "reverted some.csv (31 B)"},
		{[]string{"files", "download", "some.csv", "-o", "-"}, "apple,3\npear,5\n"},
		{[]string{"files", "download", "some.csv", "-o", filepath.Join(dir, "no-such-dir", "x.csv")}, "metaclaw: FILE_WRITE_FAILED: cannot write "},
		{[]string{"files", "delete", "dir/copy.csv"}, "deleted dir/copy.csv"},
		{[]string{"files", "delete", "dir/copy.csv", "--json"}, `"code": "NOT_FOUND"`},
		{[]string{"files", "info", "dir/copy.csv"}, "metaclaw: NOT_FOUND: "},
	}
	modes := map[string][]string{
		"local":  {"--data", filepath.Join(dir, "data")},
		"remote": testServer(t, filepath.Join(dir, "server-data")),
	}
	masks := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d\d-\d\d[T ][0-9:.]+Z?`)
	printed := map[string][]string{}
	for mode, flags := range modes {
		for _, step := range steps {
			out, errOut, code := cli(t, append(step.args, flags...)...)
			printed[mode] = append(printed[mode], masks.ReplaceAllString(out+"\x00"+errOut, "X")+"\x00"+string(rune('0'+code)))
		}
	}
	for i, step := range steps {
		l, r := printed["local"][i], printed["remote"][i]
		if l != r {
			t.Errorf("%s: local and remote differ:\n%q\n%q", strings.Join(step.args, " "), l, r)
		}
		if !strings.Contains(l, step.want) {
			t.Errorf("%s: got %q, want it to contain %q", strings.Join(step.args, " "), l, step.want)
		}
	}
}
