package spreadsheet

import (
	"archive/zip"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Limits on what a workbook may inflate to. Sheet XML is streamed, so its
// limit bounds time, not memory; the parts decoded whole (workbook, rels,
// styles) and the shared strings table are held in memory.
const (
	maxUnzipTotal   = 2 << 30   // sum of declared entry sizes
	maxSmallPart    = 64 << 20  // workbook.xml, *.rels, styles.xml
	maxSharedString = 256 << 20 // sharedStrings.xml
)

// workbook is an xlsx opened for streaming reads: the zip directory, the
// sheet list and the workbook-wide settings. Sheets and shared strings are
// read lazily, entry by entry.
type workbook struct {
	zr       *zip.ReadCloser
	entries  map[string]*zip.File // lower-cased, forward-slash names
	sheets   []sheetEntry
	date1904 bool
	sstPath  string
	stylePth string
	styles   *styleTable
}

// sheetEntry is one sheet of the workbook, in tab order.
type sheetEntry struct {
	Name   string
	Path   string // zip entry name
	Kind   string // worksheet, chartsheet, dialogsheet, macrosheet
	Hidden bool
}

func readFailed(err error, what string) error {
	return apierr.Wrap(apierr.FileReadFailed, err,
		"the workbook could not be read: %s (%v); the file is damaged or truncated — upload it again or re-save it as .xlsx", what, err)
}

// parseError is the coded error for a failed pass over a sheet's XML:
// coded errors pass on, and a pass cut short by ctx is a timeout, not
// damage.
func parseError(ctx context.Context, err error, what string) error {
	switch {
	case coded(err):
		return err
	case ctx.Err() != nil:
		return apierr.From(ctx.Err())
	}
	return readFailed(err, what)
}

// openWorkbook opens an xlsx file and reads its sheet list.
func openWorkbook(p string) (*workbook, error) {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return nil, readFailed(err, "its zip directory is damaged")
	}
	wb := &workbook{zr: zr, entries: make(map[string]*zip.File, len(zr.File))}
	ok := false
	defer func() {
		if !ok {
			zr.Close()
		}
	}()
	var total uint64
	for _, f := range zr.File {
		total += f.UncompressedSize64
		if total > maxUnzipTotal || f.UncompressedSize64 > maxUnzipTotal {
			return nil, apierr.New(apierr.TooLarge,
				"the workbook inflates to more than %d MB, over the limit of %d MB (a zip bomb or an extremely large workbook); split the data or export it as CSV",
				total>>20, maxUnzipTotal>>20)
		}
		wb.entries[strings.ToLower(strings.ReplaceAll(f.Name, "\\", "/"))] = f
	}
	if err := wb.readStructure(); err != nil {
		return nil, err
	}
	ok = true
	return wb, nil
}

func (wb *workbook) Close() error { return wb.zr.Close() }

func (wb *workbook) entry(name string) *zip.File {
	return wb.entries[strings.ToLower(strings.TrimPrefix(name, "/"))]
}

// open opens a zip entry for streaming with a hard cap on inflated bytes
// (archive/zip already refuses to read past an entry's declared size).
func (wb *workbook) open(name string, limit int64) (io.ReadCloser, error) {
	f := wb.entry(name)
	if f == nil {
		return nil, readFailed(fmt.Errorf("missing part %s", name), "a part the workbook refers to is missing")
	}
	if int64(f.UncompressedSize64) > limit {
		return nil, apierr.New(apierr.TooLarge, "the workbook part %s inflates to %d MB, over the limit of %d MB", name, f.UncompressedSize64>>20, limit>>20)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, readFailed(err, "a part cannot be opened")
	}
	return limitedReadCloser{io.LimitReader(rc, limit+1), rc}, nil
}

type limitedReadCloser struct {
	io.Reader
	io.Closer
}

// decodePart decodes a small XML part into v.
func (wb *workbook) decodePart(name string, v any) error {
	rc, err := wb.open(name, maxSmallPart)
	if err != nil {
		return err
	}
	defer rc.Close()
	d := xml.NewDecoder(rc)
	d.Strict = false
	d.CharsetReader = func(label string, input io.Reader) (io.Reader, error) {
		if strings.EqualFold(label, "utf-8") || strings.EqualFold(label, "utf8") {
			return input, nil
		}
		return nil, fmt.Errorf("unsupported XML encoding %q", label)
	}
	if err := d.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return readFailed(err, "the XML of "+name+" is malformed")
	}
	return nil
}

type xRels struct {
	Rels []struct {
		ID         string `xml:"Id,attr"`
		Type       string `xml:"Type,attr"`
		Target     string `xml:"Target,attr"`
		TargetMode string `xml:"TargetMode,attr"`
	} `xml:"Relationship"`
}

type xWorkbook struct {
	Pr struct {
		Date1904 string `xml:"date1904,attr"`
	} `xml:"workbookPr"`
	Sheets []struct {
		Name  string     `xml:"name,attr"`
		State string     `xml:"state,attr"`
		Attrs []xml.Attr `xml:",any,attr"`
	} `xml:"sheets>sheet"`
}

// relsFor returns the relationships part of a part ("xl/workbook.xml" →
// "xl/_rels/workbook.xml.rels") resolved to targets keyed by id.
func (wb *workbook) rels(part string) (map[string][2]string, error) {
	relPath := path.Join(path.Dir(part), "_rels", path.Base(part)+".rels")
	out := map[string][2]string{}
	if wb.entry(relPath) == nil {
		return out, nil
	}
	var r xRels
	if err := wb.decodePart(relPath, &r); err != nil {
		return nil, err
	}
	for _, rel := range r.Rels {
		if strings.EqualFold(rel.TargetMode, "External") {
			continue
		}
		target := strings.ReplaceAll(rel.Target, "\\", "/")
		if strings.HasPrefix(target, "/") {
			target = strings.TrimPrefix(target, "/")
		} else {
			target = path.Join(path.Dir(part), target)
		}
		out[rel.ID] = [2]string{relKind(rel.Type), target}
	}
	return out, nil
}

