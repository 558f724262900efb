package hostapi

import (
	"encoding/json"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// FuzzParseArgs feeds arbitrary bytes to the decoder every JSON door uses:
// it must answer canonical arguments or a VALIDATION_FAILED, never panic,
// and what it accepts must survive a round trip through JSON unchanged.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, ``, `{"id":"a.txt","start_line":3,"end_line":null}`,
		`{"n":9007199254740993}`, `{"n":12345678901234567890}`, `{"f":1e308,"g":-0.0,"h":1e-320}`,
		`{"data":[[1,"x",null,true,{"formula":"SUM(A1:A3)"}]]}`, `{"a":{"b":{"c":[1.5,2]}}}`,
		`[1]`, `{"a":1} {"b":2}`, `{"a":`, `{"\u0000":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	schema := Schema{"type": "object", "properties": Schema{
		"start_line": Schema{"type": "integer"}, "end_line": Schema{"type": "integer"},
		"data": Schema{"type": "array", "items": Schema{"type": "array"}},
	}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := ParseArgs(raw)
		if err != nil {
			if apierr.CodeOf(err) != apierr.ValidationFailed {
				t.Fatalf("ParseArgs: %v", err)
			}
			return
		}
		canon, err := canonicalArgs(m, schema)
		if err != nil {
			if apierr.CodeOf(err) != apierr.ValidationFailed {
				t.Fatalf("canonical: %v", err)
			}
			return
		}
		b, err := json.Marshal(canon)
		if err != nil {
			t.Fatalf("canonical args do not encode: %v", err)
		}
		m2, err := ParseArgs(b)
		if err != nil {
			t.Fatalf("re-parse %s: %v", b, err)
		}
		canon2, err := canonicalArgs(m2, schema)
		if err != nil {
			t.Fatalf("re-canonical %s: %v", b, err)
		}
		b2, _ := json.Marshal(canon2)
		if string(b) != string(b2) {
			t.Fatalf("round trip changed the arguments: %s → %s", b, b2)
		}
	})
}
