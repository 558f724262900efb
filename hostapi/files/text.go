package files

import (
	"bufio"
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// maxTextRead caps one readText answer; page through bigger files by lines.
const maxTextRead = 16 << 20

// ReadTextResult is readText's answer.
type ReadTextResult struct {
	Content    string `json:"content"`
	TotalLines int    `json:"totalLines"`
}

// WriteResult is the {ok,size} answer of writes.
type WriteResult struct {
	OK   bool  `json:"ok"`
	Size int64 `json:"size"`
}

// LinesResult is the {ok,totalLines} answer of line edits.
type LinesResult struct {
	OK         bool `json:"ok"`
	TotalLines int  `json:"totalLines"`
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
}

func textOps(idx *indexCache) []hostapi.Op {
	line := func(name, doc string, required bool, group string) hostapi.Param {
		return hostapi.Param{Name: name, Schema: hostapi.Integer(1), Doc: doc, Required: required, Group: group}
	}
	return []hostapi.Op{{
		Name: "files.readText", Tool: "file_read_text",
		Doc: "Read a text file, whole or a range of lines (1-based, inclusive). Returns the content and the file's total line count; " +
			"page through big files with start_line/end_line instead of reading them whole.",
		Params: []hostapi.Param{hostapi.Ref(""),
			line("start_line", "First line to read (1-based). Omit to start from the beginning.", false, "options"),
			line("end_line", "Last line to read (inclusive). Omit to read to the end.", false, "options")},
		Result: ReadTextResult{}, ReadOnly: true, Idempotent: true,
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			var out ReadTextResult
			err := c.WS.View(ctx, c.Args.String("id"), func(f *store.File, path string) error {
				if err := requireText(f); err != nil {
					return err
				}
				li, err := idx.get(f.SHA256, path)
				if err != nil {
					return err
				}
				out.TotalLines = li.totalLines
				start := int(c.Args.IntOr("start_line", 1))
				end := int(c.Args.IntOr("end_line", int64(li.totalLines)))
				if li.totalLines == 0 {
					return nil
				}
				if end < start {
					return apierr.New(apierr.ValidationFailed, "end_line %d is before start_line %d", end, start)
				}
				if start > li.totalLines {
					return apierr.New(apierr.ValidationFailed, "start_line %d is past the end: %q has %d lines", start, f.Name, li.totalLines)
				}
				end = min(end, li.totalLines)
				fh, from, to, err := openLines(f, path, li, start, end)
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
				out.Content = strings.ToValidUTF8(string(buf), "\uFFFD")
				return nil
			})
			return out, err
		},
	}, {
		Name: "files.writeText", Tool: "file_write_text",
		Doc:    "Replace a text file's whole content (the file is created if it does not exist). The previous version can be restored with file_revert.",
		Params: []hostapi.Param{hostapi.Ref(""), {Name: "content", Schema: hostapi.String(), Doc: "Full text content to write", Required: true}},
		Result: WriteResult{}, Idempotent: true,
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			ref, content := c.Args.String("id"), c.Args.String("content")
			f, err := c.WS.Resolve(ctx, ref)
			if apierr.Is(err, apierr.NotFound) && !store.IsID(ref) {
				f, err = c.WS.Create(ctx, store.CreateOptions{Name: ref, Source: store.SourceCreated}, strings.NewReader(content))
				if err != nil {
					return nil, err
				}
				return WriteResult{true, f.Size}, nil
			}
			if err != nil {
				return nil, err
			}
			if err := requireText(f); err != nil {
				return nil, err
			}
			f, err = c.WS.Modify(ctx, f.ID, func(_ *store.File, _ string, out io.Writer) error {
				_, err := io.WriteString(out, content)
				return err
			})
			if err != nil {
				return nil, err
			}
			return WriteResult{true, f.Size}, nil
		},
	}, {
		Name: "files.replaceLines", Tool: "file_replace_lines",
		Doc: "Replace lines start_line..end_line (1-based, inclusive) of a text file with new content (which may have more or fewer lines; " +
			"empty content deletes the lines). Returns the new total line count.",
		Params: []hostapi.Param{hostapi.Ref(""),
			line("start_line", "First line to replace (1-based)", true, ""),
			line("end_line", "Last line to replace (inclusive)", true, ""),
			{Name: "content", Schema: hostapi.String(), Doc: "Replacement text", Required: true}},
		Result: LinesResult{},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			start, _ := c.Args.Int("start_line")
			end, _ := c.Args.Int("end_line")
			return editLines(ctx, c, idx, int(start), int(end), false, c.Args.String("content"))
		},
	}, {
		Name: "files.insertLines", Tool: "file_insert_lines",
		Doc: "Insert text after line after_line of a text file (0 inserts at the top). Returns the new total line count.",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "after_line", Schema: hostapi.Integer(0), Doc: "Insert after this line (0 = at the top)", Required: true},
			{Name: "content", Schema: hostapi.String(), Doc: "Text to insert", Required: true}},
		Result: LinesResult{},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			after, _ := c.Args.Int("after_line")
			return editLines(ctx, c, idx, int(after)+1, int(after), true, c.Args.String("content"))
		},
	}, {
		Name: "files.searchText", Tool: "file_search_text",
		Doc: "Search a text file with a regular expression (RE2 syntax, e.g. \"(?i)total\" for case-insensitive). " +
			"Returns matching lines with their 1-based line numbers.",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "pattern", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "RE2 regular expression", Required: true},
			{Name: "max_matches", Schema: hostapi.Schema{"type": "integer", "minimum": 1, "maximum": 100000}, Doc: "Stop after this many matches (default 1000)", Group: "options"}},
		Result: SearchResult{}, ReadOnly: true, Idempotent: true,
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			re, err := regexp.Compile(c.Args.String("pattern"))
			if err != nil {
				return nil, apierr.New(apierr.ValidationFailed, "pattern is not a valid RE2 regular expression: %v", err)
			}
			limit := int(c.Args.IntOr("max_matches", 1000))
			out := SearchResult{Matches: []Match{}}
			err = c.WS.View(ctx, c.Args.String("id"), func(f *store.File, path string) error {
				if err := requireText(f); err != nil {
					return err
				}
				fh, err := os.Open(path)
				if err != nil {
					return apierr.Wrap(apierr.FileReadFailed, err, "cannot open %q: %v", f.Name, err)
				}
				defer fh.Close()
				sc := bufio.NewScanner(fh)
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
						out.Matches = append(out.Matches, Match{Line: n, Content: clip(strings.TrimSuffix(string(b), "\r"), 4000)})
					}
				}
				if err := sc.Err(); err != nil {
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
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			var n int
			err := c.WS.View(ctx, c.Args.String("id"), func(f *store.File, path string) error {
				if err := requireText(f); err != nil {
					return err
				}
				li, err := idx.get(f.SHA256, path)
				if err == nil {
					n = li.totalLines
				}
				return err
			})
			return n, err
		},
	}}
}

