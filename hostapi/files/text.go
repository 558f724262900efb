package files

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/textenc"
)

// maxTextRead caps one readText answer; page through bigger files by lines.
const maxTextRead = 16 << 20

// maxLine bounds line numbers and byte offsets in schemas: the largest
// integer every door (JSON, JS) carries exactly, far beyond any file, and
// small enough that a handler's arithmetic on it cannot overflow.
const maxLine = 1<<53 - 1

// ReadTextResult is readText's answer.
type ReadTextResult struct {
	Content    string `json:"content"`
	TotalLines int    `json:"totalLines"`
	// Encoding names the file's encoding when it is not plain UTF-8
	// (windows-1252, utf-16le, utf-8-bom, …); content is always UTF-8.
	Encoding string `json:"encoding,omitempty"`
}

// WriteResult is the {ok,size} answer of writes.
type WriteResult struct {
	OK   bool  `json:"ok"`
	Size int64 `json:"size"`
	EncodingChange
}

// LinesResult is the {ok,totalLines} answer of line edits.
type LinesResult struct {
	OK         bool `json:"ok"`
	TotalLines int  `json:"totalLines"`
	EncodingChange
}

// EncodingChange tells a text edit's caller which encoding the file has
// after the edit, when that is not plain UTF-8, and that it was converted
// when the new text could not be written in the file's own encoding.
type EncodingChange struct {
	// Encoding is the file's encoding after the edit (omitted for UTF-8).
	Encoding string `json:"encoding,omitempty"`
	// ConvertedFrom is the encoding the file had before, when the new
	// text held characters it cannot represent and the whole file was
	// rewritten as UTF-8.
	ConvertedFrom string `json:"convertedFrom,omitempty"`
}

// Match is one searchText hit.
type Match struct {
	Line    int    `json:"line"`
	Content string `json:"content"`
}

// SearchResult is searchText's answer.
type SearchResult struct {
	Matches []Match `json:"matches"`
	// Truncated is true when maxMatches stopped the search early.
	Truncated bool `json:"truncated"`
	// Encoding names the file's encoding when it is not plain UTF-8.
	Encoding string `json:"encoding,omitempty"`
}

// encodingName is how results name an encoding: empty for plain UTF-8.
func encodingName(enc textenc.Encoding) string {
	if s := enc.String(); s != "utf-8" {
		return s
	}
	return ""
}

func lineSchema(min int) hostapi.Schema {
	return hostapi.Schema{"type": "integer", "minimum": min, "maximum": maxLine}
}

