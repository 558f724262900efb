package hostapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func TestCanonicalNumbers(t *testing.T) {
	intSchema := Schema{"type": "integer"}
	cases := []struct {
		in     any
		schema Schema
		want   any
		errHas string
	}{
		{json.Number("5"), nil, int64(5), ""},
		{json.Number("5.0"), nil, int64(5), ""},
		{json.Number("-2.5"), nil, -2.5, ""},
		{json.Number("1e3"), nil, int64(1000), ""},
		{5, nil, int64(5), ""},
		{int64(5), nil, int64(5), ""},
		{float64(5), nil, int64(5), ""},
		{float32(0.5), nil, 0.5, ""},
		{uint8(7), nil, int64(7), ""},
		// Exact integers past 2^53 only where the schema wants an integer.
		{json.Number("9007199254740993"), intSchema, int64(9007199254740993), ""},
		{json.Number("9007199254740993"), nil, nil, "beyond 2^53"},
		{json.Number("12345678901234567890"), intSchema, nil, "out of range"},
		{json.Number("12345678901234567890"), nil, nil, "beyond 2^53"},
		{1e19, intSchema, nil, "out of range"},
		{json.Number("1e19"), intSchema, nil, "out of range"},
		{1e19, nil, 1e19, ""},
		{math.NaN(), nil, nil, "finite"},
		{math.Inf(1), nil, nil, "finite"},
		{math.Inf(-1), intSchema, nil, "finite"},
		{uint64(math.MaxUint64), nil, nil, "out of range"},
	}
	for _, c := range cases {
		got, err := Canonical(c.in, c.schema)
		if c.errHas != "" {
			if apierr.CodeOf(err) != apierr.ValidationFailed || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("%#v: want VALIDATION_FAILED with %q, got %v, %v", c.in, c.errHas, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%#v: got %#v (%T), %v; want %#v", c.in, got, got, err, c.want)
		}
	}
}

func TestCanonicalNullMeansAbsent(t *testing.T) {
	schema := Schema{"type": "object", "properties": Schema{
		"id":   Schema{"type": "string"},
		"opt":  Schema{"type": "integer"},
		"nul":  Schema{"type": []any{"string", "null"}},
		"data": Schema{"type": "array"},
		"free": Schema{},
	}, "required": []any{"id"}}
	got, err := canonicalArgs(map[string]any{"id": nil, "opt": nil, "nul": nil, "data": []any{nil, 1.0}, "free": map[string]any{"x": nil}}, schema)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": nil, "nul": nil, "data": []any{nil, int64(1)}, "free": map[string]any{"x": nil}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

func TestCanonicalNamesThePath(t *testing.T) {
	schema := Schema{"type": "object", "properties": Schema{"data": Schema{"type": "array", "items": Schema{"type": "array"}}}}
	_, err := canonicalArgs(map[string]any{"data": []any{[]any{1, 2}, []any{3, math.NaN()}}}, schema)
	if err == nil || !strings.Contains(err.Error(), `"data[1][1]"`) {
		t.Fatalf("want the path data[1][1] in %v", err)
	}
}

func TestCanonicalDepth(t *testing.T) {
	var v any = "leaf"
	for i := 0; i < maxArgDepth+10; i++ {
		v = []any{v}
	}
	if _, err := Canonical(v, nil); apierr.CodeOf(err) != apierr.ValidationFailed {
		t.Fatalf("deep value: %v", err)
	}
}

func TestParseArgs(t *testing.T) {
	for _, raw := range []string{"", "  ", "null"} {
		if m, err := ParseArgs([]byte(raw)); err != nil || m != nil {
			t.Fatalf("%q: %v %v", raw, m, err)
		}
	}
	for _, raw := range []string{"[1]", `"x"`, `{"a":1} {"b":2}`, `{"a":`} {
		if _, err := ParseArgs([]byte(raw)); apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Fatalf("%q: want VALIDATION_FAILED, got %v", raw, err)
		}
	}
}

// Every door's number shape reaches a handler as the same int64.
func TestEveryNumberShapeReachesTheHandler(t *testing.T) {
	h := newTestHost(t)
	env := h.Env("default", "s")
	for _, n := range []any{3, int64(3), float64(3), json.Number("3"), json.Number("3.0")} {
		res, err := h.Registry.CallTool(context.Background(), env, "file_echo", map[string]any{"id": "a", "start_line": n, "end_line": nil})
		if err != nil {
			t.Fatalf("%T: %v", n, err)
		}
		if got := res.(map[string]any)["total_lines"]; got != float64(3) {
			t.Fatalf("%T: total_lines %v", n, got)
		}
	}
	res, err := h.Registry.CallToolJSON(context.Background(), env, "file_echo", []byte(`{"id":"a","start_line":4,"end_line":null}`))
	if err != nil || res.(map[string]any)["total_lines"] != float64(4) {
		t.Fatalf("JSON door: %v %v", res, err)
	}
	_, err = h.Registry.CallToolJSON(context.Background(), env, "file_echo", []byte(`{"id":"a","start_line":1e19}`))
	if apierr.CodeOf(err) != apierr.ValidationFailed || !strings.Contains(err.Error(), "start_line") {
		t.Fatalf("1e19: %v", err)
	}
	_, err = h.Registry.CallToolJSON(context.Background(), env, "file_echo", []byte(`{"id":"a","start_line":"5"}`))
	if apierr.CodeOf(err) != apierr.ValidationFailed || !strings.Contains(err.Error(), "start_line") {
		t.Fatalf("string number: %v", err)
	}
}

func TestOnCallHearsEveryCall(t *testing.T) {
	h := newTestHost(t)
	env := h.Env("default", "s")
	var heard []string
	env.OnCall = func(op *Op, args map[string]any, res any, err error, d time.Duration) {
		heard = append(heard, fmt.Sprintf("%s %v %v", op.Tool, args["start_line"], apierr.CodeOf(err)))
	}
	h.Registry.CallTool(context.Background(), env, "file_echo", map[string]any{"id": "a", "start_line": 2})
	h.Registry.CallTool(context.Background(), env, "file_echo", map[string]any{"id": "a", "start_line": "x"})
	want := []string{"file_echo 2 ", "file_echo x VALIDATION_FAILED"}
	if !reflect.DeepEqual(heard, want) {
		t.Fatalf("heard %q, want %q", heard, want)
	}
}
