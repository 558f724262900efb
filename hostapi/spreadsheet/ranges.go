package spreadsheet

import (
	"strconv"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Excel's grid limits.
const (
	maxRows = 1048576
	maxCols = 16384
)

// area is a rectangle of cells, 1-based and inclusive. Whole-column ranges
// ("A:C") leave the row bounds open and whole-row ranges ("2:5") the column
// bounds; resolve them against the sheet's used size with bound.
type area struct {
	c1, r1, c2, r2       int
	wholeCols, wholeRows bool
}

func (a area) rows() int { return a.r2 - a.r1 + 1 }
func (a area) cols() int { return a.c2 - a.c1 + 1 }

// String writes the area in A1 form.
func (a area) String() string {
	if a.c1 == a.c2 && a.r1 == a.r2 {
		return cellName(a.c1, a.r1)
	}
	return cellName(a.c1, a.r1) + ":" + cellName(a.c2, a.r2)
}

// bound closes an open area against a sheet of usedRows × usedCols; an area
// on an empty sheet closes to its first row/column.
func (a area) bound(usedRows, usedCols int) area {
	if a.wholeCols {
		a.r1, a.r2 = 1, max(usedRows, 1)
		a.wholeCols = false
	}
	if a.wholeRows {
		a.c1, a.c2 = 1, max(usedCols, 1)
		a.wholeRows = false
	}
	return a
}

func rangeError(s string) error {
	return apierr.New(apierr.ValidationFailed,
		"range %q is not valid; use the A1 form such as \"A1:D50\" (also \"B7\", whole columns \"A:C\" or whole rows \"2:10\")", s)
}

func cellError(s string) error {
	return apierr.New(apierr.ValidationFailed, "cell %q is not valid; use the A1 form such as \"B7\"", s)
}

// parseCell parses "B7" (also "$B$7", "b7").
func parseCell(s string) (col, row int, ok bool) {
	s = strings.ReplaceAll(strings.TrimSpace(s), "$", "")
	i := 0
	for i < len(s) && isLetter(s[i]) {
		i++
	}
	if i == 0 || i == len(s) || i > 3 {
		return 0, 0, false
	}
	col = colNumber(s[:i])
	row, err := strconv.Atoi(s[i:])
	if err != nil || s[i] == '+' || s[i] == '-' || row < 1 || row > maxRows || col < 1 || col > maxCols {
		return 0, 0, false
	}
	return col, row, true
}

// parseRange parses an A1 range. A leading "Sheet!" is returned separately
// so that callers can check it against the sheet argument.
func parseRange(s string) (a area, sheet string, err error) {
	raw := s
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '!'); i >= 0 {
		sheet = strings.Trim(s[:i], "'")
		s = s[i+1:]
	}
	s = strings.ReplaceAll(s, "$", "")
	if s == "" {
		return a, "", rangeError(raw)
	}
	first, second, isPair := strings.Cut(s, ":")
	if !isPair {
		second = first
	}
	if c1, r1, ok := parseCell(first); ok {
		c2, r2, ok := parseCell(second)
		if !ok {
			return a, "", rangeError(raw)
		}
		a = area{c1: min(c1, c2), r1: min(r1, r2), c2: max(c1, c2), r2: max(r1, r2)}
		return a, sheet, nil
	}
	if !isPair {
		return a, "", rangeError(raw)
	}
	if c1, c2 := colOnly(first), colOnly(second); c1 > 0 && c2 > 0 {
		return area{c1: min(c1, c2), c2: max(c1, c2), r1: 1, r2: maxRows, wholeCols: true}, sheet, nil
	}
	r1, e1 := strconv.Atoi(first)
	r2, e2 := strconv.Atoi(second)
	if e1 == nil && e2 == nil && r1 >= 1 && r2 >= 1 && r1 <= maxRows && r2 <= maxRows && isDigits(first) && isDigits(second) {
		return area{r1: min(r1, r2), r2: max(r1, r2), c1: 1, c2: maxCols, wholeRows: true}, sheet, nil
	}
	return a, "", rangeError(raw)
}

func isLetter(b byte) bool { return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') }

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// colOnly parses a bare column ("C") or returns 0.
func colOnly(s string) int {
	if s == "" || len(s) > 3 {
		return 0
	}
	for i := 0; i < len(s); i++ {
		if !isLetter(s[i]) {
			return 0
		}
	}
	if c := colNumber(s); c <= maxCols {
		return c
	}
	return 0
}

// colNumber converts column letters to a 1-based number ("A" → 1, "AA" → 27).
func colNumber(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 'a' {
			b -= 'a' - 'A'
		}
		n = n*26 + int(b-'A'+1)
	}
	return n
}

// colName converts a 1-based column number to letters.
func colName(n int) string {
	var b [4]byte
	i := len(b)
	for n > 0 {
		n--
		i--
		b[i] = byte('A' + n%26)
		n /= 26
	}
	return string(b[i:])
}

func cellName(col, row int) string { return colName(col) + strconv.Itoa(row) }
