package redact

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMessage(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	r := New(link, "/srv/metaclaw-data")
	for in, want := range map[string]string{
		"open " + dir + "/files/ab12: no such file or directory": "open [server path]: no such file or directory",
		`cannot read "` + link + `/files/x" (permission denied)`: `cannot read "[server path]" (permission denied)`,
		"/srv/metaclaw-data/metaclaw.db is locked":               "[server path] is locked",
		"lstat /srv/metaclaw-data: not a directory":              "lstat [server path]: not a directory",
		"file \"reports/q3.xlsx\" not found":                     "file \"reports/q3.xlsx\" not found",
		"GET http://example.com/srv/metaclaw-data/x failed":      "GET http://example.com/srv/metaclaw-data/x failed",
		"/srv/metaclaw-database is another directory":            "/srv/metaclaw-database is another directory",
	} {
		if got := r.Message(in); got != want {
			t.Errorf("%q\n got %q\nwant %q", in, got, want)
		}
	}
	var none *Redactor
	if none.Message("/x") != "/x" || New().Message("/tmp/a") != "/tmp/a" {
		t.Fatal("an empty redactor changed a message")
	}
}
