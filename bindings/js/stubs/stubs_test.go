package stubs

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dop251/goja"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func encode(t *testing.T, vm *goja.Runtime, mode Mode, max int, src string) (string, *apierr.Error) {
	t.Helper()
	v, err := vm.RunString(src)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEncoder(vm, mode, max)
	wrote, aerr := e.Encode(v, "value", nil)
	if aerr != nil {
		return "", aerr
	}
	if !wrote {
		return "<nothing>", nil
	}
	return string(e.Bytes()), nil
}

func TestEncodeResultLikeJSONStringify(t *testing.T) {
	vm := goja.New()
	cases := []string{
		`({a: 1, b: "x", c: [1, 2.5, null, true], d: {e: {}}})`,
		`({n: NaN, i: Infinity, f: function() {}, u: undefined, s: Symbol("x")})`,
		`[undefined, function() {}, NaN, -0, 1e21, 1e-7, 0.1, 123456789012345]`,
		`({date: new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 6))})`,
		`({toJSON() { return {replaced: true} }})`,
		`({w: new Number(3), s: new String("s"), b: new Boolean(false)})`,
		`"quote \" backslash \\ newline \n tab \t ctl \u0001 emoji 😀"`,
		`({m: new Map([[1, 2]]), set: new Set([1]), re: /x/})`,
		`[[[]], {}, ""]`,
		`(() => { const o = {}; Object.defineProperty(o, "hidden", {value: 1, enumerable: false}); o.shown = 2; return o })()`,
		`({__proto__: {inherited: 1}, own: 2})`,
		`({"2": "b", "1": "a", "x": "c"})`,
		`new Uint8Array([1, 2])`,
	}
	for _, src := range cases {
		got, err := encode(t, vm, ForResult, 0, src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		want, _ := vm.RunString("JSON.stringify(" + src + ")")
		if got != want.String() {
			t.Errorf("%s:\n got %s\nwant %s", src, got, want)
		}
	}
}

func TestEncodeRefusesCyclesDepthAndSize(t *testing.T) {
	vm := goja.New()
	_, err := encode(t, vm, ForResult, 0, `(() => { const a = {x: [1]}; a.x.push({back: a}); return a })()`)
	if err == nil || err.Code != apierr.ValidationFailed || !strings.Contains(err.Message, `value at "x[1].back"`) || !strings.Contains(err.Message, "cycle") {
		t.Fatalf("cycle: %v", err)
	}
	// The same object twice is not a cycle.
	if got, err := encode(t, vm, ForResult, 0, `(() => { const s = {k: 1}; return {a: s, b: [s, s]} })()`); err != nil || got != `{"a":{"k":1},"b":[{"k":1},{"k":1}]}` {
		t.Fatalf("shared: %s %v", got, err)
	}
	_, err = encode(t, vm, ForArgs, 0, `(() => { let a = []; let c = a; for (let i = 0; i < 10000; i++) { c[0] = []; c = c[0] }; return a })()`)
	if err == nil || err.Code != apierr.ValidationFailed || !strings.Contains(err.Message, "nested more than 256 levels") || !strings.Contains(err.Message, `argument "value[0][0]`) {
		t.Fatalf("deep: %v", err)
	}
	_, err = encode(t, vm, ForResult, 100, `"x".repeat(200)`)
	if err == nil || err.Code != apierr.TooLarge {
		t.Fatalf("size: %v", err)
	}
	_, err = encode(t, vm, ForResult, 1000, `Array.from({length: 500}, (_, i) => i)`)
	if err == nil || err.Code != apierr.TooLarge {
		t.Fatalf("size of many values: %v", err)
	}
	// Logs never fail: cycles and depth print as markers.
	got, err := encode(t, vm, ForLog, 0, `(() => { const b = {n: 1, f() {}}; b.me = b; return b })()`)
	if err != nil || got != `{"n":1,"f":"[Function]","me":"[Circular]"}` {
		t.Fatalf("log: %s %v", got, err)
	}
}

func TestEncodeArgsIsStrict(t *testing.T) {
	vm := goja.New()
	for src, want := range map[string]string{
		`({x: NaN})`:         `argument "value.x": NaN is not a number`,
		`({x: [Infinity]})`:  `argument "value.x[0]": Infinity is not a number`,
		`({f() {}})`:         `argument "value.f": a function cannot be passed`,
		`({b: 10n})`:         `argument "value.b": a BigInt cannot be passed`,
		`({s: Symbol("q")})`: `argument "value.s": a Symbol cannot be passed`,
		`({get g() { throw new Error("boom") }})`: `reading the argument threw Error: boom`,
	} {
		_, err := encode(t, vm, ForArgs, 0, src)
		if err == nil || err.Code != apierr.ValidationFailed || !strings.Contains(err.Message, want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
	got, err := encode(t, vm, ForArgs, 0, `({d: new Date(Date.UTC(2024, 0, 2)), b: new Uint8Array([104, 105]), ab: new Uint8Array([1]).buffer, u: undefined, a: [undefined]})`)
	if err != nil || got != `{"d":"2024-01-02T00:00:00.000Z","b":"aGk=","ab":"AQ==","a":[null]}` {
		t.Fatalf("args: %s %v", got, err)
	}
}

func TestShapesRenameDeclaredKeysOnly(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"number_format": map[string]any{"type": "string"},
		"overlays":      map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{"max_width": map[string]any{}}}},
		"fields":        map[string]any{"type": "object"},
	}}
	vm := goja.New()
	v, _ := vm.RunString(`({numberFormat: "0.00", overlays: [{maxWidth: 3}], fields: {firstName: "Ada"}})`)
	e := NewEncoder(vm, ForArgs, 0)
	if _, err := e.Encode(v, "format", ShapeOf(schema)); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(e.Bytes(), &got)
	b, _ := json.Marshal(got)
	if string(b) != `{"fields":{"firstName":"Ada"},"number_format":"0.00","overlays":[{"max_width":3}]}` {
		t.Fatalf("got %s", b)
	}
}

