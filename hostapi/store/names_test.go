package store

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func TestNamesAreNFC(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	nfc, nfd := "caf\u00e9.txt", "cafe\u0301.txt"
	f := create(t, w, nfd, "v1")
	if f.Name != nfc {
		t.Fatalf("stored name %q, want the NFC form %q", f.Name, nfc)
	}
	for _, ref := range []string{nfc, nfd, "/" + nfd} {
		g, err := w.Resolve(ctx, ref)
		if err != nil || g.ID != f.ID {
			t.Fatalf("resolve %q: %v", ref, err)
		}
	}
	if _, err := w.Create(ctx, CreateOptions{Name: nfc}, strings.NewReader("v2")); apierr.CodeOf(err) != apierr.AlreadyExists {
		t.Fatalf("the NFC name is the same file: %v", err)
	}
	if _, err := w.Create(ctx, CreateOptions{Name: nfc, Overwrite: true}, strings.NewReader("v2")); err != nil || readAll(t, w, nfd) != "v2" {
		t.Fatalf("overwrite through the other form: %v", err)
	}
	for _, pattern := range []string{"cafe\u0301*", "caf\u00e9.*"} {
		if fs, _ := w.List(ctx, pattern); len(fs) != 1 || fs[0].ID != f.ID {
			t.Fatalf("List(%q) = %v", pattern, fs)
		}
	}
	if r, err := w.Rename(ctx, nfc, "d\u0307ir/x.txt"); err != nil || r.Name != "\u1e0bir/x.txt" {
		t.Fatalf("rename normalises too: %+v %v", r, err)
	}
}