// relKind keeps the last segment of a relationship type URI, which is the
// same in transitional and strict OOXML ("…/worksheet").
func relKind(t string) string {
	if i := strings.LastIndexByte(t, '/'); i >= 0 {
		return t[i+1:]
	}
	return t
}

func (wb *workbook) readStructure() error {
	wbPath := ""
	if root := wb.entry("_rels/.rels"); root != nil {
		var r xRels
		if err := wb.decodePart("_rels/.rels", &r); err != nil {
			return err
		}
		for _, rel := range r.Rels {
			if relKind(rel.Type) == "officeDocument" {
				wbPath = strings.TrimPrefix(strings.ReplaceAll(rel.Target, "\\", "/"), "/")
				break
			}
		}
	}
	if wbPath == "" || wb.entry(wbPath) == nil {
		wbPath = "xl/workbook.xml"
	}
	if wb.entry(wbPath) == nil {
		if f := wb.entry("mimetype"); f != nil {
			return apierr.New(apierr.UnsupportedFormat,
				"this is an OpenDocument file, not an xlsx workbook; save it as .xlsx (Excel 2007+) and upload it again")
		}
		return apierr.New(apierr.UnsupportedFormat,
			"the zip archive holds no spreadsheet (no xl/workbook.xml); files.spreadsheet.* reads .xlsx/.xlsm workbooks and .csv/.tsv files")
	}
	var x xWorkbook
	if err := wb.decodePart(wbPath, &x); err != nil {
		return err
	}
	wb.date1904 = x.Pr.Date1904 == "1" || strings.EqualFold(x.Pr.Date1904, "true")
	rels, err := wb.rels(wbPath)
	if err != nil {
		return err
	}
	for _, rel := range rels {
		switch rel[0] {
		case "sharedStrings":
			wb.sstPath = rel[1]
		case "styles":
			wb.stylePth = rel[1]
		}
	}
	for _, s := range x.Sheets {
		e := sheetEntry{Name: s.Name, Hidden: s.State == "hidden" || s.State == "veryHidden"}
		for _, a := range s.Attrs {
			if a.Name.Local == "id" && strings.Contains(a.Name.Space, "relationships") {
				if rel, ok := rels[a.Value]; ok {
					e.Kind, e.Path = rel[0], rel[1]
				}
			}
		}
		wb.sheets = append(wb.sheets, e)
	}
	if len(wb.sheets) == 0 {
		return readFailed(errors.New("no sheets"), "the workbook lists no sheets")
	}
	return nil
}

// styleTable returns per-style-index date kinds, read on first use.
func (wb *workbook) styleTable() (*styleTable, error) {
	if wb.styles != nil {
		return wb.styles, nil
	}
	st := &styleTable{}
	if wb.stylePth != "" && wb.entry(wb.stylePth) != nil {
		var x xStyles
		if err := wb.decodePart(wb.stylePth, &x); err != nil {
			return nil, err
		}
		st = newStyleTable(x)
	}
	wb.styles = st
	return st, nil
}

// openSheet opens a worksheet part for streaming.
func (wb *workbook) openSheet(i int) (io.ReadCloser, error) {
	e := wb.sheets[i]
	if e.Kind != "worksheet" {
		kind := e.Kind
		if kind == "" {
			kind = "sheet of an unknown kind"
		}
		return nil, apierr.New(apierr.UnsupportedFormat, "sheet %q is a %s, not a worksheet; it holds no cells to read", e.Name, kind)
	}
	return wb.open(e.Path, maxUnzipTotal)
}

// partSize is the declared inflated size of a part (0 if missing).
func (wb *workbook) partSize(name string) uint64 {
	if f := wb.entry(name); f != nil {
		return f.UncompressedSize64
	}
	return 0
}

// inflatedSize is the sum of the parts' declared sizes.
func (wb *workbook) inflatedSize() uint64 {
	var total uint64
	for _, f := range wb.zr.File {
		total += f.UncompressedSize64
	}
	return total
}

// verify inflates every part once so that a damaged one (bad CRC, a lying
// size) is refused before an edit: excelize reads small parts ignoring
// such errors and would write the truncated data back. On the way it
// notes whether any worksheet holds a formula.
func (wb *workbook) verify(ctx context.Context) (formulas bool, err error) {
	sheets := map[*zip.File]bool{}
	for _, s := range wb.sheets {
		if f := wb.entry(s.Path); f != nil && s.Kind == "worksheet" {
			sheets[f] = true
		}
	}
	for _, f := range wb.zr.File {
		if err := ctx.Err(); err != nil {
			return false, apierr.From(err)
		}
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return false, readFailed(err, "part "+f.Name+" cannot be opened")
		}
		if sheets[f] && !formulas {
			formulas, err = containsFormulaTag(ctx, rc)
			if err == nil {
				_, err = io.Copy(io.Discard, rc)
			}
		} else {
			_, err = io.Copy(io.Discard, rc)
		}
		rc.Close()
		if err != nil {
			if ctx.Err() != nil {
				return false, apierr.From(ctx.Err())
			}
			return false, readFailed(err, "part "+f.Name+" is damaged")
		}
	}
	return formulas, nil
}
