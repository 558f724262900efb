package files

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi/textenc"
)

// fuzzEncodings are the encodings the line index treats differently: one
// byte newlines with and without a byte order mark, and UTF-16 both ways.
func fuzzEncodings(t testing.TB) []textenc.Encoding {
	t.Helper()
	var out []textenc.Encoding
	for _, sample := range [][]byte{
		[]byte("plain"),
		{0xEF, 0xBB, 0xBF, 'a'},
		{0xFF, 0xFE, 'a', 0},
		{0xFE, 0xFF, 0, 'a'},
		[]byte("caf\xe9 \x80"), // Windows-1252
	} {
		enc, err := textenc.DetectBytes(sample)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, enc)
	}
	le, _ := textenc.Lookup("utf-16le") // BOM-less
	return append(out, le)
}

// naiveLineStarts finds where every line starts by walking the body one
// code unit at a time, the slow obvious way.
func naiveLineStarts(body []byte, nl newline, textStart int) (starts []int, endsWithNL bool) {
	if textStart >= len(body) {
		return nil, false
	}
	starts = []int{textStart}
	for i := textStart; i+nl.unit <= len(body); i += nl.unit {
		isNL := body[i] == '\n'
		if nl.unit == 2 {
			isNL = body[i+nl.at] == '\n' && body[i+1-nl.at] == 0
		}
		if isNL {
			starts = append(starts, i+nl.unit)
		}
	}
	if last := starts[len(starts)-1]; last == len(body) {
		return starts[:len(starts)-1], true
	}
	return starts, false
}

// FuzzLineIndex checks the line index against the naive walk for every
// encoding, with checkpoints every few lines so that short inputs cross
// many of them: the same line count, the same start of every line, and
// text that decodes to valid UTF-8.
func FuzzLineIndex(f *testing.F) {
	for _, s := range [][]byte{
		nil,
		[]byte("\n"),
		[]byte("a\nb\nc"),
		[]byte("a\nb\nc\n\n\n"),
		{0xEF, 0xBB, 0xBF, 'x', '\n', 'y'},
		{0xFF, 0xFE, 'a', 0, '\n', 0, 'b', 0},
		{0xFF, 0xFE, 0x0A, 0x01, '\n', 0, 0x05, 0x0A, '\n', 0},
		{0xFE, 0xFF, 0, 'a', 0, '\n', 0x01, 0x0A, 0x0A, 0x05, 0, '\n', 0},
		{0xFF, 0xFE, 'a', 0, '\n'},
		[]byte("Mu\xf1oz\r\nK\xf6ln\r\n"),
		bytes.Repeat([]byte("line\n"), 40),
	} {
		for e := range 6 {
			f.Add(s, uint8(e), uint8(3))
		}
	}
	encs := fuzzEncodings(f)
	f.Fuzz(func(t *testing.T, body []byte, which, every uint8) {
		enc := encs[int(which)%len(encs)]
		n := int(every)%8 + 1
		idx, err := buildIndex(bytes.NewReader(body), enc, n, true)
		if err != nil {
			t.Fatal(err)
		}
		if idx.nl.unit == 1 && idx.validUTF8 != utf8.Valid(body[idx.textStart:]) {
			t.Fatalf("validUTF8 %v for % x", idx.validUTF8, body)
		}
		if idx.size != int64(len(body)) {
			t.Fatalf("size %d, want %d", idx.size, len(body))
		}
		textStart := 0
		if bom := enc.BOMBytes(); bytes.HasPrefix(body, bom) {
			textStart = len(bom)
		}
		if idx.textStart != int64(textStart) {
			t.Fatalf("text starts at %d, want %d", idx.textStart, textStart)
		}
		starts, endsWithNL := naiveLineStarts(body, idx.nl, textStart)
		if idx.totalLines != len(starts) || idx.endsWithNL != endsWithNL {
			t.Fatalf("%s: %d lines (ends with newline %v), want %d (%v) in % x", enc, idx.totalLines, idx.endsWithNL, len(starts), endsWithNL, body)
		}
		r := bytes.NewReader(body)
		for line := 1; line <= len(starts)+1; line++ {
			off, err := idx.lineOffset(r, line)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(len(body))
			if line <= len(starts) {
				want = int64(starts[line-1])
			}
			if off != want {
				t.Fatalf("%s: line %d starts at %d, want %d in % x", enc, line, off, want, body)
			}
			if line > 1 {
				prev, _ := idx.lineOffset(r, line-1)
				// Every range of lines ending here agrees with the offsets.
				for first := max(1, line-3); first < line; first++ {
					from, to, err := idx.lineRange(r, first, line-1)
					start, _ := idx.lineOffset(r, first)
					if err != nil || from != start || to != off {
						t.Fatalf("%s: lines %d-%d span [%d, %d), want [%d, %d) (%v)", enc, first, line-1, from, to, start, off, err)
					}
				}
				s, err := idx.decode(body[prev:off])
				if err != nil {
					t.Fatal(err)
				}
				if !utf8.ValidString(s) {
					t.Fatalf("%s: line %d decodes to invalid UTF-8 %q", enc, line-1, s)
				}
			}
		}
	})
}

// FuzzUTF8Check feeds text to the chunked UTF-8 check in pieces of every
// size: it must agree with utf8.Valid on the whole.
func FuzzUTF8Check(f *testing.F) {
	for _, s := range []string{"", "abc", "h\xc3\xa9llo", "\xe2\x82\xac\xe2\x82", "\xf0\x9f\x98\x80x", "\xed\xa0\x80", "caf\xe9", "\xc3", "\xf4\x90\x80\x80"} {
		f.Add([]byte(s), []byte{1, 2, 3})
	}
	f.Fuzz(func(t *testing.T, text, cuts []byte) {
		check := utf8Check{valid: true}
		rest := text
		for _, c := range cuts {
			n := min(int(c)%7, len(rest))
			check.feed(rest[:n])
			rest = rest[n:]
		}
		check.feed(rest)
		if got, want := check.end(), utf8.Valid(text); got != want {
			t.Fatalf("chunked check says %v, utf8.Valid %v for % x cut by %v", got, want, text, cuts)
		}
	})
}
