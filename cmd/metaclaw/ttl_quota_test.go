package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/server"
)

// TestUploadTTL: files upload --ttl stores the file with an expiry that
// files info shows; bad durations are usage errors that store nothing.
func TestUploadTTL(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	src := filepath.Join(dir, "scratch.csv")
	os.WriteFile(src, []byte("a,b\n1,2\n"), 0o644)

	for _, tc := range []struct {
		ttl  string
		want time.Duration
	}{{"24h", 24 * time.Hour}, {"90m", 90 * time.Minute}, {"7d", 7 * 24 * time.Hour}} {
		name := "scratch-" + tc.ttl + ".csv"
		before := time.Now()
		out, errOut, code := cli(t, "files", "upload", src, "--name", name, "--ttl", tc.ttl, "--data", data, "--json")
		after := time.Now()
		var res struct {
			Name      string
			ExpiresOn time.Time `json:"expires_on"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Name != name {
			t.Fatalf("--ttl %s: %d %v %s %s", tc.ttl, code, err, out, errOut)
		}
		if res.ExpiresOn.Before(before.Add(tc.want-time.Second)) || res.ExpiresOn.After(after.Add(tc.want+time.Second)) {
			t.Fatalf("--ttl %s: expires %v, uploaded between %v and %v", tc.ttl, res.ExpiresOn, before, after)
		}
		// files info reads the same expiry back from the store.
		out, _, code = cli(t, "files", "info", name, "--data", data)
		var info struct {
			ExpiresOn time.Time `json:"expires_on"`
		}
		if err := json.Unmarshal([]byte(out), &info); err != nil || code != 0 || !info.ExpiresOn.Equal(res.ExpiresOn) {
			t.Fatalf("info after --ttl %s: %d %s", tc.ttl, code, out)
		}
	}
	// The sentence for people names the expiry.
	if out, _, code := cli(t, "files", "upload", src, "--name", "people.csv", "--ttl", "1h", "--data", data); code != 0 || !strings.Contains(out, ", expires 20") {
		t.Fatalf("upload --ttl for people: %d %s", code, out)
	}
	// Without --ttl a file does not expire.
	cli(t, "files", "upload", src, "--name", "kept.csv", "--data", data)
	if out, _, _ := cli(t, "files", "info", "kept.csv", "--data", data); strings.Contains(out, "expires_on") {
		t.Fatalf("a file without --ttl expires: %s", out)
	}
	for ttl, says := range map[string]string{
		"0s":     "at least 1s",
		"-5m":    "at least 1s",
		"banana": `"banana" is not a duration`,
		"367d":   "at most a year",
		"9000h":  "at most a year",
	} {
		_, errOut, code := cli(t, "files", "upload", src, "--name", "bad.csv", "--ttl", ttl, "--data", data)
		if code != 2 || !strings.Contains(errOut, says) {
			t.Errorf("--ttl %s: %d %s", ttl, code, errOut)
		}
	}
	if _, _, code := cli(t, "files", "info", "bad.csv", "--data", data); code != 1 {
		t.Fatal("a refused upload stored its file")
	}
}

// TestWorkspaceQuotas: a per-workspace quota from the environment, the
// flag or the config file is what the host enforces, for that workspace
// only, and metaclaw config shows it.
func TestWorkspaceQuotas(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	src := filepath.Join(dir, "8k.bin")
	os.WriteFile(src, []byte(strings.Repeat("q", 8000)), 0o644)

	// From the environment: team holds 10 KB, so one 8 KB file fits and a
	// second does not; another workspace has the default quota.
	t.Setenv("METACLAW_WORKSPACE_QUOTAS", "team=10KB, other=1GB")
	if _, errOut, code := cli(t, "files", "upload", src, "--workspace", "team", "--data", data); code != 0 {
		t.Fatalf("first upload: %s", errOut)
	}
	_, errOut, code := cli(t, "files", "upload", src, "--name", "second.bin", "--workspace", "team", "--data", data)
	if code != 1 || !strings.Contains(errOut, "QUOTA_EXCEEDED") || !strings.Contains(errOut, `workspace "team" would exceed its 9.8 KB quota`) {
		t.Fatalf("second upload: %d %s", code, errOut)
	}
	if _, _, code := cli(t, "files", "info", "second.bin", "--workspace", "team", "--data", data); code != 1 {
		t.Fatal("the refused upload was stored")
	}
	for _, ws := range []string{"default", "elsewhere"} {
		if _, errOut, code := cli(t, "files", "upload", src, "--name", "second.bin", "--workspace", ws, "--data", data); code != 0 {
			t.Fatalf("upload to %s: %s", ws, errOut)
		}
	}
	t.Setenv("METACLAW_WORKSPACE_QUOTAS", "")

	// The flag: a tool call over a tighter quota fails, within it succeeds.
	write := `{"id": "note.txt", "content": "` + strings.Repeat("n", 500) + `"}`
	out, _, code := cli(t, "tool", "file_write_text", write, "--workspace", "team", "--data", data, "--workspace-quota", "team=8300B")
	if code != 1 || !strings.Contains(out, `"code": "QUOTA_EXCEEDED"`) {
		t.Fatalf("tool over the flag's quota: %d %s", code, out)
	}
	if out, _, code := cli(t, "tool", "file_write_text", write, "--workspace", "team", "--data", data, "--workspace-quota", "team=9KB"); code != 0 {
		t.Fatalf("tool within the flag's quota: %d %s", code, out)
	}

	// The config file, shown by metaclaw config with where it came from.
	os.WriteFile(filepath.Join(data, "metaclaw.yaml"), []byte("workspace_quotas:\n  team: 8KB\n  guests: 100MiB\n"), 0o644)
	if _, errOut, code := cli(t, "files", "upload", src, "--name", "third.bin", "--workspace", "guests", "--data", data); code != 0 {
		t.Fatalf("upload within the file's quota: %s", errOut)
	}
	if out, _, code := cli(t, "tool", "file_write_text", `{"id": "x.txt", "content": "x"}`, "--workspace", "team", "--data", data); code != 1 || !strings.Contains(out, "QUOTA_EXCEEDED") {
		t.Fatalf("team over the file's quota: %d %s", code, out)
	}
	out, _, code = cli(t, "config", "--data", data)
	if code != 0 || !strings.Contains(out, "guests=100MiB,team=8KB") || !strings.Contains(out, "metaclaw.yaml") {
		t.Fatalf("config: %d %s", code, out)
	}
	out, _, code = cli(t, "config", "--data", data, "--json")
	if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), ""), `"team":8000`) {
		t.Fatalf("config --json: %d %s", code, out)
	}
}

// TestRemoteModuleAndTTL: with --server, run sends a module as POST
// /api/run {wasm} and files upload --ttl sends the ttl form field; the
// server runs the module and stores the expiry.
func TestRemoteModuleAndTTL(t *testing.T) {
	dir := t.TempDir()
	h, parts, err := host.Open(hostapi.Config{DataDir: filepath.Join(dir, "data"), Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := setRunners(h, jsrt.New(h), false); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Host: h, Tools: parts.Tools, Tokens: []server.Token{{Secret: "remote-token-2", Workspace: "team"}}, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	r := func(args ...string) (string, string, int) {
		return cli(t, append(args, "--server", ts.URL, "--token", "remote-token-2")...)
	}

	mod := filepath.Join(dir, "writer.wasm")
	os.WriteFile(mod, callThenEchoModule("file_write_text", `{"id": "remote.md", "content": "from a module\n"}`), 0o644)
	out, errOut, code := r("run", mod, "--input", `{"n": 9007199254740991}`, "--session", "wasm-sess")
	res := parseRun(t, out)
	if code != 0 || !res.OK || jsonText(res.Result) != `{"n":9007199254740991}` || len(res.Files) != 1 || res.Files[0]["name"] != "remote.md" {
		t.Fatalf("remote run of a module: %d %s %s", code, out, errOut)
	}
	f, err := h.Store.Workspace("team").Resolve(context.Background(), "remote.md")
	if err != nil || f.Size != int64(len("from a module\n")) || f.SourceSessionID != "wasm-sess" {
		t.Fatalf("the module's file on the server: %+v %v", f, err)
	}
	trap := filepath.Join(dir, "trap.wasm")
	os.WriteFile(trap, trapModule(), 0o644)
	if out, _, code := r("run", trap); code != 1 || parseRun(t, out).OK || !strings.Contains(out, "trapped") {
		t.Fatalf("remote run of a trapping module: %d %s", code, out)
	}

	src := filepath.Join(dir, "scratch.csv")
	os.WriteFile(src, []byte("a\n1\n"), 0o644)
	before := time.Now()
	out, errOut, code = r("files", "upload", src, "--ttl", "2h", "--name", "tmp/scratch.csv", "--json")
	var up struct {
		Name      string
		ExpiresOn time.Time `json:"expires_on"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &up) != nil || up.Name != "tmp/scratch.csv" {
		t.Fatalf("remote upload --ttl: %d %s %s", code, out, errOut)
	}
	stored, err := h.Store.Workspace("team").Resolve(context.Background(), "tmp/scratch.csv")
	if err != nil || !stored.ExpiresOn.Equal(up.ExpiresOn) || stored.ExpiresOn.Before(before.Add(2*time.Hour-time.Second)) || stored.ExpiresOn.After(time.Now().Add(2*time.Hour+time.Second)) {
		t.Fatalf("the server stored expiry %v (answer %v): %v", stored.ExpiresOn, up.ExpiresOn, err)
	}
	if b, _ := os.ReadFile(src); err != nil || stored.Size != int64(len(b)) {
		t.Fatalf("stored %d bytes", stored.Size)
	}
}
