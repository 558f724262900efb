package table

import (
	"context"
	"fmt"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi"
)

func (e *engine) stats(ctx context.Context, c *hostapi.Call) (any, error) {
	t, inst, err := e.open(ctx, c, c.Args.String("path"), sheetArg(c.Args, "sheet"), nil)
	if err != nil {
		return nil, err
	}
	defer e.pool.release(inst)
	idx, err := pickColumns(t.meta, c.Args.Strings("columns"))
	if err != nil {
		return nil, err
	}
	res := StatsResult{RowCount: t.meta.RowCount, Columns: make([]StatsColumn, len(idx))}
	type slot struct {
		col, n int
	}
	var aggs []string
	slots := make([]slot, len(idx))
	for k, i := range idx {
		col := t.meta.Columns[i]
		kind := typeName(col.SQLType)
		res.Columns[k] = StatsColumn{Name: col.Name, Type: kind}
		q := quoteIdent(col.Name)
		start := len(aggs)
		aggs = append(aggs, "count("+q+")", "approx_count_distinct("+q+")")
		switch {
		case isNumericType(kind):
			aggs = append(aggs, "min("+q+")", "max("+q+")", "avg("+q+")::DOUBLE", "sum("+q+")", "stddev_samp("+q+")::DOUBLE")
		case kind == "string":
			aggs = append(aggs, "min(length("+q+"))", "max(length("+q+"))")
		case isTemporalType(kind):
			aggs = append(aggs, "min("+q+")", "max("+q+")")
		case kind == "boolean":
			aggs = append(aggs, "count_if("+q+")", "count_if(NOT "+q+")")
		}
		slots[k] = slot{col: start, n: len(aggs) - start}
	}
	if len(aggs) == 0 {
		return res, nil
	}
	qctx, cancel := e.queryContext(ctx)
	defer cancel()
	from := " FROM " + srcAlias(0) + ".main.data"
	vals := make([]any, len(aggs))
	ptrs := make([]any, len(aggs))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := inst.db.QueryRowContext(qctx, "SELECT "+strings.Join(aggs, ", ")+from).Scan(ptrs...); err != nil {
		return nil, sqlError(qctx, err)
	}
	for k := range idx {
		sc := &res.Columns[k]
		v := vals[slots[k].col : slots[k].col+slots[k].n]
		sc.NonNullCount = toInt(v[0])
		sc.NullCount = t.meta.RowCount - sc.NonNullCount
		sc.DistinctEstimate = min(toInt(v[1]), sc.NonNullCount)
		switch {
		case isNumericType(sc.Type):
			sc.Min, sc.Max = jsonValue(v[2], sc.Type), jsonValue(v[3], sc.Type)
			if f, ok := toFloat(v[4]); ok {
				sc.Mean = &f
			}
			sc.Sum = jsonValue(v[5], sc.Type)
			if f, ok := toFloat(v[6]); ok {
				sc.Stddev = &f
			}
		case sc.Type == "string":
			if v[2] != nil {
				a, b := toInt(v[2]), toInt(v[3])
				sc.MinLength, sc.MaxLength = &a, &b
			}
			mc, err := e.mostCommon(qctx, inst, t.meta.Columns[idx[k]].Name, sc.Type)
			if err != nil {
				return nil, err
			}
			sc.MostCommon = mc
		case isTemporalType(sc.Type):
			sc.Min, sc.Max = jsonValue(v[2], sc.Type), jsonValue(v[3], sc.Type)
		case sc.Type == "boolean":
			a, b := toInt(v[2]), toInt(v[3])
			sc.TrueCount, sc.FalseCount = &a, &b
		}
	}
	return res, nil
}

// mostCommonN is how many of a string column's most frequent values stats
// reports; ties are broken by value so that the answer is deterministic.
const mostCommonN = 5

func (e *engine) mostCommon(ctx context.Context, inst *instance, name, kind string) ([]ValueCount, error) {
	q := quoteIdent(name)
	rows, err := inst.db.QueryContext(ctx, fmt.Sprintf(`SELECT %s, count(*) AS n FROM %s.main.data WHERE %s IS NOT NULL GROUP BY 1 ORDER BY n DESC, 1 LIMIT %d`, q, srcAlias(0), q, mostCommonN))
	if err != nil {
		return nil, sqlError(ctx, err)
	}
	defer rows.Close()
	out := []ValueCount{}
	for rows.Next() {
		var v any
		var n int64
		if err := rows.Scan(&v, &n); err != nil {
			return nil, sqlError(ctx, err)
		}
		out = append(out, ValueCount{Value: jsonValue(v, kind), Count: n})
	}
	return out, sqlError(ctx, rows.Err())
}
