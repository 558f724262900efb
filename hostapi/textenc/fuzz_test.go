package textenc

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
	xunicode "golang.org/x/text/encoding/unicode"
)

// seeds are real texts in the encodings the detector knows, plus the
// text fixtures of the examples folder.
func seeds(f *testing.F) [][]byte {
	le := xunicode.UTF16(xunicode.LittleEndian, xunicode.IgnoreBOM)
	out := [][]byte{
		nil, []byte("a"), []byte(people),
		append([]byte("\xef\xbb\xbf"), people...),
		append([]byte{0xFF, 0xFE}, encodeWith(f, le, people)...),
		encodeWith(f, le, people),
		encodeWith(f, charmap.Windows1252, "x;“quoted” – €5\n"),
		encodeWith(f, charmap.ISO8859_1, people),
		[]byte("\x89PNG\r\n\x1a\n\x00\x00"),
		[]byte("ok\xe2\x82"),
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "examples", "*"))
	for _, p := range files {
		switch strings.ToLower(filepath.Ext(p)) {
		case ".csv", ".tsv", ".txt", ".md", ".psv":
			if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
				out = append(out, b)
			}
		}
	}
	return out
}

// FuzzDetect: detection never fails on text-like input except with
// ErrBinary, decoding always yields valid UTF-8, and single-byte and
// Unicode encodings give back the exact bytes when encoded again.
func FuzzDetect(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DetectBytes(b)
		if err != nil {
			if err != ErrBinary {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if e.Confidence < 0 || e.Confidence > 1 || e.Name == "" {
			t.Fatalf("bad result %+v", e)
		}
		if _, err := Lookup(e.String()); err != nil {
			t.Fatalf("reported name %q does not look up: %v", e.String(), err)
		}
		text, err := e.Decode(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !utf8.ValidString(text) {
			t.Fatalf("decoded text is not UTF-8: %q", text)
		}
		body := b
		if e.BOM {
			body = b[len(e.BOMBytes()):]
		} else if e.Name == "utf-8" && bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
			t.Fatalf("BOM not reported")
		}
		if e.Name == "utf-8" && (e.Confidence == 1) != utf8.Valid(body) {
			t.Fatalf("confidence %v for UTF-8 whose validity is %v", e.Confidence, utf8.Valid(body))
		}
		roundTrips := (e.Name == "utf-8" && e.Confidence == 1) || e.Name == "windows-1252" || e.Name == "iso-8859-1" ||
			(strings.HasPrefix(e.Name, "utf-16") && !strings.ContainsRune(text, utf8.RuneError) && len(b)%2 == 0)
		if !roundTrips {
			return
		}
		out, err := e.Encode(text)
		if err != nil {
			t.Fatalf("encode of decoded %s text: %v", e, err)
		}
		if !bytes.Equal(out, body) {
			t.Fatalf("round trip changed the bytes:\n% x\n% x", body, out)
		}
	})
}

// FuzzWriter: writing a text in any split gives the same bytes as Encode.
func FuzzWriter(f *testing.F) {
	f.Add("Señor € café\n", uint8(1))
	f.Add("東京", uint8(2))
	f.Add("ok\xe2\x82", uint8(3))
	f.Fuzz(func(t *testing.T, s string, step uint8) {
		n := int(step%7) + 1
		for _, label := range []string{"utf-8", "windows-1252", "utf-16be"} {
			e, _ := Lookup(label)
			want, wantErr := e.Encode(s)
			var out bytes.Buffer
			w := e.NewWriter(&out)
			var err error
			for i := 0; i < len(s) && err == nil; i += n {
				_, err = w.Write([]byte(s[i:min(i+n, len(s))]))
			}
			if err == nil {
				err = w.Close()
			}
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("%s: writer err %v, Encode err %v", label, err, wantErr)
			}
			if err == nil && !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("%s: writer wrote % x, Encode % x", label, out.Bytes(), want)
			}
		}
	})
}