func TestDeceptiveCharactersRefused(t *testing.T) {
	w := openTest(t, Config{}).Workspace("default")
	cases := map[string]string{
		"invoice\u202Eexe.pdf": "U+202E (RIGHT-TO-LEFT OVERRIDE) at character 8",
		"a\u200Bb.txt":         "U+200B (ZERO WIDTH SPACE) at character 2",
		"\uFEFFnotes.md":       "U+FEFF (ZERO WIDTH NO-BREAK SPACE) at character 1",
		"dir/x\u2066y":         "U+2066 (LEFT-TO-RIGHT ISOLATE) at character 6",
		"\u061Cx":              "U+061C (ARABIC LETTER MARK) at character 1",
		"x\u200E":              "U+200E (LEFT-TO-RIGHT MARK) at character 2",
		"x\u200Dy":             "U+200D (ZERO WIDTH JOINER) at character 2",
		"x\u2060y":             "U+2060 (WORD JOINER) at character 2",
		"x\u202Ay":             "U+202A (LEFT-TO-RIGHT EMBEDDING) at character 2",
		"x\u2069y":             "U+2069 (POP DIRECTIONAL ISOLATE) at character 2",
	}
	for name, want := range cases {
		_, err := w.Create(context.Background(), CreateOptions{Name: name}, strings.NewReader("x"))
		if apierr.CodeOf(err) != apierr.ValidationFailed || !strings.Contains(apierr.Of(err).Message, want) {
			t.Errorf("%q: %v; want a message with %q", name, err, want)
		}
	}
	if _, err := w.Rename(context.Background(), "missing", "a\u202Eb"); apierr.CodeOf(err) != apierr.ValidationFailed {
		t.Errorf("rename to a deceptive name: %v", err)
	}
	if fs, _ := w.List(context.Background(), ""); len(fs) != 0 {
		t.Fatalf("refused names created files: %v", fs)
	}
	// Ordinary non-Latin names stay welcome.
	for _, ok := range []string{"отчёт.xlsx", "数据/表.csv", "تقرير.pdf", "emoji 🎉.txt"} {
		if _, err := w.Create(context.Background(), CreateOptions{Name: ok}, strings.NewReader("x")); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// A symbolic link planted as a body is never followed: reads refuse it, and
// fsck reports it and, repairing, removes the link (never its target),
// restoring the backup if there is one — it never adopts the link's target
// as the file's content.
func TestPlantedSymlinkBody(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("server secret"), 0o600)
	plain := create(t, w, "plain.txt", "mine")
	edited := create(t, w, "edited.txt", "v1")
	if _, err := w.Modify(ctx, "edited.txt", func(_ *File, _ string, out io.Writer) error { _, err := io.WriteString(out, "v2"); return err }); err != nil {
		t.Fatal(err)
	}
	edited, _ = w.Resolve(ctx, edited.ID)
	for _, f := range []*File{plain, edited} {
		os.Remove(s.bodyPath(f))
		if err := os.Symlink(secret, s.bodyPath(f)); err != nil {
			t.Fatal(err)
		}
	}
	// And a backup replaced by a link.
	third := create(t, w, "third.txt", "t1")
	if _, err := w.Modify(ctx, "third.txt", func(_ *File, _ string, out io.Writer) error { _, err := io.WriteString(out, "t2"); return err }); err != nil {
		t.Fatal(err)
	}
	os.Remove(s.backupPath(third.ID))
	os.Symlink(secret, s.backupPath(third.ID))
	if _, err := w.Revert(ctx, "third.txt"); apierr.CodeOf(err) != apierr.FileReadFailed {
		t.Fatalf("revert to a planted link: %v", err)
	}
	if _, err := w.Open(ctx, "plain.txt"); apierr.CodeOf(err) != apierr.FileReadFailed || strings.Contains(err.Error(), s.cfg.Dir) {
		t.Fatalf("open through a planted link: %v", err)
	}
	err := w.View(ctx, "plain.txt", func(*File, string) error { t.Fatal("fn ran on a planted link"); return nil })
	if apierr.CodeOf(err) != apierr.FileReadFailed {
		t.Fatalf("view through a planted link: %v", err)
	}
	_, err = w.Modify(ctx, "plain.txt", func(*File, string, io.Writer) error { t.Fatal("fn ran on a planted link"); return nil })
	if apierr.CodeOf(err) != apierr.FileReadFailed {
		t.Fatalf("modify through a planted link: %v", err)
	}
	rep, err := s.Fsck(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, p := range rep.Problems {
		kinds[p.Kind]++
	}
	if len(rep.Problems) != 3 || kinds["symlink_body"] != 2 || kinds["symlink_backup"] != 1 {
		t.Fatalf("fsck: %+v", rep.Problems)
	}
	rep, err = s.Fsck(ctx, true)
	if err != nil || rep.Unrepaired() != 0 {
		t.Fatalf("fsck --repair: %+v %v", rep, err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "server secret" {
		t.Fatal("the link's target was changed")
	}
	if _, err := w.Resolve(ctx, "plain.txt"); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("a file whose body was a link and had no backup is dropped: %v", err)
	}
	if got := readAll(t, w, "edited.txt"); got != "v1" {
		t.Fatalf("the backup replaced the planted link: %q", got)
	}
	if got := readAll(t, w, "third.txt"); got != "t2" {
		t.Fatalf("third.txt: %q", got)
	}
	if _, err := w.Revert(ctx, "third.txt"); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("revert after the planted backup was dropped: %v", err)
	}
	if _, err := os.Lstat(s.backupPath(third.ID)); !os.IsNotExist(err) {
		t.Fatalf("the planted backup link is still there: %v", err)
	}
	checkClean(t, s)
}

// Error messages never show where the data directory is.
func TestErrorsDoNotShowServerPaths(t *testing.T) {
	s := openTest(t, Config{})
	w := s.Workspace("default")
	ctx := context.Background()
	f := create(t, w, "a.txt", "x")
	os.Remove(s.bodyPath(f))
	var errs []error
	_, err := w.Open(ctx, "a.txt")
	errs = append(errs, err)
	errs = append(errs, w.View(ctx, "a.txt", func(*File, string) error { return nil }))
	_, err = w.Modify(ctx, "a.txt", func(*File, string, io.Writer) error { return nil })
	errs = append(errs, err)
	g := create(t, w, "b.txt", "y")
	os.RemoveAll(s.backDir) // the backup cannot be made
	_, err = w.Modify(ctx, g.ID, func(_ *File, _ string, out io.Writer) error { _, err := io.WriteString(out, "z"); return err })
	errs = append(errs, err)
	os.MkdirAll(s.backDir, 0o750)
	os.RemoveAll(s.tmp.path) // no temp directory to write in
	_, err = w.Create(ctx, CreateOptions{Name: "c.txt"}, strings.NewReader("z"))
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		e := apierr.Of(err)
		if e.Code != apierr.FileReadFailed && e.Code != apierr.FileWriteFailed {
			t.Errorf("case %d: %v", i, err)
		}
		if strings.Contains(e.Message, s.cfg.Dir) || strings.Contains(e.Message, "/files/") {
			t.Errorf("case %d: message shows a server path: %s", i, e.Message)
		}
		if !strings.Contains(err.Error(), "fsck") && !strings.Contains(err.Error(), "disk") {
			t.Errorf("case %d: message does not say what to do: %s", i, e.Message)
		}
	}
	os.MkdirAll(s.tmp.path, 0o750)

	// Nor does a store that cannot open its data directory.
	notDir := filepath.Join(t.TempDir(), "plain-file")
	os.WriteFile(notDir, nil, 0o600)
	_, err = Open(Config{Dir: filepath.Join(notDir, "data")})
	if err == nil || strings.Contains(err.Error(), notDir) || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("open under a file: %v", err)
	}
}

