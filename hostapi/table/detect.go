package table

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/saintfish/chardet"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/ianaindex"
	xunicode "golang.org/x/text/encoding/unicode"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// sniffBytes is how much of a file the detectors look at.
const sniffBytes = 64 << 10

// lowConfidence is the encoding confidence below which getMap warns.
const lowConfidence = 0.5

// textEncoding is what a text table was found to be written in.
type textEncoding struct {
	Name       string  // reported name: utf-8, utf-8-bom, utf-16le, windows-1252, …
	Confidence float64 // 0..1
	// Decoder turns the body into UTF-8; nil when the body already is
	// UTF-8 (with or without BOM, which DuckDB skips itself).
	Decoder encoding.Encoding
}

// readHead returns up to n bytes from the start of path.
func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	m, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:m], nil
}

// detectEncoding finds the encoding of the text file at path whose first
// bytes are head. UTF-8 is tried first (BOM, then a validation pass over the
// whole body, streamed); UTF-16 is recognised by its BOM or its NUL pattern;
// anything else goes to a statistical detector (chardet).
func detectEncoding(path string, head []byte) (textEncoding, error) {
	switch {
	case bytes.HasPrefix(head, []byte{0xEF, 0xBB, 0xBF}):
		return textEncoding{Name: "utf-8-bom", Confidence: 1}, nil
	case bytes.HasPrefix(head, []byte{0xFF, 0xFE}):
		return textEncoding{Name: "utf-16le", Confidence: 1, Decoder: xunicode.UTF16(xunicode.LittleEndian, xunicode.ExpectBOM)}, nil
	case bytes.HasPrefix(head, []byte{0xFE, 0xFF}):
		return textEncoding{Name: "utf-16be", Confidence: 1, Decoder: xunicode.UTF16(xunicode.BigEndian, xunicode.ExpectBOM)}, nil
	}
	if le, be := utf16Pattern(head); le {
		return textEncoding{Name: "utf-16le", Confidence: 0.9, Decoder: xunicode.UTF16(xunicode.LittleEndian, xunicode.IgnoreBOM)}, nil
	} else if be {
		return textEncoding{Name: "utf-16be", Confidence: 0.9, Decoder: xunicode.UTF16(xunicode.BigEndian, xunicode.IgnoreBOM)}, nil
	}
	if looksBinary(head) {
		return textEncoding{}, errBinary
	}
	ok, err := validUTF8File(path)
	if err != nil {
		return textEncoding{}, err
	}
	if ok {
		return textEncoding{Name: "utf-8", Confidence: 1}, nil
	}
	return detectLegacy(head), nil
}

var errBinary = apierr.New(apierr.UnsupportedFormat, "binary content")

// utf16Pattern reports whether head looks like BOM-less UTF-16: mostly
// ASCII text whose every other byte is NUL.
func utf16Pattern(head []byte) (le, be bool) {
	n := len(head) &^ 1
	if n > 4096 {
		n = 4096
	}
	if n < 4 {
		return false, false
	}
	var evenZero, oddZero int
	for i := 0; i < n; i += 2 {
		if head[i] == 0 {
			evenZero++
		}
		if head[i+1] == 0 {
			oddZero++
		}
	}
	pairs := n / 2
	le = oddZero*10 >= pairs*7 && evenZero*10 <= pairs
	be = evenZero*10 >= pairs*7 && oddZero*10 <= pairs
	return le, be
}

// looksBinary reports whether head holds bytes no text table contains: NUL,
// or more than 1% control characters other than tab, CR, LF, FF and ESC.
func looksBinary(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	ctl := 0
	for _, b := range head {
		if b < 0x20 && b != '\t' && b != '\n' && b != '\r' && b != '\f' && b != 0x1b {
			ctl++
		}
	}
	return ctl*100 > len(head)
}

