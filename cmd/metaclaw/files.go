package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/metaclaw/metaclaw/cmd/metaclaw/internal/config"

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
	// TTL, when positive, deletes the file that long after the upload.
	TTL time.Duration
}

// Time-to-live bounds, as files.create takes them.
const (
	minTTL = time.Second
	maxTTL = 366 * 24 * time.Hour
)

// parseTTL reads --ttl: a Go duration (90m, 24h, 1h30m) or whole days
// (7d), from a second to a year.
func parseTTL(text string) (time.Duration, error) {
	text = strings.TrimSpace(text)
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(text, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		if err == nil && (n < 0 || n > 366) {
			return 0, fmt.Errorf("--ttl %s: at most a year (366d)", text)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(text)
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("--ttl %q is not a duration such as 30m, 24h or 7d", text)
	case d < minTTL:
		return 0, fmt.Errorf("--ttl %s: a time to live is at least 1s", text)
	case d > maxTTL:
		return 0, fmt.Errorf("--ttl %s: a time to live is at most a year (366d)", text)
	}
	return d, nil
}

func newFilesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "files",
		Short: "manage workspace files: upload, download, list, info, delete, revert",
		Long: `Manage the files of a workspace, locally on the data directory or with --server on a
running server. Output is for people (tables, sentences) unless --json is given.`,
		Example: `  metaclaw files upload sales.xlsx --name reports/sales.xlsx
  metaclaw files list --pattern 'reports/*'
  metaclaw files download reports/sales.xlsx -o local.xlsx`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(stderr)
				cmd.Usage()
				return exitCode(2)
			}
			msg := fmt.Sprintf("files: unknown subcommand %q", args[0])
			var names []string
			for _, c := range cmd.Commands() {
				names = append(names, c.Name())
			}
			if near := config.Nearest(args[0], names); near != "" {
				msg += "; did you mean " + near + "?"
			}
			return usageError(cmd, "%s", msg)
		},
	}
	config.Bind(cmd.PersistentFlags(), "files")
	cmd.AddCommand(newFilesUploadCmd(g), newFilesDownloadCmd(g), newFilesListCmd(g),
		newFilesInfoCmd(g), newFilesDeleteCmd(g), newFilesRevertCmd(g))
	return cmd
}

func newFilesUploadCmd(g *globals) *cobra.Command {
	var name, ttl string
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "upload PATH",
		Short: "upload a local file into the workspace",
		Long: `Upload a local file into the workspace. With --ttl the file is deleted automatically that
long after the upload (a file:deleted event says so); files info shows expires_on.`,
		Example: `  metaclaw files upload sales.xlsx
  metaclaw files upload ./out/report.pdf --name reports/q3.pdf --overwrite
  metaclaw files upload scratch.csv --ttl 24h`,
		Args: positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u := upload{Name: name, Overwrite: overwrite}
			if cmd.Flags().Changed("ttl") {
				d, err := parseTTL(ttl)
				if err != nil {
					return usageError(cmd, "files upload: %v", err)
				}
				u.TTL = d
			}
			return filesUpload(cmd, g, args[0], u)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "workspace path to store the file under (default: the file's base name)")
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "replace an existing file of that name")
	cmd.Flags().StringVar(&ttl, "ttl", "", "delete the file automatically this long after the upload: 30m, 24h, 7d (1s to a year)")
	return cmd
}

func newFilesDownloadCmd(g *globals) *cobra.Command {
	var output string
	var force bool
	cmd := &cobra.Command{
		Use:   "download REF",
		Short: "download a workspace file (by name or id) to a local file or stdout",
		Long: `Download a workspace file. The local file is the file's base name, or -o PATH (a
directory: the base name inside it; -: stdout). An existing local file is kept unless
--force is given; a download that breaks leaves no partial file behind.`,
		Example: `  metaclaw files download reports/q3.pdf
  metaclaw files download reports/q3.pdf -o /tmp/ --force
  metaclaw files download notes.md -o - | less`,
		Args: positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withBackend(g.json, func(ctx context.Context, b backend) error {
				return filesDownload(ctx, g, b, args[0], output, force)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "where to write: a path, a directory, or - for stdout (default: the file's base name)")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing local file")
	return cmd
}

func newFilesListCmd(g *globals) *cobra.Command {
	var pattern string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list workspace files",
		Example: `  metaclaw files list
  metaclaw files list --pattern '**/*.csv' --json`,
		Args: positional(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withBackend(g.json, func(ctx context.Context, b backend) error {
				return filesList(ctx, g, b, pattern)
			})
		},
	}
	cmd.Flags().StringVar(&pattern, "pattern", "", "glob pattern, e.g. \"*.csv\" or \"reports/**\"")
	return cmd
}

func newFilesInfoCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "info REF",
		Short:   "print a file's metadata as JSON",
		Example: `  metaclaw files info reports/q3.pdf`,
		Args:    positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withBackend(g.json, func(ctx context.Context, b backend) error {
				res, err := b.Info(ctx, args[0])
				if err != nil {
					return fail(g, err, g.json)
				}
				printJSON(res)
				return nil
			})
		},
	}
}

func newFilesDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete REF",
		Short:   "delete a workspace file",
		Example: `  metaclaw files delete old/draft.md`,
		Args:    positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withBackend(g.json, func(ctx context.Context, b backend) error {
				if err := b.Delete(ctx, args[0]); err != nil {
					return fail(g, err, g.json)
				}
				if g.json {
					printJSON(map[string]any{"deleted": true})
				} else {
					fmt.Fprintf(stdout, "deleted %s\n", args[0])
				}
				return nil
			})
		},
	}
}

func newFilesRevertCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "revert REF",
		Short:   "restore a file's previous version (one-level undo)",
		Example: `  metaclaw files revert sales.xlsx`,
		Args:    positional(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withBackend(g.json, func(ctx context.Context, b backend) error {
				res, err := b.Revert(ctx, args[0])
				if err != nil {
					return fail(g, err, g.json)
				}
				if g.json {
					printJSON(res)
				} else {
					fmt.Fprintf(stdout, "reverted %v (%s)\n", res["name"], human(size(res)))
				}
				return nil
			})
		},
	}
}

func filesUpload(cmd *cobra.Command, g *globals, path string, u upload) error {
	fh, err := os.Open(path)
	if err != nil {
		return usageError(cmd, "files upload: %v", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil || st.IsDir() {
		return usageError(cmd, "files upload: %s is not a regular file", path)
	}
	if u.Name == "" {
		u.Name = filepath.Base(path)
	}
	u.Filename, u.Size = filepath.Base(path), st.Size()
	return g.withBackend(g.json, func(ctx context.Context, b backend) error {
		var body io.Reader = fh
		bar := progress(st.Size(), "uploading "+u.Name)
		if bar != nil {
			r := progressbar.NewReader(fh, bar)
			body = &r
		}
		res, err := b.Upload(ctx, body, u)
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
			expires := ""
			if e, ok := res["expires_on"]; ok {
				expires = fmt.Sprintf(", expires %v", e)
				if t, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e)); err == nil {
					expires = ", expires " + t.Local().Format(time.DateTime)
				}
			}
			fmt.Fprintf(stdout, "uploaded %v (%s, %v) id %v%s\n", res["name"], human(size(res)), res["mime_type"], res["id"], expires)
		}
		return nil
	})
}

// filesDownload writes the file to output (default: its base name; a
// directory: the base name inside it; - for stdout). The body goes to a
// temporary file beside the target, which takes the target's name only
// once the copy is complete: a broken download leaves nothing behind, and
// without force an existing file is never replaced, even one that appears
// while the download runs.
func filesDownload(ctx context.Context, g *globals, b fileBackend, ref, output string, force bool) error {
	target := output
	if target != "" && target != "-" {
		if err := checkTarget(&target, "", force); err != nil {
			return fail(g, err, g.json)
		}
	}
	var tmp *os.File
	var bar *progressbar.ProgressBar
	res, err := b.Download(ctx, ref, func(name string, size int64) (io.Writer, error) {
		if target == "-" {
			return stdout, nil
		}
		if err := checkTarget(&target, name, force); err != nil {
			return nil, err
		}
		f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".download-*")
		if err != nil {
			// The temporary name means nothing to the user: say what
			// went wrong with the target.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, apierr.New(apierr.FileWriteFailed, "cannot write %s: %v", target, err)
		}
		tmp = f
		if bar = progress(size, "downloading "+name); bar != nil {
			return io.MultiWriter(f, bar), nil
		}
		return f, nil
	})
	if bar != nil {
		bar.Finish()
		fmt.Fprintln(stderr)
	}
	if tmp != nil {
		if cerr := tmp.Close(); err == nil && cerr != nil {
			err = apierr.New(apierr.FileWriteFailed, "cannot write %s: %v", target, cerr)
		}
		if err == nil {
			err = commitDownload(tmp.Name(), target, force)
		}
		os.Remove(tmp.Name())
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
	return nil
}

// checkTarget settles where a download goes: the file's base name when no
// target was given, inside the target when it is a directory (name is ""
// before the file is known), and refuses an existing file without force.
func checkTarget(target *string, name string, force bool) error {
	if *target == "" {
		if name == "" {
			return nil
		}
		*target = filepath.Base(name)
	}
	st, err := os.Stat(*target)
	if err == nil && st.IsDir() {
		if name == "" {
			return nil // the name inside it is known once the file is found
		}
		*target = filepath.Join(*target, filepath.Base(name))
		st, err = os.Stat(*target)
	}
	if err == nil {
		if st.IsDir() {
			return apierr.New(apierr.AlreadyExists, "%s is a directory; choose another path with -o", *target)
		}
		if !force {
			return apierr.New(apierr.AlreadyExists, "%s already exists; pass --force to overwrite it, or -o PATH to write elsewhere", *target)
		}
	}
	return nil
}

// commitDownload gives the complete temporary file the target's name.
// Without force a hard link does it, which fails if the name was taken
// meanwhile; filesystems without hard links fall back to a checked rename.
func commitDownload(tmp, target string, force bool) error {
	if force {
		if err := os.Rename(tmp, target); err != nil {
			return apierr.New(apierr.FileWriteFailed, "cannot write %s: %v", target, err)
		}
		return nil
	}
	err := os.Link(tmp, target)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return apierr.New(apierr.AlreadyExists, "%s already exists; pass --force to overwrite it, or -o PATH to write elsewhere", target)
	}
	if _, serr := os.Lstat(target); serr == nil {
		return apierr.New(apierr.AlreadyExists, "%s already exists; pass --force to overwrite it, or -o PATH to write elsewhere", target)
	}
	if err := os.Rename(tmp, target); err != nil {
		return apierr.New(apierr.FileWriteFailed, "cannot write %s: %v", target, err)
	}
	return nil
}

// filesList prints the list as JSON or as a table. Both backends answer in
// the server's JSON shape (snake_case keys, RFC 3339 times), which the
// table reads.
func filesList(ctx context.Context, g *globals, b fileBackend, pattern string) error {
	res, err := b.List(ctx, pattern)
	if err != nil {
		return fail(g, err, g.json)
	}
	if g.json {
		printJSON(res)
		return nil
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
	return nil
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
