// Package textenc finds out which character encoding a text file is
// written in (UTF-8 with or without a byte order mark, UTF-16 LE/BE,
// Windows-1252/Latin-1 and the other legacy encodings chardet knows) and
// converts between that encoding and UTF-8 in both directions.
//
// Detection is deterministic and bounded: a byte order mark decides at
// once; otherwise the first SniffBytes are checked for the NUL pattern of
// BOM-less UTF-16 and for binary content, the whole input is validated as
// UTF-8 (streamed, so a 1 GB file costs one pass and 1 MB of memory), and
// only input that is not UTF-8 goes to the statistical detector.
//
// Typical use, reading:
//
//	enc, err := textenc.DetectFile(ctx, path) // or Detect(ctx, r), DetectBytes(b)
//	r := enc.NewReader(f)                      // UTF-8, byte order mark removed
//
// and writing an edited text back in the file's own encoding:
//
//	body, err := enc.Encode(text) // *UnrepresentableError when it can't be
//	out := append(enc.BOMBytes(), body...)
package textenc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
	xunicode "golang.org/x/text/encoding/unicode"
)

// SniffBytes is how much of the start of a text the detectors look at
// (the UTF-8 check reads everything).
const SniffBytes = 64 << 10

// LowConfidence is the confidence below which a detection is a guess that
// callers should mention to their users.
const LowConfidence = 0.5

// Encoding is what a text was found (or declared) to be written in. The
// zero value is not usable; take one from Detect*, Lookup or UTF8.
type Encoding struct {
	// Name is the encoding's lower-case name: utf-8, utf-16le, utf-16be,
	// windows-1252, iso-8859-1, shift_jis, … (for chardet's legacy
	// guesses, chardet's name lower-cased).
	Name string
	// BOM is true when the text starts with a byte order mark.
	BOM bool
	// Confidence is how sure the detection is, 0..1 (1 for a byte order
	// mark, for valid UTF-8 and for Lookup).
	Confidence float64

	// codec converts to and from UTF-8; nil for UTF-8 itself.
	codec encoding.Encoding
	// decoder, when set, decodes instead of codec (UTF-16 honours and
	// removes a byte order mark; the encoder must not write one).
	decoder encoding.Encoding
}

// UTF8 is UTF-8 without a byte order mark, the encoding of new text.
var UTF8 = Encoding{Name: "utf-8", Confidence: 1}

// ErrBinary means the input holds bytes no text contains (NUL, or many
// control characters): it is not a text file in any encoding.
var ErrBinary = errors.New("binary content, not text")

// ErrUnrepresentable is what errors.Is finds in an *UnrepresentableError.
var ErrUnrepresentable = errors.New("text not representable in the encoding")

// UnrepresentableError reports the first character of a text that an
// encoding has no bytes for (or a byte sequence that is not UTF-8).
type UnrepresentableError struct {
	Encoding string
	// Rune is the character; utf8.RuneError for invalid UTF-8 input.
	Rune rune
	// Offset is its byte offset in the UTF-8 input (for a Writer, counted
	// from the writer's first byte).
	Offset int64
}

func (e *UnrepresentableError) Error() string {
	if e.Rune == utf8.RuneError {
		return fmt.Sprintf("invalid UTF-8 at byte %d cannot be written as %s", e.Offset, e.Encoding)
	}
	return fmt.Sprintf("%q (U+%04X) at byte %d cannot be written in %s", e.Rune, e.Rune, e.Offset, e.Encoding)
}

// Is makes errors.Is(err, ErrUnrepresentable) true.
func (e *UnrepresentableError) Is(target error) bool { return target == ErrUnrepresentable }

// String is the name reported to users: Name, except that UTF-8 with a
// byte order mark is "utf-8-bom" (UTF-16 nearly always has one, UTF-8
// rarely, and Excel and other tools treat the two UTF-8 forms apart).
func (e Encoding) String() string {
	if e.Name == "utf-8" && e.BOM {
		return "utf-8-bom"
	}
	return e.Name
}

