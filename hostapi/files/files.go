// Package files holds the generic file operations of SPEC 3: tier 1
// (list, info, create, delete, copy, rename, revert, download), tier 2 text
// (line-based reads and edits on a cached line index) and raw bytes.
package files

import (
	"bytes"
	"context"
	"io"
	"path"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Register adds the generic file operations to h's registry.
func Register(h *hostapi.Host) error {
	idx := newIndexCache(64)
	h.Registry.Add(tier1Ops(h)...)
	h.Registry.Add(textOps(idx)...)
	h.Registry.Add(bytesOps()...)
	return nil
}

// Summary is one entry of files.list.
type Summary struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Size       int64     `json:"size"`
	MimeType   string    `json:"mimeType"`
	ModifiedOn time.Time `json:"modifiedOn"`
}

// Info is files.info's full metadata.
type Info struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	Size            int64     `json:"size"`
	MimeType        string    `json:"mimeType"`
	SHA256          string    `json:"sha256"`
	Source          string    `json:"source"`
	SourceSessionID string    `json:"sourceSessionId"`
	CreatedOn       time.Time `json:"createdOn"`
	ModifiedOn      time.Time `json:"modifiedOn"`
	IconType        string    `json:"iconType"`
	HasBackup       bool      `json:"hasBackup"`
	// ExpiresOn is when a file created with a time to live is deleted
	// (absent: it stays until deleted).
	ExpiresOn *time.Time `json:"expiresOn,omitempty"`
}

// MaxTTLSeconds is the longest time to live files.create accepts: a year
// (366 days). Longer-lived files are simply kept until deleted.
const MaxTTLSeconds = 366 * 24 * 3600

// NewInfo converts store metadata to files.info's shape.
func NewInfo(f *store.File) Info {
	info := Info{ID: f.ID, Name: f.Name, Size: f.Size, MimeType: f.MimeType, SHA256: f.SHA256, Source: f.Source,
		SourceSessionID: f.SourceSessionID, CreatedOn: f.CreatedOn, ModifiedOn: f.ModifiedOn,
		IconType: f.IconType(), HasBackup: f.HasBackup}
	if !f.ExpiresOn.IsZero() {
		t := f.ExpiresOn
		info.ExpiresOn = &t
	}
	return info
}

// IDName is the {id,name} answer of create, copy and rename.
type IDName struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// IDNameSize is revert's answer.
type IDNameSize struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// Downloaded is files.download's answer.
type Downloaded struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	MimeType string `json:"mimeType"`
}

// Deleted is files.delete's answer.
type Deleted struct {
	Deleted bool `json:"deleted"`
}

