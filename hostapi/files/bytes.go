package files

import (
	"context"
	"encoding/base64"
	"io"
	"os"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// maxReadBytes caps one readBytes call (SPEC 3).
const maxReadBytes = 4 << 20

func bytesOps() []hostapi.Op {
	data := hostapi.Param{Name: "data", Schema: hostapi.String(), Doc: "Base64-encoded bytes", Required: true}
	return []hostapi.Op{{
		Name: "files.readBytes", Tool: "file_read_bytes",
		Doc: "Read raw bytes of any file as base64 (at most 4 MB per call), for formats without a dedicated API. " +
			"Reading at the end of the file returns an empty string.",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "offset", Schema: lineSchema(0), Doc: "Byte offset to start at", Required: true},
			{Name: "length", Schema: hostapi.Schema{"type": "integer", "minimum": 0, "maximum": maxReadBytes}, Doc: "Number of bytes (at most 4194304)", Required: true}},
		Result: "", ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:   "Read the first 15 bytes of a file (\"# Meeting notes\")",
			Args:  map[string]any{"id": "notes.md", "offset": 0, "length": 15},
			Want:  "IyBNZWV0aW5nIG5vdGVz",
			Files: []string{"notes.md"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			off, _ := c.Args.Int("offset")
			n, _ := c.Args.Int("length")
			rd, err := c.WS.Open(ctx, c.Args.String("id"))
			if err != nil {
				return nil, err
			}
			defer rd.Close()
			if off > rd.Meta.Size {
				return nil, apierr.New(apierr.ValidationFailed, "offset %d is past the end of %q (%d bytes)", off, rd.Meta.Name, rd.Meta.Size)
			}
			buf := make([]byte, min(n, rd.Meta.Size-off))
			if _, err := rd.ReadAt(buf, off); err != nil && err != io.EOF {
				return nil, apierr.Wrap(apierr.FileReadFailed, err, "reading %q failed: %v", rd.Meta.Name, err)
			}
			return base64.StdEncoding.EncodeToString(buf), nil
		},
	}, {
		Name: "files.writeBytes", Tool: "file_write_bytes",
		Doc: "Overwrite bytes of a file at an offset with base64-decoded data (the file grows if the data runs past its end; " +
			"the offset may be at most the file size).",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "offset", Schema: lineSchema(0), Doc: "Byte offset to write at (at most the file size)", Required: true}, data},
		Result: WriteResult{},
		Examples: []hostapi.Example{{
			Doc:   "Overwrite bytes 2-8 with \"MEETING\"",
			Args:  map[string]any{"id": "notes.md", "offset": 2, "data": "TUVFVElORw=="},
			Want:  map[string]any{"ok": true, "size": 76},
			Files: []string{"notes.md"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			b, err := decodeBase64(c.Args.String("data"))
			if err != nil {
				return nil, err
			}
			off, _ := c.Args.Int("offset")
			f, err := c.WS.Modify(ctx, c.Args.String("id"), func(cur *store.File, path string, out io.Writer) error {
				if off > cur.Size {
					return apierr.New(apierr.ValidationFailed, "offset %d is past the end of %q (%d bytes); use appendBytes to add at the end", off, cur.Name, cur.Size)
				}
				fh, err := os.Open(path)
				if err != nil {
					return apierr.Wrap(apierr.FileReadFailed, err, "cannot open %q: %v", cur.Name, err)
				}
				defer fh.Close()
				if _, err := io.Copy(out, io.NewSectionReader(fh, 0, off)); err != nil {
					return err
				}
				if _, err := out.Write(b); err != nil {
					return err
				}
				rest := off + int64(len(b))
				if rest < cur.Size {
					_, err = io.Copy(out, io.NewSectionReader(fh, rest, cur.Size-rest))
				}
				return err
			})
			if err != nil {
				return nil, err
			}
			return WriteResult{OK: true, Size: f.Size}, nil
		},
	}, {
		Name: "files.appendBytes", Tool: "file_append_bytes",
		Doc:    "Append base64-decoded bytes to the end of a file.",
		Params: []hostapi.Param{hostapi.Ref(""), data},
		Result: WriteResult{},
		Examples: []hostapi.Example{{
			Doc:   "Append a line (\"- Lunch at noon\\n\") to a file",
			Args:  map[string]any{"id": "notes.md", "data": "LSBMdW5jaCBhdCBub29uCg=="},
			Want:  map[string]any{"ok": true, "size": 92},
			Files: []string{"notes.md"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			b, err := decodeBase64(c.Args.String("data"))
			if err != nil {
				return nil, err
			}
			f, err := c.WS.Modify(ctx, c.Args.String("id"), func(cur *store.File, path string, out io.Writer) error {
				fh, err := os.Open(path)
				if err != nil {
					return apierr.Wrap(apierr.FileReadFailed, err, "cannot open %q: %v", cur.Name, err)
				}
				defer fh.Close()
				if _, err := io.Copy(out, fh); err != nil {
					return err
				}
				_, err = out.Write(b)
				return err
			})
			if err != nil {
				return nil, err
			}
			return WriteResult{OK: true, Size: f.Size}, nil
		},
	}}
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	}
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "argument \"data\" is not valid base64: %v", err)
	}
	return b, nil
}