// IsUTF8 reports whether the text's bytes are UTF-8 (after the byte order
// mark, if any), so that no conversion is needed to read it.
func (e Encoding) IsUTF8() bool { return e.codec == nil }

// BOMBytes returns the byte order mark a whole file in e starts with: nil when
// e.BOM is false. Encode and NewWriter never write it, so that a fragment
// (lines inserted in the middle of a file) can be encoded alone.
func (e Encoding) BOMBytes() []byte {
	if !e.BOM {
		return nil
	}
	switch e.Name {
	case "utf-8":
		return []byte{0xEF, 0xBB, 0xBF}
	case "utf-16le":
		return []byte{0xFF, 0xFE}
	case "utf-16be":
		return []byte{0xFE, 0xFF}
	}
	return nil
}

// NewReader returns a reader of r's text as UTF-8. A byte order mark at
// the start of r is removed. Bytes that are invalid in e become U+FFFD, so
// the output is always valid UTF-8.
func (e Encoding) NewReader(r io.Reader) io.Reader {
	if e.codec == nil {
		return xunicode.UTF8BOM.NewDecoder().Reader(r)
	}
	dec := e.codec
	if e.decoder != nil {
		dec = e.decoder
	}
	return dec.NewDecoder().Reader(r)
}

// Decode returns the UTF-8 form of b, as NewReader would.
func (e Encoding) Decode(b []byte) (string, error) {
	var buf strings.Builder
	buf.Grow(len(b) + len(b)/4)
	if _, err := io.Copy(&buf, e.NewReader(bytes.NewReader(b))); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// Encode returns s (UTF-8) in encoding e, without a byte order mark. When
// a character of s has no representation in e, or s is not valid UTF-8,
// the error is an *UnrepresentableError naming the first such character.
func (e Encoding) Encode(s string) ([]byte, error) {
	if e.codec == nil {
		if !utf8.ValidString(s) {
			return nil, e.unrepresentable(s, 0)
		}
		return []byte(s), nil
	}
	out, err := e.codec.NewEncoder().String(s)
	if err != nil || !utf8.ValidString(s) {
		return nil, e.unrepresentable(s, 0)
	}
	return []byte(out), nil
}

// Check reports whether s can be written in e: nil, or the
// *UnrepresentableError Encode would return.
func (e Encoding) Check(s string) error {
	_, err := e.Encode(s)
	return err
}

// unrepresentable finds the first character of s that e cannot encode;
// base is added to its offset. It encodes rune by rune, which is slow but
// runs only once a whole-text encode has failed.
func (e Encoding) unrepresentable(s string, base int64) error {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return &UnrepresentableError{Encoding: e.String(), Rune: r, Offset: base + int64(i)}
			}
		}
		if e.codec == nil {
			continue
		}
		if _, err := e.codec.NewEncoder().String(string(r)); err != nil {
			return &UnrepresentableError{Encoding: e.String(), Rune: r, Offset: base + int64(i)}
		}
	}
	// Not reached for the encodings detected here; be safe anyway.
	return &UnrepresentableError{Encoding: e.String(), Rune: utf8.RuneError, Offset: base}
}

// NewWriter returns a writer that encodes the UTF-8 written to it into e
// and writes the result to w (without a byte order mark). A write holding
// a character e cannot represent writes nothing of that call and fails
// with an *UnrepresentableError; every later write fails the same way.
// Close reports a character left incomplete at the end; it does not close
// w.
func (e Encoding) NewWriter(w io.Writer) io.WriteCloser {
	return &writer{enc: e, w: w}
}

type writer struct {
	enc   Encoding
	w     io.Writer
	carry []byte // the start of a character split across writes
	off   int64  // UTF-8 bytes accepted so far (carry excluded)
	err   error
}

