package files

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"golang.org/x/text/encoding/charmap"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
)

// encoded writes text in one of the encodings the text tier reads, with
// the bytes an editor on that platform would write.
type encoded struct {
	name string // what results report
	bom  []byte
	enc  func(string) []byte
}

func utf16Bytes(s string, bigEndian bool) []byte {
	units := utf16.Encode([]rune(s))
	out := make([]byte, 0, 2*len(units))
	for _, u := range units {
		if bigEndian {
			out = append(out, byte(u>>8), byte(u))
		} else {
			out = append(out, byte(u), byte(u>>8))
		}
	}
	return out
}

func cp1252(s string) []byte {
	b, err := charmap.Windows1252.NewEncoder().String(s)
	if err != nil {
		panic(err)
	}
	return []byte(b)
}

var encodings = []encoded{
	{"windows-1252", nil, cp1252},
	{"utf-8-bom", []byte{0xEF, 0xBB, 0xBF}, func(s string) []byte { return []byte(s) }},
	{"utf-16le", []byte{0xFF, 0xFE}, func(s string) []byte { return utf16Bytes(s, false) }},
	{"utf-16be", []byte{0xFE, 0xFF}, func(s string) []byte { return utf16Bytes(s, true) }},
}

func (e encoded) file(s string) []byte { return append(append([]byte(nil), e.bom...), e.enc(s)...) }

func (f *fixture) upload(name string, data []byte) {
	f.t.Helper()
	hosttest.Upload(f.t, f.env.WS, name, data, true)
}

func (f *fixture) rawBody(ref string) []byte { return []byte(f.body(ref)) }

// call runs a meta-tool with raw JSON arguments (the HTTP/MCP/CLI door).
func (f *fixture) call(tool, raw string) (string, error) {
	f.t.Helper()
	v, err := f.h.Registry.CallToolJSON(context.Background(), f.env, tool, []byte(raw))
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(v)
	return string(b), nil
}

func jsonArgs(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestTextTierReadsEveryEncoding(t *testing.T) {
	const text = "name,city,amount (€)\nMuñoz,Málaga,1200\nGarcía,Sevilla,950\nMüller,Köln,780\n"
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			f := newFixture(t, hostapi.Config{})
			f.upload("data.csv", e.file(text))
			want, _ := json.Marshal(map[string]any{"content": text, "total_lines": 4, "encoding": e.name})
			if got := f.mustTool("file_read_text", jsonArgs("id", "data.csv")); got != string(want) {
				t.Fatalf("read whole:\n got %s\nwant %s", got, want)
			}
			if got := f.mustTool("file_read_text", jsonArgs("id", "data.csv", "start_line", 2, "end_line", 3)); !strings.Contains(got, `"content":"Muñoz,Málaga,1200\nGarcía,Sevilla,950\n"`) {
				t.Fatalf("read lines 2-3: %s", got)
			}
			if got := f.mustTool("file_read_text", jsonArgs("id", "data.csv", "end_line", 1)); !strings.Contains(got, `"content":"name,city,amount (€)\n"`) {
				t.Fatalf("line 1 must not carry the byte order mark: %s", got)
			}
			got := f.mustTool("file_search_text", jsonArgs("id", "data.csv", "pattern", "Muñoz|Köln"))
			if got != `{"encoding":"`+e.name+`","matches":[{"content":"Muñoz,Málaga,1200","line":2},{"content":"Müller,Köln,780","line":4}],"truncated":false}` {
				t.Fatalf("search: %s", got)
			}
			if got := f.mustTool("file_search_text", jsonArgs("id", "data.csv", "pattern", "^name")); !strings.Contains(got, `"line":1`) {
				t.Fatalf("a search anchored at the start of line 1 must not see the byte order mark: %s", got)
			}
			if got := f.mustTool("file_line_count", jsonArgs("id", "data.csv")); got != "4" {
				t.Fatalf("line count: %s", got)
			}

			// Edits keep the encoding (and the byte order mark).
			got = f.mustTool("file_replace_lines", jsonArgs("id", "data.csv", "start_line", 3, "end_line", 3, "content", "Núñez,Córdoba,1010"))
			if got != `{"encoding":"`+e.name+`","ok":true,"total_lines":4}` {
				t.Fatalf("replace: %s", got)
			}
			text2 := "name,city,amount (€)\nMuñoz,Málaga,1200\nNúñez,Córdoba,1010\nMüller,Köln,780\n"
			if b := f.rawBody("data.csv"); !bytes.Equal(b, e.file(text2)) {
				t.Fatalf("after replace the body is\n% x\nwant\n% x", b, e.file(text2))
			}
			f.mustTool("file_insert_lines", jsonArgs("id", "data.csv", "after_line", 0, "content", "# Umsätze"))
			f.mustTool("file_insert_lines", jsonArgs("id", "data.csv", "after_line", 5, "content", "Total,—,2990"))
			text3 := "# Umsätze\n" + text2 + "Total,—,2990\n"
			if b := f.rawBody("data.csv"); !bytes.Equal(b, e.file(text3)) {
				t.Fatalf("after inserts the body is\n% x\nwant\n% x", b, e.file(text3))
			}
			got = f.mustTool("file_write_text", jsonArgs("id", "data.csv", "content", "a;b\nç;€\n"))
			if want := fmt.Sprintf(`{"encoding":"%s","ok":true,"size":%d}`, e.name, len(e.file("a;b\nç;€\n"))); got != want {
				t.Fatalf("write: %s, want %s", got, want)
			}
			if b := f.rawBody("data.csv"); !bytes.Equal(b, e.file("a;b\nç;€\n")) {
				t.Fatalf("after write the body is % x", b)
			}
			// The earlier version is still one revert away.
			f.mustTool("file_revert", jsonArgs("id", "data.csv"))
			if b := f.rawBody("data.csv"); !bytes.Equal(b, e.file(text)) {
				t.Fatalf("after revert the body is % x", b)
			}
		})
	}
}