// FuzzGlob checks the glob compiler used by files.list on arbitrary
// patterns and names: it never panics, a pattern without wildcards matches
// exactly itself, "**" matches everything, and a compiled glob is cheap to
// run.
func FuzzGlob(f *testing.F) {
	for _, seed := range [][2]string{
		{"*.csv", "reports/q3.csv"},
		{"**/*.csv", "deep/a/b.csv"},
		{"deep/**", "deep/a/b.csv"},
		{"*.{md,txt}", "notes.md"},
		{"[n]otes.md", "notes.md"},
		{"[!a]*", "b.txt"},
		{"reports/?3.xlsx", "reports/q3.xlsx"},
		{"{a,{b,c}}/*", "c/x"},
		{"[", "x"},
		{"{a", "a"},
		{"a}", "a}"},
		{"[]]", "]"},
		{"[\\]", "\\"},
		{"[[:alpha:]]", "a"},
		{"caf\u00e9*", "cafe\u0301.txt"},
		{"***/**/*", "a/b/c"},
		{"(a|b)+$^.", "(a|b)+$^."},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 256 || len(name) > 1024 {
			return
		}
		g, err := CompileGlob(pattern)
		if err != nil {
			if apierr.CodeOf(err) != apierr.ValidationFailed {
				t.Fatalf("CompileGlob(%q): %v", pattern, err)
			}
			return
		}
		g.Match(name)
		literal := lookupName(strings.TrimSpace(pattern))
		if literal != "" && utf8.ValidString(literal) && !strings.ContainsAny(literal, "*?[]{},") {
			target := literal
			if !strings.Contains(literal, "/") {
				target = "dir/" + literal // a pattern without "/" matches base names
			}
			if !g.Match(target) {
				t.Fatalf("literal pattern %q does not match %q", pattern, target)
			}
			if g.Match(target + "x") {
				t.Fatalf("literal pattern %q matches %q", pattern, target+"x")
			}
		}
		if all, _ := CompileGlob("**"); !all.Match(name) && utf8.ValidString(name) && !strings.Contains(name, "\n") {
			t.Fatalf("** does not match %q", name)
		}
	})
}