// editLines replaces lines start..end with content, or with insert set
// (and end = start-1) inserts content before line start.
func editLines(ctx context.Context, c *hostapi.Call, idx *indexCache, start, end int, insert bool, content string) (any, error) {
	var total int
	_, err := c.WS.Modify(ctx, c.Args.String("id"), func(f *store.File, path string, out io.Writer) error {
		if err := requireText(f); err != nil {
			return err
		}
		li, err := idx.get(f.SHA256, path)
		if err != nil {
			return err
		}
		switch {
		case insert && start-1 > li.totalLines:
			return apierr.New(apierr.ValidationFailed, "after_line %d is past the end: %q has %d lines", start-1, f.Name, li.totalLines)
		case !insert && end < start:
			return apierr.New(apierr.ValidationFailed, "end_line %d is before start_line %d", end, start)
		case !insert && end > li.totalLines:
			return apierr.New(apierr.ValidationFailed, "lines %d-%d are out of range: %q has %d lines", start, end, f.Name, li.totalLines)
		}
		fh, from, to, err := openLines(f, path, li, start, end)
		if err != nil {
			return err
		}
		defer fh.Close()
		// Keep the file's line structure: what follows the new text still
		// starts on its own line, and a file that ended with a newline still does.
		followed := end < li.totalLines || li.endsWithNL
		if content != "" && !strings.HasSuffix(content, "\n") && followed {
			content += "\n"
		}
		if content != "" && from == li.size && li.size > 0 && !li.endsWithNL {
			content = "\n" + content // appending after a last line that has no newline
		}
		if _, err := io.Copy(out, io.NewSectionReader(fh, 0, from)); err != nil {
			return err
		}
		if _, err := io.WriteString(out, content); err != nil {
			return err
		}
		if _, err := io.Copy(out, io.NewSectionReader(fh, to, li.size-to)); err != nil {
			return err
		}
		removed := 0
		if !insert {
			removed = end - start + 1
		}
		total = li.totalLines - removed + countLines(strings.TrimPrefix(content, "\n"))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return LinesResult{OK: true, TotalLines: total}, nil
}

// openLines opens a body and finds the byte range [from, to) holding lines
// start..end (end = start-1 gives the empty range before line start).
func openLines(f *store.File, path string, li *lineIndex, start, end int) (fh *os.File, from, to int64, err error) {
	fh, err = os.Open(path)
	if err != nil {
		return nil, 0, 0, apierr.Wrap(apierr.FileReadFailed, err, "cannot open %q: %v", f.Name, err)
	}
	if from, err = li.lineOffset(fh, start); err == nil {
		to, err = li.lineOffset(fh, end+1)
	}
	if err != nil {
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

// requireText refuses binary files in the text tier, pointing to the API
// that fits them.
func requireText(f *store.File) error {
	m := f.MimeType
	if f.Size == 0 || strings.HasPrefix(m, "text/") || textMIMEs[m] {
		return nil
	}
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