func TestEditsNeedingUTF8ConvertTheFile(t *testing.T) {
	f := newFixture(t, hostapi.Config{})
	// Without bytes 0x80-0x9F the file is reported as ISO-8859-1 (and read
	// as its superset Windows-1252).
	const text = "name,city\nMuñoz,Málaga\nMüller,Köln\n"
	f.upload("w.csv", cp1252(text))
	got := f.mustTool("file_replace_lines", jsonArgs("id", "w.csv", "start_line", 3, "end_line", 3, "content", "田中,東京"))
	if got != `{"converted_from":"iso-8859-1","ok":true,"total_lines":3}` {
		t.Fatalf("replace with CJK: %s", got)
	}
	if b := f.body("w.csv"); b != "name,city\nMuñoz,Málaga\n田中,東京\n" {
		t.Fatalf("the file must now be UTF-8: %q", b)
	}
	if got := f.mustTool("file_read_text", jsonArgs("id", "w.csv")); got != `{"content":"name,city\nMuñoz,Málaga\n田中,東京\n","total_lines":3}` {
		t.Fatalf("read after conversion: %s", got)
	}

	f.upload("x.csv", cp1252(text))
	if got := f.mustTool("file_insert_lines", jsonArgs("id", "x.csv", "after_line", 1, "content", "→ arrow")); got != `{"converted_from":"iso-8859-1","ok":true,"total_lines":4}` {
		t.Fatalf("insert with an arrow: %s", got)
	}
	if b := f.body("x.csv"); b != "name,city\n→ arrow\nMuñoz,Málaga\nMüller,Köln\n" {
		t.Fatalf("insert converted: %q", b)
	}
	f.upload("y.csv", cp1252(text))
	if got := f.mustTool("file_write_text", jsonArgs("id", "y.csv", "content", "Ωmega\n")); got != `{"converted_from":"iso-8859-1","ok":true,"size":7}` {
		t.Fatalf("write with omega: %s", got)
	}
	// UTF-8 with a byte order mark that must become plain UTF-8 never
	// does: every character fits. Neither does UTF-16.
	f.upload("z.txt", append([]byte{0xFF, 0xFE}, utf16Bytes("a\n", false)...))
	if got := f.mustTool("file_insert_lines", jsonArgs("id", "z.txt", "after_line", 1, "content", "田中 😀")); got != `{"encoding":"utf-16le","ok":true,"total_lines":2}` {
		t.Fatalf("UTF-16 holds everything: %s", got)
	}
	if b := f.rawBody("z.txt"); !bytes.Equal(b, append([]byte{0xFF, 0xFE}, utf16Bytes("a\n田中 😀\n", false)...)) {
		t.Fatalf("UTF-16 insert: % x", b)
	}
}

