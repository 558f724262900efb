package files

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

type fixture struct {
	t   *testing.T
	h   *hostapi.Host
	env *hostapi.Env
}

func newFixture(t *testing.T, cfg hostapi.Config) *fixture {
	t.Helper()
	h := hosttest.New(t, cfg, Register)
	return &fixture{t: t, h: h, env: h.Env("default", "sess")}
}

// tool calls a meta-tool and returns its JSON.
func (f *fixture) tool(name string, args map[string]any) (string, error) {
	f.t.Helper()
	v, err := f.h.Registry.CallTool(context.Background(), f.env, name, args)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(v)
	return string(b), nil
}

func (f *fixture) mustTool(name string, args map[string]any) string {
	f.t.Helper()
	s, err := f.tool(name, args)
	if err != nil {
		f.t.Fatalf("%s %v: %v", name, args, err)
	}
	return s
}

// expectCode asserts that a call fails with code and leaves the workspace as it was.
func (f *fixture) expectCode(code apierr.Code, name string, args map[string]any) {
	f.t.Helper()
	before := f.snapshot()
	_, err := f.tool(name, args)
	if apierr.CodeOf(err) != code {
		f.t.Fatalf("%s %v: want %s, got %v", name, args, code, err)
	}
	if after := f.snapshot(); after != before {
		f.t.Fatalf("%s %v failed but changed the workspace:\n%s\n%s", name, args, before, after)
	}
}

func (f *fixture) snapshot() string {
	list, _ := f.env.WS.List(context.Background(), "")
	var b strings.Builder
	for _, x := range list {
		fmt.Fprintf(&b, "%s %s %d %v\n", x.Name, x.SHA256, x.Size, x.HasBackup)
	}
	return b.String()
}

