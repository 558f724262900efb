package table

import (
	"context"
	"fmt"
)

// statsOf computes the statistics of the columns idx of the table
// (worker side), a batch of columns per scan.
func statsOf(ctx context.Context, inst *instance, meta tableMeta, idx []int) (StatsResult, error) {
	res := StatsResult{RowCount: meta.RowCount, Columns: make([]StatsColumn, len(idx))}
	for lo := 0; lo < len(idx); lo += aggBatch / 4 {
		hi := min(lo+aggBatch/4, len(idx))
		if err := statsBatch(ctx, inst, meta, idx, lo, hi, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

func statsBatch(ctx context.Context, inst *instance, meta tableMeta, idx []int, lo, hi int, res *StatsResult) error {
	type slot struct{ col, n int }
	var aggs []string
	slots := make([]slot, hi-lo)
	for k := lo; k < hi; k++ {
		col := meta.Columns[idx[k]]
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
		slots[k-lo] = slot{col: start, n: len(aggs) - start}
	}
	if len(aggs) == 0 {
		return nil
	}
	vals, err := scanAggregates(ctx, inst.db, aggs, " FROM "+srcAlias(0)+".main.data")
	if err != nil {
		return err
	}
	for k := lo; k < hi; k++ {
		sc := &res.Columns[k]
		v := vals[slots[k-lo].col : slots[k-lo].col+slots[k-lo].n]
		sc.NonNullCount = toInt(v[0])
		sc.NullCount = meta.RowCount - sc.NonNullCount
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
			mc, err := mostCommon(ctx, inst, meta.Columns[idx[k]].Name, sc.Type)
			if err != nil {
				return err
			}
			sc.MostCommon = mc
		case isTemporalType(sc.Type):
			sc.Min, sc.Max = jsonValue(v[2], sc.Type), jsonValue(v[3], sc.Type)
		case sc.Type == "boolean":
			a, b := toInt(v[2]), toInt(v[3])
			sc.TrueCount, sc.FalseCount = &a, &b
		}
	}
	return nil
}

// mostCommonN is how many of a string column's most frequent values stats
// reports; ties are broken by value so that the answer is deterministic.
const mostCommonN = 5

func mostCommon(ctx context.Context, inst *instance, name, kind string) ([]ValueCount, error) {
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
