//go:build wasip1

// Command csvsummary is an example metaclaw WebAssembly module: it groups
// a CSV file of the workspace by one column with files.table.query (SQL on
// DuckDB, run by the host), and writes the summary as a formatted Excel
// workbook with the spreadsheet operations — one sheet with a header, a
// row per group, a totals row of live formulas and a filter.
//
// Build and run it (from the repository root):
//
//	make -C examples
//	metaclaw files upload examples/csvsummary/testdata/orders.csv
//	metaclaw run examples/csvsummary.wasm --input '{"path":"orders.csv","group_by":"region","sum":"amount"}'
//
// Input:
//
//	path      the CSV (or xlsx) file to summarise
//	group_by  the column to group by
//	sum       the numeric column to add up
//	output    the workbook to write (default: <path without extension>-summary.xlsx)
//
// Result: {output, groups, rows, total}, and the workbook in the run's files.
package main

import (
	"fmt"
	"path"
	"strings"

	"github.com/metaclaw/metaclaw/bindings/wasm/guest"
)

type input struct {
	Path    string `json:"path"`
	GroupBy string `json:"group_by"`
	Sum     string `json:"sum"`
	Output  string `json:"output"`
}

type summary struct {
	Output string  `json:"output"`
	Groups int     `json:"groups"`
	Rows   int64   `json:"rows"`
	Total  float64 `json:"total"`
}

// maxGroups bounds the summary; more groups than this are not a summary.
const maxGroups = 10000

func main() {
	guest.Run(func(in input) (summary, error) {
		if in.Path == "" || in.GroupBy == "" || in.Sum == "" {
			return summary{}, &guest.Error{Code: guest.ValidationFailed,
				Message: `give path, group_by and sum, e.g. {"path":"orders.csv","group_by":"region","sum":"amount"}`}
		}
		if in.Output == "" {
			in.Output = strings.TrimSuffix(in.Path, path.Ext(in.Path)) + "-summary.xlsx"
		}
		return summarise(in)
	})
}

func summarise(in input) (summary, error) {
	group, value := quote(in.GroupBy), quote(in.Sum)
	q := fmt.Sprintf(`SELECT CAST(%[1]s AS VARCHAR) AS grp, count(*) AS n, CAST(sum(%[2]s) AS DOUBLE) AS total,
		CAST(avg(%[2]s) AS DOUBLE) AS average, CAST(min(%[2]s) AS DOUBLE) AS low, CAST(max(%[2]s) AS DOUBLE) AS high
		FROM data GROUP BY 1 ORDER BY total DESC NULLS LAST, grp`, group, value)
	res, err := guest.Table.Query(in.Path, q, &guest.TableQueryOptions{WindowRows: guest.Ptr(int64(maxGroups))})
	if err != nil {
		return summary{}, fmt.Errorf("summarising %s: %w", in.Path, err)
	}
	if res.HasMore {
		return summary{}, &guest.Error{Code: guest.TooLarge,
			Message: fmt.Sprintf("%s has more than %d distinct values in %s; group by a column with fewer", in.Path, maxGroups, in.GroupBy)}
	}

	sheet := "Sheet1"
	rows := [][]any{{in.GroupBy, "Rows", "Total " + in.Sum, "Average", "Min", "Max"}}
	out := summary{Output: in.Output, Groups: len(res.Rows)}
	for _, r := range res.Rows {
		rows = append(rows, r)
		out.Rows += toInt(r[1])
		out.Total += toFloat(r[2])
	}
	last := len(rows) // the sheet row of the last group
	rows = append(rows, []any{"Total",
		map[string]any{"formula": fmt.Sprintf("SUM(B2:B%d)", last)},
		map[string]any{"formula": fmt.Sprintf("SUM(C2:C%d)", last)},
		map[string]any{"formula": fmt.Sprintf("C%d/B%d", last+1, last+1)},
		map[string]any{"formula": fmt.Sprintf("MIN(E2:E%d)", last)},
		map[string]any{"formula": fmt.Sprintf("MAX(F2:F%d)", last)},
	})

	if _, err := guest.Files.Create(in.Output, &guest.FilesCreateOptions{Overwrite: guest.Ptr(true)}); err != nil {
		return summary{}, err
	}
	if _, err := guest.Spreadsheet.WriteRange(in.Output, sheet, "A1", rows); err != nil {
		return summary{}, err
	}
	end := len(rows)
	formats := []struct {
		rng  string
		opts guest.SpreadsheetSetFormatOptions
	}{
		{"A1:F1", guest.SpreadsheetSetFormatOptions{Bold: guest.Ptr(true), FillColor: guest.Ptr("#DDEBF7")}},
		{fmt.Sprintf("A%d:F%d", end, end), guest.SpreadsheetSetFormatOptions{Bold: guest.Ptr(true)}},
		{fmt.Sprintf("C2:F%d", end), guest.SpreadsheetSetFormatOptions{NumberFormat: guest.Ptr("#,##0.00")}},
		{"A1:A1", guest.SpreadsheetSetFormatOptions{ColumnWidth: guest.Ptr(24.0)}},
		{"B1:F1", guest.SpreadsheetSetFormatOptions{ColumnWidth: guest.Ptr(14.0)}},
	}
	for _, f := range formats {
		if _, err := guest.Spreadsheet.SetFormat(in.Output, sheet, f.rng, &f.opts); err != nil {
			return summary{}, err
		}
	}
	if _, err := guest.Spreadsheet.AutoFilter(in.Output, sheet, fmt.Sprintf("A1:F%d", last)); err != nil {
		return summary{}, err
	}
	guest.Logf("%s: %d groups of %s written to %s", in.Path, out.Groups, in.GroupBy, in.Output)
	return out, nil
}

// quote makes a column name an SQL identifier.
func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func toFloat(v any) float64 {
	f, _ := v.(float64)
	return f
}

func toInt(v any) int64 { return int64(toFloat(v)) }
