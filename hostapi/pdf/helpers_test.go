package pdf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// testEnv is a real host with the PDF operations registered.
type testEnv struct {
	t   testing.TB
	h   *hostapi.Host
	env *hostapi.Env
	ctx context.Context
}

func newTestEnv(t testing.TB) *testEnv {
	return newTestEnvAt(t, t.TempDir())
}

// testCacheDir holds pdfium's compiled code for the tests: the user's
// cache, as in production, so that only the first test run on a machine
// compiles pdfium; a temporary directory when the user has no cache.
var testCacheDir = sync.OnceValue(func() string {
	if d := DefaultCacheDir(); d != "" {
		return d
	}
	d, err := os.MkdirTemp("", "pdf-wazero-")
	if err != nil {
		panic(err)
	}
	return d
})

func newTestEnvAt(t testing.TB, dir string) *testEnv {
	t.Helper()
	return newTestEnvWith(t, hostapi.Config{DataDir: dir})
}

// newTestEnvWith is a test host built from cfg, which names its DataDir.
func newTestEnvWith(t testing.TB, cfg hostapi.Config) *testEnv {
	t.Helper()
	return newTestEnvOpts(t, cfg, Options{CacheDir: testCacheDir()})
}

// newTestEnvOpts is a test host built from cfg with the PDF options o.
func newTestEnvOpts(t testing.TB, cfg hostapi.Config, o Options) *testEnv {
	t.Helper()
	h := hosttest.New(t, cfg, RegisterWith(o))
	return &testEnv{t: t, h: h, env: h.Env("default", "test-session"), ctx: context.Background()}
}

func (e *testEnv) upload(name string, data []byte) *store.File {
	e.t.Helper()
	return hosttest.Upload(e.t, e.env.WS, name, data, false)
}

// tool calls a meta-tool and returns its snake_case result.
func (e *testEnv) tool(name string, args map[string]any) (any, error) {
	return e.h.Registry.CallTool(e.ctx, e.env, name, args)
}

func (e *testEnv) mustTool(name string, args map[string]any) map[string]any {
	e.t.Helper()
	res, err := e.tool(name, args)
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	m, ok := res.(map[string]any)
	if !ok {
		e.t.Fatalf("%s: result is %T", name, res)
	}
	return m
}

// js invokes an op the way a script does (camelCase Go values back).
func (e *testEnv) js(name string, args map[string]any) (any, error) {
	op := e.h.Registry.ByName(name)
	if op == nil {
		e.t.Fatalf("no op %s", name)
	}
	return e.h.Registry.Invoke(e.ctx, e.env, op, args)
}

