package spreadsheet

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

type testEnv struct {
	t   testing.TB
	h   *hostapi.Host
	env *hostapi.Env
	ctx context.Context
}

func newEnv(t testing.TB) *testEnv {
	t.Helper()
	h := hosttest.New(t, hostapi.Config{}, Register)
	return &testEnv{t: t, h: h, env: h.Env("default", "test-session"), ctx: context.Background()}
}

func (te *testEnv) upload(name string, b []byte) *store.File {
	te.t.Helper()
	return hosttest.Upload(te.t, te.env.WS, name, b, true)
}

func (te *testEnv) info(name string) *store.File {
	te.t.Helper()
	f, err := te.env.WS.Resolve(te.ctx, name)
	if err != nil {
		te.t.Fatal(err)
	}
	return f
}

// tool calls a meta-tool (snake_case in and out).
func (te *testEnv) tool(name string, args map[string]any) (any, error) {
	return te.h.Registry.CallTool(te.ctx, te.env, name, args)
}

func (te *testEnv) mustTool(name string, args map[string]any) any {
	te.t.Helper()
	res, err := te.tool(name, args)
	if err != nil {
		te.t.Fatalf("%s(%v): %v", name, args, err)
	}
	return res
}

// js calls an op the way a script does and returns the camelCase projection.
func (te *testEnv) js(name string, args map[string]any) (any, error) {
	op := te.h.Registry.ByName(name)
	if op == nil {
		te.t.Fatalf("no op %s", name)
	}
	v, err := te.h.Registry.Invoke(te.ctx, te.env, op, args)
	if err != nil {
		return nil, err
	}
	return hostapi.Project(v, hostapi.CamelCase), nil
}

func (te *testEnv) readRange(file string, sheet any, rng string) [][]any {
	te.t.Helper()
	res := te.mustTool("spreadsheet_read_range", map[string]any{"id": file, "sheet": sheet, "range": rng})
	return toGrid(te.t, res)
}

func toGrid(t testing.TB, res any) [][]any {
	t.Helper()
	rows, ok := res.([]any)
	if !ok {
		t.Fatalf("not an array: %#v", res)
	}
	out := make([][]any, len(rows))
	for i, r := range rows {
		out[i] = r.([]any)
	}
	return out
}

func wantCode(t testing.TB, err error, code apierr.Code, contains ...string) {
	t.Helper()
	if apierr.CodeOf(err) != code {
		t.Fatalf("want %s, got %v", code, err)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Fatalf("error %q does not mention %q", err, c)
		}
	}
}

func wantGrid(t testing.TB, got [][]any, want [][]any) {
	t.Helper()
	if !reflect.DeepEqual(normGrid(got), normGrid(want)) {
		t.Fatalf("grid mismatch\n got: %s\nwant: %s", fmtGrid(got), fmtGrid(want))
	}
}

func normGrid(g [][]any) [][]any {
	out := make([][]any, len(g))
	for i, r := range g {
		out[i] = make([]any, len(r))
		for j, v := range r {
			if n, ok := v.(int); ok {
				v = float64(n)
			}
			out[i][j] = v
		}
	}
	return out
}

func fmtGrid(g [][]any) string {
	var b strings.Builder
	for _, r := range g {
		b.WriteString("\n  ")
		for _, v := range r {
			fmt.Fprintf(&b, "%#v, ", v)
		}
	}
	return b.String()
}

// xlsxBytes saves an excelize workbook to bytes.
func xlsxBytes(t testing.TB, f *excelize.File) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawXLSX builds a minimal workbook from hand-written parts, for content
// excelize would not produce (cached formula values, prefixes, rich text,
// 1904 dates …). sheets maps a sheet name to its <sheetData> inner XML.
type rawBook struct {
	sheets   []rawSheet
	sst      []string // raw <si> inner XML
	styles   string   // full styles.xml, or "" for a default with a date style at index 1
	date1904 bool
	prefix   string // namespace prefix for the sheet XML, e.g. "x:"
}

type rawSheet struct {
	name, data, extra string
	hidden            bool
}