func (x *writer) Write(p []byte) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	src := p
	if len(x.carry) > 0 {
		src = append(x.carry, p...)
	}
	// Keep a character cut off at the end for the next write.
	cut := len(src)
	for i := 1; i < utf8.UTFMax && i <= len(src); i++ {
		b := src[len(src)-i]
		if b < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRune(src[len(src)-i:]) {
				cut = len(src) - i
			}
			break
		}
	}
	out, err := x.enc.Encode(string(src[:cut]))
	if err != nil {
		if ue, ok := err.(*UnrepresentableError); ok {
			ue.Offset += x.off
		}
		x.err = err
		return 0, err
	}
	if _, err := x.w.Write(out); err != nil {
		x.err = err
		return 0, err
	}
	x.off += int64(cut)
	x.carry = append(x.carry[:0:0], src[cut:]...)
	return len(p), nil
}

func (x *writer) Close() error {
	if x.err != nil {
		return x.err
	}
	if len(x.carry) > 0 {
		x.err = &UnrepresentableError{Encoding: x.enc.String(), Rune: utf8.RuneError, Offset: x.off}
		return x.err
	}
	return nil
}

// Lookup returns the encoding a label names: the names Detect reports
// (utf-8, utf-8-bom, utf-16le, windows-1252, …) and the WHATWG and IANA
// labels (latin1, cp1252, iso-8859-15, shift_jis, …). ISO-8859-1 and its
// aliases are read and written as Windows-1252, its superset, as browsers
// do. Confidence is 1; BOM is true only for utf-8-bom.
func Lookup(label string) (Encoding, error) {
	l := strings.ToLower(strings.TrimSpace(label))
	switch l {
	case "utf-8", "utf8":
		return UTF8, nil
	case "utf-8-bom", "utf8-bom":
		e := UTF8
		e.BOM = true
		return e, nil
	case "utf-16le", "utf-16":
		return utf16Of("utf-16le", false, 1), nil
	case "utf-16be":
		return utf16Of("utf-16be", false, 1), nil
	case "iso-8859-1", "latin1", "latin-1", "l1", "iso8859-1", "iso_8859-1", "cp819", "ibm819":
		return Encoding{Name: "iso-8859-1", Confidence: 1, codec: windows1252}, nil
	}
	enc, err := htmlindex.Get(l)
	if err != nil || enc == nil {
		enc, err = ianaindex.IANA.Encoding(l)
	}
	if err != nil || enc == nil {
		return Encoding{}, fmt.Errorf("unknown text encoding %q; use a name such as utf-8, utf-16le, windows-1252 or iso-8859-15", label)
	}
	switch enc {
	case xunicode.UTF8:
		return UTF8, nil
	case charmap.Windows1252:
		return Encoding{Name: "windows-1252", Confidence: 1, codec: windows1252}, nil
	case charmap.ISO8859_1:
		return Encoding{Name: "iso-8859-1", Confidence: 1, codec: windows1252}, nil
	}
	name := l
	if n, err := htmlindex.Name(enc); err == nil {
		name = n
	}
	if name == "utf-16le" || name == "utf-16be" {
		return utf16Of(name, false, 1), nil
	}
	return Encoding{Name: name, Confidence: 1, codec: enc}, nil
}

func utf16Of(name string, bom bool, conf float64) Encoding {
	end := xunicode.LittleEndian
	if name == "utf-16be" {
		end = xunicode.BigEndian
	}
	return Encoding{Name: name, BOM: bom, Confidence: conf,
		codec:   xunicode.UTF16(end, xunicode.IgnoreBOM),
		decoder: xunicode.UTF16(end, xunicode.UseBOM)}
}

// DetectFile detects the encoding of the file at path (see Detect).
func DetectFile(ctx context.Context, path string) (Encoding, error) {
	f, err := os.Open(path)
	if err != nil {
		return Encoding{}, err
	}
	defer f.Close()
	return Detect(ctx, f)
}

// DetectBytes detects the encoding of b, which is a whole text (see
// Detect).
func DetectBytes(b []byte) (Encoding, error) {
	return Detect(context.Background(), bytes.NewReader(b))
}

