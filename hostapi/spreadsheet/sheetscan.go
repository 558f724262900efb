package spreadsheet

import (
	"bytes"
	"context"
	"fmt"
	"io"
)

// rawCell is one <c> element as the sheet XML holds it, before shared
// strings, styles and dates are applied. Byte slices are valid only inside
// the row callback.
type rawCell struct {
	col     int
	typ     byte // 'n' number (default), 's' shared string, 'b', 'e', 'S' (t="str"), 'i' (inlineStr), 'd'
	style   int
	hasV    bool
	v       []byte
	hasF    bool
	f       []byte // formula text; empty for a shared formula's dependent cells
	fShared bool
	hasIS   bool
	is      []byte // inline string text
}

// rowFunc receives each row that has at least one cell with content. It
// returns stop=true to end the scan early.
type rowFunc func(row int, cells []rawCell) (stop bool, err error)

// scanSheet streams the <sheetData> of a worksheet part and calls fn for
// every row holding cells with content (keepEmpty: also cells that only
// carry a style). It checks ctx every few thousand rows.
func scanSheet(ctx context.Context, r io.Reader, keepEmpty bool, fn rowFunc) error {
	s := newXMLScanner(r, 64<<20)
	var (
		inData, inRow, inCell        bool
		inV, inF, inIS, inT          bool
		rphDepth                     int
		row, lastCol, rowsSinceCheck int
		cells                        []rawCell
		cur                          rawCell
		arena                        []byte
		vStart, fStart, isStart      int
	)
	for {
		k, err := s.next()
		if err != nil {
			return err
		}
		switch k {
		case tokEOF:
			return nil
		case tokText:
			switch {
			case inV:
				arena = appendText(arena, s.text, s.cdata)
			case inF:
				arena = appendText(arena, s.text, s.cdata)
			case inT && rphDepth == 0:
				arena = appendText(arena, s.text, s.cdata)
			}
		case tokStart:
			name := s.name
			switch {
			case !inData:
				if string(name) == "sheetData" {
					if s.empty {
						return nil
					}
					inData = true
				}
			case !inRow:
				if string(name) != "row" {
					continue
				}
				if v, ok := attrValue(s.attrs, "r"); ok {
					n, ok := atoiBytes(v, maxRows)
					if !ok || n < 1 {
						return fmt.Errorf("row number %q is outside 1..%d", truncBytes(v), maxRows)
					}
					row = n
				} else {
					row++
				}
				if row > maxRows {
					return fmt.Errorf("the sheet has more than %d rows", maxRows)
				}
				lastCol = 0
				cells = cells[:0]
				arena = arena[:0]
				inRow = !s.empty
				if rowsSinceCheck++; rowsSinceCheck >= 2048 {
					rowsSinceCheck = 0
					if err := ctx.Err(); err != nil {
						return err
					}
				}
			case !inCell:
				if string(name) != "c" {
					continue
				}
				cur = rawCell{typ: 'n'}
				inCell = true
				if v, ok := attrValue(s.attrs, "r"); ok {
					col := refColumn(v)
					if col < 1 || col > maxCols {
						return fmt.Errorf("cell reference %q is not valid", truncBytes(v))
					}
					cur.col = col
				} else {
					cur.col = lastCol + 1
				}
				if cur.col > maxCols {
					return fmt.Errorf("the sheet has more than %d columns", maxCols)
				}
				lastCol = cur.col
				if v, ok := attrValue(s.attrs, "s"); ok {
					cur.style, _ = atoiBytes(v, 1<<30)
				}
				if v, ok := attrValue(s.attrs, "t"); ok {
					cur.typ = cellType(v)
				}
				if s.empty {
					inCell = false
					if keepEmpty {
						cells = append(cells, cur)
					}
				}
			default:
				switch string(name) {
				case "v":
					cur.hasV = true
					inV = !s.empty
					vStart = len(arena)
				case "f":
					cur.hasF = true
					if t, ok := attrValue(s.attrs, "t"); ok && string(t) == "shared" {
						cur.fShared = true
					}
					inF = !s.empty
					fStart = len(arena)
				case "is":
					cur.hasIS = true
					inIS = !s.empty
					isStart = len(arena)
				case "rPh":
					if inIS && !s.empty {
						rphDepth++
					}
				case "t":
					if inIS && !s.empty {
						inT = true
					}
				}
			}
		case tokEnd:
			name := s.name
			switch {
			case inCell:
				switch string(name) {
				case "v":
					if inV {
						cur.v = arena[vStart:len(arena):len(arena)]
						inV = false
					}
				case "f":
					if inF {
						cur.f = arena[fStart:len(arena):len(arena)]
						inF = false
					}
				case "t":
					inT = false
				case "rPh":
					if rphDepth > 0 {
						rphDepth--
					}
				case "is":
					if inIS {
						cur.is = arena[isStart:len(arena):len(arena)]
						inIS, inT, rphDepth = false, false, 0
					}
				case "c":
					inCell, inV, inF, inIS, inT = false, false, false, false, false
					if cur.hasV || cur.hasF || cur.hasIS || keepEmpty {
						cells = append(cells, cur)
					}
				case "row", "sheetData":
					return errUnclosed(name, "c")
				}
			case inRow:
				if string(name) == "sheetData" {
					return errUnclosed(name, "row")
				}
				if string(name) == "row" {
					inRow = false
					if len(cells) > 0 {
						// Cell slices are capped 3-index slices of arena:
						// later appends never write into them, and the
						// arena is only reset after fn returns.
						stop, err := fn(row, cells)
						if err != nil || stop {
							return err
						}
					}
				}
			case inData:
				if string(name) == "sheetData" {
					return nil
				}
			}
		}
	}
}

// errUnclosed reports an end tag that arrives while a child is still open:
// readers that skipped to it would disagree about where cells are.
func errUnclosed(end []byte, open string) error {
	return fmt.Errorf("</%s> arrives inside an unclosed <%s> (malformed XML)", truncBytes(end), open)
}

func truncBytes(b []byte) string {
	if len(b) > 20 {
		return string(b[:20]) + "…"
	}
	return string(b)
}

// refColumn returns the column of a cell reference such as "AB12".
func refColumn(ref []byte) int {
	n := 0
	for i, c := range ref {
		switch {
		case c >= 'A' && c <= 'Z':
			n = n*26 + int(c-'A'+1)
		case c >= 'a' && c <= 'z':
			n = n*26 + int(c-'a'+1)
		case c == '$':
		default:
			if i == 0 {
				return 0
			}
			return n
		}
		if n > maxCols {
			return n
		}
	}
	return n
}

func cellType(t []byte) byte {
	switch string(bytes.TrimSpace(t)) {
	case "s":
		return 's'
	case "b":
		return 'b'
	case "e":
		return 'e'
	case "str":
		return 'S'
	case "inlineStr":
		return 'i'
	case "d":
		return 'd'
	}
	return 'n'
}
