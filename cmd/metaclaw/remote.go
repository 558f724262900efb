package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/server/client"
)

// Remote mode: with --server URL (and --token), the file, run and tool
// commands talk to a running `metaclaw serve` and print what the local mode
// prints.

func (g *globals) remote() (*client.Client, error) {
	c, err := client.New(g.server, g.token)
	if err != nil {
		return nil, err
	}
	c.Session = g.session
	if g.workspace != "default" {
		fmt.Fprintf(stderr, "metaclaw: --workspace %q is ignored with --server: the token decides the workspace\n", g.workspace)
	}
	return c, nil
}

func remoteContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

func remoteFiles(g *globals, sub string, rest []string, name, output, pattern string, overwrite bool) int {
	c, err := g.remote()
	if err != nil {
		return fail(g, err, g.json)
	}
	ctx, stop := remoteContext()
	defer stop()
	switch sub {
	case "upload":
		return remoteUpload(ctx, g, c, rest[0], name, overwrite)
	case "download":
		return remoteDownload(ctx, g, c, rest[0], output)
	case "list":
		res, err := c.List(ctx, pattern)
		if err != nil {
			return fail(g, err, g.json)
		}
		if g.json {
			delete(res, "workspace")
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f["name"], human(client.Int(f, "size")), f["mime_type"], mod, f["id"])
		}
		tw.Flush()
	case "info":
		res, err := c.Info(ctx, rest[0])
		if err != nil {
			return fail(g, err, g.json)
		}
		printJSON(res)
	case "delete":
		if err := c.Delete(ctx, rest[0]); err != nil {
			return fail(g, err, g.json)
		}
		if g.json {
			printJSON(map[string]any{"deleted": true})
		} else {
			fmt.Fprintf(stdout, "deleted %s\n", rest[0])
		}
	case "revert":
		// Revert has no REST route of its own: it is the file_revert tool.
		res, err := c.CallTool(ctx, "file_revert", map[string]any{"id": rest[0]})
		if err != nil {
			return fail(g, err, g.json)
		}
		m, _ := res.(map[string]any)
		if g.json {
			printJSON(m)
		} else {
			fmt.Fprintf(stdout, "reverted %v (%s)\n", m["name"], human(client.Int(m, "size")))
		}
	}
	return 0
}

func remoteUpload(ctx context.Context, g *globals, c *client.Client, path, name string, overwrite bool) int {
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
	res, err := c.Upload(ctx, body, client.UploadOptions{Name: name, Filename: filepath.Base(path), Overwrite: overwrite, Size: st.Size()})
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
		fmt.Fprintf(stdout, "uploaded %v (%s, %v) id %v\n", res["name"], human(client.Int(res, "size")), res["mime_type"], res["id"])
	}
	return 0
}

func remoteDownload(ctx context.Context, g *globals, c *client.Client, ref, output string) int {
	var out *os.File
	var bar *progressbar.ProgressBar
	target := output
	name, n, err := c.Download(ctx, ref, func(name string, size int64) (io.Writer, error) {
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
			printJSON(map[string]any{"name": name, "size": n, "path": target})
		} else {
			fmt.Fprintf(stderr, "wrote %s (%s)\n", target, human(n))
		}
	}
	return 0
}

func remoteRun(g *globals, name string, code []byte, input string, timeout time.Duration) int {
	c, err := g.remote()
	if err != nil {
		return fail(g, err, true)
	}
	ctx, stop := remoteContext()
	defer stop()
	req := client.RunRequest{Code: string(code), TimeoutMs: timeout.Milliseconds(), SessionID: g.session}
	if strings.TrimSpace(input) != "" {
		req.Input = json.RawMessage(input)
	}
	res, err := c.Run(ctx, req)
	if err != nil {
		return fail(g, err, true)
	}
	printJSON(res)
	if ok, _ := res["ok"].(bool); !ok {
		return 1
	}
	return 0
}

func remoteTool(g *globals, name string, args map[string]any) int {
	c, err := g.remote()
	if err != nil {
		return fail(g, err, true)
	}
	ctx, stop := remoteContext()
	defer stop()
	res, err := c.CallTool(ctx, name, args)
	if err != nil {
		return fail(g, err, true)
	}
	printJSON(res)
	return 0
}

func remoteTools(g *globals) int {
	c, err := g.remote()
	if err != nil {
		return fail(g, err, true)
	}
	ctx, stop := remoteContext()
	defer stop()
	res, err := c.Tools(ctx)
	if err != nil {
		return fail(g, err, g.json)
	}
	if g.json {
		printJSON(res)
		return 0
	}
	list, _ := res["tools"].([]any)
	for _, x := range list {
		t, _ := x.(map[string]any)
		doc := fmt.Sprint(t["description"])
		if i := strings.Index(doc, ". "); i > 0 {
			doc = doc[:i+1]
		}
		fmt.Fprintf(stdout, "%-32s %s\n", t["name"], doc)
	}
	return 0
}
