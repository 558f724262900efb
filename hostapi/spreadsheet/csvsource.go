package spreadsheet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// csvSheetName is the name of the one sheet a CSV/TSV file reads as.
const csvSheetName = "Sheet1"

// streamCSV reads a delimited text file as one sheet: row n is the n-th
// record (blank lines are skipped), values typed as a spreadsheet would
// type typed-in text (numbers, booleans, ISO dates), empty fields null.
func streamCSV(ctx context.Context, p, name string, from int, fn func(row int, vals []colValue) (bool, error)) error {
	fh, err := os.Open(p)
	if err != nil {
		return apierr.Wrap(apierr.FileReadFailed, err, "cannot open the file: %v", err)
	}
	defer fh.Close()
	br := bufio.NewReaderSize(fh, 64<<10)
	head, _ := br.Peek(64 << 10)
	r := decodedReader(br, head)
	delim := ','
	if ext := strings.ToLower(filepath.Ext(name)); ext == ".tsv" || ext == ".tab" {
		delim = '\t'
	} else {
		delim = sniffDelimiter(head)
	}
	cr := csv.NewReader(r)
	cr.Comma = delim
	cr.LazyQuotes = true
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	var vals []colValue
	for row := 1; ; row++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
				err = nil
			} else {
				return apierr.Wrap(apierr.FileReadFailed, err, "the delimited text could not be parsed at record %d: %v", row, err)
			}
		}
		if row > maxRows {
			return apierr.New(apierr.TooLarge, "the file has more than %d rows, the most a sheet can hold; use files.table.* for larger data", maxRows)
		}
		if row&2047 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if row < from {
			continue
		}
		vals = vals[:0]
		for i, field := range rec {
			if i >= maxCols {
				break
			}
			if v := typeText(field); v.k != kEmpty {
				vals = append(vals, colValue{col: i + 1, v: v})
			}
		}
		if len(vals) == 0 {
			continue
		}
		stop, err := fn(row, vals)
		if err != nil || stop {
			return err
		}
	}
}

// decodedReader transcodes UTF-16 (by BOM) and Windows-1252 (bytes that
// are not UTF-8) to UTF-8 and drops a UTF-8 BOM.
func decodedReader(r io.Reader, head []byte) io.Reader {
	switch {
	case bytes.HasPrefix(head, []byte{0xEF, 0xBB, 0xBF}):
		return transform.NewReader(r, unicode.UTF8BOM.NewDecoder())
	case bytes.HasPrefix(head, []byte{0xFF, 0xFE}):
		return transform.NewReader(r, unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM).NewDecoder())
	case bytes.HasPrefix(head, []byte{0xFE, 0xFF}):
		return transform.NewReader(r, unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM).NewDecoder())
	}
	sample := head
	for i := 0; i < 3 && len(sample) > 0 && !utf8.Valid(sample); i++ {
		sample = sample[:len(sample)-1] // a rune cut at the sample's end
	}
	if !utf8.Valid(sample) {
		return transform.NewReader(r, charmap.Windows1252.NewDecoder())
	}
	return r
}

// sniffDelimiter picks the most frequent of , ; tab | in the first line.
func sniffDelimiter(head []byte) rune {
	line := head
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		line = head[:i]
	}
	best, bestN := ',', 0
	inQuote := false
	counts := map[rune]int{}
	for _, c := range string(line) {
		if c == '"' {
			inQuote = !inQuote
			continue
		}
		if !inQuote && (c == ',' || c == ';' || c == '\t' || c == '|') {
			counts[c]++
		}
	}
	for _, c := range []rune{',', ';', '\t', '|'} {
		if counts[c] > bestN {
			best, bestN = c, counts[c]
		}
	}
	return best
}

// typeText types a text field: plain decimal numbers (not ones with a
// leading zero such as "007", which are codes), true/false, ISO dates.
func typeText(s string) value {
	if s == "" {
		return value{}
	}
	if looksNumeric(s) {
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) {
			return value{k: kNumber, n: f}
		}
	}
	switch {
	case strings.EqualFold(s, "true"):
		return value{k: kBool, n: 1}
	case strings.EqualFold(s, "false"):
		return value{k: kBool}
	}
	if isISODate(s) {
		return value{k: kDate, s: s}
	}
	return value{k: kString, s: s}
}

func looksNumeric(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	start, digits := i, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if digits > 1 && s[start] == '0' {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

// isISODate matches YYYY-MM-DD with an optional THH:MM[:SS[.fff]] time.
func isISODate(s string) bool {
	d := func(i int) bool { return i < len(s) && s[i] >= '0' && s[i] <= '9' }
	if len(s) < 10 || !(d(0) && d(1) && d(2) && d(3) && s[4] == '-' && d(5) && d(6) && s[7] == '-' && d(8) && d(9)) {
		return false
	}
	if len(s) == 10 {
		return true
	}
	if (s[10] != 'T' && s[10] != ' ') || len(s) < 16 || !(d(11) && d(12) && s[13] == ':' && d(14) && d(15)) {
		return false
	}
	rest := s[16:]
	if len(rest) >= 3 && rest[0] == ':' && rest[1] >= '0' && rest[1] <= '9' && rest[2] >= '0' && rest[2] <= '9' {
		rest = rest[3:]
		if len(rest) > 1 && rest[0] == '.' {
			rest = strings.TrimLeft(rest[1:], "0123456789")
		}
	}
	return rest == "" || rest == "Z"
}
