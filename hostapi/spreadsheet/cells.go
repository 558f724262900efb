package spreadsheet

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// cellWrite is one cell to write: kEmpty clears the value, kPending is a
// formula (s), kDate a date serial (n) with its kind.
type cellWrite struct {
	k  kind
	dk dateKind
	n  float64
	s  string
}

// parseCellWrite converts one cell of writeRange/writeCell, given in the
// registry's canonical form (integers int64, other numbers float64; NaN and
// infinities were refused by the decoder, naming the cell).
func parseCellWrite(v any, date1904 bool) (cellWrite, error) {
	switch x := v.(type) {
	case nil:
		return cellWrite{}, nil
	case bool:
		if x {
			return cellWrite{k: kBool, n: 1}, nil
		}
		return cellWrite{k: kBool}, nil
	case int64:
		// The decoder keeps int64 within ±2^53 here, where float64 is exact.
		return cellWrite{k: kNumber, n: float64(x)}, nil
	case float64:
		return cellWrite{k: kNumber, n: x}, nil
	case string:
		if x == "" {
			return cellWrite{}, nil // empty text clears the cell, as in Excel
		}
		if len(x) > excelize.TotalCellChars && utf8.RuneCountInString(x) > excelize.TotalCellChars {
			return cellWrite{}, fmt.Errorf("the text has %d characters; a cell holds at most %d", utf8.RuneCountInString(x), excelize.TotalCellChars)
		}
		if isISODate(x) {
			if serial, dk, ok := isoToSerial(x, date1904); ok {
				return cellWrite{k: kDate, n: serial, dk: dk}, nil
			}
		}
		return cellWrite{k: kString, s: x}, nil
	case map[string]any:
		f, ok := x["formula"].(string)
		if !ok || len(x) != 1 {
			return cellWrite{}, errors.New(`an object cell must be {"formula": "SUM(A1:A3)"}`)
		}
		f = strings.TrimPrefix(strings.TrimSpace(f), "=")
		if f == "" {
			return cellWrite{}, errors.New("the formula is empty")
		}
		return cellWrite{k: kPending, s: f}, nil
	case []any:
		return cellWrite{}, errors.New("a cell is a number, text, boolean, null or {\"formula\": \"…\"}, not an array (data is an array of rows, each an array of cells)")
	}
	return cellWrite{}, fmt.Errorf("a cell is a number, text, boolean, null or {\"formula\": \"…\"}, not %T", v)
}

// cellBlock is a block of new values (writeRange's data, writeCell's
// value) in the canonical form the registry decoded. The cells are checked
// once by newCellBlock and converted as they are written, so that a
// million cells are not held twice.
type cellBlock struct {
	rows     [][]any
	date1904 bool
	width    int // cells in the longest row
	cells    int
	formulas bool
	// dates has, per column of the block, bit 1<<dateKind set for each
	// kind of date written there (they need a date style).
	dates []uint8
}

// newCellBlock checks raw, an array of rows of cells.
func newCellBlock(raw any, date1904 bool) (*cellBlock, error) {
	rows, ok := raw.([]any)
	if !ok {
		return nil, apierr.New(apierr.ValidationFailed, "data must be an array of rows, e.g. [[\"Name\", \"Total\"], [\"Ann\", 12]]")
	}
	b := &cellBlock{rows: make([][]any, len(rows)), date1904: date1904}
	for i, r := range rows {
		cells, ok := r.([]any)
		if !ok {
			return nil, apierr.New(apierr.ValidationFailed, "data[%d] must be an array of cells (a row), e.g. [\"Ann\", 12]", i)
		}
		b.rows[i] = cells
		b.cells += len(cells)
		if len(cells) > b.width {
			b.dates = append(b.dates, make([]uint8, len(cells)-b.width)...)
			b.width = len(cells)
		}
		for j, v := range cells {
			cw, err := parseCellWrite(v, date1904)
			if err != nil {
				return nil, apierr.New(apierr.ValidationFailed, "data[%d][%d]: %v", i, j, err)
			}
			switch cw.k {
			case kPending:
				b.formulas = true
			case kDate:
				b.dates[j] |= 1 << cw.dk
			}
		}
	}
	return b, nil
}

// at is cell j of row i (checked already).
func (b *cellBlock) at(i, j int) cellWrite {
	cw, _ := parseCellWrite(b.rows[i][j], b.date1904)
	return cw
}

// empty reports whether cell j of row i clears rather than writes.
func (b *cellBlock) empty(i, j int) bool {
	v := b.rows[i][j]
	return v == nil || v == ""
}

// used is the area the block's non-empty cells cover when its top-left is
// at (r1, c1); ok is false when every cell is empty.
func (b *cellBlock) used(r1, c1 int) (a area, ok bool) {
	for i, row := range b.rows {
		lo, hi := -1, -1
		for j := range row {
			if !b.empty(i, j) {
				if lo < 0 {
					lo = j
				}
				hi = j
			}
		}
		if lo < 0 {
			continue
		}
		r := r1 + i
		if !ok {
			a, ok = area{r1: r, r2: r, c1: c1 + lo, c2: c1 + hi}, true
			continue
		}
		a.r2, a.c1, a.c2 = r, min(a.c1, c1+lo), max(a.c2, c1+hi)
	}
	return a, ok
}

// parseDay reads "2024-01-15" as time.Parse does (refusing days a month
// does not have) at a fraction of its cost: big writes hold many dates.
func parseDay(s string) (time.Time, error) {
	num := func(from, to int) int {
		n := 0
		for i := from; i < to; i++ {
			n = n*10 + int(s[i]-'0')
		}
		return n
	}
	if !isISODate(s) || len(s) != 10 {
		return time.Time{}, fmt.Errorf("%q is not a date", s)
	}
	y, m, d := num(0, 4), num(5, 7), num(8, 10)
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if m < 1 || m > 12 || t.Day() != d || t.Month() != time.Month(m) {
		return time.Time{}, fmt.Errorf("%q is not a date", s)
	}
	return t, nil
}

// isoToSerial converts an ISO date/time to an Excel serial.
func isoToSerial(s string, date1904 bool) (float64, dateKind, bool) {
	dk := dateOnly
	var t time.Time
	var err error
	if len(s) == 10 {
		t, err = parseDay(s)
	} else {
		dk = dateTime
		s = strings.Replace(strings.TrimSuffix(s, "Z"), " ", "T", 1)
		layout := "2006-01-02T15:04"
		if len(s) > 16 {
			layout = "2006-01-02T15:04:05.999999999"
		}
		t, err = time.Parse(layout, s)
	}
	if err != nil {
		return 0, 0, false
	}
	since := func(epoch time.Time) float64 {
		return float64(t.Unix()-epoch.Unix())/86400 + float64(t.Nanosecond())/86400e9
	}
	switch {
	case t.Year() > 9999:
		return 0, 0, false
	case date1904:
		if t.Before(epoch1904) {
			return 0, 0, false
		}
		return since(epoch1904), dk, true
	case t.Before(time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)):
		return 0, 0, false
	case t.Before(time.Date(1900, 3, 1, 0, 0, 0, 0, time.UTC)):
		return since(epoch1900) - 1, dk, true // Excel's phantom 1900-02-29
	}
	return since(epoch1900), dk, true
}
