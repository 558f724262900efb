package textenc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	xunicode "golang.org/x/text/encoding/unicode"
)

// people is a mostly-ASCII table whose names carry accents, the usual
// shape of a Latin-1 CSV exported on Windows.
const people = "id;name;city;amount\n" +
	"1;Muñoz;Málaga;12,50\n" +
	"2;Zoë Brontë;Besançon;7,25\n" +
	"3;Jürgen Weiß;Köln;1.234,00\n" +
	"4;Ana;Lisboa;3,00\n"

func encodeWith(t testing.TB, enc encoding.Encoding, s string) []byte {
	t.Helper()
	b, err := enc.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatalf("encoding fixture: %v", err)
	}
	return b
}

func TestDetect(t *testing.T) {
	le := xunicode.UTF16(xunicode.LittleEndian, xunicode.IgnoreBOM)
	be := xunicode.UTF16(xunicode.BigEndian, xunicode.IgnoreBOM)
	curly := "quote,price\n“Füße” – naïve,€ 12\n‘Ärger’…,€ 3\n"
	cases := []struct {
		name     string
		body     []byte
		want     string // String()
		bom      bool
		minConf  float64
		wantText string
	}{
		{"ascii", []byte("a,b\n1,2\n"), "utf-8", false, 1, "a,b\n1,2\n"},
		{"utf-8", []byte(people), "utf-8", false, 1, people},
		{"utf-8 bom", append([]byte("\xef\xbb\xbf"), people...), "utf-8-bom", true, 1, people},
		{"utf-16le bom", append([]byte{0xFF, 0xFE}, encodeWith(t, le, people)...), "utf-16le", true, 1, people},
		{"utf-16be bom", append([]byte{0xFE, 0xFF}, encodeWith(t, be, people)...), "utf-16be", true, 1, people},
		{"utf-16le no bom", encodeWith(t, le, people), "utf-16le", false, 0.9, people},
		{"utf-16be no bom", encodeWith(t, be, people), "utf-16be", false, 0.9, people},
		{"windows-1252 with C1 punctuation", encodeWith(t, charmap.Windows1252, curly), "windows-1252", false, LowConfidence, curly},
		{"latin-1 names", encodeWith(t, charmap.ISO8859_1, people), "", false, LowConfidence, people},
		{"empty", nil, "utf-8", false, 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := DetectBytes(tc.body)
			if err != nil {
				t.Fatalf("DetectBytes: %v", err)
			}
			if tc.want != "" && e.String() != tc.want {
				t.Fatalf("String() = %q, want %q", e.String(), tc.want)
			}
			if tc.want == "" && e.String() != "iso-8859-1" && e.String() != "windows-1252" {
				t.Fatalf("String() = %q, want iso-8859-1 or windows-1252", e.String())
			}
			if e.BOM != tc.bom || e.Confidence < tc.minConf || e.Confidence > 1 {
				t.Fatalf("BOM=%v confidence=%v, want BOM=%v confidence ≥ %v", e.BOM, e.Confidence, tc.bom, tc.minConf)
			}
			text, err := e.Decode(tc.body)
			if err != nil || text != tc.wantText {
				t.Fatalf("Decode = %q, %v; want %q", text, err, tc.wantText)
			}
			// The file-based and the streaming detectors agree.
			path := filepath.Join(t.TempDir(), "f")
			os.WriteFile(path, tc.body, 0o600)
			e2, err := DetectFile(context.Background(), path)
			if err != nil || e2.String() != e.String() || e2.Confidence != e.Confidence {
				t.Fatalf("DetectFile = %v %v %v, DetectBytes = %v %v", e2, e2.Confidence, err, e, e.Confidence)
			}
			// Encoding the text again gives the body back (after the BOM).
			out, err := e.Encode(text)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if got := append(e.BOMBytes(), out...); !bytes.Equal(got, tc.body) && !(len(got) == 0 && len(tc.body) == 0) {
				t.Fatalf("round trip = % x, want % x", got, tc.body)
			}
		})
	}
}