// validUTF8File streams path and reports whether all of it is valid UTF-8.
func validUTF8File(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20+utf8.UTFMax)
	carry := 0
	for {
		n, err := f.Read(buf[carry : carry+1<<20])
		n += carry
		chunk := buf[:n]
		// Keep an incomplete rune at the end for the next round.
		cut := len(chunk)
		for i := 1; i < utf8.UTFMax && i <= len(chunk); i++ {
			b := chunk[len(chunk)-i]
			if b < 0x80 {
				break
			}
			if utf8.RuneStart(b) {
				if !utf8.FullRune(chunk[len(chunk)-i:]) {
					cut = len(chunk) - i
				}
				break
			}
		}
		if err == io.EOF {
			cut = len(chunk)
		}
		if !utf8.Valid(chunk[:cut]) {
			return false, nil
		}
		carry = copy(buf, chunk[cut:])
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// detectLegacy names a single-byte (or legacy multi-byte) encoding with
// chardet. ISO-8859-1 is decoded as its superset Windows-1252, which is
// what files written on Windows actually use; it is reported as
// windows-1252 when bytes 0x80–0x9F (€, curly quotes, dashes) occur.
//
// chardet scores by language statistics and gives mostly-ASCII tables
// (where only names carry accents) low scores, so it reads the lines that
// hold non-ASCII bytes, and the confidence is raised when the decoded text
// is plausible: non-ASCII letters inside words, typographic punctuation.
func detectLegacy(head []byte) textEncoding {
	sample := nonASCIILines(head, 16<<10)
	hasC1 := false
	for _, b := range sample {
		if b >= 0x80 && b <= 0x9F {
			hasC1 = true
			break
		}
	}
	fallback := textEncoding{Name: "windows-1252", Confidence: 0.3, Decoder: charmap.Windows1252}
	res, err := chardet.NewTextDetector().DetectBest(sample)
	if err != nil || res == nil {
		return withPlausibility(fallback, sample)
	}
	conf := float64(res.Confidence) / 100
	name := strings.ToLower(res.Charset)
	var te textEncoding
	switch name {
	case "iso-8859-1", "windows-1252":
		if hasC1 {
			name = "windows-1252"
		}
		te = textEncoding{Name: name, Confidence: conf, Decoder: charmap.Windows1252}
	case "utf-8", "utf-16le", "utf-16be", "utf-32le", "utf-32be":
		// The body is not valid UTF-8 (checked before) and has no UTF-16
		// pattern, so a Unicode guess is wrong; fall back.
		te = fallback
	default:
		enc, err := ianaindex.IANA.Encoding(res.Charset)
		if err != nil || enc == nil {
			fallback.Confidence = conf / 2
			te = fallback
		} else {
			te = textEncoding{Name: name, Confidence: conf, Decoder: enc}
		}
	}
	return withPlausibility(te, sample)
}

// nonASCIILines collects up to max bytes of the lines of b that contain
// bytes ≥ 0x80 (all of b when there are none).
func nonASCIILines(b []byte, max int) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		for _, c := range line {
			if c >= 0x80 {
				out = append(out, line...)
				break
			}
		}
		if len(out) >= max {
			break
		}
	}
	if len(out) == 0 {
		return b
	}
	return out
}

// withPlausibility raises te's confidence when its decoding of sample
// looks like real text: at least 90% of the non-ASCII characters are
// letters next to letters, or punctuation and symbols (€ “ ” – …).
func withPlausibility(te textEncoding, sample []byte) textEncoding {
	decoded, err := te.Decoder.NewDecoder().Bytes(sample)
	if err != nil {
		return te
	}
	rs := []rune(string(decoded))
	high, good := 0, 0
	for i, r := range rs {
		if r < 0x80 {
			continue
		}
		high++
		near := (i > 0 && unicode.IsLetter(rs[i-1])) || (i+1 < len(rs) && unicode.IsLetter(rs[i+1]))
		switch {
		case r == utf8.RuneError, unicode.IsControl(r):
		case unicode.IsLetter(r) && near, unicode.IsPunct(r), unicode.IsSymbol(r):
			good++
		}
	}
	if high == 0 {
		return te
	}
	p := float64(good) / float64(high)
	if p >= 0.9 {
		te.Confidence = max(te.Confidence, 0.5+0.45*p)
	}
	return te
}

// transcode writes the UTF-8 form of src into dst.
func transcode(src, dst string, enc encoding.Encoding) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, enc.NewDecoder().Reader(in)); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// sniffDelimiter picks the field delimiter of a text table from its first
// lines: among comma, semicolon, tab and pipe, the one that appears in the
// header and splits the most lines into the header's number of fields.
// Quoted fields (which may hold delimiters and line breaks) are skipped.
func sniffDelimiter(sample []byte, truncated bool) (byte, bool) {
	records := splitRecords(sample, 200)
	if truncated && len(records) > 1 {
		records = records[:len(records)-1]
	}
	var nonEmpty [][]byte
	for _, r := range records {
		if len(bytes.TrimSpace(r)) > 0 {
			nonEmpty = append(nonEmpty, r)
		}
	}
	if len(nonEmpty) == 0 {
		return 0, false
	}
	best, bestScore := byte(0), -1.0
	for _, d := range []byte{',', ';', '\t', '|'} {
		h := countOutsideQuotes(nonEmpty[0], d)
		if h == 0 {
			continue
		}
		same := 0
		for _, r := range nonEmpty {
			if countOutsideQuotes(r, d) == h {
				same++
			}
		}
		score := float64(same)/float64(len(nonEmpty))*1000 + float64(min(h, 999))
		if score > bestScore {
			best, bestScore = d, score
		}
	}
	return best, best != 0
}

// splitRecords splits text at line breaks that are not inside quotes.
func splitRecords(b []byte, max int) [][]byte {
	var out [][]byte
	inQ := false
	start := 0
	for i := 0; i < len(b) && len(out) < max; i++ {
		switch b[i] {
		case '"':
			inQ = !inQ
		case '\n':
			if !inQ {
				out = append(out, bytes.TrimRight(b[start:i], "\r"))
				start = i + 1
			}
		}
	}
	if start < len(b) && len(out) < max {
		out = append(out, b[start:])
	}
	return out
}

func countOutsideQuotes(line []byte, d byte) int {
	n := 0
	inQ := false
	for _, c := range line {
		switch {
		case c == '"':
			inQ = !inQ
		case c == d && !inQ:
			n++
		}
	}
	return n
}
