package table

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/textenc"
)

// textFormat is what the file name (or, failing that, the content) says
// about a delimited text table.
type textFormat struct {
	Name     string // csv, tsv, psv, text
	Delim    byte
	Inferred bool
}

func formatOf(name string, head []byte, truncated bool) (textFormat, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".tsv", ".tab":
		return textFormat{Name: "tsv", Delim: '\t'}, nil
	case ".psv":
		return textFormat{Name: "psv", Delim: '|'}, nil
	case ".csv":
		d, ok := sniffDelimiter(head, truncated)
		if !ok {
			d = ',' // a one-column CSV
		}
		return textFormat{Name: "csv", Delim: d}, nil
	}
	d, ok := sniffDelimiter(head, truncated)
	if !ok {
		return textFormat{}, apierr.New(apierr.UnsupportedFormat, "%q does not look like a delimited table: no comma, semicolon, tab or pipe separates fields in its first line; rename it to .csv if it is a one-column table", name)
	}
	return textFormat{Name: "text", Delim: d, Inferred: true}, nil
}

// dialect is what DuckDB's sniffer found (sniff_csv).
type dialect struct {
	Quote, Escape, NewLine, Comment string
	Skip                            int64
	Header                          bool
	Columns                         []colMeta
	DateFormat, TimestampFormat     sql.NullString
	// Relaxed allows ragged rows; NoQuote switches quoting off.
	Relaxed, NoQuote bool
}

const relaxedOpts = ", strict_mode=false, null_padding=true"