func textOps(idx *indexCache) []hostapi.Op {
	line := func(name, doc string, required bool, group string) hostapi.Param {
		return hostapi.Param{Name: name, Schema: lineSchema(1), Doc: doc, Required: required, Group: group}
	}
	return []hostapi.Op{{
		Name: "files.readText", Tool: "file_read_text",
		Doc: "Read a text file, whole or a range of lines (1-based, inclusive). Returns the content and the file's total line count; " +
			"page through big files with start_line/end_line instead of reading them whole. Files in Windows-1252, Latin-1, UTF-16 " +
			"or UTF-8 with a byte order mark are decoded (encoding names the file's encoding).",
		Params: []hostapi.Param{hostapi.Ref(""),
			line("start_line", "First line to read (1-based). Omit to start from the beginning.", false, "options"),
			line("end_line", "Last line to read (inclusive). Omit to read to the end.", false, "options")},
		Result: ReadTextResult{}, ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:   "Read the first two lines of a note",
			Args:  map[string]any{"id": "notes.md", "start_line": 1, "end_line": 2},
			Want:  map[string]any{"content": "# Meeting notes\n- Budget approved\n", "total_lines": 4},
			Files: []string{"notes.md"},
		}, {
			Doc:   "Read a Windows-1252 CSV: the content comes back as UTF-8",
			Args:  map[string]any{"id": "latin1.csv", "start_line": 2, "end_line": 2},
			Want:  map[string]any{"content": "Muñoz,Málaga,1200\n", "total_lines": 4, "encoding": "windows-1252"},
			Files: []string{"latin1.csv"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			var out ReadTextResult
			err := c.WS.View(ctx, c.Args.String("id"), func(f *store.File, path string) error {
				li, err := textIndex(ctx, idx, f, path)
				if err != nil {
					return err
				}
				out.TotalLines = li.totalLines
				out.Encoding = encodingName(li.enc)
				total := int64(li.totalLines)
				start := c.Args.IntOr("start_line", 1)
				end := c.Args.IntOr("end_line", total)
				if total == 0 {
					return nil
				}
				if end < start {
					return apierr.New(apierr.ValidationFailed, "end_line %d is before start_line %d", end, start)
				}
				if start > total {
					return apierr.New(apierr.ValidationFailed, "start_line %d is past the end: %q has %d lines", start, f.Name, total)
				}
				end = min(end, total)
				fh, from, to, err := openLines(f, path, li, int(start), int(end))
				if err != nil {
					return err
				}
				defer fh.Close()
				if to-from > maxTextRead {
					return apierr.New(apierr.TooLarge, "lines %d-%d are %d MB; read at most 16 MB at a time with start_line/end_line", start, end, (to-from)>>20)
				}
				buf := make([]byte, to-from)
				if _, err := fh.ReadAt(buf, from); err != nil && err != io.EOF {
					return apierr.Wrap(apierr.FileReadFailed, err, "reading %q failed: %v", f.Name, err)
				}
				out.Content, err = li.decode(buf)
				return err
			})
			return out, err
		},
	}, {
		Name: "files.writeText", Tool: "file_write_text",
		Doc: "Replace a text file's whole content (the file is created, as UTF-8, if it does not exist). An existing file keeps its " +
			"encoding (Windows-1252, UTF-16, …) unless the text has characters it cannot hold; then the file becomes UTF-8 and " +
			"converted_from says so. The previous version can be restored with file_revert.",
		Params: []hostapi.Param{hostapi.Ref(""), {Name: "content", Schema: hostapi.String(), Doc: "Full text content to write", Required: true}},
		Result: WriteResult{}, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:   "Rewrite a note",
			Args:  map[string]any{"id": "notes.md", "content": "# Notes\nAll done.\n"},
			Want:  map[string]any{"ok": true, "size": 18},
			Files: []string{"notes.md"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			ref, content := c.Args.String("id"), c.Args.String("content")
			f, err := c.WS.Resolve(ctx, ref)
			if apierr.Is(err, apierr.NotFound) && !store.IsID(ref) {
				if c.Host.BlankFor(ref) != nil {
					return nil, apierr.New(apierr.UnsupportedFormat, "%q would not be a text file; %s", ref, formatHint(ref))
				}
				f, err = c.WS.Create(ctx, store.CreateOptions{Name: ref, Source: store.SourceCreated}, strings.NewReader(content))
				if err != nil {
					return nil, err
				}
				return WriteResult{OK: true, Size: f.Size}, nil
			}
			if err != nil {
				return nil, err
			}
			if err := requireText(f); err != nil {
				return nil, err
			}
			var change EncodingChange
			f, err = c.WS.Modify(ctx, f.ID, func(cur *store.File, path string, out io.Writer) error {
				li, err := textIndex(ctx, idx, cur, path)
				if err != nil {
					return err
				}
				enc := li.enc
				if cur.Size == 0 {
					enc = textenc.UTF8 // an empty file has no encoding to keep
				}
				body, err := enc.Encode(content)
				if err != nil {
					change.ConvertedFrom = enc.String()
					enc, body = textenc.UTF8, []byte(content)
				}
				change.Encoding = encodingName(enc)
				if _, err := out.Write(enc.BOMBytes()); err != nil {
					return err
				}
				_, err = out.Write(body)
				return err
			})
			if err != nil {
				return nil, err
			}
			return WriteResult{OK: true, Size: f.Size, EncodingChange: change}, nil
		},
	}, {
		Name: "files.replaceLines", Tool: "file_replace_lines",
		Doc: "Replace lines start_line..end_line (1-based, inclusive) of a text file with new content (which may have more or fewer lines; " +
			"empty content deletes the lines). Returns the new total line count. The file keeps its encoding unless the new text " +
			"needs UTF-8 (then converted_from says so).",
		Params: []hostapi.Param{hostapi.Ref(""),
			line("start_line", "First line to replace (1-based)", true, ""),
			line("end_line", "Last line to replace (inclusive)", true, ""),
			{Name: "content", Schema: hostapi.String(), Doc: "Replacement text", Required: true}},
		Result: LinesResult{},
		Examples: []hostapi.Example{{
			Doc:   "Replace line 2 of a note",
			Args:  map[string]any{"id": "notes.md", "start_line": 2, "end_line": 2, "content": "- Budget approved (120k)"},
			Want:  map[string]any{"ok": true, "total_lines": 4},
			Files: []string{"notes.md"},
		}, {
			Doc:   "Fix a name in a Windows-1252 CSV; the file stays Windows-1252",
			Args:  map[string]any{"id": "latin1.csv", "start_line": 4, "end_line": 4, "content": "Müller,Köln,870"},
			Want:  map[string]any{"ok": true, "total_lines": 4, "encoding": "windows-1252"},
			Files: []string{"latin1.csv"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			start, _ := c.Args.Int("start_line")
			end, _ := c.Args.Int("end_line")
			return editLines(ctx, c, idx, start, end, false, c.Args.String("content"))
		},
	}, {
		Name: "files.insertLines", Tool: "file_insert_lines",
		Doc: "Insert text after line after_line of a text file (0 inserts at the top). Returns the new total line count. The file " +
			"keeps its encoding unless the new text needs UTF-8 (then converted_from says so).",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "after_line", Schema: lineSchema(0), Doc: "Insert after this line (0 = at the top)", Required: true},
			{Name: "content", Schema: hostapi.String(), Doc: "Text to insert", Required: true}},
		Result: LinesResult{},
		Examples: []hostapi.Example{{
			Doc:   "Add a line after the title of a note",
			Args:  map[string]any{"id": "notes.md", "after_line": 1, "content": "Date: 2024-03-01"},
			Want:  map[string]any{"ok": true, "total_lines": 5},
			Files: []string{"notes.md"},
		}, {
			Doc:   "Append a line to a UTF-16 text file",
			Args:  map[string]any{"id": "utf16.txt", "after_line": 3, "content": "Vierte Zeile"},
			Want:  map[string]any{"ok": true, "total_lines": 4, "encoding": "utf-16le"},
			Files: []string{"utf16.txt"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			after, _ := c.Args.Int("after_line")
			return editLines(ctx, c, idx, after+1, after, true, c.Args.String("content"))
		},
	}, {
		Name: "files.searchText", Tool: "file_search_text",
		Doc: "Search a text file with a regular expression (RE2 syntax, e.g. \"(?i)total\" for case-insensitive). " +
			"Returns matching lines with their 1-based line numbers. Files in other encodings than UTF-8 are decoded first.",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "pattern", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "RE2 regular expression", Required: true},
			{Name: "max_matches", Schema: hostapi.Schema{"type": "integer", "minimum": 1, "maximum": 100000}, Doc: "Stop after this many matches (default 1000)", Group: "options"}},
		Result: SearchResult{}, ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:   "Find a name with an accent in a Windows-1252 CSV",
			Args:  map[string]any{"id": "latin1.csv", "pattern": "Muñoz"},
			Want:  map[string]any{"matches": []any{map[string]any{"line": 2, "content": "Muñoz,Málaga,1200"}}, "truncated": false},
			Files: []string{"latin1.csv"},
		}, {
			Doc:   "Case-insensitive search, at most one match",
			Args:  map[string]any{"id": "notes.md", "pattern": "(?i)^- (budget|hire)", "max_matches": 1},
			Want:  map[string]any{"matches": []any{map[string]any{"line": 2, "content": "- Budget approved"}}, "truncated": true},
			Files: []string{"notes.md"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			re, err := regexp.Compile(c.Args.String("pattern"))
			if err != nil {
				return nil, apierr.New(apierr.ValidationFailed, "pattern is not a valid RE2 regular expression: %v", err)
			}
			limit := int(c.Args.IntOr("max_matches", 1000))
			out := SearchResult{Matches: []Match{}}
			err = c.WS.View(ctx, c.Args.String("id"), func(f *store.File, path string) error {
				li, err := textIndex(ctx, idx, f, path)
				if err != nil {
					return err
				}
				out.Encoding = encodingName(li.enc)
				fh, err := os.Open(path)
				if err != nil {
					return apierr.Wrap(apierr.FileReadFailed, err, "cannot open %q: %v", f.Name, err)
				}
				defer fh.Close()
				var r io.Reader = fh
				if !li.enc.IsUTF8() || li.textStart > 0 {
					r = li.enc.NewReader(fh)
				}
				sc := bufio.NewScanner(r)
				sc.Buffer(make([]byte, 64<<10), maxTextRead)
				for n := 1; sc.Scan(); n++ {
					if n%4096 == 0 {
						if err := ctx.Err(); err != nil {
							return apierr.From(err)
						}
					}
					b := sc.Bytes()
					if re.Match(b) {
						if len(out.Matches) == limit {
							out.Truncated = true
							return nil
						}
						out.Matches = append(out.Matches, Match{Line: n, Content: clip(toValidUTF8(bytes.TrimSuffix(b, []byte("\r"))), 4000)})
					}
				}
				if err := sc.Err(); err != nil {
					if errors.Is(err, bufio.ErrTooLong) {
						return apierr.New(apierr.TooLarge, "%q has a line longer than 16 MB; search it with files.table or read it with files.readBytes", f.Name)
					}
					return apierr.Wrap(apierr.FileReadFailed, err, "searching %q failed: %v", f.Name, err)
				}
				return nil
			})
			return out, err
		},
	}, {
		Name: "files.lineCount", Tool: "file_line_count",
		Doc:    "Number of lines in a text file (a final newline does not start another line).",
		Params: []hostapi.Param{hostapi.Ref("")},
		Result: 0, ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:   "Count the lines of a note",
			Args:  map[string]any{"id": "notes.md"},
			Want:  4,
			Files: []string{"notes.md"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			var n int
			err := c.WS.View(ctx, c.Args.String("id"), func(f *store.File, path string) error {
				li, err := textIndex(ctx, idx, f, path)
				if err == nil {
					n = li.totalLines
				}
				return err
			})
			return n, err
		},
	}}
}