func tier1Ops(h *hostapi.Host) []hostapi.Op {
	return []hostapi.Op{{
		Name: "files.list", Tool: "file_list",
		Doc: "List workspace files, optionally filtered by a glob pattern (\"*.csv\" matches in every folder, \"reports/**\" a subtree). " +
			"Returns id, name, size, mime type and modification time of each file.",
		Params: []hostapi.Param{{Name: "pattern", Schema: hostapi.String(), Doc: "Optional glob pattern, e.g. \"*.xlsx\" or \"reports/**/*.pdf\""}},
		Result: []Summary(nil), ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:   "List the markdown files",
			Args:  map[string]any{"pattern": "*.md"},
			Want:  map[string]any{"files": []any{map[string]any{"name": "notes.md", "size": 76, "mime_type": "text/markdown"}}},
			Files: []string{"notes.md", "people.csv"},
		}},
		ToolResult: func(v any) any {
			return struct {
				Files []Summary `json:"files"`
			}{v.([]Summary)}
		},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			fs, err := c.WS.List(ctx, c.Args.String("pattern"))
			if err != nil {
				return nil, err
			}
			out := make([]Summary, len(fs))
			for i, f := range fs {
				out[i] = Summary{ID: f.ID, Name: f.Name, Size: f.Size, MimeType: f.MimeType, ModifiedOn: f.ModifiedOn}
			}
			return out, nil
		},
	}, {
		Name: "files.info", Tool: "file_info",
		Doc:    "Full metadata of one file: size, MIME type (detected from its bytes), sha256, source (upload, created, derived), timestamps, icon type and whether an earlier version can be restored with file_revert.",
		Params: []hostapi.Param{hostapi.Ref("")},
		Result: Info{}, ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:  "Metadata of a file by name",
			Args: map[string]any{"id": "notes.md"},
			Want: map[string]any{"name": "notes.md", "size": 76, "mime_type": "text/markdown", "icon_type": "md", "has_backup": false,
				"sha256": "212742672810a85040e315fa1bfe21fb8872f79cd2244b60d80e33b9082ef6ff"},
			Files: []string{"notes.md"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			f, err := c.WS.Resolve(ctx, c.Args.String("id"))
			if err != nil {
				return nil, err
			}
			return NewInfo(f), nil
		},
	}, {
		Name: "files.create", Tool: "file_create",
		Doc: "Create a file. A .xlsx name makes an empty workbook with one sheet \"Sheet1\" and a .pdf name a blank one-page A4 PDF " +
			"(fill them with the spreadsheet_* and pdf_* tools; content is refused for them); any other name makes a text file, empty or with content. " +
			"Fails with ALREADY_EXISTS when the name is taken unless overwrite is true. Folders in the name (\"reports/q3.md\") need not exist first. " +
			"With ttl (seconds) the file is deleted automatically that long after it is created or overwritten (file_info shows expires_on): use it for scratch and intermediate outputs.",
		Params: []hostapi.Param{
			{Name: "name", Schema: hostapi.String(), Doc: "Workspace path of the new file, e.g. \"notes/todo.md\"", Required: true},
			{Name: "content", Schema: hostapi.String(), Doc: "Optional initial text content (not for .xlsx or .pdf)", Group: "options"},
			{Name: "mime_type", Schema: hostapi.String(), Doc: "Optional MIME type, used only when the content does not reveal one", Group: "options"},
			{Name: "overwrite", Schema: hostapi.Boolean(), Doc: "Replace an existing file of that name (default false)", Group: "options"},
			{Name: "ttl", Schema: hostapi.Schema{"type": "integer", "minimum": 1, "maximum": MaxTTLSeconds},
				Doc: "Time to live in seconds (1 to 31622400, a year): the file is deleted automatically, with a file:deleted event, that long after this call; absent: kept until deleted", Group: "options"},
		},
		Result: IDName{},
		Examples: []hostapi.Example{{
			Doc:  "Create a markdown note",
			Args: map[string]any{"name": "notes/todo.md", "content": "# To do\n- call Ana\n"},
			Want: map[string]any{"name": "notes/todo.md"},
		}, {
			Doc:  "Create an empty workbook to fill with spreadsheet_write_range",
			Args: map[string]any{"name": "report.xlsx"},
			Want: map[string]any{"name": "report.xlsx"},
		}, {
			Doc:  "Replace an existing file",
			Args: map[string]any{"name": "notes.md", "content": "# Notes\n", "overwrite": true},
			Want: map[string]any{"name": "notes.md"}, Files: []string{"notes.md"},
		}, {
			Doc:  "Create a scratch file that deletes itself after an hour",
			Args: map[string]any{"name": "tmp/scratch.txt", "content": "intermediate result\n", "ttl": 3600},
			Want: map[string]any{"name": "tmp/scratch.txt"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			name, content := c.Args.String("name"), c.Args.String("content")
			var ttl time.Duration
			if secs, ok := c.Args.Int("ttl"); ok {
				ttl = time.Duration(secs) * time.Second
			}
			body, err := initialBody(c.Host, name, content)
			if err != nil {
				return nil, err
			}
			f, err := c.WS.Create(ctx, store.CreateOptions{Name: name, MimeType: c.Args.String("mime_type"),
				Source: store.SourceCreated, Overwrite: c.Args.Bool("overwrite"), TTL: ttl}, body)
			if err != nil {
				return nil, err
			}
			return IDName{f.ID, f.Name}, nil
		},
	}, {
		Name: "files.delete", Tool: "file_delete",
		Doc:    "Delete a file (and its backup) from the workspace. This cannot be undone.",
		Params: []hostapi.Param{hostapi.Ref("")},
		Result: Deleted{}, Destructive: true,
		Examples: []hostapi.Example{{
			Doc:   "Delete a file",
			Args:  map[string]any{"id": "notes.md"},
			Want:  map[string]any{"deleted": true},
			Files: []string{"notes.md"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			if err := c.WS.Delete(ctx, c.Args.String("id")); err != nil {
				return nil, err
			}
			return Deleted{true}, nil
		},
	}, {
		Name: "files.copy", Tool: "file_copy",
		Doc: "Duplicate a file under a new name; returns the copy's id and name.",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "new_name", Schema: hostapi.String(), Doc: "Workspace path of the copy", Required: true},
			{Name: "overwrite", Schema: hostapi.Boolean(), Doc: "Replace an existing file of that name (default false)", Group: "options"}},
		Result: IDName{},
		Examples: []hostapi.Example{{
			Doc:   "Copy a note into an archive folder",
			Args:  map[string]any{"id": "notes.md", "new_name": "archive/notes-2024.md"},
			Want:  map[string]any{"name": "archive/notes-2024.md"},
			Files: []string{"notes.md"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			f, err := c.WS.Copy(ctx, c.Args.String("id"), c.Args.String("new_name"), c.Args.Bool("overwrite"))
			if err != nil {
				return nil, err
			}
			return IDName{f.ID, f.Name}, nil
		},
	}, {
		Name: "files.rename", Tool: "file_rename",
		Doc: "Rename or move a file; its id stays the same.",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "new_name", Schema: hostapi.String(), Doc: "New workspace path", Required: true}},
		Result: IDName{}, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:   "Move a note into a folder",
			Args:  map[string]any{"id": "notes.md", "new_name": "docs/notes.md"},
			Want:  map[string]any{"name": "docs/notes.md"},
			Files: []string{"notes.md"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			f, err := c.WS.Rename(ctx, c.Args.String("id"), c.Args.String("new_name"))
			if err != nil {
				return nil, err
			}
			return IDName{f.ID, f.Name}, nil
		},
	}, {
		Name: "files.revert", Tool: "file_revert",
		Doc: "Undo the edits to a file: restore the version it had before it was first modified (one level of undo). " +
			"NOT_FOUND when there is no earlier version.",
		Params: []hostapi.Param{hostapi.Ref("")},
		Result: IDNameSize{}, Destructive: true,
		Examples: []hostapi.Example{{
			Doc:   "Undo the edits to a file (after e.g. file_write_text changed it)",
			Args:  map[string]any{"id": "notes.md"},
			Want:  map[string]any{"name": "notes.md", "size": 76},
			Files: []string{"notes.md"},
			Setup: []hostapi.SetupCall{{Tool: "file_write_text", Args: map[string]any{"id": "notes.md", "content": "changed\n"}}},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			f, err := c.WS.Revert(ctx, c.Args.String("id"))
			if err != nil {
				return nil, err
			}
			return IDNameSize{f.ID, f.Name, f.Size}, nil
		},
	}, downloadOp(h)}
}

// formatHints say how to fill a file whose format is not text, by the
// extension a blank maker is registered for.
var formatHints = map[string]string{
	".xlsx": "create it without content and write cells with files.spreadsheet.writeRange (spreadsheet_write_range); " +
		"to turn CSV text into a workbook, save it as a .csv and use files.table.export with format \"xlsx\"",
	".pdf": "create it without content, then add text with files.pdf.addText (pdf_add_text) and pages with files.pdf.addPage (pdf_add_page)",
}

func formatHint(name string) string {
	if h, ok := formatHints[strings.ToLower(path.Ext(name))]; ok {
		return h
	}
	return "create it without content and use the operations of its format"
}

// initialBody is what files.create writes: the host's blank document for
// names of a format that has one (a workbook, a PDF), else the text
// content. Text cannot become a workbook or a PDF by being stored under
// such a name, so content for those is refused rather than written as a
// file no reader could open.
func initialBody(h *hostapi.Host, name, content string) (io.Reader, error) {
	blank := h.BlankFor(name)
	if blank == nil {
		return strings.NewReader(content), nil
	}
	if content != "" {
		return nil, apierr.New(apierr.ValidationFailed, "content cannot fill %q: a %s file is not text; %s",
			name, strings.ToLower(path.Ext(name)), formatHint(name))
	}
	var buf bytes.Buffer
	if err := blank(&buf); err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "making an empty %s document failed: %v", strings.ToLower(path.Ext(name)), err)
	}
	return &buf, nil
}