// TestUTF16LineIndex checks the two-byte newline: 0x0A bytes inside other
// characters are not line ends, and checkpoints land on code units.
func TestUTF16LineIndex(t *testing.T) {
	f := newFixture(t, hostapi.Config{})
	var lines []string
	for i := 1; i <= 1000; i++ {
		// Ċ is U+010A and ਅ U+0A05: both hold a 0x0A byte.
		lines = append(lines, fmt.Sprintf("Ċਅ line %d ✓", i))
	}
	text := strings.Join(lines, "\n") // no final newline
	for _, big := range []bool{false, true} {
		name := fmt.Sprintf("t-%v.txt", big)
		f.upload(name, append(map[bool][]byte{false: {0xFF, 0xFE}, true: {0xFE, 0xFF}}[big], utf16Bytes(text, big)...))
		for _, r := range [][2]int{{1, 1}, {255, 258}, {256, 256}, {257, 257}, {511, 513}, {990, 1000}, {1000, 1000}} {
			got := f.mustTool("file_read_text", jsonArgs("id", name, "start_line", r[0], "end_line", r[1]))
			content := strings.Join(lines[r[0]-1:r[1]], "\n")
			if r[1] < 1000 {
				content += "\n"
			}
			enc := "utf-16le"
			if big {
				enc = "utf-16be"
			}
			want, _ := json.Marshal(map[string]any{"content": content, "total_lines": 1000, "encoding": enc})
			if got != string(want) {
				t.Fatalf("%s lines %v:\n got %s\nwant %s", name, r, got, want)
			}
		}
		got := f.mustTool("file_search_text", jsonArgs("id", name, "pattern", `line (300|1000) `))
		if !strings.Contains(got, `"line":300`) || !strings.Contains(got, `"line":1000`) || strings.Count(got, `"line"`) != 2 {
			t.Fatalf("%s search: %s", name, got)
		}
		// Appending after the unterminated last line starts a new line.
		f.mustTool("file_insert_lines", jsonArgs("id", name, "after_line", 1000, "content", "end"))
		if got := f.mustTool("file_read_text", jsonArgs("id", name, "start_line", 1000)); !strings.Contains(got, `"content":"Ċਅ line 1000 ✓\nend"`) || !strings.Contains(got, `"total_lines":1001`) {
			t.Fatalf("%s append: %s", name, got)
		}
	}
}

func TestBOMLessUTF16AndBinary(t *testing.T) {
	f := newFixture(t, hostapi.Config{})
	f.upload("nobom.txt", utf16Bytes("Grüße\naus Köln\n", false))
	if got := f.mustTool("file_read_text", jsonArgs("id", "nobom.txt")); got != `{"content":"Grüße\naus Köln\n","encoding":"utf-16le","total_lines":2}` {
		t.Fatalf("BOM-less UTF-16: %s", got)
	}
	f.upload("blob.bin", []byte("\x00\x01\x02\x03binary\x00\xff\xfe\x00"))
	for _, tool := range []string{"file_read_text", "file_line_count", "file_search_text"} {
		args := jsonArgs("id", "blob.bin")
		if tool == "file_search_text" {
			args["pattern"] = "x"
		}
		f.expectCode(apierr.UnsupportedFormat, tool, args)
	}
	f.expectCode(apierr.UnsupportedFormat, "file_insert_lines", jsonArgs("id", "blob.bin", "after_line", 0, "content", "x"))
}

// TestLegacyBytesPastTheHead: Windows-1252 bytes that appear only after the
// first 64 KB still make the file Windows-1252, so no line reads back with
// U+FFFD.
func TestLegacyBytesPastTheHead(t *testing.T) {
	f := newFixture(t, hostapi.Config{})
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&b, "row %04d,plain ascii text here\n", i)
	}
	b.WriteString("last,Muñoz – 5 €\n")
	f.upload("late.csv", cp1252(b.String()))
	got := f.mustTool("file_read_text", jsonArgs("id", "late.csv", "start_line", 3001))
	if got != `{"content":"last,Muñoz – 5 €\n","encoding":"windows-1252","total_lines":3001}` {
		t.Fatalf("late legacy byte: %s", got)
	}
	if got := f.mustTool("file_search_text", jsonArgs("id", "late.csv", "pattern", "Muñoz")); !strings.Contains(got, `"line":3001`) {
		t.Fatalf("search: %s", got)
	}
}

func TestExampleFixturesDecode(t *testing.T) {
	f := newFixture(t, hostapi.Config{})
	dir := filepath.Join("..", "..", "testdata", "examples")
	for name, want := range map[string]string{
		"latin1.csv": `{"content":"name,city,amount (€)\nMuñoz,Málaga,1200\nGarcía,Sevilla,950\nMüller,Köln,780\n","encoding":"windows-1252","total_lines":4}`,
		"utf16.txt":  `{"content":"Grüße aus Köln\nZweite Zeile\nDritte Zeile: Straße\n","encoding":"utf-16le","total_lines":3}`,
		"bom.csv":    `{"content":"id,item,price\n1,Café,3.50\n2,Crème brûlée,6.00\n","encoding":"utf-8-bom","total_lines":3}`,
		"notes.md":   `{"content":"# Meeting notes\n- Budget approved\n- Hire two engineers\n- Next review: March\n","total_lines":4}`,
		"people.csv": `{"content":"name,city\nAna,Lisboa\nBo,Oslo\nCy,Rome\n","total_lines":4}`,
	} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f.upload(name, data)
		if got := f.mustTool("file_read_text", jsonArgs("id", name)); got != want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}