func (f *fixture) body(ref string) string {
	f.t.Helper()
	r, err := f.env.WS.Open(context.Background(), ref)
	if err != nil {
		f.t.Fatal(err)
	}
	defer r.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

func TestTier1(t *testing.T) {
	f := newFixture(t, hostapi.Config{})
	created := f.mustTool("file_create", map[string]any{"name": "/docs/readme.md", "content": "# Hi\n"})
	var c struct{ ID, Name string }
	json.Unmarshal([]byte(created), &c)
	if c.Name != "docs/readme.md" || !store.IsID(c.ID) {
		t.Fatalf("create: %s", created)
	}
	f.mustTool("file_create", map[string]any{"name": "empty.json", "mime_type": "application/json"})
	f.mustTool("file_create", map[string]any{"name": "data.csv", "content": "a,b\n1,2\n"})

	list := f.mustTool("file_list", map[string]any{"pattern": "*.{md,csv}"})
	if !strings.Contains(list, `"files":[`) || !strings.Contains(list, `"name":"data.csv"`) || !strings.Contains(list, `"mime_type":"text/markdown"`) || strings.Contains(list, "empty.json") {
		t.Fatalf("list: %s", list)
	}
	op := f.h.Registry.ByName("files.list")
	v, _ := f.h.Registry.Invoke(context.Background(), f.env, op, nil)
	if got := v.([]Summary); len(got) != 3 || got[0].Name != "data.csv" {
		t.Fatalf("JS list: %+v", got)
	}

	info := f.mustTool("file_info", map[string]any{"id": c.ID})
	for _, want := range []string{`"sha256":"`, `"source":"created"`, `"icon_type":"md"`, `"has_backup":false`, `"source_session_id":"sess"`, `"size":5`} {
		if !strings.Contains(info, want) {
			t.Fatalf("info lacks %s: %s", want, info)
		}
	}
	if info := f.mustTool("file_info", map[string]any{"id": "empty.json"}); !strings.Contains(info, `"mime_type":"application/json"`) {
		t.Fatalf("empty file keeps the given type: %s", info)
	}

	cp := f.mustTool("file_copy", map[string]any{"id": "data.csv", "new_name": "copy.csv"})
	if !strings.Contains(cp, `"name":"copy.csv"`) || f.body("copy.csv") != "a,b\n1,2\n" {
		t.Fatalf("copy: %s", cp)
	}
	rn := f.mustTool("file_rename", map[string]any{"id": "copy.csv", "new_name": "archive/copy2.csv"})
	if !strings.Contains(rn, `"name":"archive/copy2.csv"`) {
		t.Fatalf("rename: %s", rn)
	}
	f.mustTool("file_write_text", map[string]any{"id": "data.csv", "content": "a,b\n3,4\n"})
	rv := f.mustTool("file_revert", map[string]any{"id": "data.csv"})
	if !strings.Contains(rv, `"size":8`) || f.body("data.csv") != "a,b\n1,2\n" {
		t.Fatalf("revert: %s %q", rv, f.body("data.csv"))
	}
	if del := f.mustTool("file_delete", map[string]any{"id": "archive/copy2.csv"}); del != `{"deleted":true}` {
		t.Fatalf("delete: %s", del)
	}

	// Bad input: exact codes, nothing changes.
	f.expectCode(apierr.NotFound, "file_info", map[string]any{"id": "nope.txt"})
	f.expectCode(apierr.NotFound, "file_delete", map[string]any{"id": "00000000-0000-0000-0000-000000000000"})
	f.expectCode(apierr.AlreadyExists, "file_create", map[string]any{"name": "data.csv"})
	f.expectCode(apierr.AlreadyExists, "file_copy", map[string]any{"id": "data.csv", "new_name": "docs/readme.md"})
	f.expectCode(apierr.AlreadyExists, "file_rename", map[string]any{"id": "data.csv", "new_name": "docs/readme.md"})
	f.expectCode(apierr.NotFound, "file_revert", map[string]any{"id": "docs/readme.md"})
	f.expectCode(apierr.ValidationFailed, "file_create", map[string]any{"name": "../escape.txt"})
	f.expectCode(apierr.ValidationFailed, "file_create", map[string]any{"name": 7})
	f.expectCode(apierr.ValidationFailed, "file_create", map[string]any{})
	f.expectCode(apierr.ValidationFailed, "file_list", map[string]any{"pattern": "[abc"})
	f.expectCode(apierr.ValidationFailed, "file_copy", map[string]any{"id": "data.csv"})
	// overwrite replaces, keeping the id.
	ow := f.mustTool("file_create", map[string]any{"name": "data.csv", "content": "z\n", "overwrite": true})
	if f.body("data.csv") != "z\n" || !strings.Contains(ow, `"name":"data.csv"`) {
		t.Fatalf("overwrite: %s", ow)
	}
}

func TestQuotaAndSizeThroughOperations(t *testing.T) {
	f := newFixture(t, hostapi.Config{MaxFileSize: 100, MaxWorkspaceSize: 150})
	f.expectCode(apierr.TooLarge, "file_create", map[string]any{"name": "big.txt", "content": strings.Repeat("x", 101)})
	f.mustTool("file_create", map[string]any{"name": "a.txt", "content": strings.Repeat("x", 100)})
	f.expectCode(apierr.QuotaExceeded, "file_create", map[string]any{"name": "b.txt", "content": strings.Repeat("y", 60)})
	f.expectCode(apierr.QuotaExceeded, "file_copy", map[string]any{"id": "a.txt", "new_name": "c.txt"})
	f.mustTool("file_create", map[string]any{"name": "b.txt", "content": strings.Repeat("y", 40)})
	f.expectCode(apierr.QuotaExceeded, "file_append_bytes", map[string]any{"id": "b.txt", "data": base64.StdEncoding.EncodeToString(make([]byte, 20))})
	f.expectCode(apierr.TooLarge, "file_write_text", map[string]any{"id": "a.txt", "content": strings.Repeat("z", 101)})
	f.expectCode(apierr.QuotaExceeded, "file_insert_lines", map[string]any{"id": "b.txt", "after_line": 0, "content": strings.Repeat("q", 30)})
	// Rewrites work when the new body and the backup of the old one fit.
	f.mustTool("file_delete", map[string]any{"id": "b.txt"})
	f.mustTool("file_write_text", map[string]any{"id": "a.txt", "content": strings.Repeat("w", 40)})
	if got := f.body("a.txt"); got != strings.Repeat("w", 40) {
		t.Fatalf("rewrite: %q", got)
	}
}

func TestTextOperations(t *testing.T) {
	f := newFixture(t, hostapi.Config{})
	f.mustTool("file_create", map[string]any{"name": "t.txt", "content": "l1\nl2\nl3\nl4\n"})
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"id": "t.txt"}, `{"content":"l1\nl2\nl3\nl4\n","total_lines":4}`},
		{map[string]any{"id": "t.txt", "start_line": 2, "end_line": 3}, `{"content":"l2\nl3\n","total_lines":4}`},
		{map[string]any{"id": "t.txt", "start_line": 3}, `{"content":"l3\nl4\n","total_lines":4}`},
		{map[string]any{"id": "t.txt", "end_line": 1}, `{"content":"l1\n","total_lines":4}`},
		{map[string]any{"id": "t.txt", "start_line": 4, "end_line": 99}, `{"content":"l4\n","total_lines":4}`},
	}
	for _, c := range cases {
		if got := f.mustTool("file_read_text", c.args); got != c.want {
			t.Errorf("read %v = %s, want %s", c.args, got, c.want)
		}
	}
	f.expectCode(apierr.ValidationFailed, "file_read_text", map[string]any{"id": "t.txt", "start_line": 5})
	f.expectCode(apierr.ValidationFailed, "file_read_text", map[string]any{"id": "t.txt", "start_line": 3, "end_line": 2})
	f.expectCode(apierr.ValidationFailed, "file_read_text", map[string]any{"id": "t.txt", "start_line": 0})
	f.expectCode(apierr.NotFound, "file_read_text", map[string]any{"id": "missing.txt"})

	if got := f.mustTool("file_replace_lines", map[string]any{"id": "t.txt", "start_line": 2, "end_line": 3, "content": "A\nB\nC"}); got != `{"ok":true,"total_lines":5}` {
		t.Fatalf("replace: %s", got)
	}
	if b := f.body("t.txt"); b != "l1\nA\nB\nC\nl4\n" {
		t.Fatalf("after replace: %q", b)
	}
	if got := f.mustTool("file_replace_lines", map[string]any{"id": "t.txt", "start_line": 1, "end_line": 2, "content": ""}); got != `{"ok":true,"total_lines":3}` || f.body("t.txt") != "B\nC\nl4\n" {
		t.Fatalf("delete lines: %s %q", got, f.body("t.txt"))
	}
	f.expectCode(apierr.ValidationFailed, "file_replace_lines", map[string]any{"id": "t.txt", "start_line": 2, "end_line": 9, "content": "x"})
	f.expectCode(apierr.ValidationFailed, "file_replace_lines", map[string]any{"id": "t.txt", "start_line": 2, "end_line": 1, "content": "x"})
	if got := f.mustTool("file_insert_lines", map[string]any{"id": "t.txt", "after_line": 0, "content": "top"}); got != `{"ok":true,"total_lines":4}` {
		t.Fatal(got)
	}
	f.mustTool("file_insert_lines", map[string]any{"id": "t.txt", "after_line": 4, "content": "end1\nend2\n"})
	f.mustTool("file_insert_lines", map[string]any{"id": "t.txt", "after_line": 2, "content": "mid"})
	if b := f.body("t.txt"); b != "top\nB\nmid\nC\nl4\nend1\nend2\n" {
		t.Fatalf("after inserts: %q", b)
	}
	f.expectCode(apierr.ValidationFailed, "file_insert_lines", map[string]any{"id": "t.txt", "after_line": 8, "content": "x"})
	f.expectCode(apierr.ValidationFailed, "file_insert_lines", map[string]any{"id": "t.txt", "after_line": -1, "content": "x"})
	if got := f.mustTool("file_line_count", map[string]any{"id": "t.txt"}); got != "7" {
		t.Fatalf("line count %s", got)
	}

	// A file without a final newline.
	f.mustTool("file_write_text", map[string]any{"id": "n.txt", "content": "a\nb"})
	if got := f.mustTool("file_line_count", map[string]any{"id": "n.txt"}); got != "2" {
		t.Fatal(got)
	}
	f.mustTool("file_insert_lines", map[string]any{"id": "n.txt", "after_line": 2, "content": "c"})
	if b := f.body("n.txt"); b != "a\nb\nc" {
		t.Fatalf("append after unterminated line: %q", b)
	}
	f.mustTool("file_replace_lines", map[string]any{"id": "n.txt", "start_line": 3, "end_line": 3, "content": "C"})
	if b := f.body("n.txt"); b != "a\nb\nC" {
		t.Fatalf("replace the unterminated line: %q", b)
	}
	f.mustTool("file_create", map[string]any{"name": "e.txt"})
	if got := f.mustTool("file_read_text", map[string]any{"id": "e.txt"}); got != `{"content":"","total_lines":0}` {
		t.Fatal(got)
	}
	f.mustTool("file_insert_lines", map[string]any{"id": "e.txt", "after_line": 0, "content": "first"})
	if b := f.body("e.txt"); b != "first" {
		t.Fatalf("insert into empty: %q", b)
	}

	// Search.
	f.mustTool("file_write_text", map[string]any{"id": "s.txt", "content": "Alpha\r\nbeta\nALPHA beta\ngamma\n"})
	if got := f.mustTool("file_search_text", map[string]any{"id": "s.txt", "pattern": "(?i)alpha"}); got != `{"matches":[{"content":"Alpha","line":1},{"content":"ALPHA beta","line":3}],"truncated":false}` {
		t.Fatalf("search: %s", got)
	}
	if got := f.mustTool("file_search_text", map[string]any{"id": "s.txt", "pattern": "a", "max_matches": 2}); !strings.Contains(got, `"truncated":true`) || strings.Count(got, `"line"`) != 2 {
		t.Fatalf("max_matches: %s", got)
	}
	f.expectCode(apierr.ValidationFailed, "file_search_text", map[string]any{"id": "s.txt", "pattern": "(unclosed"})
	f.expectCode(apierr.ValidationFailed, "file_search_text", map[string]any{"id": "s.txt", "pattern": "a", "max_matches": 0})

	// Binary files are refused by the text tier with a pointer to the right API.
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
	f.env.WS.Create(context.Background(), store.CreateOptions{Name: "p.png"}, strings.NewReader(png))
	for _, tool := range []string{"file_read_text", "file_line_count"} {
		f.expectCode(apierr.UnsupportedFormat, tool, map[string]any{"id": "p.png"})
	}
	f.expectCode(apierr.UnsupportedFormat, "file_write_text", map[string]any{"id": "p.png", "content": "x"})
	f.expectCode(apierr.UnsupportedFormat, "file_replace_lines", map[string]any{"id": "p.png", "start_line": 1, "end_line": 1, "content": "x"})
}

