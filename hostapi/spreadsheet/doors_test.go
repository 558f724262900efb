package spreadsheet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
)

// blankBytes is the workbook files.create makes for an .xlsx name.
func blankBytes(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := blankWorkbook(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rawTool calls a meta-tool with its arguments as JSON bytes, the way
// HTTP, MCP and the CLI deliver them.
func (te *testEnv) rawTool(tool, raw string) (any, error) {
	return te.h.Registry.CallToolJSON(te.ctx, te.env, tool, []byte(raw))
}

func (te *testEnv) mustRaw(tool, raw string) any {
	te.t.Helper()
	res, err := te.rawTool(tool, raw)
	if err != nil {
		te.t.Fatalf("%s %s: %v", tool, raw, err)
	}
	return res
}

func wantJSON(t *testing.T, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if why := containsJSON(got, w); why != "" {
		t.Fatalf("%s\ngot  %s\nwant %s", why, mustJSON(got), want)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestEveryToolFromJSON: every spreadsheet tool works with arguments as
// raw JSON (plain numbers, integer sheets, integer and fractional column
// widths, null for optional arguments) and the cells read back as written.
func TestEveryToolFromJSON(t *testing.T) {
	te := newEnv(t)
	te.upload("b.xlsx", blankBytes(t))

	res := te.mustRaw("spreadsheet_write_range", `{"id":"b.xlsx","sheet":1,"start_cell":"A1","data":[
		["n","x","big","tiny","when","ok","f","at"],
		[1,2.5,9007199254740992,-3e-7,"2024-02-29",true,{"formula":"A2*B2"},"2024-02-29T13:45:00"],
		[-0,1e300,12345678901234,0.1,"",false,null,"not a date"]]}`)
	wantJSON(t, res, `{"range":"A1:H3","cells":24}`)
	wantJSON(t, te.mustRaw("spreadsheet_read_range", `{"id":"b.xlsx","sheet":1,"range":"A1:H3"}`), `[
		["n","x","big","tiny","when","ok","f","at"],
		[1,2.5,9007199254740992,-3e-7,"2024-02-29",true,2.5,"2024-02-29T13:45:00"],
		[0,1e300,12345678901234,0.1,null,false,null,"not a date"]]`)

	// writeCell: integer and fractional values, an integer sheet, null
	// for the options; then null for the value keeps it while a format
	// changes, and "" clears.
	wantJSON(t, te.mustRaw("spreadsheet_write_cell", `{"id":"b.xlsx","sheet":1,"cell":"C4","value":42,"formula":null,"format":null}`), `{"ok":true}`)
	wantJSON(t, te.mustRaw("spreadsheet_write_cell", `{"id":"b.xlsx","sheet":1,"cell":"D4","value":0.125}`), `{"ok":true}`)
	wantJSON(t, te.mustRaw("spreadsheet_write_cell", `{"id":"b.xlsx","sheet":1,"cell":"C4","value":null,"format":{"bold":true,"column_width":20}}`), `{"ok":true}`)
	wantJSON(t, te.mustRaw("spreadsheet_read_cell", `{"id":"b.xlsx","sheet":1,"cell":"C4"}`),
		`{"value":42,"type":"number","format":{"bold":true,"column_width":20}}`)
	te.mustRaw("spreadsheet_write_cell", `{"id":"b.xlsx","sheet":1,"cell":"A1","value":""}`)
	wantJSON(t, te.mustRaw("spreadsheet_read_cell", `{"id":"b.xlsx","sheet":1,"cell":"A1"}`), `{"value":null,"type":"empty"}`)
	wantJSON(t, te.mustRaw("spreadsheet_read_range", `{"id":"b.xlsx","sheet":1,"range":"A4:D4"}`), `[[null,null,42,0.125]]`)

	// setFormat: an integer width, a fractional one, null options.
	te.mustRaw("spreadsheet_set_format", `{"id":"b.xlsx","sheet":1,"range":"A1:B1","column_width":14,"bold":true,"italic":null,"font_color":null,"fill_color":null,"number_format":null,"horizontal_alignment":null,"wrap_text":null,"border":null}`)
	te.mustRaw("spreadsheet_set_format", `{"id":"b.xlsx","sheet":1,"range":"E:E","column_width":9.5,"number_format":"dd.mm.yyyy"}`)
	wantJSON(t, te.mustRaw("spreadsheet_read_cell", `{"id":"b.xlsx","sheet":1,"cell":"B1"}`), `{"value":"x","format":{"bold":true,"italic":false,"column_width":14}}`)
	wantJSON(t, te.mustRaw("spreadsheet_read_cell", `{"id":"b.xlsx","sheet":1,"cell":"E2"}`), `{"value":"2024-02-29","type":"date","format":{"number_format":"dd.mm.yyyy","column_width":9.5}}`)

	// Sheets by index everywhere.
	wantJSON(t, te.mustRaw("spreadsheet_add_sheet", `{"id":"b.xlsx","name":"Two"}`), `{"sheets":["Sheet1","Two"]}`)
	te.mustRaw("spreadsheet_write_range", `{"id":"b.xlsx","sheet":2,"start_cell":"B2","data":[[10],[20],[30]]}`)
	wantJSON(t, te.mustRaw("spreadsheet_insert_rows", `{"id":"b.xlsx","sheet":2,"after_row":2,"count":2}`), `{"rows":6}`)
	wantJSON(t, te.mustRaw("spreadsheet_read_range", `{"id":"b.xlsx","sheet":2,"range":"B2:B6"}`), `[[10],[null],[null],[20],[30]]`)
	wantJSON(t, te.mustRaw("spreadsheet_delete_rows", `{"id":"b.xlsx","sheet":2,"start_row":3,"count":2}`), `{"rows":4}`)
	wantJSON(t, te.mustRaw("spreadsheet_read_range", `{"id":"b.xlsx","sheet":2,"range":"B2:B4"}`), `[[10],[20],[30]]`)
	wantJSON(t, te.mustRaw("spreadsheet_list_sheets", `{"id":"b.xlsx"}`), `[{"name":"Sheet1","rows":4,"columns":8},{"name":"Two","rows":4,"columns":2}]`)
	wantJSON(t, te.mustRaw("spreadsheet_get_sheet_summary", `{"id":"b.xlsx","sheet":2}`), `{"sheet":"Two","rows":4,"columns":2,"column_types":["empty","number"]}`)
	wantJSON(t, te.mustRaw("spreadsheet_auto_filter", `{"id":"b.xlsx","sheet":1,"range":"A1:H3"}`), `{"ok":true}`)
	if x := te.part("b.xlsx", "xl/worksheets/sheet1.xml"); !strings.Contains(x, `<autoFilter ref="A1:H3"/>`) {
		t.Fatalf("no filter in\n%s", x)
	}
	wantJSON(t, te.mustRaw("spreadsheet_delete_sheet", `{"id":"b.xlsx","name":2}`), `{"sheets":["Sheet1"]}`)
}

// TestNullOptionalArguments: every op's examples give the same answer with
// null for each optional argument they leave out (OpenAI's strict function
// calling sends null for every unused optional field).
func TestNullOptionalArguments(t *testing.T) {
	te := newEnv(t)
	sales := readFixture(t, "sales.xlsx")
	n := 0
	for _, op := range te.h.Registry.Ops() {
		for i, ex := range op.Examples {
			withNulls := map[string]any{}
			for k, v := range ex.Args {
				withNulls[k] = v
			}
			for _, p := range op.Params {
				if _, given := ex.Args[p.Name]; !given && !p.Required {
					withNulls[p.Name] = nil
				}
			}
			var answers [2]string
			for j, args := range []map[string]any{ex.Args, withNulls} {
				n++
				env := te.h.Env(fmt.Sprintf("nulls%d", n), "nulls")
				upload(t, env, "sales.xlsx", sales)
				raw, _ := json.Marshal(args)
				res, err := te.h.Registry.CallToolJSON(te.ctx, env, op.Tool, raw)
				if err != nil {
					t.Fatalf("%s/%d %s: %v", op.Tool, i, raw, err)
				}
				answers[j] = mustJSON(res)
			}
			if answers[0] != answers[1] {
				t.Errorf("%s/%d: with nulls %s, without %s", op.Tool, i, answers[1], answers[0])
			}
		}
	}
}

// TestArgumentsOutOfRange: numbers a spreadsheet cannot take are refused
// with VALIDATION_FAILED naming the argument (never wrapped, rounded or
// zeroed), a sheet that does not exist is NOT_FOUND, and the file is left
// as it was.
func TestArgumentsOutOfRange(t *testing.T) {
	te := newEnv(t)
	te.upload("r.xlsx", readFixture(t, "sales.xlsx"))
	before := te.info("r.xlsx").SHA256
	for _, c := range []struct {
		tool, raw string
		code      apierr.Code
		mentions  []string
	}{
		{"spreadsheet_insert_rows", `{"id":"r.xlsx","sheet":1,"after_row":1e19,"count":1}`, apierr.ValidationFailed, []string{"after_row", "out of range"}},
		{"spreadsheet_insert_rows", `{"id":"r.xlsx","sheet":1,"after_row":10000000000000000000,"count":1}`, apierr.ValidationFailed, []string{"after_row", "out of range"}},
		{"spreadsheet_insert_rows", `{"id":"r.xlsx","sheet":1,"after_row":9007199254740993,"count":1}`, apierr.ValidationFailed, []string{"after_row", "maximum"}},
		{"spreadsheet_insert_rows", `{"id":"r.xlsx","sheet":1,"after_row":-1,"count":1}`, apierr.ValidationFailed, []string{"after_row"}},
		{"spreadsheet_insert_rows", `{"id":"r.xlsx","sheet":1,"after_row":1,"count":0}`, apierr.ValidationFailed, []string{"count"}},
		{"spreadsheet_insert_rows", `{"id":"r.xlsx","sheet":1,"after_row":1,"count":1.5}`, apierr.ValidationFailed, []string{"count"}},
		{"spreadsheet_insert_rows", `{"id":"r.xlsx","sheet":1,"after_row":1,"count":"2"}`, apierr.ValidationFailed, []string{"count"}},
		{"spreadsheet_insert_rows", `{"id":"r.xlsx","sheet":1,"after_row":1,"count":1048576}`, apierr.ValidationFailed, []string{"count"}},
		{"spreadsheet_insert_rows", `{"id":"r.xlsx","sheet":1,"after_row":1048000,"count":1000}`, apierr.ValidationFailed, []string{"past row 1048576"}},
		{"spreadsheet_delete_rows", `{"id":"r.xlsx","sheet":1,"start_row":-9223372036854775808,"count":1}`, apierr.ValidationFailed, []string{"start_row"}},
		{"spreadsheet_delete_rows", `{"id":"r.xlsx","sheet":1,"start_row":1,"count":18446744073709551616}`, apierr.ValidationFailed, []string{"count", "out of range"}},
		{"spreadsheet_delete_rows", `{"id":"r.xlsx","sheet":1,"start_row":0,"count":1}`, apierr.ValidationFailed, []string{"start_row"}},
		{"spreadsheet_read_range", `{"id":"r.xlsx","sheet":0,"range":"A1"}`, apierr.ValidationFailed, []string{"sheet"}},
		{"spreadsheet_read_range", `{"id":"r.xlsx","sheet":1.5,"range":"A1"}`, apierr.ValidationFailed, []string{"sheet"}},
		{"spreadsheet_read_range", `{"id":"r.xlsx","sheet":1e19,"range":"A1"}`, apierr.ValidationFailed, []string{"sheet", "out of range"}},
		{"spreadsheet_read_range", `{"id":"r.xlsx","sheet":3,"range":"A1"}`, apierr.NotFound, []string{"sheet 3 does not exist", `"Sales", "Notes"`}},
		{"spreadsheet_read_range", `{"id":"r.xlsx","sheet":9223372036854775807,"range":"A1"}`, apierr.NotFound, []string{"does not exist"}},
		{"spreadsheet_set_format", `{"id":"r.xlsx","sheet":1,"range":"A1","column_width":0}`, apierr.ValidationFailed, []string{"column_width"}},
		{"spreadsheet_set_format", `{"id":"r.xlsx","sheet":1,"range":"A1","column_width":256}`, apierr.ValidationFailed, []string{"column_width"}},
		{"spreadsheet_set_format", `{"id":"r.xlsx","sheet":1,"range":"A1","column_width":"14"}`, apierr.ValidationFailed, []string{"column_width"}},
		{"spreadsheet_set_format", `{"id":"r.xlsx","sheet":1,"range":"A1","column_width":1e400}`, apierr.ValidationFailed, []string{"column_width", "out of range"}},
		{"spreadsheet_write_cell", `{"id":"r.xlsx","sheet":1,"cell":"A1","format":{"column_width":-3}}`, apierr.ValidationFailed, []string{"format"}},
		{"spreadsheet_write_range", `{"id":"r.xlsx","sheet":1,"start_cell":"A1","data":[[9007199254740993]]}`, apierr.ValidationFailed, []string{"data[0][0]", "pass it as a string"}},
		{"spreadsheet_write_range", `{"id":"r.xlsx","sheet":1,"start_cell":"A1","data":[[1,[2]]]}`, apierr.ValidationFailed, []string{"data[0][1]", "not an array"}},
		{"spreadsheet_write_range", `{"id":"r.xlsx","sheet":1,"start_cell":"A1","data":[[1],[{"formula":1}]]}`, apierr.ValidationFailed, []string{"data[1][0]", "formula"}},
		{"spreadsheet_write_range", `{"id":"r.xlsx","sheet":1,"start_cell":"A1","data":[1,2]}`, apierr.ValidationFailed, []string{"data"}},
		{"spreadsheet_write_range", `{"id":"r.xlsx","sheet":1,"start_cell":"A1","data":[]}`, apierr.ValidationFailed, []string{"data is empty"}},
		{"spreadsheet_write_range", `{"id":"r.xlsx","sheet":1,"start_cell":"A1048576","data":[[1],[2]]}`, apierr.ValidationFailed, []string{"do not fit"}},
		{"spreadsheet_write_range", `{"id":"r.xlsx","sheet":1,"start_cell":"A1","data":[[1]],"colour":"red"}`, apierr.ValidationFailed, []string{"unknown argument", "start_cell"}},
		{"spreadsheet_write_cell", `{"id":"r.xlsx","sheet":1,"cell":"A1"}`, apierr.ValidationFailed, []string{"nothing to write"}},
		{"spreadsheet_write_cell", `{"id":"r.xlsx","sheet":1,"cell":"A1","value":[1]}`, apierr.ValidationFailed, []string{"value"}},
		{"spreadsheet_write_cell", `{"id":"r.xlsx","sheet":"1","cell":"A1","value":1,"formula":"A2"}`, apierr.ValidationFailed, []string{"either a value or a formula"}},
		{"spreadsheet_read_cell", `{"sheet":1,"cell":"A1"}`, apierr.ValidationFailed, []string{"missing required argument", "id"}},
	} {
		_, err := te.rawTool(c.tool, c.raw)
		wantCode(t, err, c.code, c.mentions...)
		if c.code == apierr.ValidationFailed && !strings.Contains(err.Error(), "; example: "+c.tool) {
			t.Errorf("%s: a refused meta-tool call shows the op's example: %v", c.raw, err)
		}
	}
	if te.info("r.xlsx").SHA256 != before {
		t.Fatal("a refused call changed the file")
	}
}

// TestScriptValues: values as a script's VM or an embedder hands them over
// (Go ints, float32, json.Number, NaN) reach the same cells, and NaN or an
// infinity is refused naming the cell instead of clearing it.
func TestScriptValues(t *testing.T) {
	te := newEnv(t)
	te.upload("s.xlsx", blankBytes(t))
	op := te.h.Registry.ByName("files.spreadsheet.writeRange")
	_, err := te.h.Registry.Invoke(te.ctx, te.env, op, map[string]any{"id": "s.xlsx", "sheet": int32(1), "start_cell": "A1",
		"data": [][]any{{int(1), int64(-2), float32(0.5), json.Number("7"), json.Number("2.25"), uint8(9), true, "2024-01-15"}}})
	if err != nil {
		t.Fatal(err)
	}
	wantGrid(t, te.readRange("s.xlsx", 1, "A1:H1"), [][]any{{1.0, -2.0, 0.5, 7.0, 2.25, 9.0, true, "2024-01-15"}})
	before := te.info("s.xlsx").SHA256
	for _, bad := range []any{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := te.h.Registry.Invoke(te.ctx, te.env, op, map[string]any{"id": "s.xlsx", "sheet": 1, "start_cell": "A1",
			"data": []any{[]any{1, 2}, []any{3, bad}}})
		wantCode(t, err, apierr.ValidationFailed, "data[1][1]", "finite")
		_, err = te.js("files.spreadsheet.writeCell", map[string]any{"id": "s.xlsx", "sheet": 1, "cell": "A1", "value": bad})
		wantCode(t, err, apierr.ValidationFailed, "value", "finite")
	}
	for _, sheet := range []any{int(1), int64(1), float64(1), json.Number("1"), uint16(1)} {
		if _, err := te.js("files.spreadsheet.readCell", map[string]any{"id": "s.xlsx", "sheet": sheet, "cell": "A1"}); err != nil {
			t.Errorf("sheet %T: %v", sheet, err)
		}
		if _, err := te.js("files.spreadsheet.setFormat", map[string]any{"id": "s.xlsx", "sheet": sheet, "range": "A1", "column_width": sheet}); err != nil {
			t.Errorf("columnWidth %T: %v", sheet, err)
		}
	}
	if te.info("s.xlsx").SHA256 == before {
		t.Fatal("the column widths were not written")
	}
	wantGrid(t, te.readRange("s.xlsx", 1, "A1:B1"), [][]any{{1.0, -2.0}})
	if w := te.cell("s.xlsx", 1, "A1")["format"].(map[string]any)["columnWidth"]; w != 1.0 {
		t.Fatalf("column width %v", w)
	}
}

// readFixture reads one of the example fixtures (testdata/examples).
func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func upload(t testing.TB, env *hostapi.Env, name string, b []byte) {
	t.Helper()
	hosttest.Upload(t, env.WS, name, b, false)
}

// TestMissingFile: every tool answers NOT_FOUND naming a file that is not
// in the workspace.
func TestMissingFile(t *testing.T) {
	te := newEnv(t)
	for _, op := range te.h.Registry.Ops() {
		args := map[string]any{}
		for k, v := range op.Examples[0].Args {
			args[k] = v
		}
		args["id"] = "reports/missing.xlsx"
		_, err := te.tool(op.Tool, args)
		wantCode(t, err, apierr.NotFound, "reports/missing.xlsx")
	}
}
