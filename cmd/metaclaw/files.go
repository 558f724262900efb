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

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/files"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

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
	if g.server != "" {
		return remoteFiles(g, sub, rest, *name, *output, *pattern, *overwrite)
	}
	h, err := g.openHost()
	if err != nil {
		return fail(g, err, g.json)
	}
	defer h.Close()
	ctx := store.WithActor(context.Background(), store.Actor{Session: g.session})
	ws := h.Store.Workspace(g.workspace)
	switch sub {
	case "upload":
		return filesUpload(ctx, g, ws, rest[0], *name, *overwrite)
	case "download":
		return filesDownload(ctx, g, ws, rest[0], *output)
	case "list":
		list, err := ws.List(ctx, *pattern)
		if err != nil {
			return fail(g, err, g.json)
		}
		if g.json {
			out := make([]files.Summary, len(list))
			for i, f := range list {
				out[i] = files.Summary{ID: f.ID, Name: f.Name, Size: f.Size, MimeType: f.MimeType, ModifiedOn: f.ModifiedOn}
			}
			printJSON(hostapi.Project(map[string]any{"files": out}, hostapi.SnakeCase))
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSIZE\tTYPE\tMODIFIED\tID")
		for _, f := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Name, human(f.Size), f.MimeType, f.ModifiedOn.Local().Format(time.DateTime), f.ID)
		}
		tw.Flush()
	case "info":
		f, err := ws.Resolve(ctx, rest[0])
		if err != nil {
			return fail(g, err, g.json)
		}
		printJSON(hostapi.Project(files.NewInfo(f), hostapi.SnakeCase))
	case "delete":
		if err := ws.Delete(ctx, rest[0]); err != nil {
			return fail(g, err, g.json)
		}
		if g.json {
			printJSON(map[string]any{"deleted": true})
		} else {
			fmt.Fprintf(stdout, "deleted %s\n", rest[0])
		}
	case "revert":
		f, err := ws.Revert(ctx, rest[0])
		if err != nil {
			return fail(g, err, g.json)
		}
		if g.json {
			printJSON(map[string]any{"id": f.ID, "name": f.Name, "size": f.Size})
		} else {
			fmt.Fprintf(stdout, "reverted %s (%s)\n", f.Name, human(f.Size))
		}
	}
	return 0
}

func filesUpload(ctx context.Context, g *globals, ws *store.Workspace, path, name string, overwrite bool) int {
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
	f, err := ws.Create(ctx, store.CreateOptions{Name: name, Source: store.SourceUpload, Overwrite: overwrite}, body)
	if bar != nil {
		bar.Finish()
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return fail(g, err, g.json)
	}
	if g.json {
		printJSON(map[string]any{"id": f.ID, "name": f.Name, "size": f.Size, "mime_type": f.MimeType, "sha256": f.SHA256})
	} else {
		fmt.Fprintf(stdout, "uploaded %s (%s, %s) id %s\n", f.Name, human(f.Size), f.MimeType, f.ID)
	}
	return 0
}

func filesDownload(ctx context.Context, g *globals, ws *store.Workspace, ref, output string) int {
	rd, err := ws.Open(ctx, ref)
	if err != nil {
		return fail(g, err, g.json)
	}
	defer rd.Close()
	if output == "" {
		output = filepath.Base(rd.Meta.Name)
	}
	var w io.Writer = stdout
	if output != "-" {
		out, err := os.Create(output)
		if err != nil {
			return usageError("files download: %v", err)
		}
		defer out.Close()
		w = out
	}
	if bar := progress(rd.Meta.Size, "downloading "+rd.Meta.Name); bar != nil && output != "-" {
		w = io.MultiWriter(w, bar)
		defer func() { bar.Finish(); fmt.Fprintln(stderr) }()
	}
	if _, err := io.Copy(w, rd); err != nil {
		return usageError("files download: %v", err)
	}
	if output != "-" {
		if g.json {
			printJSON(map[string]any{"id": rd.Meta.ID, "name": rd.Meta.Name, "size": rd.Meta.Size, "path": output})
		} else {
			fmt.Fprintf(stderr, "wrote %s (%s)\n", output, human(rd.Meta.Size))
		}
	}
	return 0
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