// textIndex checks that f is text and returns its line index. A body
// whose MIME type names text is read as text; a body of unknown type
// (application/octet-stream, which BOM-less UTF-16 is) is read when its
// bytes turn out to be text in some encoding.
func textIndex(ctx context.Context, idx *indexCache, f *store.File, path string) (*lineIndex, error) {
	if err := requireText(f); err != nil {
		return nil, err
	}
	if !isTextMIME(f.MimeType) && f.Size > 0 && looksBinary(path) {
		return nil, notText(f) // refused before its bytes are indexed
	}
	li, err := idx.get(ctx, f.SHA256, path)
	if err != nil {
		return nil, err
	}
	if li.binary && !isTextMIME(f.MimeType) && f.Size > 0 {
		return nil, notText(f)
	}
	return li, nil
}

// looksBinary reports whether the start of the body at path is binary
// content rather than text in any encoding.
func looksBinary(path string) bool {
	fh, err := os.Open(path)
	if err != nil {
		return false // the index build reports the error
	}
	defer fh.Close()
	head := make([]byte, textenc.SniffBytes)
	n, _ := io.ReadFull(fh, head)
	_, err = textenc.DetectBytes(head[:completeRunes(head[:n])])
	return errors.Is(err, textenc.ErrBinary)
}

// editLines replaces lines start..end with content, or with insert set
// (and end = start-1) inserts content before line start. The new text is
// written in the file's encoding; when it cannot be, the whole file is
// rewritten as UTF-8.
func editLines(ctx context.Context, c *hostapi.Call, idx *indexCache, start, end int64, insert bool, content string) (any, error) {
	var total int
	var change EncodingChange
	_, err := c.WS.Modify(ctx, c.Args.String("id"), func(f *store.File, path string, out io.Writer) error {
		li, err := textIndex(ctx, idx, f, path)
		if err != nil {
			return err
		}
		// Compare as int64 before anything becomes an int: a line number
		// past the end is an error, never a wrapped offset.
		lines := int64(li.totalLines)
		switch {
		case insert && start-1 > lines:
			return apierr.New(apierr.ValidationFailed, "after_line %d is past the end: %q has %d lines", start-1, f.Name, lines)
		case !insert && end < start:
			return apierr.New(apierr.ValidationFailed, "end_line %d is before start_line %d", end, start)
		case !insert && end > lines:
			return apierr.New(apierr.ValidationFailed, "lines %d-%d are out of range: %q has %d lines", start, end, f.Name, lines)
		}
		fh, from, to, err := openLines(f, path, li, int(start), int(end))
		if err != nil {
			return err
		}
		defer fh.Close()
		// Keep the file's line structure: what follows the new text still
		// starts on its own line, and a file that ended with a newline still does.
		followed := end < lines || li.endsWithNL
		if content != "" && !strings.HasSuffix(content, "\n") && followed {
			content += "\n"
		}
		if content != "" && from == li.size && li.size > li.textStart && !li.endsWithNL {
			content = "\n" + content // appending after a last line that has no newline
		}
		removed := int64(0)
		if !insert {
			removed = end - start + 1
		}
		total = int(lines - removed + int64(countLines(strings.TrimPrefix(content, "\n"))))
		change.Encoding = encodingName(li.enc)

		enc := li.enc
		if li.size == 0 {
			enc = textenc.UTF8
		}
		if body, err := enc.Encode(content); err == nil {
			return writeSpliced(out, fh, from, to, li.size, body)
		}
		// The new text needs UTF-8: decode the rest of the file around it.
		change = EncodingChange{ConvertedFrom: li.enc.String()}
		if err := copyDecoded(out, li, io.NewSectionReader(fh, li.textStart, from-li.textStart)); err != nil {
			return err
		}
		if _, err := io.WriteString(out, content); err != nil {
			return err
		}
		return copyDecoded(out, li, io.NewSectionReader(fh, to, li.size-to))
	})
	if err != nil {
		return nil, err
	}
	return LinesResult{OK: true, TotalLines: total, EncodingChange: change}, nil
}

