package table

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"unicode"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// lockdown runs on every query instance after its databases are attached
// and before any caller SQL: no file, network or extension access from
// SQL, no spilling to disk, and a configuration nobody can change again
// (SET memory_limit, SET enable_external_access … all fail afterwards).
// memory_limit and threads come from the instance's start-up settings.
var lockdown = []string{
	"SET GLOBAL temp_directory = ''",
	"SET GLOBAL autoinstall_known_extensions = false",
	"SET GLOBAL autoload_known_extensions = false",
	"SET GLOBAL enable_external_access = false",
	"SET GLOBAL lock_configuration = true",
}

// userSQL is a caller's statement after validation.
type userSQL struct {
	Text       string // without trailing semicolons and comments
	HasOrderBy bool   // a top-level ORDER BY is present
}

// checkSQL admits exactly one read-only statement: SELECT, WITH … SELECT,
// DuckDB's FROM-first SELECT, or VALUES. Everything else (PRAGMA, SET,
// COPY, ATTACH, INSTALL, LOAD, DDL, DML, several statements) is refused
// here, before DuckDB sees it; checkPrepared then confirms with DuckDB's
// own parser that the statement is a SELECT.
func checkSQL(q string) (userSQL, error) {
	stmts, err := splitStatements(q)
	if err != nil {
		return userSQL{}, err
	}
	if len(stmts) == 0 {
		return userSQL{}, apierr.New(apierr.ValidationFailed, "query is empty; write one SELECT statement, e.g. SELECT * FROM data LIMIT 10")
	}
	if len(stmts) > 1 {
		return userSQL{}, apierr.New(apierr.ValidationFailed, "query holds %d statements; send exactly one read-only SELECT (no ';' between statements)", len(stmts))
	}
	s := stmts[0]
	kw := strings.ToUpper(firstWord(s.text))
	switch kw {
	case "SELECT", "WITH", "FROM", "VALUES":
	default:
		return userSQL{}, apierr.New(apierr.ValidationFailed, "only one read-only SELECT (or WITH … SELECT) statement is allowed; %q statements are refused. Reference the file as table data, e.g. SELECT * FROM data", kw)
	}
	return userSQL{Text: s.text, HasOrderBy: s.orderBy}, nil
}

type stmt struct {
	text    string
	orderBy bool
}

// splitStatements splits q at semicolons outside strings, quoted
// identifiers, dollar quotes and comments. It also notes whether each
// statement has an ORDER BY outside parentheses.
func splitStatements(q string) ([]stmt, error) {
	var out []stmt
	var cur strings.Builder
	depth := 0
	orderBy := false
	var lastWord string
	flush := func() {
		if t := strings.TrimSpace(cur.String()); t != "" {
			out = append(out, stmt{text: t, orderBy: orderBy})
		}
		cur.Reset()
		depth, orderBy, lastWord = 0, false, ""
	}
	rs := []rune(q)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '-' && i+1 < len(rs) && rs[i+1] == '-':
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
			cur.WriteRune('\n')
			continue
		case c == '/' && i+1 < len(rs) && rs[i+1] == '*':
			end := indexRunes(rs, i+2, []rune("*/"))
			if end < 0 {
				return nil, apierr.New(apierr.ValidationFailed, "query has an unterminated /* comment")
			}
			i = end + 1
			cur.WriteRune(' ')
			continue
		case c == '\'' || c == '"':
			j := i + 1
			for ; j < len(rs); j++ {
				if rs[j] == c {
					if j+1 < len(rs) && rs[j+1] == c {
						j++
						continue
					}
					break
				}
				if c == '\'' && rs[j] == '\\' && i > 0 && (rs[i-1] == 'E' || rs[i-1] == 'e') {
					j++
				}
			}
			if j >= len(rs) {
				return nil, apierr.New(apierr.ValidationFailed, "query has an unterminated %c quote", c)
			}
			cur.WriteString(string(rs[i : j+1]))
			i = j
			lastWord = ""
			continue
		case c == '$':
			// $tag$ … $tag$ dollar quoting
			j := i + 1
			for j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]) || rs[j] == '_') {
				j++
			}
			if j < len(rs) && rs[j] == '$' {
				tag := rs[i : j+1]
				end := indexRunes(rs, j+1, tag)
				if end < 0 {
					return nil, apierr.New(apierr.ValidationFailed, "query has an unterminated %s quote", string(tag))
				}
				last := end + len(tag) - 1
				cur.WriteString(string(rs[i : last+1]))
				i = last
				lastWord = ""
				continue
			}
		case c == ';':
			flush()
			continue
		case c == '(':
			depth++
		case c == ')':
			depth--
		}
		if unicode.IsLetter(c) || c == '_' {
			j := i
			for j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]) || rs[j] == '_') {
				j++
			}
			w := strings.ToUpper(string(rs[i:j]))
			if depth == 0 && w == "BY" && lastWord == "ORDER" {
				orderBy = true
			}
			lastWord = w
			cur.WriteString(string(rs[i:j]))
			i = j - 1
			continue
		}
		if !unicode.IsSpace(c) {
			lastWord = ""
		}
		cur.WriteRune(c)
	}
	flush()
	return out, nil
}

