package spreadsheet

import (
	"fmt"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

// TestFormulasWithoutCachedValues: formulas metaclaw writes carry no cached
// result; reads calculate them, and on a big sheet once for the cache
// rather than once per page.
func TestFormulasWithoutCachedValues(t *testing.T) {
	te := newEnv(t)
	f := excelize.NewFile()
	te.upload("calc.xlsx", xlsxBytes(t, f))
	const n = 60000
	data := make([]any, n)
	for i := range data {
		r := i + 1
		data[i] = []any{float64(r), map[string]any{"formula": fmt.Sprintf("A%d*2", r)}}
	}
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "calc.xlsx", "sheet": 1, "start_cell": "A1", "data": data})
	start := time.Now()
	wantGrid(t, te.readRange("calc.xlsx", 1, "A1:B2"), [][]any{{1.0, 2.0}, {2.0, 4.0}})
	first := time.Since(start)
	start = time.Now()
	for r := 1; r <= n; r += 10000 {
		page := te.readRange("calc.xlsx", 1, fmt.Sprintf("A%d:B%d", r, r+9999))
		if len(page) != 10000 || page[9999][1] != float64(2*(r+9999)) {
			t.Fatalf("page at %d ends %v", r, page[len(page)-1])
		}
	}
	t.Logf("first read (calculates %d formulas) %v, six pages %v", n, first, time.Since(start))
	s := te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": "calc.xlsx", "sheet": 1}).(map[string]any)
	if s["column_types"].([]any)[1] != "number" {
		t.Fatalf("summary %v", s)
	}
}
