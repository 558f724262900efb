package js

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dop251/goja"

	"github.com/metaclaw/metaclaw/hostapi"
)

func TestFromJSRenamesOnlyDeclaredKeys(t *testing.T) {
	schema := hostapi.Schema{"type": "object", "properties": hostapi.Schema{
		"number_format": hostapi.String(),
		"overlays":      hostapi.ArrayOf(hostapi.Object(hostapi.Schema{"max_width": hostapi.Integer()})),
		"fields":        hostapi.Schema{"type": "object"},
	}}
	in := map[string]any{
		"numberFormat": "0.00",
		"overlays":     []any{map[string]any{"maxWidth": int64(3)}},
		"fields":       map[string]any{"firstName": "Ada"},
	}
	got, _ := json.Marshal(FromJS(in, schema))
	if string(got) != `{"fields":{"firstName":"Ada"},"number_format":"0.00","overlays":[{"max_width":3}]}` {
		t.Fatalf("got %s", got)
	}
}

type demoResult struct {
	TotalLines int            `json:"totalLines"`
	Items      []string       `json:"items"`
	Extra      map[string]int `json:"extra,omitempty"`
}

func TestStubsBuildArgumentsFromSlots(t *testing.T) {
	reg := hostapi.NewRegistry()
	var got map[string]any
	reg.Add(hostapi.Op{
		Name: "files.demo.op", Tool: "demo_op",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "start_line", Schema: hostapi.Integer(), Group: "options"},
			{Name: "in_place", Schema: hostapi.Boolean(), Group: "options"}},
		Result:  demoResult{},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) { return nil, nil },
	})
	vm := goja.New()
	plan := NewPlan(reg)
	err := plan.Install(vm, func(op *hostapi.Op, args map[string]any) goja.Value {
		got = args
		return ToJS(vm, demoResult{TotalLines: 3, Items: []string{"a"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err := vm.RunString(`JSON.stringify(files.demo.op("a.txt", {startLine: 2, inPlace: true}))`)
	if err != nil {
		t.Fatal(err)
	}
	if v.String() != `{"totalLines":3,"items":["a"]}` {
		t.Fatalf("result %s", v)
	}
	if b, _ := json.Marshal(got); string(b) != `{"id":"a.txt","in_place":true,"start_line":2}` {
		t.Fatalf("args %s", b)
	}
	// Unknown options and extra arguments reject the promise with VALIDATION_FAILED.
	for _, code := range []string{`files.demo.op("a", {nope: 1})`, `files.demo.op("a", {}, 3)`, `files.demo.op("a", 5)`} {
		v, err := vm.RunString(code)
		if err != nil {
			t.Fatal(err)
		}
		p := v.Export().(*goja.Promise)
		if p.State() != goja.PromiseStateRejected || p.Result().ToObject(vm).Get("code").String() != "VALIDATION_FAILED" {
			t.Fatalf("%s: %v %v", code, p.State(), p.Result())
		}
	}
	// Nothing but plain values crossed: the namespace has no Go object.
	if v, _ := vm.RunString(`Object.getPrototypeOf(files) === Object.prototype && typeof files.demo.op`); v.String() != "function" {
		t.Fatalf("namespace shape: %v", v)
	}
}