// ingestText loads a delimited text file into table data of db: detect
// the encoding (transcoding to UTF-8 when needed), pick the delimiter, let
// DuckDB sniff quoting, header and types with that delimiter, and load it
// with read_csv. scratch is a path prefix for temporary files.
func ingestText(ctx context.Context, db *sql.DB, f *store.File, src, scratch string, b bounds) (*tableMeta, error) {
	if f.Size == 0 {
		return nil, apierr.New(apierr.FileReadFailed, "%q is empty (0 bytes): there is no header or data to read as a table", f.Name)
	}
	head, err := readHead(src, sniffBytes)
	if err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot read %q: %v", f.Name, err)
	}
	if bytes.HasPrefix(head, []byte{0xD0, 0xCF, 0x11, 0xE0}) {
		return nil, apierr.New(apierr.UnsupportedFormat, "%q is a legacy Office file (such as an .xls workbook); save it as .xlsx or .csv and try again", f.Name)
	}
	if isZip(head) {
		return nil, apierr.New(apierr.UnsupportedFormat, "%q is a zip archive, not a text table; if it is an Excel workbook give it an .xlsx name", f.Name)
	}
	enc, err := textenc.DetectFile(ctx, src)
	if errors.Is(err, textenc.ErrBinary) {
		return nil, apierr.New(apierr.UnsupportedFormat, "%q holds binary data, not a delimited text table (CSV/TSV); check that it is the file you meant", f.Name)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, apierr.Wrap(apierr.Timeout, err, "reading %q ran out of time", f.Name)
		}
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot read %q: %v", f.Name, err)
	}
	meta := &tableMeta{Encoding: enc.String(), EncodingConfidence: math.Round(enc.Confidence*100) / 100, DecimalSeparator: "."}
	if enc.Confidence < textenc.LowConfidence {
		meta.Warnings = append(meta.Warnings, fmt.Sprintf("the text encoding was guessed as %s with low confidence (%.2f); check accented letters in names and values", enc, enc.Confidence))
	}
	readPath := src
	// DuckDB reads UTF-8 (and skips a UTF-8 byte order mark) itself;
	// anything else, and UTF-8 with invalid bytes, is converted first.
	if !enc.IsUTF8() || enc.Confidence < 1 {
		readPath = scratch + ".utf8"
		defer os.Remove(readPath)
		if err := transcode(ctx, src, readPath, enc); err != nil {
			if ctx.Err() != nil {
				return nil, apierr.Wrap(apierr.Timeout, err, "converting %q to UTF-8 ran out of time", f.Name)
			}
			return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot convert %q from %s to UTF-8: %v", f.Name, enc, err)
		}
		if head, err = readHead(readPath, sniffBytes); err != nil {
			return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot read %q: %v", f.Name, err)
		}
		if textenc.LooksBinary(head) {
			return nil, apierr.New(apierr.UnsupportedFormat, "%q holds binary data, not a delimited text table (CSV/TSV)", f.Name)
		}
	}
	if len(bytes.TrimSpace(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")))) == 0 {
		return nil, apierr.New(apierr.FileReadFailed, "%q holds only blank lines: there is no header or data to read as a table", f.Name)
	}
	tf, err := formatOf(f.Name, head, len(head) == sniffBytes)
	if err != nil {
		return nil, err
	}
	meta.Format, meta.FormatInferred, meta.Delimiter = tf.Name, tf.Inferred, string(tf.Delim)
	if tf.Inferred {
		meta.Warnings = append(meta.Warnings, fmt.Sprintf("format inferred from the content: %q has no .csv/.tsv/.psv extension, so fields were split at %s; check the columns and types before relying on them", f.Name, describeDelim(tf.Delim)))
	}
	// A header wider than the bound is refused before DuckDB's sniffer
	// spends its time on it.
	if recs := splitRecords(head, 1); len(recs) > 0 {
		if n := countOutsideQuotes(recs[0], tf.Delim) + 1; n > b.MaxColumns {
			return nil, tooManyColumns(f.Name, n, b.MaxColumns)
		}
	}

	d, warn, err := sniff(ctx, db, readPath, tf.Delim)
	if err != nil && ctx.Err() != nil {
		return nil, apierr.Wrap(apierr.Timeout, err, "reading %q ran out of time", f.Name)
	}
	if err != nil {
		return nil, apierr.Wrap(apierr.UnsupportedFormat, err, "%q cannot be read as a %s table: %s", f.Name, describeDelim(tf.Delim)+"-separated", firstLine(cleanDuckMsg(err)))
	}
	if warn != "" {
		meta.Warnings = append(meta.Warnings, warn)
	}
	meta.QuoteChar = d.Quote
	if d.Quote == "" {
		if bytes.ContainsRune(head, '"') {
			meta.Warnings = append(meta.Warnings, `the quote characters (") in the file do not pair up, so quoting is off: they stay part of the values and delimiters inside them split fields`)
		} else {
			meta.QuoteChar = `"` // no quotes in the file: standard quoting applies, unused
		}
	}
	meta.Newline = strings.NewReplacer(`\r`, "\r", `\n`, "\n").Replace(d.NewLine)
	meta.HasHeader = d.Header

	warn, err = loadCSV(ctx, db, readPath, tf.Delim, d)
	if err != nil {
		if ctx.Err() != nil {
			return nil, apierr.Wrap(apierr.Timeout, err, "loading %q ran out of time", f.Name)
		}
		return nil, apierr.Wrap(apierr.UnsupportedFormat, err, "%q cannot be loaded as a table: %s", f.Name, firstLine(cleanDuckMsg(err)))
	}
	if warn != "" {
		meta.Warnings = append(meta.Warnings, warn)
	}
	sep, err := refineNumbers(ctx, db)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "reading the numbers of %q failed: %v", f.Name, err)
	}
	if sep != "" {
		meta.DecimalSeparator = sep
	}
	if err := describeTable(ctx, db, meta); err != nil {
		return nil, err
	}
	if len(meta.Columns) > b.MaxColumns {
		return nil, tooManyColumns(f.Name, len(meta.Columns), b.MaxColumns)
	}
	return meta, nil
}

func tooManyColumns(name string, n, limit int) error {
	return apierr.New(apierr.TooLarge, "%q has %d columns, more than the %d the table engine loads; split the file or keep the columns you need", name, n, limit)
}

func describeDelim(d byte) string {
	switch d {
	case ',':
		return "comma"
	case ';':
		return "semicolon"
	case '\t':
		return "tab"
	case '|':
		return "pipe"
	}
	return fmt.Sprintf("%q", d)
}

func isZip(head []byte) bool { return bytes.HasPrefix(head, []byte("PK\x03\x04")) }

