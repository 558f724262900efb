package files

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// TestIntegersOutOfRange sends every integer parameter of the files area,
// as raw JSON, values outside its range: beyond int64 (which once wrapped
// to 0 and wrote at the start of the file), beyond 2^53, negative,
// fractional, as a string, null when required. Each is VALIDATION_FAILED
// naming the argument, and the file is unchanged.
func TestIntegersOutOfRange(t *testing.T) {
	f := newFixture(t, hostapi.Config{})
	f.mustTool("file_create", jsonArgs("name", "t.txt", "content", "l1\nl2\nl3\n"))
	data := `"` + base64.StdEncoding.EncodeToString([]byte("XYZ")) + `"`
	huge := []string{"1e19", "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e300", "9007199254740992"}
	bad := append([]string{"1.5", `"2"`, "true", "[1]"}, huge...)
	cases := []struct {
		tool, arg, base string
		also            []string // more bad values for this argument
	}{
		{"file_read_text", "start_line", `"id":"t.txt"`, []string{"0", "-1"}},
		{"file_read_text", "end_line", `"id":"t.txt"`, []string{"0", "-3"}},
		{"file_replace_lines", "start_line", `"id":"t.txt","end_line":1,"content":"x"`, []string{"0", "null"}},
		{"file_replace_lines", "end_line", `"id":"t.txt","start_line":1,"content":"x"`, []string{"0", "null"}},
		{"file_insert_lines", "after_line", `"id":"t.txt","content":"x"`, []string{"-1", "null"}},
		{"file_search_text", "max_matches", `"id":"t.txt","pattern":"l"`, []string{"0", "100001"}},
		{"file_read_bytes", "offset", `"id":"t.txt","length":1`, []string{"-1", "null"}},
		{"file_read_bytes", "length", `"id":"t.txt","offset":0`, []string{"-1", "4194305", "null"}},
		{"file_write_bytes", "offset", `"id":"t.txt","data":` + data, []string{"-1", "null"}},
	}
	before := f.snapshot()
	for _, c := range cases {
		for _, v := range append(append([]string(nil), bad...), c.also...) {
			raw := "{" + c.base + `,"` + c.arg + `":` + v + "}"
			_, err := f.call(c.tool, raw)
			if apierr.CodeOf(err) != apierr.ValidationFailed {
				t.Errorf("%s %s: want VALIDATION_FAILED, got %v", c.tool, raw, err)
				continue
			}
			if !strings.Contains(err.Error(), c.arg) {
				t.Errorf("%s %s: the error does not name %s: %v", c.tool, raw, c.arg, err)
			}
		}
	}
	if after := f.snapshot(); after != before || f.body("t.txt") != "l1\nl2\nl3\n" {
		t.Fatalf("refused calls changed the workspace:\n%s\n%s", before, after)
	}

	// In range for the schema but past the file: the operation's own
	// check, still VALIDATION_FAILED, still nothing written.
	for _, c := range []struct{ tool, raw string }{
		{"file_write_bytes", `{"id":"t.txt","offset":9007199254740991,"data":` + data + `}`},
		{"file_write_bytes", `{"id":"t.txt","offset":10,"data":` + data + `}`},
		{"file_read_bytes", `{"id":"t.txt","offset":9007199254740991,"length":3}`},
		{"file_insert_lines", `{"id":"t.txt","after_line":9007199254740991,"content":"x"}`},
		{"file_insert_lines", `{"id":"t.txt","after_line":4,"content":"x"}`},
		{"file_replace_lines", `{"id":"t.txt","start_line":1,"end_line":9007199254740991,"content":"x"}`},
		{"file_replace_lines", `{"id":"t.txt","start_line":9007199254740991,"end_line":9007199254740991,"content":"x"}`},
		{"file_read_text", `{"id":"t.txt","start_line":9007199254740991}`},
	} {
		if _, err := f.call(c.tool, c.raw); apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Errorf("%s %s: want VALIDATION_FAILED, got %v", c.tool, c.raw, err)
		}
	}
	if f.body("t.txt") != "l1\nl2\nl3\n" {
		t.Fatalf("the file changed: %q", f.body("t.txt"))
	}

	// The largest end_line is a valid "to the end"; null means absent.
	if got, err := f.call("file_read_text", `{"id":"t.txt","start_line":2,"end_line":9007199254740991}`); err != nil || got != `{"content":"l2\nl3\n","total_lines":3}` {
		t.Fatalf("end_line at the maximum: %s %v", got, err)
	}
	if got, err := f.call("file_read_text", `{"id":"t.txt","start_line":null,"end_line":null}`); err != nil || got != `{"content":"l1\nl2\nl3\n","total_lines":3}` {
		t.Fatalf("null options: %s %v", got, err)
	}
	if got, err := f.call("file_search_text", `{"id":"t.txt","pattern":"l","max_matches":null}`); err != nil || strings.Count(got, `"line"`) != 3 {
		t.Fatalf("null max_matches: %s %v", got, err)
	}
	// Numbers written as floats with an integral value are integers.
	if got, err := f.call("file_read_bytes", `{"id":"t.txt","offset":3.0,"length":2e0}`); err != nil || got != `"`+base64.StdEncoding.EncodeToString([]byte("l2"))+`"` {
		t.Fatalf("integral floats: %s %v", got, err)
	}
	if got, err := f.call("file_write_bytes", `{"id":"t.txt","offset":9,"data":`+data+`}`); err != nil || got != `{"ok":true,"size":12}` || f.body("t.txt") != "l1\nl2\nl3\nXYZ" {
		t.Fatalf("write at the end: %s %v %q", got, err, f.body("t.txt"))
	}
}