func (e *testEnv) file(ref string) *store.File {
	e.t.Helper()
	f, err := e.env.WS.Resolve(e.ctx, ref)
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

func (e *testEnv) body(ref string) []byte {
	e.t.Helper()
	var b []byte
	err := e.env.WS.View(e.ctx, ref, func(f *store.File, path string) error {
		var err error
		b, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// wantCode asserts err carries code.
func wantCode(t testing.TB, err error, code apierr.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s, got no error", code)
	}
	if got := apierr.CodeOf(err); got != code {
		t.Fatalf("want %s, got %s (%v)", code, got, err)
	}
}

// pageTexts pulls the text of every page out of an extract result.
func pageTexts(t testing.TB, res map[string]any) []string {
	t.Helper()
	var out []string
	for _, p := range res["pages"].([]any) {
		out = append(out, p.(map[string]any)["text"].(string))
	}
	return out
}

// textPDF builds a PDF with pdfcpu's creation API: one Helvetica 12 line per
// entry, 16 points apart, from the top-left of an A4 page.
func textPDF(t testing.TB, pages [][]string) []byte {
	t.Helper()
	type text struct {
		Value string         `json:"value"`
		Pos   [2]float64     `json:"pos"`
		Font  map[string]any `json:"font"`
	}
	pm := map[string]any{}
	for i, lines := range pages {
		tt := []text{}
		for j, l := range lines {
			tt = append(tt, text{Value: l, Pos: [2]float64{72, 72 + float64(j)*16}, Font: map[string]any{"name": "Helvetica", "size": 12}})
		}
		pm[fmt.Sprint(i+1)] = map[string]any{"content": map[string]any{"text": tt}}
	}
	js, _ := json.Marshal(map[string]any{"paper": "A4P", "origin": "UpperLeft", "pages": pm})
	return createPDF(t, string(js))
}

func createPDF(t testing.TB, js string) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := api.Create(nil, strings.NewReader(js), &out, model.NewDefaultConfiguration()); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// formJSON is a one-page form with a field of every fillable kind.
const formJSON = `{"paper":"A4P","origin":"UpperLeft",
"fonts":{"input":{"name":"Helvetica","size":12},"label":{"name":"Helvetica","size":12}},
"pages":{"1":{"content":{
 "textfield":[{"id":"name","value":"","pos":[100,100],"width":200},
              {"id":"city","value":"Paris","pos":[100,130],"width":200},
              {"id":"notes","value":"","pos":[100,300],"width":200,"height":60,"multiline":true}],
 "checkbox":[{"id":"agree","value":false,"pos":[100,160],"width":12}],
 "radiobuttongroup":[{"id":"gender","value":"","orientation":"hor","pos":[100,190],"width":12,
    "buttons":{"values":["female","male"],"label":{"value":"x","width":50,"gap":5,"pos":"right"}}}],
 "combobox":[{"id":"color","value":"red","options":["red","green","blue"],"pos":[100,220],"width":100}],
 "listbox":[{"id":"fruit","value":"apple","options":["apple","pear","plum"],"pos":[100,250],"width":100,"height":40}]
}}}}`

func formPDF(t testing.TB) []byte { return createPDF(t, formJSON) }

func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.NRGBA{R: uint8(x * 255 / w), G: 80, B: uint8(y * 255 / h), A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i)
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// popplerText runs poppler's pdftotext, an independent reader, on data.
func popplerText(t testing.TB, data []byte, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext (poppler-utils) is not installed; skipping the independent-reader check")
	}
	p := filepath.Join(t.TempDir(), "in.pdf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, extra...), p, "-")
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext: %v: %s", err, out)
	}
	return string(out)
}

// rawPDF writes objects 1..n (bodies given) with a classic xref table;
// object 1 must be the catalog.
func rawPDF(objs []string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// manyPagesPDF has n pages that all show "Page text" (one shared content
// stream), written directly so that building it takes milliseconds.
func manyPagesPDF(n int) []byte {
	objs := []string{"<< /Type /Catalog /Pages 2 0 R >>", ""}
	kids := make([]string, n)
	content := `<< /Length 44 >>
stream
BT /F1 12 Tf 72 720 Td (Page text) Tj ET    
endstream`
	objs = append(objs, content, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i := 0; i < n; i++ {
		kids[i] = fmt.Sprintf("%d 0 R", len(objs)+1)
		objs = append(objs, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources << /Font << /F1 4 0 R >> >> >>")
	}
	objs[1] = fmt.Sprintf("<< /Type /Pages /Count %d /Kids [%s] >>", n, strings.Join(kids, " "))
	return rawPDF(objs)
}

// withButtonAndSignature adds a push button and an unsigned signature field
// to page 1 of a form PDF, kinds pdfcpu's creation API does not make.
func withButtonAndSignature(t testing.TB, data []byte) []byte {
	t.Helper()
	ctx, err := api.ReadAndValidate(bytes.NewReader(data), model.NewDefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	x := ctx.XRefTable
	pd, pageRef, _, err := ctx.PageDict(1, false)
	if err != nil {
		t.Fatal(err)
	}
	annots, _ := x.DereferenceArray(pd["Annots"])
	fields, _ := x.DereferenceArray(x.Form["Fields"])
	for _, d := range []types.Dict{
		{"FT": types.Name("Btn"), "Ff": types.Integer(ffPushbutton), "T": types.StringLiteral("submit"),
			"Type": types.Name("Annot"), "Subtype": types.Name("Widget"), "P": *pageRef,
			"Rect": types.Array{types.Integer(400), types.Integer(700), types.Integer(480), types.Integer(720)}},
		{"FT": types.Name("Sig"), "T": types.StringLiteral("signature"),
			"Type": types.Name("Annot"), "Subtype": types.Name("Widget"), "P": *pageRef,
			"Rect": types.Array{types.Integer(0), types.Integer(0), types.Integer(0), types.Integer(0)}},
	} {
		ref, err := x.IndRefForNewObject(d)
		if err != nil {
			t.Fatal(err)
		}
		annots = append(annots, *ref)
		fields = append(fields, *ref)
	}
	pd["Annots"] = annots
	x.Form["Fields"] = fields
	var out bytes.Buffer
	if err := api.WriteContext(ctx, &out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// withProperties sets the document's title and author.
func withProperties(t testing.TB, data []byte, props map[string]string) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := api.AddProperties(bytes.NewReader(data), &out, props, model.NewDefaultConfiguration()); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// rotated turns the given pages by deg degrees clockwise.
func rotated(t testing.TB, data []byte, deg int, pages ...string) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := api.Rotate(bytes.NewReader(data), &out, deg, pages, model.NewDefaultConfiguration()); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// encrypted protects data with AES-256; an empty user password opens
// without a password (owner-restricted only).
func encrypted(t testing.TB, data []byte, userPW, ownerPW string) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := api.Encrypt(bytes.NewReader(data), &out, model.NewAESConfiguration(userPW, ownerPW, 256)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// unchanged asserts that a failed call left the file's body alone.
func (e *testEnv) unchanged(ref string, before *store.File) {
	e.t.Helper()
	after := e.file(ref)
	if after.SHA256 != before.SHA256 || after.Size != before.Size {
		e.t.Fatalf("%s changed after a failed call", ref)
	}
}