// sniff runs DuckDB's dialect sniffer with the delimiter fixed, relaxing
// it step by step for ragged rows and unbalanced quotes.
func sniff(ctx context.Context, db *sql.DB, path string, delim byte) (*dialect, string, error) {
	attempts := []struct {
		relaxed, noQuote bool
		warn             string
	}{
		{false, false, ""},
		{true, false, "some rows have a different number of fields than the header: short rows were padded with nulls and extra fields went into extra columns"},
		{true, true, ""}, // the caller notes that quoting is off
	}
	var firstErr error
	for _, a := range attempts {
		extra := ""
		if a.relaxed {
			extra += relaxedOpts
		}
		if a.noQuote {
			extra += ", quote=''"
		}
		q := fmt.Sprintf(`SELECT Quote, Escape, NewLineDelimiter, Comment, SkipRows, HasHeader, Columns, DateFormat, TimestampFormat
			FROM sniff_csv(%s, delim=%s%s)`, sqlString(path), sqlString(string(delim)), extra)
		var d dialect
		var cols any
		err := db.QueryRowContext(ctx, q).Scan(&d.Quote, &d.Escape, &d.NewLine, &d.Comment, &d.Skip, &d.Header, &cols, &d.DateFormat, &d.TimestampFormat)
		if err != nil {
			if ctx.Err() != nil {
				return nil, "", err
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, s := range []*string{&d.Quote, &d.Escape, &d.Comment} {
			if *s == "(empty)" {
				*s = ""
			}
		}
		list, _ := cols.([]any)
		for _, c := range list {
			m, _ := c.(map[string]any)
			name, _ := m["name"].(string)
			typ, _ := m["type"].(string)
			d.Columns = append(d.Columns, colMeta{Name: name, SQLType: typ})
		}
		if len(d.Columns) == 0 {
			continue
		}
		d.Relaxed, d.NoQuote = a.relaxed, a.noQuote
		if a.noQuote {
			d.Quote, d.Escape = "", ""
		}
		return &d, a.warn, nil
	}
	return nil, "", firstErr
}

// loadCSV creates table data from the file with the sniffed dialect. When
// later rows do not fit the types sniffed from the first ones, it retries
// with types inferred from the whole file, then with all columns as text.
func loadCSV(ctx context.Context, db *sql.DB, path string, delim byte, d *dialect) (string, error) {
	opts := fmt.Sprintf("delim=%s, quote=%s, escape=%s, new_line=%s, comment=%s, skip=%d, header=%t",
		sqlString(string(delim)), sqlString(d.Quote), sqlString(d.Escape), sqlString(d.NewLine), sqlString(d.Comment), d.Skip, d.Header)
	if d.Relaxed {
		opts += relaxedOpts
	}
	var cols []string
	for _, c := range d.Columns {
		cols = append(cols, sqlString(c.Name)+": "+sqlString(c.SQLType))
	}
	explicit := opts + ", auto_detect=false, columns={" + strings.Join(cols, ", ") + "}"
	if d.DateFormat.Valid && d.DateFormat.String != "" {
		explicit += ", dateformat=" + sqlString(d.DateFormat.String)
	}
	if d.TimestampFormat.Valid && d.TimestampFormat.String != "" {
		explicit += ", timestampformat=" + sqlString(d.TimestampFormat.String)
	}
	attempts := []struct{ opts, warn string }{
		{explicit, ""},
		{opts + ", sample_size=-1", ""},
		{opts + ", all_varchar=true", "values did not fit one type per column, so every column was loaded as text; use TRY_CAST in queries to convert"},
	}
	var firstErr error
	for _, a := range attempts {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS data"); err != nil {
			return "", err
		}
		_, err := db.ExecContext(ctx, "CREATE TABLE data AS SELECT * FROM read_csv("+sqlString(path)+", "+a.opts+")")
		if err == nil {
			return a.warn, nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return "", firstErr
}

// Number patterns for text columns that hold formatted numbers.
const (
	// 1.234,56 / -25,00 / 1234 (decimal comma, optional dot thousands)
	reCommaDecimal = `[-+]?(\d{1,3}(\.\d{3})+|\d+)(,\d+)?`
	// a decimal comma that cannot be a thousands separator
	reCommaSure = `[-+]?(\d+,(\d{1,2}|\d{4,})|\d{1,3}(\.\d{3})+,\d+)`
	// 1,234.56 / 1,234 (comma thousands, optional decimal point)
	reCommaThousands = `[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?`
	// thousands commas that cannot be a decimal comma: two groups or more,
	// or a decimal point after them
	reThousandsSure = `[-+]?\d{1,3}((,\d{3}){2,}(\.\d+)?|(,\d{3})+\.\d+)`
)

// refineNumbers converts text columns that hold numbers written with a
// decimal comma (1.234,56) or thousands commas (1,234.56), which DuckDB's
// sniffer leaves as text, to DOUBLE. It returns "," when decimal commas
// were found. A column converts only when every value fits and at least
// one value is unambiguous; a cheap look at the first rows rules most
// text columns out before any full scan.
func refineNumbers(ctx context.Context, db *sql.DB) (string, error) {
	rows, err := db.QueryContext(ctx, `SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() AND table_name = 'data' AND data_type = 'VARCHAR' ORDER BY column_index`)
	if err != nil {
		return "", err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return "", err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", err
	}
	sep := ""
	for _, n := range names {
		q := quoteIdent(n)
		var nn, eu, us int64
		err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(v), count(*) FILTER (WHERE regexp_full_match(v, '%s')), count(*) FILTER (WHERE regexp_full_match(v, '%s'))
			FROM (SELECT trim(%s) AS v FROM data WHERE %s IS NOT NULL LIMIT 2000)`, reCommaDecimal, reCommaThousands, q, q)).Scan(&nn, &eu, &us)
		if err != nil {
			return "", err
		}
		if nn == 0 || (eu < nn && us < nn) {
			continue
		}
		var all, euAll, euSure, usAll, usSure int64
		err = db.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(v),
				count(*) FILTER (WHERE regexp_full_match(v, '%s')), count(*) FILTER (WHERE regexp_full_match(v, '%s')),
				count(*) FILTER (WHERE regexp_full_match(v, '%s')), count(*) FILTER (WHERE regexp_full_match(v, '%s'))
			FROM (SELECT trim(%s) AS v FROM data WHERE %s IS NOT NULL)`, reCommaDecimal, reCommaSure, reCommaThousands, reThousandsSure, q, q)).Scan(&all, &euAll, &euSure, &usAll, &usSure)
		if err != nil {
			return "", err
		}
		var using string
		switch {
		case euAll == all && euSure > 0:
			using = fmt.Sprintf(`CAST(replace(replace(trim(%s), '.', ''), ',', '.') AS DOUBLE)`, q)
			sep = ","
		case usAll == all && usSure > 0 && euSure == 0:
			using = fmt.Sprintf(`CAST(replace(trim(%s), ',', '') AS DOUBLE)`, q)
		default:
			continue
		}
		if _, err := db.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE data ALTER COLUMN %s SET DATA TYPE DOUBLE USING %s`, q, using)); err != nil {
			return "", err
		}
	}
	return sep, nil
}

// describeTable records the columns and the row count of table data.
func describeTable(ctx context.Context, db *sql.DB, meta *tableMeta) error {
	rows, err := db.QueryContext(ctx, `SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() AND schema_name = 'main' AND table_name = 'data' ORDER BY column_index`)
	if err != nil {
		return apierr.Wrap(apierr.Internal, err, "listing the columns failed: %v", err)
	}
	meta.Columns = nil
	for rows.Next() {
		var c colMeta
		if err := rows.Scan(&c.Name, &c.SQLType); err != nil {
			rows.Close()
			return apierr.Wrap(apierr.Internal, err, "listing the columns failed: %v", err)
		}
		meta.Columns = append(meta.Columns, c)
	}
	rows.Close()
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM data`).Scan(&meta.RowCount); err != nil {
		return apierr.Wrap(apierr.Internal, err, "counting the rows failed: %v", err)
	}
	if meta.Warnings == nil {
		meta.Warnings = []string{}
	}
	return nil
}
