package download

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitizeFilename(t *testing.T) {
	cases := []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"  spaced name.txt ", "spaced name.txt"},
		{"../../etc/passwd", "passwd"},
		{`..\..\windows\evil.exe`, "evil.exe"},
		{"dir/", ""},
		{"", ""},
		{".", ""},
		{"..", ""},
		{"a\x00b\x1fc\x7f.txt", "abc.txt"},
		{"line\r\nbreak.txt", "linebreak.txt"},
		{"evil\u202Etxt.exe", "eviltxt.exe"}, // bidi override removed
		{"bad\xffutf8.txt", "bad_utf8.txt"},
		{"naïve.txt", "naïve.txt"},
		{".hidden", ".hidden"},
	}
	for _, c := range cases {
		if got := sanitizeFilename(c.in); got != c.want {
			t.Errorf("sanitizeFilename(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSanitizeFilenameLength(t *testing.T) {
	long := strings.Repeat("ü", 200) + ".tar" // 404 bytes
	got := sanitizeFilename(long)
	if len(got) > maxFilenameBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, ".tar") {
		t.Fatalf("got %d bytes, valid=%v, %q", len(got), utf8.ValidString(got), got[len(got)-8:])
	}
	longExt := "a." + strings.Repeat("x", 300)
	if got := sanitizeFilename(longExt); len(got) > maxFilenameBytes || got == "" {
		t.Fatalf("long extension: %d bytes", len(got))
	}
}

func TestPickFilename(t *testing.T) {
	u := func(s string) *url.URL {
		p, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		cd, url, want string
	}{
		{`attachment; filename="report 2024.pdf"`, "http://h/x/y.bin", "report 2024.pdf"},
		{`attachment; filename*=UTF-8''na%C3%AFve%20file.txt`, "http://h/x", "naïve file.txt"},
		{`attachment; filename="plain.txt"; filename*=UTF-8''fancy.txt`, "http://h/x", "fancy.txt"},
		{`attachment; filename="../../etc/passwd"`, "http://h/x", "passwd"},
		{`attachment; filename=".."`, "http://h/files/fallback.csv", "fallback.csv"},
		{`attachment`, "http://h/files/data.json", "data.json"},
		{`garbage;;;=`, "http://h/files/data.json", "data.json"},
		{"", "http://h/files/my%20file.txt", "my file.txt"},
		{"", "http://h/files/a%2Fb.txt", "b.txt"},
		{"", "http://h/dir/", "download"},
		{"", "http://h", "download"},
		{"", "http://h/..", "download"},
	}
	for _, c := range cases {
		if got := pickFilename(c.cd, u(c.url)); got != c.want {
			t.Errorf("pickFilename(%q, %q) = %q, want %q", c.cd, c.url, got, c.want)
		}
	}
	if got := pickFilename("", nil); got != "download" {
		t.Errorf("nil URL: %q", got)
	}
}