func TestDecodeBuildsPlainValues(t *testing.T) {
	vm := goja.New()
	src := `{"b":1,"a":[1,-2.5,1e3,9007199254740993,null,true,false,"s\u00e9\n\ud83d\ude00\"","\ud800x"],"__proto__":{"polluted":1},"o":{}}`
	v, err := Decode(vm, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	vm.Set("v", v)
	got, _ := vm.RunString(`[Object.keys(v).join(","), typeof v.a[2], v.a[2], v.a[3], v.a[7], Object.getPrototypeOf(v) === Object.prototype, ({}).polluted, v.__proto__.polluted, Array.isArray(v.a), v.a[8].length].join("|")`)
	want := "b,a,__proto__,o|number|1000|9007199254740992|sé\n😀\"|true||1|true|2"
	if got.String() != want {
		t.Fatalf("got  %q\nwant %q", got.String(), want)
	}
	for _, bad := range []string{``, `{`, `[1,]`, `{"a" 1}`, `"\x01"`, `"\u12"`, `tru`, `1 2`, `{"a":1}}`, `-`} {
		if _, err := Decode(vm, []byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
	deep := strings.Repeat("[", 300) + strings.Repeat("]", 300)
	if _, err := Decode(vm, []byte(deep)); err == nil {
		t.Error("300 levels decoded")
	}
}

func TestLoneSurrogatesBecomeReplacementCharacters(t *testing.T) {
	vm := goja.New()
	got, err := encode(t, vm, ForResult, 0, `"a\ud800b"`)
	if err != nil || got != "\"a\uFFFDb\"" && got != "\"a\ufffdb\"" && got != "\"a�b\"" {
		t.Fatalf("got %s %v", got, err)
	}
}

func TestStringJSONLenMatchesEncoding(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\"back\\", "\n\r\t\x00\x1f", "é😀", string([]byte{0xff, 'a'})} {
		got := len(appendString(nil, s))
		if StringJSONLen(s) != got {
			t.Errorf("%q: len %d, encoded %d", s, StringJSONLen(s), got)
		}
		if !utf8.Valid(appendString(nil, s)) || !json.Valid(appendString(nil, s)) {
			t.Errorf("%q: invalid JSON", s)
		}
	}
	_ = math.MaxInt
}
