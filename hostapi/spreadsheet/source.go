package spreadsheet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/richardlehane/mscfb"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

type srcKind int

const (
	srcXLSX srcKind = iota
	srcCSV
)

var (
	zipMagic = []byte("PK\x03\x04")
	oleMagic = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}
)

// csvHint is the way out SPEC 3 gives for writes to delimited text.
const csvHint = "spreadsheet edits need an .xlsx workbook; convert it first with files.table.export(ref, {format: \"xlsx\", targetPath: \"name.xlsx\"}) (meta-tool table_export) and edit the new file"

// detectKind decides from the bytes (and, for text, the name) whether a
// file is an xlsx workbook or delimited text, and names the way out for
// everything else.
func detectKind(f *store.File, p string) (srcKind, error) {
	fh, err := os.Open(p)
	if err != nil {
		return 0, apierr.Wrap(apierr.FileReadFailed, err, "cannot open %q: %v", f.Name, err)
	}
	defer fh.Close()
	head := make([]byte, 8)
	n, _ := io.ReadFull(fh, head)
	head = head[:n]
	ext := strings.ToLower(filepath.Ext(f.Name))
	switch {
	case bytes.HasPrefix(head, zipMagic) || bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return srcXLSX, nil
	case bytes.HasPrefix(head, oleMagic):
		if isEncryptedOOXML(fh) {
			return 0, apierr.New(apierr.UnsupportedFormat,
				"%q is a password-protected (encrypted) workbook; remove the password in Excel (File → Info → Protect Workbook) and upload it again", f.Name)
		}
		return 0, apierr.New(apierr.UnsupportedFormat,
			"%q is a legacy Excel 97–2003 (.xls) or other OLE file; save it as .xlsx and upload it again", f.Name)
	case ext == ".csv" || ext == ".tsv" || ext == ".tab" || ext == ".txt":
		return srcCSV, nil
	case n == 0:
		return 0, apierr.New(apierr.UnsupportedFormat, "%q is empty; it is not a workbook. Create one with files.table.export or upload an .xlsx", f.Name)
	}
	if ext == ".xlsx" || ext == ".xlsm" {
		return 0, apierr.New(apierr.FileReadFailed, "%q is named like a workbook but is not a zip archive (damaged or truncated); upload it again", f.Name)
	}
	return 0, apierr.New(apierr.UnsupportedFormat,
		"%q (%s) is not a spreadsheet; files.spreadsheet.* reads .xlsx/.xlsm workbooks and .csv/.tsv files", f.Name, f.MimeType)
}

// isEncryptedOOXML reports whether an OLE compound file is an encrypted
// OOXML package (it then holds an EncryptedPackage stream).
func isEncryptedOOXML(ra io.ReaderAt) (enc bool) {
	defer func() {
		if recover() != nil {
			enc = false
		}
	}()
	doc, err := mscfb.New(ra)
	if err != nil {
		return false
	}
	for i := 0; i < 10000; i++ {
		e, err := doc.Next()
		if err != nil {
			return false
		}
		if e.Name == "EncryptedPackage" || e.Name == "EncryptionInfo" {
			return true
		}
	}
	return false
}

// source is a spreadsheet file opened for reading under its read lock.
type source struct {
	svc    *service
	file   *store.File
	path   string
	kind   srcKind
	wb     *workbook
	sheets []sheetEntry
	rv     *resolver
}

func (svc *service) openSource(f *store.File, p string) (*source, error) {
	k, err := detectKind(f, p)
	if err != nil {
		return nil, err
	}
	src := &source{svc: svc, file: f, path: p, kind: k}
	if k == srcCSV {
		src.sheets = []sheetEntry{{Name: csvSheetName, Kind: "worksheet"}}
		return src, nil
	}
	wb, err := openWorkbook(p)
	if err != nil {
		return nil, err
	}
	src.wb, src.sheets = wb, wb.sheets
	return src, nil
}

func (src *source) Close() {
	if src.wb != nil {
		src.wb.Close()
	}
}

func (src *source) sheetNames() []string {
	out := make([]string, len(src.sheets))
	for i, s := range src.sheets {
		out[i] = s.Name
	}
	return out
}

// sheetIndex resolves the sheet argument: a name (exact, then
// case-insensitive, as Excel's names are) or a 1-based index.
func (src *source) sheetIndex(arg any) (int, error) {
	return resolveSheet(src.sheetNames(), arg)
}

func resolveSheet(names []string, arg any) (int, error) {
	list := quoteList(names)
	switch a := arg.(type) {
	case string:
		for i, n := range names {
			if n == a {
				return i, nil
			}
		}
		for i, n := range names {
			if strings.EqualFold(n, a) {
				return i, nil
			}
		}
		if n, err := strconv.Atoi(strings.TrimSpace(a)); err == nil && n >= 1 && n <= len(names) {
			return n - 1, nil
		}
		return 0, apierr.New(apierr.NotFound, "sheet %q not found; sheets are: %s", a, list)
	case int64:
		if a < 1 || a > int64(len(names)) {
			return 0, apierr.New(apierr.NotFound, "sheet %d does not exist; the workbook has %d sheet(s): %s", a, len(names), list)
		}
		return int(a) - 1, nil
	case nil:
		return 0, apierr.New(apierr.ValidationFailed, "sheet is missing; pass a sheet name or a 1-based index; sheets are: %s", list)
	}
	// The registry's schema admits only a name or an integer.
	return 0, apierr.New(apierr.ValidationFailed, "sheet must be a name or a 1-based index; sheets are: %s", list)
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// resolver prepares shared strings and styles for value decoding.
func (src *source) resolver() (*resolver, error) {
	if src.rv != nil {
		return src.rv, nil
	}
	st, err := src.wb.styleTable()
	if err != nil {
		return nil, err
	}
	src.rv = &resolver{sst: newSharedStrings(src.wb), styles: st, date1904: src.wb.date1904}
	return src.rv, nil
}

// stream reads sheet idx from the top and calls fn for every row holding
// values; rows before from are parsed but not decoded.
func (src *source) stream(ctx context.Context, idx, from int, fn func(row int, vals []colValue) (bool, error)) error {
	if src.kind == srcCSV {
		return streamCSV(ctx, src.path, src.file.Name, from, fn)
	}
	rv, err := src.resolver()
	if err != nil {
		return err
	}
	rc, err := src.wb.openSheet(idx)
	if err != nil {
		return err
	}
	defer rc.Close()
	var vals []colValue
	err = scanSheet(ctx, rc, false, func(row int, cells []rawCell) (bool, error) {
		if row < from {
			return false, nil
		}
		vals = vals[:0]
		for i := range cells {
			v, err := rv.resolve(&cells[i])
			if err != nil {
				return false, err
			}
			if v.k != kEmpty {
				vals = append(vals, colValue{col: cells[i].col, v: v})
			}
		}
		if len(vals) == 0 {
			return false, nil
		}
		return fn(row, vals)
	})
	if err != nil {
		return parseError(ctx, err, fmt.Sprintf("sheet %q could not be parsed", src.sheets[idx].Name))
	}
	return nil
}
