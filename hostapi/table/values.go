package table

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
	"unicode/utf8"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// typeName maps a DuckDB type to seed 001's vocabulary: integer, float,
// string, date, datetime, time, boolean; other types keep a lower-case
// DuckDB name (interval, blob, list, struct, map, uuid).
func typeName(sqlType string) string {
	t := strings.ToUpper(strings.TrimSpace(sqlType))
	switch {
	case strings.HasSuffix(t, "]") || strings.HasPrefix(t, "LIST"):
		return "list"
	case strings.HasPrefix(t, "STRUCT"):
		return "struct"
	case strings.HasPrefix(t, "MAP"):
		return "map"
	case strings.HasPrefix(t, "DECIMAL"), strings.HasPrefix(t, "NUMERIC"):
		return "float"
	}
	switch t {
	case "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT", "INT", "INT8", "INT4", "INT2", "BIGNUM", "VARINT":
		return "integer"
	case "FLOAT", "DOUBLE", "REAL":
		return "float"
	case "VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR", "ENUM":
		return "string"
	case "DATE":
		return "date"
	case "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "DATETIME", "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ":
		return "datetime"
	case "TIME", "TIME WITH TIME ZONE", "TIMETZ", "TIME_NS":
		return "time"
	case "BOOLEAN", "BOOL":
		return "boolean"
	case "", "SQLNULL":
		return "null"
	}
	return strings.ToLower(t)
}

func isNumericType(t string) bool  { return t == "integer" || t == "float" }
func isTemporalType(t string) bool { return t == "date" || t == "datetime" || t == "time" }

// jsonValue turns a value scanned from DuckDB into a plain JSON value:
// numbers as numbers, dates as ISO 8601 strings, null as nil. kind is the
// column's typeName, which decides how a time.Time is written.
func jsonValue(v any, kind string) any {
	switch t := v.(type) {
	case nil:
		return nil
	case bool, string, int64, int32, int16, int8, int, uint8, uint16, uint32:
		return t
	case uint64:
		if t > 1<<53 {
			return fmt.Sprint(t)
		}
		return float64(t)
	case float64:
		return finite(t)
	case float32:
		return finite(float64(t))
	case time.Time:
		return formatTime(t, kind)
	case *big.Int:
		if t.IsInt64() && math.Abs(float64(t.Int64())) <= 1<<53 {
			return t.Int64()
		}
		return t.String()
	case duckdb.Decimal:
		return finite(t.Float64())
	case duckdb.Interval:
		return formatInterval(t)
	case duckdb.UUID:
		return formatUUID(t[:])
	case duckdb.Union:
		return jsonValue(t.Value, "")
	case []byte:
		if utf8.Valid(t) {
			return string(t)
		}
		return base64.StdEncoding.EncodeToString(t)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = jsonValue(x, "")
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = jsonValue(x, "")
		}
		return out
	case duckdb.OrderedMap:
		out := map[string]any{}
		keys, vals := t.Keys(), t.Values()
		for i := range keys {
			out[fmt.Sprint(jsonValue(keys[i], ""))] = jsonValue(vals[i], "")
		}
		return out
	case duckdb.Map:
		out := map[string]any{}
		for k, x := range t {
			out[fmt.Sprint(jsonValue(k, ""))] = jsonValue(x, "")
		}
		return out
	case fmt.Stringer:
		return t.String()
	}
	return fmt.Sprint(v)
}

// finite keeps NaN and infinities out of JSON, which cannot carry them.
func finite(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

func formatTime(t time.Time, kind string) string {
	switch kind {
	case "date":
		return t.Format("2006-01-02")
	case "time":
		if t.Nanosecond() == 0 {
			return t.Format("15:04:05")
		}
		return t.Format("15:04:05.999999")
	}
	if t.Location() != time.UTC && t.Location().String() != "" {
		return t.Format(time.RFC3339Nano)
	}
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05")
	}
	return t.Format("2006-01-02T15:04:05.999999")
}

func formatInterval(iv duckdb.Interval) string {
	var parts []string
	if iv.Months != 0 {
		parts = append(parts, fmt.Sprintf("%d months", iv.Months))
	}
	if iv.Days != 0 {
		parts = append(parts, fmt.Sprintf("%d days", iv.Days))
	}
	if iv.Micros != 0 || len(parts) == 0 {
		d := time.Duration(iv.Micros) * time.Microsecond
		parts = append(parts, d.String())
	}
	return strings.Join(parts, " ")
}

func formatUUID(b []byte) string {
	if len(b) != 16 {
		return hex.EncodeToString(b)
	}
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// toFloat reads a numeric aggregate (DOUBLE, HUGEINT sum, DECIMAL) as a
// float64.
func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case float32:
		return float64(t), true
	case int64:
		return float64(t), true
	case int32:
		return float64(t), true
	case int:
		return float64(t), true
	case uint64:
		return float64(t), true
	case *big.Int:
		f, _ := new(big.Float).SetInt(t).Float64()
		return f, true
	case duckdb.Decimal:
		return t.Float64(), true
	}
	return 0, false
}

func toInt(v any) int64 {
	switch t := v.(type) {
	case int64:
		return t
	case int32:
		return int64(t)
	case int:
		return int64(t)
	case uint64:
		return int64(t)
	case float64:
		return int64(t)
	case *big.Int:
		return t.Int64()
	}
	return 0
}
