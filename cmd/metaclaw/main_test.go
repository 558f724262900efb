package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cli runs the CLI in-process with args and returns stdout, stderr and the
// exit code.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := realMain(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestUploadRunTool(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	csv := filepath.Join(dir, "some.csv")
	os.WriteFile(csv, []byte("name,qty\napple,3\npear,5\nplum,7\n"), 0o644)
	script := filepath.Join(dir, "s.js")
	os.WriteFile(script, []byte(`const f = (await files.list("*.csv"))[0]; return await files.readText(f.id, {startLine: 2, endLine: 3});`), 0o644)

	out, errOut, code := cli(t, "files", "upload", csv, "--data", data, "--json")
	if code != 0 || !strings.Contains(out, `"name": "some.csv"`) || !strings.Contains(out, `"mime_type": "text/csv"`) {
		t.Fatalf("upload: %d %s %s", code, out, errOut)
	}
	// Flags after positional arguments, global flags before the command.
	out, errOut, code = cli(t, "--data", data, "run", script, "--timeout", "5s")
	var res struct {
		OK     bool
		Result struct {
			Content    string
			TotalLines int
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.OK || res.Result.Content != "apple,3\npear,5\n" || res.Result.TotalLines != 4 {
		t.Fatalf("run: %d %s %s", code, out, errOut)
	}
	out, _, code = cli(t, "tool", "file_read_text", `{"id":"some.csv","start_line":2,"end_line":3}`, "--data", data)
	var tr struct {
		Content    string
		TotalLines int `json:"total_lines"`
	}
	if err := json.Unmarshal([]byte(out), &tr); err != nil || code != 0 || tr.Content != res.Result.Content || tr.TotalLines != 4 {
		t.Fatalf("tool: %d %s", code, out)
	}
	// A tool error prints the coded error on stdout and exits 1.
	out, _, code = cli(t, "tool", "file_read_text", `{"id":"missing.csv"}`, "--data", data)
	if code != 1 || !strings.Contains(out, `"code": "NOT_FOUND"`) {
		t.Fatalf("tool error: %d %s", code, out)
	}
	out, _, code = cli(t, "tool", "file_read_text", `{"start_line":"x"}`, "--data", data)
	if code != 1 || !strings.Contains(out, `"code": "VALIDATION_FAILED"`) {
		t.Fatalf("tool validation: %d %s", code, out)
	}
	// A failing script exits 1 with the error in the result.
	os.WriteFile(script, []byte(`await files.info("nope")`), 0o644)
	out, _, code = cli(t, "run", script, "--data", data)
	if code != 1 || !strings.Contains(out, `"code": "NOT_FOUND"`) {
		t.Fatalf("failing run: %d %s", code, out)
	}
	// files list/info/download/delete/revert.
	out, _, _ = cli(t, "files", "list", "--data", data, "--pattern", "*.csv", "--json")
	if !strings.Contains(out, `"files": [`) || !strings.Contains(out, "some.csv") {
		t.Fatalf("list: %s", out)
	}
	out, _, _ = cli(t, "files", "info", "some.csv", "--data", data)
	if !strings.Contains(out, `"sha256"`) || !strings.Contains(out, `"source": "upload"`) {
		t.Fatalf("info: %s", out)
	}
	dst := filepath.Join(dir, "back.csv")
	if _, e, code := cli(t, "files", "download", "some.csv", "-o", dst, "--data", data); code != 0 {
		t.Fatalf("download: %s", e)
	}
	if b, _ := os.ReadFile(dst); string(b) != "name,qty\napple,3\npear,5\nplum,7\n" {
		t.Fatalf("downloaded %q", b)
	}
	cli(t, "tool", "file_write_text", `{"id":"some.csv","content":"changed\n"}`, "--data", data)
	if out, _, code := cli(t, "files", "revert", "some.csv", "--data", data, "--json"); code != 0 || !strings.Contains(out, `"size": 31`) {
		t.Fatalf("revert: %s", out)
	}
	if _, _, code := cli(t, "files", "delete", "some.csv", "--data", data); code != 0 {
		t.Fatal("delete failed")
	}
	if _, _, code := cli(t, "files", "info", "some.csv", "--data", data); code != 1 {
		t.Fatal("info after delete should fail")
	}
	if out, _, code := cli(t, "fsck", "--data", data); code != 0 || !strings.Contains(out, "0 problems") {
		t.Fatalf("fsck: %d %s", code, out)
	}
	if out, _, code := cli(t, "tools", "--data", data, "--json"); code != 0 || !strings.Contains(out, `"file_read_text"`) || !strings.Contains(out, `"run_script"`) {
		t.Fatalf("tools: %s", out)
	}
	if _, _, code := cli(t, "nonsense"); code != 2 {
		t.Fatal("unknown command should exit 2")
	}
}

// TestTypesCompile checks `metaclaw types` with the TypeScript compiler and
// an example script typed against it.
func TestTypesCompile(t *testing.T) {
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("npx is not installed: skipping the TypeScript check of `metaclaw types`")
	}
	dir := t.TempDir()
	out, _, code := cli(t, "types", "--data", filepath.Join(dir, "data"))
	if code != 0 || !strings.Contains(out, "declare const files") {
		t.Fatalf("types: %s", out)
	}
	os.WriteFile(filepath.Join(dir, "metaclaw.d.ts"), []byte(out), 0o644)
	example := `async function main() {
  const list = await files.list("*.csv");
  const first: string = list[0].name;
  const { content, totalLines } = await files.readText(list[0].id, { startLine: 2, endLine: 3 });
  const n: number = await files.lineCount(first);
  await files.create("out.md", { content: content + totalLines + n });
  const hits = await files.searchText("out.md", "^a", { maxMatches: 5 });
  const saved = await tools.save({ name: "my_tool", description: "d", inputSchema: { type: "object" }, code: "return 1" });
  const r: any = await tools.call("my_tool", { a: 1 });
  console.log(hits.matches[0].line, saved.version, r, input, session.id);
  try { await files.info("x"); } catch (e) { console.log((e as MetaclawError).code); }
}
main();
`
	os.WriteFile(filepath.Join(dir, "example.ts"), []byte(example), 0o644)
	cmd := exec.Command(npx, "-y", "-p", "typescript@5", "tsc", "--noEmit", "--strict", "--target", "es2020", "--lib", "es2020", "metaclaw.d.ts", "example.ts")
	cmd.Dir = dir
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tsc: %v\n%s", err, msg)
	}
}
