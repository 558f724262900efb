package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/server/client"
)

// fileBackend is where the files subcommands act (localBackend,
// remoteBackend). Each answer is that side's JSON object, printed as is by
// --json and read by the human output, so each mode prints what it always
// has while the printing is written once.
type fileBackend interface {
	// Upload stores body; the answer has id, name, size, mime_type, sha256.
	Upload(ctx context.Context, body io.Reader, u upload) (map[string]any, error)
	// Download finds the file, calls open with its name and size, and
	// copies the body into what open returns. The answer has name and size.
	Download(ctx context.Context, ref string, open func(name string, size int64) (io.Writer, error)) (map[string]any, error)
	// List answers {"files": [...]} in the server's JSON shape.
	List(ctx context.Context, pattern string) (map[string]any, error)
	Info(ctx context.Context, ref string) (any, error)
	Delete(ctx context.Context, ref string) error
	// Revert restores the backup; the answer has name and size.
	Revert(ctx context.Context, ref string) (map[string]any, error)
}

// upload describes one upload.
type upload struct {
	Name      string // workspace path
	Filename  string // the local file's base name
	Overwrite bool
	Size      int64 // exact body size
}

func cmdFiles(g *globals, args []string) int {
	fs := newFlags("files", g)
	name := fs.String("name", "", "upload: workspace path to store the file under (default: the file's base name)")
	overwrite := fs.Bool("overwrite", false, "upload: replace an existing file of that name")
	output := fs.String("o", "", "download: where to write (default: the file's base name; - for stdout)")
	pattern := fs.String("pattern", "", "list: glob pattern, e.g. \"*.csv\"")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return usageError("files: %v", err)
	}
	if len(pos) == 0 {
		return usageError("usage: metaclaw files upload PATH [--name N] | download REF [-o PATH] | list [--pattern P] | info REF | delete REF | revert REF")
	}
	sub, rest := pos[0], pos[1:]
	need := map[string]int{"upload": 1, "download": 1, "list": 0, "info": 1, "delete": 1, "revert": 1}
	n, ok := need[sub]
	if !ok {
		return usageError("files: unknown subcommand %q (upload, download, list, info, delete, revert)", sub)
	}
	if len(rest) != n {
		return usageError("files %s takes %d argument(s)", sub, n)
	}
	return g.withBackend(g.json, func(ctx context.Context, b backend) int {
		switch sub {
		case "upload":
			return filesUpload(ctx, g, b, rest[0], *name, *overwrite)
		case "download":
			return filesDownload(ctx, g, b, rest[0], *output)
		case "list":
			return filesList(ctx, g, b, *pattern)
		case "info":
			res, err := b.Info(ctx, rest[0])
			if err != nil {
				return fail(g, err, g.json)
			}
			printJSON(res)
		case "delete":
			if err := b.Delete(ctx, rest[0]); err != nil {
				return fail(g, err, g.json)
			}
			if g.json {
				printJSON(map[string]any{"deleted": true})
			} else {
				fmt.Fprintf(stdout, "deleted %s\n", rest[0])
			}
		case "revert":
			res, err := b.Revert(ctx, rest[0])
			if err != nil {
				return fail(g, err, g.json)
			}
			if g.json {
				printJSON(res)
			} else {
				fmt.Fprintf(stdout, "reverted %v (%s)\n", res["name"], human(size(res)))
			}
		}
		return 0
	})
}

func filesUpload(ctx context.Context, g *globals, b fileBackend, path, name string, overwrite bool) int {
	fh, err := os.Open(path)
	if err != nil {
		return usageError("files upload: %v", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil || st.IsDir() {
		return usageError("files upload: %s is not a regular file", path)
	}
	if name == "" {
		name = filepath.Base(path)
	}
	var body io.Reader = fh
	bar := progress(st.Size(), "uploading "+name)
	if bar != nil {
		r := progressbar.NewReader(fh, bar)
		body = &r
	}
	res, err := b.Upload(ctx, body, upload{Name: name, Filename: filepath.Base(path), Overwrite: overwrite, Size: st.Size()})
	if bar != nil {
		bar.Finish()
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return fail(g, err, g.json)
	}
	if g.json {
		printJSON(res)
	} else {
		fmt.Fprintf(stdout, "uploaded %v (%s, %v) id %v\n", res["name"], human(size(res)), res["mime_type"], res["id"])
	}
	return 0
}

// filesDownload writes the file to output (default: its base name; - for
// stdout). The target is created only once the file is found, and removed
// again if the copy breaks, so a failed download leaves nothing behind.
func filesDownload(ctx context.Context, g *globals, b fileBackend, ref, output string) int {
	var out *os.File
	var bar *progressbar.ProgressBar
	target := output
	res, err := b.Download(ctx, ref, func(name string, size int64) (io.Writer, error) {
		if target == "-" {
			return stdout, nil
		}
		if target == "" {
			target = filepath.Base(name)
		}
		f, err := os.Create(target)
		if err != nil {
			return nil, apierr.New(apierr.FileWriteFailed, "cannot write %s: %v", target, err)
		}
		out = f
		if bar = progress(size, "downloading "+name); bar != nil {
			return io.MultiWriter(f, bar), nil
		}
		return f, nil
	})
	if bar != nil {
		bar.Finish()
		fmt.Fprintln(stderr)
	}
	if out != nil {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = apierr.New(apierr.FileWriteFailed, "cannot write %s: %v", target, cerr)
		}
		if err != nil {
			os.Remove(target)
		}
	}
	if err != nil {
		return fail(g, err, g.json)
	}
	if target != "-" {
		if g.json {
			res["path"] = target
			printJSON(res)
		} else {
			fmt.Fprintf(stderr, "wrote %s (%s)\n", target, human(size(res)))
		}
	}
	return 0
}

// filesList prints the list as JSON or as a table. Both backends answer in
// the server's JSON shape (snake_case keys, RFC 3339 times), which the
// table reads.
func filesList(ctx context.Context, g *globals, b fileBackend, pattern string) int {
	res, err := b.List(ctx, pattern)
	if err != nil {
		return fail(g, err, g.json)
	}
	if g.json {
		printJSON(res)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSIZE\tTYPE\tMODIFIED\tID")
	list, _ := res["files"].([]any)
	for _, x := range list {
		f, _ := x.(map[string]any)
		mod := fmt.Sprint(f["modified_on"])
		if t, err := time.Parse(time.RFC3339Nano, mod); err == nil {
			mod = t.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f["name"], human(size(f)), f["mime_type"], mod, f["id"])
	}
	tw.Flush()
	return 0
}

// size reads the "size" of a backend's answer: an int64 from the store, a
// JSON number from the server or a projection.
func size(m map[string]any) int64 {
	if n, ok := m["size"].(int64); ok {
		return n
	}
	return client.Int(m, "size")
}

// progress returns a progress bar on stderr for transfers worth one (over
// 4 MB, stderr a terminal), or nil.
func progress(size int64, label string) *progressbar.ProgressBar {
	f, ok := stderr.(*os.File)
	if !ok || size < 4<<20 || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return progressbar.NewOptions64(size, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription(label),
		progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