// writeSpliced writes the body with bytes [from, to) replaced by mid.
func writeSpliced(out io.Writer, fh io.ReaderAt, from, to, size int64, mid []byte) error {
	if _, err := io.Copy(out, io.NewSectionReader(fh, 0, from)); err != nil {
		return err
	}
	if _, err := out.Write(mid); err != nil {
		return err
	}
	_, err := io.Copy(out, io.NewSectionReader(fh, to, size-to))
	return err
}

// copyDecoded writes the text of r, which holds whole lines in li's
// encoding, as UTF-8.
func copyDecoded(out io.Writer, li *lineIndex, r io.Reader) error {
	if li.enc.IsUTF8() {
		_, err := io.Copy(out, r)
		return err
	}
	_, err := io.Copy(out, li.enc.NewReader(r))
	return err
}

// openLines opens a body and finds the byte range [from, to) holding lines
// start..end (end = start-1 gives the empty range before line start).
func openLines(f *store.File, path string, li *lineIndex, start, end int) (fh *os.File, from, to int64, err error) {
	fh, err = os.Open(path)
	if err != nil {
		return nil, 0, 0, apierr.Wrap(apierr.FileReadFailed, err, "cannot open %q: %v", f.Name, err)
	}
	if from, to, err = li.lineRange(fh, start, end); err != nil {
		fh.Close()
		return nil, 0, 0, err
	}
	return fh, from, to, nil
}