// Detect reads r to its end and reports its encoding: a byte order mark
// decides (with confidence 0.4 when UTF-8 after a UTF-8 mark is not
// valid); BOM-less UTF-16 is recognised by NUL bytes in every other
// position of mostly-ASCII text; then input holding NUL or many control
// characters is ErrBinary; input that is valid UTF-8 throughout is UTF-8;
// anything else goes to a statistical detector (chardet) on the lines that
// hold non-ASCII bytes. Empty input is UTF-8. Detect stops with ctx's
// error when ctx ends.
func Detect(ctx context.Context, r io.Reader) (Encoding, error) {
	head := make([]byte, SniffBytes)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Encoding{}, err
	}
	head = head[:n]
	complete := n < SniffBytes
	rest := r
	if complete {
		rest = eofReader{}
	}
	switch {
	case bytes.HasPrefix(head, []byte{0xEF, 0xBB, 0xBF}):
		// The mark decides, but bytes that are not UTF-8 after it (a
		// mark put before legacy text) make it a guess: they read as
		// U+FFFD.
		e := UTF8
		e.BOM = true
		bad, err := firstInvalidUTF8(ctx, head[3:], rest)
		if err != nil {
			return Encoding{}, err
		}
		if bad != nil {
			e.Confidence = 0.4
		}
		return e, nil
	case bytes.HasPrefix(head, []byte{0xFF, 0xFE}):
		return utf16Of("utf-16le", true, 1), nil
	case bytes.HasPrefix(head, []byte{0xFE, 0xFF}):
		return utf16Of("utf-16be", true, 1), nil
	}
	if le, be := utf16Pattern(head); le {
		return utf16Of("utf-16le", false, 0.9), nil
	} else if be {
		return utf16Of("utf-16be", false, 0.9), nil
	}
	if LooksBinary(head) {
		return Encoding{}, ErrBinary
	}
	sample, err := firstInvalidUTF8(ctx, head, rest)
	if err != nil {
		return Encoding{}, err
	}
	if sample == nil {
		return UTF8, nil
	}
	return detectLegacy(head, sample), nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// utf16Pattern reports whether head looks like BOM-less UTF-16: mostly
// ASCII text whose every other byte is NUL.
func utf16Pattern(head []byte) (le, be bool) {
	n := min(len(head)&^1, 4096)
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

// LooksBinary reports whether b (the start of a file, or of its decoded
// text) holds bytes no text holds: NUL, or more than 1% control
// characters other than tab, CR, LF, FF and ESC.
func LooksBinary(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	ctl := 0
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != 0x1b {
			ctl++
		}
	}
	return ctl*100 > len(b)
}

// validateChunk is how much firstInvalidUTF8 validates at a time.
const validateChunk = 1 << 20

// firstInvalidUTF8 validates head followed by the rest of the input as
// UTF-8. It returns nil when all of it is valid, and otherwise up to
// SniffBytes of text starting at the line that holds the first invalid
// byte: the detector's best evidence, even when it lies far past head.
func firstInvalidUTF8(ctx context.Context, head []byte, rest io.Reader) ([]byte, error) {
	buf := make([]byte, 0, validateChunk+len(head)+utf8.UTFMax)
	buf = append(buf, head...)
	eof := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for !eof && len(buf) < validateChunk {
			n, err := rest.Read(buf[len(buf):min(cap(buf), len(buf)+validateChunk)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return nil, err
			}
		}
		// Keep a character cut off at the end for the next round.
		cut := len(buf)
		if !eof {
			for i := 1; i < utf8.UTFMax && i <= len(buf); i++ {
				b := buf[len(buf)-i]
				if b < utf8.RuneSelf {
					break
				}
				if utf8.RuneStart(b) {
					if !utf8.FullRune(buf[len(buf)-i:]) {
						cut = len(buf) - i
					}
					break
				}
			}
		}
		if bad := invalidAt(buf[:cut]); bad >= 0 {
			start := bytes.LastIndexByte(buf[:bad], '\n') + 1
			if bad-start > SniffBytes/2 {
				start = bad - SniffBytes/2
			}
			end := min(len(buf), start+SniffBytes)
			return append([]byte(nil), buf[start:end]...), nil
		}
		if eof {
			return nil, nil
		}
		n := copy(buf, buf[cut:])
		buf = buf[:n]
	}
}

// invalidAt returns the offset of the first invalid UTF-8 sequence in b,
// or -1.
func invalidAt(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}
