package js

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// canonicalOf is what the registry makes of arguments: their canonical
// form, or the decoder's error message.
func canonicalOf(args map[string]any) (any, string) {
	v, err := hostapi.Canonical(args, nil)
	if err != nil {
		return nil, apierr.Of(err).Message
	}
	return v, ""
}

// checkSame requires fastArgs to read raw as ParseArgs does, or to leave
// it to ParseArgs.
func checkSame(t *testing.T, raw string) (fast bool) {
	t.Helper()
	got, ok := fastArgs([]byte(raw))
	want, err := hostapi.ParseArgs([]byte(raw))
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("%.80q: fastArgs read what ParseArgs refuses (%v)", raw, err)
	}
	if want == nil {
		want = map[string]any{}
	}
	gv, gerr := canonicalOf(got)
	wv, werr := canonicalOf(want)
	if gerr != werr || !reflect.DeepEqual(gv, wv) {
		t.Fatalf("%.80q: fast %v %q, ParseArgs %v %q", raw, gv, gerr, wv, werr)
	}
	return true
}

func TestFastArgsReadsAsParseArgs(t *testing.T) {
	fast := []string{
		`{}`, ` { } `, `{"id":"a.txt"}`, `{"a":1,"b":-2,"c":0,"d":-0,"e":1.5,"f":1e3,"g":1.0,"h":-1.25E-2}`,
		`{"big":9007199254740993,"max":9223372036854775807,"min":-9223372036854775808,"over":99999999999999999999}`,
		`{"f":1e400}`, `{"f":123456789012345678901234567890.5}`,
		`{"s":"plain","u":"héllo ✓","e":"a\"b\\c\/d\n\t\u00e9\ud83d\ude00","bad":"\ud800"}`,
		"{\"invalid\":\"\xff\xfe\"}",
		`{"t":true,"f":false,"n":null,"arr":[1,"x",[2,[3,{}]],null],"o":{"k":{"k":[]}}}`,
		`{"dup":1,"dup":2}`,
		`{"rows":[["item 0",1,2,3],["item 1",11,12,13]]}`,
	}
	for _, raw := range fast {
		if !checkSame(t, raw) {
			t.Errorf("%q: expected the fast path", raw)
		}
	}
	// Malformed input, input the fast path leaves to ParseArgs, and
	// ParseArgs' own refusals: never read differently.
	slow := []string{
		``, `null`, `[]`, `"x"`, `1`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":[1,]}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`,
		`{"a":-}`, `{"a":1e}`, `{"a":tru}`, `{"a":nul}`, `{"a":1} x`, `{"a":1}{}`, "{\"a\":\"x\ny\"}", `{"a":"x`, `{'a':1}`,
		`{"a":NaN}`, `{"a":Infinity}`, `{"a":+1}`, `{a:1}`,
		`{"deep":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`,
	}
	for _, raw := range slow {
		if checkSame(t, raw) {
			if _, err := hostapi.ParseArgs([]byte(raw)); err != nil {
				t.Errorf("%q: the fast path read malformed input", raw)
			}
		}
	}
	// Deep input is ParseArgs' to refuse with its message.
	if _, ok := fastArgs([]byte(`{"deep":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`)); ok {
		t.Error("300-deep arguments took the fast path")
	}
}

// A writeRange of 100,000 × 10 cells reads into the values the registry
// expects, the same as through ParseArgs.
func TestFastArgsBigRows(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"id":"w.xlsx","data":[`)
	for r := 0; r < 100000; r++ {
		if r > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `["item %d",%d,%d.5,true,null]`, r, r, r)
	}
	b.WriteString("]}")
	if !checkSame(t, b.String()) {
		t.Fatal("big rows took the slow path")
	}
	got, _ := fastArgs([]byte(b.String()))
	row := got["data"].([]any)[99999].([]any)
	if row[0] != "item 99999" || row[1] != int64(99999) || row[2] != 99999.5 || row[3] != true || row[4] != nil {
		t.Fatalf("last row: %#v", row)
	}
}

func FuzzFastArgs(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",{"b":null}]}`, `{"n":-0.0e+1}`, `{"s":"\u00e9\\"}`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if json.Valid([]byte(raw)) || strings.HasPrefix(raw, "{") {
			checkSame(t, raw)
		}
	})
}

func BenchmarkFastArgs(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"id":"w.xlsx","data":[`)
	for r := 0; r < 100000; r++ {
		if r > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `["item %d"`, r)
		for c := 1; c < 10; c++ {
			fmt.Fprintf(&sb, ",%d", r*10+c)
		}
		sb.WriteByte(']')
	}
	sb.WriteString("]}")
	raw := []byte(sb.String())
	b.Run("fastArgs", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, ok := fastArgs(raw); !ok {
				b.Fatal("slow path")
			}
		}
	})
	b.Run("ParseArgs", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := hostapi.ParseArgs(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