// indexRunes finds pat in rs at or after from; -1 when absent.
func indexRunes(rs []rune, from int, pat []rune) int {
	for i := from; i+len(pat) <= len(rs); i++ {
		match := true
		for k := range pat {
			if rs[i+k] != pat[k] {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

func firstWord(s string) string {
	s = strings.TrimLeft(s, "( \t\r\n")
	i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && r != '_' })
	if i < 0 {
		return s
	}
	return s[:i]
}

// checkPrepared asks DuckDB to parse and bind q on the locked connection,
// refuses anything that is not a SELECT, and returns the result's column
// names. Binding already fails with a Permission Error for file readers
// (read_csv('/etc/passwd')).
func checkPrepared(ctx context.Context, conn *sql.Conn, q string) ([]string, error) {
	var names []string
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return apierr.New(apierr.Internal, "unexpected SQL driver connection %T", dc)
		}
		// Prepare, unlike PrepareContext, refuses several statements
		// instead of running all but the last: a second line of defence
		// behind checkSQL's own split.
		st, err := c.Prepare(q)
		if err != nil {
			if strings.Contains(err.Error(), "multi-statement") {
				return apierr.Wrap(apierr.ValidationFailed, err, "send exactly one read-only SELECT statement")
			}
			return sqlError(ctx, err)
		}
		defer st.Close()
		ds, ok := st.(*duckdb.Stmt)
		if !ok {
			return apierr.New(apierr.Internal, "unexpected SQL statement %T", st)
		}
		typ, err := ds.StatementType()
		if err != nil {
			return sqlError(ctx, err)
		}
		if typ != duckdb.STATEMENT_TYPE_SELECT {
			return apierr.New(apierr.ValidationFailed, "only read-only SELECT statements are allowed")
		}
		n, err := ds.ColumnCount()
		if err != nil {
			return sqlError(ctx, err)
		}
		for i := 0; i < n; i++ {
			name, err := ds.ColumnName(i)
			if err != nil {
				return sqlError(ctx, err)
			}
			names = append(names, name)
		}
		return nil
	})
	return names, err
}

// sqlError turns a DuckDB error into a coded one. Statements run on the
// caller's behalf, so problems in them are the caller's to fix
// (VALIDATION_FAILED with DuckDB's explanation), except for sandbox
// refusals, time and memory limits.
func sqlError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return ae
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return apierr.Wrap(apierr.Timeout, err, "the query ran out of time and was interrupted; add filters, aggregate, or LIMIT the result (a join without a join condition multiplies row counts)")
	}
	msg := cleanDuckMsg(err)
	var de *duckdb.Error
	if errors.As(err, &de) {
		switch de.Type {
		case duckdb.ErrorTypePermission:
			return apierr.Wrap(apierr.SandboxViolation, err, "file, network and extension access is disabled: SQL here reads only the tables of this call (data, and the names given in tables). DuckDB said: %s", firstLine(msg))
		case duckdb.ErrorTypeInterrupt:
			return apierr.Wrap(apierr.Timeout, err, "the query was interrupted at its time limit; add filters, aggregate, or LIMIT the result")
		case duckdb.ErrorTypeOutOfMemory:
			return apierr.Wrap(apierr.ResourceExhausted, err, "the query needs more memory than the table engine allows (%s); aggregate or filter before joining or sorting, or ask for a smaller window", firstLine(msg))
		case duckdb.ErrorTypeIO, duckdb.ErrorTypeFatal, duckdb.ErrorTypeInternal, duckdb.ErrorTypeConnection:
			return apierr.Wrap(apierr.Internal, err, "the SQL engine failed: %s", msg)
		}
	}
	return apierr.Wrap(apierr.ValidationFailed, err, "%s", msg)
}

// cleanDuckMsg keeps DuckDB's message (including its LINE/caret pointer,
// which helps fixing syntax) but bounds its length.
func cleanDuckMsg(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "could not prepare query\n")
	msg = strings.TrimSpace(msg)
	if len(msg) > 1500 {
		msg = msg[:1500] + "…"
	}
	return msg
}
