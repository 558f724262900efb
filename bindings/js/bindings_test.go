package js

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/metaclaw/metaclaw/bindings/js/stubs"
	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

type demoResult struct {
	TotalLines int            `json:"totalLines"`
	Items      []string       `json:"items"`
	Extra      map[string]int `json:"extra,omitempty"`
	When       time.Time      `json:"when"`
	Raw        []byte         `json:"raw"`
	Ptr        *int           `json:"ptr"`
}

func demoRegistry() *hostapi.Registry {
	reg := hostapi.NewRegistry()
	reg.Add(hostapi.Op{
		Name: "files.demo.op", Tool: "demo_op",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "start_line", Schema: hostapi.Integer(), Group: "options"},
			{Name: "in_place", Schema: hostapi.Boolean(), Group: "options"},
			{Name: "format", Schema: hostapi.Object(hostapi.Schema{"number_format": hostapi.String()}), Group: "options"}},
		Result:  demoResult{},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) { return nil, nil },
	}, hostapi.Op{Tool: "tool_only", Result: 0, Handler: func(ctx context.Context, c *hostapi.Call) (any, error) { return 1, nil }},
		hostapi.Op{Name: "tools.ping", Result: 0, Handler: func(ctx context.Context, c *hostapi.Call) (any, error) { return 1, nil }})
	return reg
}

func TestSpecTravelsAndBuildsStubs(t *testing.T) {
	reg := demoRegistry()
	spec, ops := Spec(reg)
	if len(spec.Methods) != 2 || len(ops) != 2 || ops[0].Name != "files.demo.op" || ops[1].Name != "tools.ping" {
		t.Fatalf("spec: %+v", spec.Methods)
	}
	// The spec crosses a process boundary as JSON.
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var back stubs.Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	vm := goja.New()
	var gotMethod int
	var gotArgs string
	_, err = stubs.NewPlan(&back).Install(vm, func(method int, args []byte) goja.Value {
		gotMethod, gotArgs = method, string(args)
		v, _ := stubs.Decode(vm, EncodeResult(demoResult{TotalLines: 3, Items: []string{"a"}}))
		p, resolve, _ := vm.NewPromise()
		resolve(v)
		return vm.ToValue(p)
	}, stubs.Options{MaxArgBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vm.RunString(`var r; files.demo.op("a.txt", {startLine: 2, inPlace: true, format: {numberFormat: "0.0"}}).then(x => r = x)`); err != nil {
		t.Fatal(err)
	}
	v, _ := vm.RunString(`JSON.stringify(r)`)
	if v.String() != `{"totalLines":3,"items":["a"],"when":"0001-01-01T00:00:00Z","raw":"","ptr":null}` {
		t.Fatalf("result %s", v)
	}
	if gotMethod != 0 || gotArgs != `{"id":"a.txt","start_line":2,"in_place":true,"format":{"number_format":"0.0"}}` {
		t.Fatalf("call %d %s", gotMethod, gotArgs)
	}
	// Unknown options and extra arguments reject the promise with VALIDATION_FAILED.
	for _, code := range []string{`files.demo.op("a", {nope: 1})`, `files.demo.op("a", {}, 3)`, `files.demo.op("a", 5)`, `files.demo.op("a", [1])`} {
		v, err := vm.RunString(code)
		if err != nil {
			t.Fatal(err)
		}
		p := v.Export().(*goja.Promise)
		if p.State() != goja.PromiseStateRejected || p.Result().ToObject(vm).Get("code").String() != "VALIDATION_FAILED" {
			t.Fatalf("%s: %v %v", code, p.State(), p.Result())
		}
	}
	// Namespaces look like plain objects and can be changed by the script.
	v, _ = vm.RunString(`[Object.getPrototypeOf(files) === Object.prototype, typeof files.demo.op, Object.keys(files).join(), Object.keys(tools).join(),
		files.demo === files.demo, "tool_only" in tools, (files.extra = 1, Object.keys(files).join()), (delete files.demo, typeof files.demo)].join("|")`)
	if v.String() != "true|function|demo|ping|true|false|demo,extra|undefined" {
		t.Fatalf("namespaces: %s", v)
	}
}

func TestErrorsUseTheIntrinsicError(t *testing.T) {
	vm := goja.New()
	sb, err := stubs.NewPlan(&stubs.Spec{}).Install(vm, nil, stubs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vm.RunString(`Error = 5; globalThis.Error = function() { return {hijacked: true} }`)
	e := sb.Error(apierr.New(apierr.NotFound, "no such file"))
	vm.Set("e", e)
	v, _ := vm.RunString(`[e.code, e.message, e.hijacked, Object.prototype.toString.call(e)].join("|")`)
	if v.String() != "NOT_FOUND|no such file||[object Error]" {
		t.Fatalf("error: %s", v)
	}
}

// EncodeResult writes the same values as hostapi.Project(v, CamelCase), in
// declaration order.
func TestEncodeResultMatchesProject(t *testing.T) {
	n := 7
	type inner struct {
		MimeType string `json:"mimeType"`
		Hidden   string `json:"-"`
		Zero     int    `json:"zero,omitempty"`
	}
	type outer struct {
		inner
		Cells    [][]any          `json:"cells"`
		Map      map[string]any   `json:"map"`
		IntMap   map[int]string   `json:"intMap"`
		Nil      []string         `json:"nil"`
		NilMap   map[string]int   `json:"nilMap"`
		Float    float64          `json:"float"`
		Big      int64            `json:"big"`
		Uint     uint32           `json:"uint"`
		Raw      json.RawMessage  `json:"raw"`
		Any      any              `json:"any"`
		Ptr      *int             `json:"ptr"`
		Time     time.Time        `json:"time"`
		Bytes    []byte           `json:"bytes"`
		Arr      [2]bool          `json:"arr"`
		Children []inner          `json:"children"`
		Iface    map[string][]int `json:"iface"`
	}
	v := outer{inner: inner{MimeType: "text/csv"}, Cells: [][]any{{1, "a", nil, true, 2.5}}, Map: map[string]any{"b": 1, "a": []any{"x"}},
		IntMap: map[int]string{2: "two", 10: "ten"}, Float: 0.1, Big: 1 << 40, Uint: 7, Raw: json.RawMessage(`{"z": 1, "a": 2}`),
		Any: map[string]any{"k": int64(3)}, Ptr: &n, Time: time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC), Bytes: []byte("hi"),
		Children: []inner{{MimeType: "a"}}, Iface: map[string][]int{"q": {1}}}
	var fromUs, fromProject any
	if err := json.Unmarshal(EncodeResult(v), &fromUs); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(hostapi.Project(v, hostapi.CamelCase))
	json.Unmarshal(b, &fromProject)
	if !reflect.DeepEqual(fromUs, fromProject) {
		t.Fatalf("\n ours    %s\n project %s", EncodeResult(v), b)
	}
	if got := string(EncodeResult(v))[:40]; got != `{"mimeType":"text/csv","cells":[[1,"a",n` {
		t.Fatalf("order: %s", got)
	}
	if got := string(EncodeResult([]any{math.NaN(), math.Inf(1), 1e300})); got != `[null,null,1e+300]` {
		t.Fatalf("non-finite: %s", got)
	}
}
