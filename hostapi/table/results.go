package table

// Results of the table operations. Field names follow seed 001: the JS
// sandbox sees them in camelCase, meta-tools in snake_case.

// MapColumn is one column in a table map.
type MapColumn struct {
	Name         string `json:"name"`
	Index        int    `json:"index"`
	InferredType string `json:"inferredType"`
}

// Chunk is a deterministic block of rows ("1-500", "501-1000", …).
type Chunk struct {
	Index int    `json:"index"`
	Rows  string `json:"rows"`
}

// MapResult is seed 001's TabularGetMap.
type MapResult struct {
	// Format is csv, tsv, psv, text (delimiter sniffed from the content)
	// or xlsx.
	Format string `json:"format"`
	// FormatInferred is true when the format came from the content rather
	// than the file name; see Warnings.
	FormatInferred bool `json:"formatInferred"`
	// Sheet and Sheets are set for workbooks.
	Sheet              string      `json:"sheet,omitempty"`
	Sheets             []string    `json:"sheets,omitempty"`
	Delimiter          string      `json:"delimiter"`
	QuoteChar          string      `json:"quoteChar"`
	Newline            string      `json:"newline,omitempty"`
	DecimalSeparator   string      `json:"decimalSeparator"`
	EncodingDetected   string      `json:"encodingDetected"`
	EncodingConfidence float64     `json:"encodingConfidence"`
	HasHeader          bool        `json:"hasHeader"`
	RowCount           int64       `json:"rowCount"`
	ColumnCount        int         `json:"columnCount"`
	Columns            []MapColumn `json:"columns"`
	ChunkSize          int         `json:"chunkSize"`
	Chunks             []Chunk     `json:"chunks"`
	Warnings           []string    `json:"warnings"`
}

// DescribeColumn is one column of seed 001's TabularDescribe.
type DescribeColumn struct {
	Name         string `json:"name"`
	Index        int    `json:"index"`
	InferredType string `json:"inferredType"`
	// SQLType is the DuckDB column type, for writing casts in queries.
	SQLType string `json:"sqlType"`
	// Nullable is true when the column holds at least one null (an empty
	// field).
	Nullable         bool  `json:"nullable"`
	NonNullCount     int64 `json:"nonNullCount"`
	NullCount        int64 `json:"nullCount"`
	DistinctEstimate int64 `json:"distinctEstimate"`
}

// DescribeResult is seed 001's TabularDescribe.
type DescribeResult struct {
	RowCount    int64            `json:"rowCount"`
	ColumnCount int              `json:"columnCount"`
	Columns     []DescribeColumn `json:"columns"`
}

// ValueCount is one of a column's most common values.
type ValueCount struct {
	Value any   `json:"value"`
	Count int64 `json:"count"`
}

// StatsColumn holds the statistics of one column; which fields are set
// depends on its type (seed 001).
type StatsColumn struct {
	Name             string `json:"name"`
	Type             string `json:"type"`
	NonNullCount     int64  `json:"nonNullCount"`
	NullCount        int64  `json:"nullCount"`
	DistinctEstimate int64  `json:"distinctEstimate"`
	// Numeric, date and time columns.
	Min any `json:"min,omitempty"`
	Max any `json:"max,omitempty"`
	// Numeric columns.
	Mean   *float64 `json:"mean,omitempty"`
	Sum    any      `json:"sum,omitempty"`
	Stddev *float64 `json:"stddev,omitempty"`
	// String columns.
	MinLength  *int64       `json:"minLength,omitempty"`
	MaxLength  *int64       `json:"maxLength,omitempty"`
	MostCommon []ValueCount `json:"mostCommon,omitempty"`
	// Boolean columns.
	TrueCount  *int64 `json:"trueCount,omitempty"`
	FalseCount *int64 `json:"falseCount,omitempty"`
}

// StatsResult is seed 001's TabularGetStats.
type StatsResult struct {
	RowCount int64         `json:"rowCount"`
	Columns  []StatsColumn `json:"columns"`
}

// RowsResult is seed 001's TabularReadRows.
type RowsResult struct {
	Columns     []string `json:"columns"`
	ColumnTypes []string `json:"columnTypes"`
	Rows        [][]any  `json:"rows"`
	RowStart    int64    `json:"rowStart"`
	RowCount    int      `json:"rowCount"`
	TotalRows   int64    `json:"totalRows"`
	// TotalRowCount repeats TotalRows under the name query results use.
	TotalRowCount  int64   `json:"totalRowCount"`
	HasMore        bool    `json:"hasMore"`
	QueryElapsedMs float64 `json:"queryElapsedMs"`
}

// QueryResult is seed 001's TabularQuery.
type QueryResult struct {
	Columns        []string `json:"columns"`
	ColumnTypes    []string `json:"columnTypes"`
	Rows           [][]any  `json:"rows"`
	RowCount       int      `json:"rowCount"`
	TotalRowCount  int64    `json:"totalRowCount"`
	WindowRows     int64    `json:"windowRows"`
	WindowOffset   int64    `json:"windowOffset"`
	HasMore        bool     `json:"hasMore"`
	QueryElapsedMs float64  `json:"queryElapsedMs"`
	Warnings       []string `json:"warnings,omitempty"`
}

// ExportResult is seed 001's TabularExport.
type ExportResult struct {
	ID          string   `json:"id"`
	TargetPath  string   `json:"targetPath"`
	Format      string   `json:"format"`
	Sheet       string   `json:"sheet,omitempty"`
	RowCount    int64    `json:"rowCount"`
	ColumnCount int      `json:"columnCount"`
	Size        int64    `json:"size"`
	Warnings    []string `json:"warnings"`
}