func TestLineIndexOnBigFile(t *testing.T) {
	f := newFixture(t, hostapi.Config{})
	var b strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	f.env.WS.Create(context.Background(), store.CreateOptions{Name: "big.txt"}, strings.NewReader(b.String()))
	for _, r := range [][2]int{{1, 1}, {255, 258}, {256, 256}, {257, 257}, {4990, 5000}, {1000, 1000}} {
		got := f.mustTool("file_read_text", map[string]any{"id": "big.txt", "start_line": r[0], "end_line": r[1]})
		var want strings.Builder
		for i := r[0]; i <= r[1]; i++ {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		w, _ := json.Marshal(map[string]any{"content": want.String(), "total_lines": 5000})
		if got != string(w) {
			t.Fatalf("lines %v: %s", r, got)
		}
	}
	// The index follows edits (a new body has a new sha256).
	f.mustTool("file_replace_lines", map[string]any{"id": "big.txt", "start_line": 1, "end_line": 10, "content": "x"})
	if got := f.mustTool("file_read_text", map[string]any{"id": "big.txt", "start_line": 1, "end_line": 2}); got != `{"content":"x\nline 11\n","total_lines":4991}` {
		t.Fatalf("after edit: %s", got)
	}
}

func TestBytes(t *testing.T) {
	f := newFixture(t, hostapi.Config{})
	f.mustTool("file_create", map[string]any{"name": "b.bin", "content": "0123456789"})
	enc := base64.StdEncoding.EncodeToString
	if got := f.mustTool("file_read_bytes", map[string]any{"id": "b.bin", "offset": 2, "length": 3}); got != `"`+enc([]byte("234"))+`"` {
		t.Fatalf("read: %s", got)
	}
	if got := f.mustTool("file_read_bytes", map[string]any{"id": "b.bin", "offset": 8, "length": 100}); got != `"`+enc([]byte("89"))+`"` {
		t.Fatalf("read past end: %s", got)
	}
	if got := f.mustTool("file_read_bytes", map[string]any{"id": "b.bin", "offset": 10, "length": 1}); got != `""` {
		t.Fatalf("read at end: %s", got)
	}
	f.expectCode(apierr.ValidationFailed, "file_read_bytes", map[string]any{"id": "b.bin", "offset": 11, "length": 1})
	f.expectCode(apierr.ValidationFailed, "file_read_bytes", map[string]any{"id": "b.bin", "offset": 0, "length": 4<<20 + 1})
	f.expectCode(apierr.ValidationFailed, "file_read_bytes", map[string]any{"id": "b.bin", "offset": -1, "length": 1})
	if got := f.mustTool("file_write_bytes", map[string]any{"id": "b.bin", "offset": 8, "data": enc([]byte("ABCD"))}); got != `{"ok":true,"size":12}` || f.body("b.bin") != "01234567ABCD" {
		t.Fatalf("write: %s %q", got, f.body("b.bin"))
	}
	f.mustTool("file_write_bytes", map[string]any{"id": "b.bin", "offset": 0, "data": enc([]byte("zz"))})
	if got := f.mustTool("file_append_bytes", map[string]any{"id": "b.bin", "data": enc([]byte{0, 1, 2})}); got != `{"ok":true,"size":15}` || f.body("b.bin") != "zz234567ABCD\x00\x01\x02" {
		t.Fatalf("append: %s %q", got, f.body("b.bin"))
	}
	f.expectCode(apierr.ValidationFailed, "file_write_bytes", map[string]any{"id": "b.bin", "offset": 16, "data": enc([]byte("x"))})
	f.expectCode(apierr.ValidationFailed, "file_append_bytes", map[string]any{"id": "b.bin", "data": "not base64!!"})
	f.expectCode(apierr.NotFound, "file_append_bytes", map[string]any{"id": "nope.bin", "data": enc([]byte("x"))})
}

func TestDownload(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/report.csv":
			w.Header().Set("Content-Type", "text/csv")
			fmt.Fprint(w, "x,y\n1,2\n")
		case "/redirect":
			http.Redirect(w, r, "/report.csv", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	strict := newFixture(t, hostapi.Config{})
	for _, u := range []string{srv.URL + "/report.csv", "http://localhost/x", "http://10.0.0.1/x", "http://169.254.169.254/latest/meta-data", "http://[::1]/x"} {
		strict.expectCode(apierr.SandboxViolation, "file_download", map[string]any{"url": u})
	}
	strict.expectCode(apierr.ValidationFailed, "file_download", map[string]any{"url": "file:///etc/passwd"})

	open := newFixture(t, hostapi.Config{AllowPrivateDownloads: true})
	got := open.mustTool("file_download", map[string]any{"url": srv.URL + "/redirect"})
	if !strings.Contains(got, `"name":"report.csv"`) || !strings.Contains(got, `"mime_type":"text/csv"`) || open.body("report.csv") != "x,y\n1,2\n" {
		t.Fatalf("download: %s", got)
	}
	got = open.mustTool("file_download", map[string]any{"url": srv.URL + "/report.csv", "filename": "in/r2.csv"})
	if !strings.Contains(got, `"name":"in/r2.csv"`) || !strings.Contains(got, `"size":8`) {
		t.Fatalf("download with filename: %s", got)
	}
	open.expectCode(apierr.AlreadyExists, "file_download", map[string]any{"url": srv.URL + "/report.csv"})
	open.expectCode(apierr.FileReadFailed, "file_download", map[string]any{"url": srv.URL + "/missing"})
	small := newFixture(t, hostapi.Config{AllowPrivateDownloads: true, MaxFileSize: 4})
	small.expectCode(apierr.TooLarge, "file_download", map[string]any{"url": srv.URL + "/report.csv"})
}