const defaultStyles = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">
<numFmts count="2"><numFmt numFmtId="164" formatCode="yyyy\-mm\-dd"/><numFmt numFmtId="165" formatCode="[h]:mm:ss"/></numFmts>
<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts>
<fills count="3"><fill><patternFill patternType="none"/></fill><fill><patternFill patternType="gray125"/></fill><fill><patternFill patternType="solid"><fgColor rgb="FFFF0000"/><bgColor indexed="64"/></patternFill></fill></fills>
<borders count="2"><border><left/><right/><top/><bottom/><diagonal/></border><border><left style="thin"><color rgb="FF00B050"/></left><right style="thin"><color rgb="FF00B050"/></right><top style="thin"><color rgb="FF00B050"/></top><bottom style="thin"><color rgb="FF00B050"/></bottom><diagonal/></border></borders>
<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>
<cellXfs count="7"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/><xf numFmtId="164" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1"/><xf numFmtId="22" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1"/><xf numFmtId="21" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1"/><xf numFmtId="165" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1"/><xf numFmtId="10" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1"/><xf numFmtId="0" fontId="0" fillId="2" borderId="1" xfId="0" applyFill="1" applyBorder="1"/></cellXfs>
</styleSheet>`

func (rb rawBook) bytes(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	put := func(name, body string) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	var ct, rels, sheets strings.Builder
	ct.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/><Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>`)
	rels.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">`)
	for i, s := range rb.sheets {
		n := i + 1
		fmt.Fprintf(&ct, `<Override PartName="/xl/worksheets/sheet%d.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>`, n)
		fmt.Fprintf(&rels, `<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet%d.xml"/>`, n, n)
		state := ""
		if s.hidden {
			state = ` state="hidden"`
		}
		fmt.Fprintf(&sheets, `<sheet name="%s" sheetId="%d"%s r:id="rId%d"/>`, s.name, n, state, n)
		p := rb.prefix
		ns := `xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"`
		if p != "" {
			ns = `xmlns:` + strings.TrimSuffix(p, ":") + `="http://schemas.openxmlformats.org/spreadsheetml/2006/main"`
		}
		put(fmt.Sprintf("xl/worksheets/sheet%d.xml", n), fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8" standalone="yes"?>`+"\n"+
			`<%sworksheet %s xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><%ssheetData>%s</%ssheetData>%s</%sworksheet>`,
			p, ns, p, s.data, p, s.extra, p))
	}
	ct.WriteString(`</Types>`)
	k := len(rb.sheets)
	fmt.Fprintf(&rels, `<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/>`, k+1)
	fmt.Fprintf(&rels, `<Relationship Id="rId%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/>`, k+2)
	rels.WriteString(`</Relationships>`)
	put("[Content_Types].xml", ct.String())
	put("_rels/.rels", `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`)
	pr := ""
	if rb.date1904 {
		pr = `<workbookPr date1904="1"/>`
	}
	put("xl/workbook.xml", `<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">`+pr+`<sheets>`+sheets.String()+`</sheets></workbook>`)
	put("xl/_rels/workbook.xml.rels", rels.String())
	styles := rb.styles
	if styles == "" {
		styles = defaultStyles
	}
	put("xl/styles.xml", styles)
	var sst strings.Builder
	fmt.Fprintf(&sst, `<?xml version="1.0" encoding="UTF-8"?><sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="%d" uniqueCount="%d">`, len(rb.sst), len(rb.sst))
	for _, s := range rb.sst {
		sst.WriteString("<si>" + s + "</si>")
	}
	sst.WriteString("</sst>")
	put("xl/sharedStrings.xml", sst.String())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// replaceEntry swaps one zip entry's body.
func replaceEntry(t testing.TB, b []byte, name string, body []byte) []byte {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		w, err := zw.Create(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == name {
			w.Write(body)
			continue
		}
		copyEntry(w, f)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// copyEntry writes zip entry f's inflated body to w.
func copyEntry(w io.Writer, f *zip.File) {
	rc, _ := f.Open()
	var buf bytes.Buffer
	buf.ReadFrom(rc)
	rc.Close()
	w.Write(buf.Bytes())
}