// countLines counts lines the way the line index does.
func countLines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// textMIMEs lists non-text/* types that are text all the same.
var textMIMEs = map[string]bool{
	"application/json": true, "application/x-ndjson": true, "application/xml": true, "application/yaml": true,
	"application/toml": true, "application/sql": true, "application/javascript": true, "image/svg+xml": true,
	"application/x-sh": true, "application/x-php": true, "application/x-subrip": true, "application/rtf": false,
}

func isTextMIME(m string) bool { return strings.HasPrefix(m, "text/") || textMIMEs[m] }

// requireText refuses files whose type is known not to be text, pointing
// to the API that fits them. Bodies of unknown type are checked by their
// bytes (textIndex).
func requireText(f *store.File) error {
	if f.Size == 0 || isTextMIME(f.MimeType) || f.MimeType == "application/octet-stream" {
		return nil
	}
	return notText(f)
}

func notText(f *store.File) error {
	m := f.MimeType
	hint := "use files.readBytes for raw bytes"
	switch {
	case strings.Contains(m, "spreadsheet") || strings.HasSuffix(f.Name, ".xlsx"):
		hint = "use files.spreadsheet.* (spreadsheet_* tools) for workbooks"
	case m == "application/pdf":
		hint = "use files.pdf.extractText (pdf_extract_text) for PDFs"
	case strings.HasPrefix(m, "image/"):
		hint = "use files.image.* (image_* tools) for images"
	}
	return apierr.New(apierr.UnsupportedFormat, "%q is %s, not text; %s", f.Name, m, hint)
}

// toValidUTF8 is the text of b with invalid bytes as U+FFFD.
func toValidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