func TestDetectOtherScripts(t *testing.T) {
	cases := []struct {
		name, want, text string
		enc              encoding.Encoding
	}{
		{"japanese", "shift_jis", strings.Repeat("東京都,大阪府,名古屋市,日本語のテキストです。\n", 20), japanese.ShiftJIS},
		{"japanese next to latin letters", "shift_jis", strings.Repeat("ABC株式会社,東京都港区1-2-3,XYZ商事です\n", 10), japanese.ShiftJIS},
		{"russian", "windows-1251", strings.Repeat("Москва,Санкт-Петербург,Новосибирск,это русский текст\n", 10), charmap.Windows1251},
		{"one short latin line", "", "name;city\nMuñoz;Málaga\n", charmap.Windows1252},
		{"german words", "", "Straße,Größe,Übergröße,Äpfel\n", charmap.Windows1252},
	}
	for _, tc := range cases {
		body := encodeWith(t, tc.enc, tc.text)
		for i := 0; i < 5; i++ { // the same answer every time
			e, err := DetectBytes(body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && e.Name != tc.want || tc.want == "" && e.Name != "windows-1252" && e.Name != "iso-8859-1" {
				t.Fatalf("%s: detected %q (%.2f), want %s", tc.name, e.Name, e.Confidence, tc.want)
			}
			if got, _ := e.Decode(body); got != tc.text {
				t.Fatalf("%s: decoded %q", tc.name, got)
			}
		}
	}
}

func TestDetectBinary(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	ctl := bytes.Repeat([]byte("ab\x01\x02\x03cd\x04"), 100)
	for name, b := range map[string][]byte{"png": png, "control characters": ctl} {
		if _, err := DetectBytes(b); !errors.Is(err, ErrBinary) {
			t.Errorf("%s: err = %v, want ErrBinary", name, err)
		}
	}
	if !LooksBinary([]byte("a\x00b")) || LooksBinary([]byte("a\tb\r\n\fc\x1b[0m")) {
		t.Fatal("LooksBinary misjudges NUL or ordinary control characters")
	}
}

// A legacy byte far past the sniffed head still makes the text legacy,
// and the detector judges it by the lines around that byte.
func TestDetectInvalidPastHead(t *testing.T) {
	var b bytes.Buffer
	for b.Len() < 3*validateChunk {
		b.WriteString("1,plain ascii line,0.5\n")
	}
	tail := "999,Muñoz Ibáñez from Málaga,3.5\n1000,Zoë Brontë,1\n"
	b.Write(encodeWith(t, charmap.Windows1252, tail))
	e, err := DetectBytes(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "windows-1252" && e.Name != "iso-8859-1" {
		t.Fatalf("detected %q, want a Latin encoding", e.Name)
	}
	text, _ := e.Decode(b.Bytes())
	if !strings.HasSuffix(text, tail) {
		t.Fatalf("decoded tail = %q", text[len(text)-len(tail):])
	}
}

// Multi-byte characters across every internal boundary (the sniffed
// head, the validation chunks) are still valid UTF-8.
func TestDetectUTF8AcrossChunks(t *testing.T) {
	for _, at := range []int{SniffBytes - 1, SniffBytes - 2, validateChunk - 1, validateChunk + SniffBytes - 2} {
		b := bytes.Repeat([]byte("x"), at)
		b = append(b, "€ and 😀\n"...)
		b = append(b, bytes.Repeat([]byte("y"), validateChunk)...)
		e, err := DetectBytes(b)
		if err != nil || e.String() != "utf-8" || e.Confidence != 1 {
			t.Fatalf("split at %d: %v %v %v", at, e, e.Confidence, err)
		}
	}
	// A truncated character at the very end is not UTF-8.
	if e, _ := DetectBytes([]byte("abc\xe2\x82")); e.IsUTF8() {
		t.Fatalf("truncated final character detected as %v", e)
	}
}

func TestDetectContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	big := bytes.Repeat([]byte("abc,def\n"), 2*validateChunk/8)
	if _, err := Detect(ctx, bytes.NewReader(big)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// A failing reader's error comes back.
	boom := errors.New("disk gone")
	if _, err := Detect(context.Background(), io.MultiReader(bytes.NewReader(big[:SniffBytes+10]), errReader{boom})); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if _, err := DetectFile(context.Background(), filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestNewReaderRemovesBOM(t *testing.T) {
	for _, label := range []string{"utf-8-bom", "utf-16le", "utf-16be"} {
		e, err := Lookup(label)
		if err != nil {
			t.Fatal(err)
		}
		e.BOM = true
		body, err := e.Encode("héllo\n")
		if err != nil {
			t.Fatal(err)
		}
		body = append(e.BOMBytes(), body...)
		got, err := io.ReadAll(e.NewReader(bytes.NewReader(body)))
		if err != nil || string(got) != "héllo\n" {
			t.Fatalf("%s: read %q, %v", label, got, err)
		}
	}
	// Invalid bytes become U+FFFD: the output is always UTF-8.
	got, _ := UTF8.Decode([]byte("a\xffb"))
	if got != "a\uFFFDb" {
		t.Fatalf("invalid UTF-8 decoded as %q", got)
	}
	odd, _ := Lookup("utf-16le")
	got, _ = odd.Decode([]byte{'a', 0, 0x00, 0xD8, 'b'}) // lone surrogate, odd length
	if !utf8.ValidString(got) || !strings.HasPrefix(got, "a") {
		t.Fatalf("broken UTF-16 decoded as %q", got)
	}
}

func TestEncode(t *testing.T) {
	w1252, _ := Lookup("windows-1252")
	b, err := w1252.Encode("€ “Müller” – ok")
	if err != nil || !bytes.Equal(b, []byte{0x80, ' ', 0x93, 'M', 0xFC, 'l', 'l', 'e', 'r', 0x94, ' ', 0x96, ' ', 'o', 'k'}) {
		t.Fatalf("Encode = % x, %v", b, err)
	}
	_, err = w1252.Encode("Preis: 5 € (東京)")
	var ue *UnrepresentableError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnrepresentable) {
		t.Fatalf("err = %v, want *UnrepresentableError", err)
	}
	if ue.Rune != '東' || ue.Offset != int64(len("Preis: 5 € (")) || ue.Encoding != "windows-1252" {
		t.Fatalf("error = %+v", ue)
	}
	if !strings.Contains(ue.Error(), "U+6771") || !strings.Contains(ue.Error(), "windows-1252") {
		t.Fatalf("message %q does not name the character and the encoding", ue.Error())
	}
	if err := w1252.Check("Ærø"); err != nil {
		t.Fatalf("Check: %v", err)
	}
	for _, e := range []Encoding{UTF8, w1252} {
		if err := e.Check("ok\xffno"); !errors.As(err, &ue) || ue.Rune != utf8.RuneError || ue.Offset != 2 {
			t.Fatalf("%v: invalid UTF-8 gave %v", e, err)
		}
	}
	le, _ := Lookup("utf-16le")
	if b, _ := le.Encode("é😀"); !bytes.Equal(b, []byte{0xE9, 0x00, 0x3D, 0xD8, 0x00, 0xDE}) {
		t.Fatalf("utf-16le Encode = % x (no BOM expected)", b)
	}
	latin, _ := Lookup("latin1")
	if b, err := latin.Encode("€"); err != nil || !bytes.Equal(b, []byte{0x80}) {
		t.Fatalf("latin1 (as windows-1252) Encode(€) = % x, %v", b, err)
	}
}

func TestWriter(t *testing.T) {
	w1252, _ := Lookup("windows-1252")
	var out bytes.Buffer
	w := w1252.NewWriter(&out)
	in := []byte("Señor € café\n")
	for i := range in { // one byte at a time: every character is split
		if n, err := w.Write(in[i : i+1]); err != nil || n != 1 {
			t.Fatalf("write %d: %d %v", i, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if want := encodeWith(t, charmap.Windows1252, string(in)); !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("wrote % x, want % x", out.Bytes(), want)
	}

	out.Reset()
	w = w1252.NewWriter(&out)
	w.Write([]byte("abc\n"))
	n, err := w.Write([]byte("x→y"))
	var ue *UnrepresentableError
	if n != 0 || !errors.As(err, &ue) || ue.Rune != '→' || ue.Offset != 5 {
		t.Fatalf("write = %d, %v; want the arrow at byte 5", n, err)
	}
	if out.String() != "abc\n" {
		t.Fatalf("a failed write wrote %q", out.String())
	}
	if _, err2 := w.Write([]byte("more")); err2 != err {
		t.Fatalf("a write after a failure gave %v", err2)
	}

	w = UTF8.NewWriter(&out)
	w.Write([]byte("ok\xe2\x82"))
	if err := w.Close(); !errors.Is(err, ErrUnrepresentable) {
		t.Fatalf("Close with a cut character: %v", err)
	}
}

func TestLookup(t *testing.T) {
	cases := map[string]string{
		"UTF-8": "utf-8", "utf-8-bom": "utf-8-bom", "utf-16le": "utf-16le", "UTF-16BE": "utf-16be",
		"latin1": "iso-8859-1", "ISO-8859-1": "iso-8859-1", "cp1252": "windows-1252", "windows-1252": "windows-1252",
		"iso-8859-15": "iso-8859-15", "shift_jis": "shift_jis", "koi8-r": "koi8-r",
	}
	for label, want := range cases {
		e, err := Lookup(label)
		if err != nil || e.String() != want || e.Confidence != 1 {
			t.Errorf("Lookup(%q) = %v, %v; want %s", label, e, err, want)
			continue
		}
		// Every name Lookup reports looks up again.
		if e2, err := Lookup(e.String()); err != nil || e2.String() != want {
			t.Errorf("Lookup(%q) again = %v, %v", e.String(), e2, err)
		}
	}
	if _, err := Lookup("klingon-8"); err == nil || !strings.Contains(err.Error(), "klingon-8") {
		t.Fatalf("unknown label: %v", err)
	}
	// Latin-1 reads bytes 0x80–0x9F as Windows-1252 does.
	latin, _ := Lookup("latin1")
	if s, _ := latin.Decode([]byte{0x80, 0xE9}); s != "€é" {
		t.Fatalf("latin1 Decode = %q", s)
	}
}

// Every byte of Windows-1252 decodes to a character that encodes back to
// the same byte, so an edit never changes the bytes it did not touch.
func TestWindows1252RoundTripsEveryByte(t *testing.T) {
	e, _ := Lookup("windows-1252")
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	s, _ := e.Decode(all)
	back, err := e.Encode(s)
	if err != nil || !bytes.Equal(back, all) {
		t.Fatalf("round trip: %v\n% x", err, back)
	}
}
