package table

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Every attempt to leave the sandbox is refused with a coded error and
// changes nothing: not the table, not the file, not the disk.
func TestGuardrails(t *testing.T) {
	th := newTestHost(t)
	uploadRecords(th, "g.csv", genRecords(300))
	th.upload("other.csv", []byte("a\n1\n"))
	before := th.sha("g.csv")
	m := th.call("table_get_map", map[string]any{"path": "g.csv"})
	if num(t, m["row_count"]) != 300 {
		t.Fatal(m)
	}
	out := t.TempDir()
	x := filepath.Join(out, "x")
	cases := []struct {
		sql  string
		want []apierr.Code
	}{
		{"SELECT * FROM read_csv('/etc/passwd')", sandbox},
		{"SELECT * FROM read_csv_auto('" + x + ".csv')", sandbox},
		{"SELECT * FROM read_text('/etc/hostname')", sandbox},
		{"SELECT * FROM read_blob('/etc/hostname')", sandbox},
		{"SELECT * FROM glob('/*')", sandbox},
		{"SELECT * FROM read_parquet('https://example.com/x.parquet')", sandbox},
		{"SELECT * FROM '/etc/passwd'", either},
		{"COPY data TO '" + x + ".csv'", invalid},
		{"COPY (SELECT * FROM data) TO '" + x + ".csv' (FORMAT csv)", invalid},
		{"ATTACH '" + x + ".db'", invalid},
		{"ATTACH '" + x + ".db' AS y; SELECT 1", invalid},
		{"DETACH _src0", invalid},
		{"USE _src0", invalid},
		{"INSTALL httpfs", invalid},
		{"LOAD httpfs", invalid},
		{"PRAGMA table_info('data')", invalid},
		{"/* comment */ PRAGMA version", invalid},
		{"SET memory_limit = '64GB'", invalid},
		{"SET enable_external_access = true", invalid},
		{"RESET lock_configuration", invalid},
		{"SELECT 1; DROP TABLE data", invalid},
		{"SELECT 1; DROP VIEW data", invalid},
		{"SELECT * FROM data; COPY data TO '" + x + ".csv'", invalid},
		{"DROP VIEW data", invalid},
		{"CREATE TABLE t AS SELECT * FROM data", invalid},
		{"INSERT INTO _src0.main.data SELECT * FROM data", invalid},
		{"WITH d AS (SELECT 1) DELETE FROM data", invalid},
		{"UPDATE data SET id = 0", invalid},
		{"EXPORT DATABASE '" + out + "'", invalid},
		{"CALL pragma_version()", invalid},
		{"CHECKPOINT", invalid},
		{"SELECT * FROM query('DROP VIEW data')", invalid},
		{"SELECT * FROM query('CREATE TABLE z AS SELECT 1')", invalid},
		{"SELECT 'unterminated", invalid},
	}
	for _, c := range cases {
		_, err := th.h.Registry.CallTool(context.Background(), th.env, "table_query", map[string]any{"path": "g.csv", "query": c.sql})
		code := apierr.CodeOf(err)
		ok := false
		for _, w := range c.want {
			ok = ok || code == w
		}
		if !ok {
			t.Errorf("%q: got %v, want one of %v", c.sql, err, c.want)
		}
		// The same statement through export is refused the same way.
		_, err = th.h.Registry.CallTool(context.Background(), th.env, "table_export", map[string]any{"path": "g.csv", "query": c.sql, "target_path": "leak.csv", "format": "csv"})
		if code := apierr.CodeOf(err); code != apierr.ValidationFailed && code != apierr.SandboxViolation {
			t.Errorf("export %q: got %v", c.sql, err)
		}
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("files appeared outside the sandbox: %v", ents)
	}
	if _, err := th.env.WS.Resolve(context.Background(), "leak.csv"); !apierr.Is(err, apierr.NotFound) {
		t.Fatalf("a refused export created its target: %v", err)
	}
	q := th.call("table_query", map[string]any{"path": "g.csv", "query": "SELECT count(*), sum(id) FROM data"})
	if got := rowsOf(q["rows"])[0]; num(t, got[0]) != 300 || num(t, got[1]) != 300*301/2 {
		t.Fatalf("table changed: %v", got)
	}
	if th.sha("g.csv") != before {
		t.Fatal("file changed")
	}
	// Harmless statements that merely look suspicious still run.
	for _, s := range []string{"SELECT 'a;b' AS s", "SELECT $$x; DROP TABLE data$$ AS s", "select 1 -- ; DROP TABLE data", "FROM data SELECT id LIMIT 1", "VALUES (1), (2)", "(SELECT 1)"} {
		th.call("table_query", map[string]any{"path": "g.csv", "query": s})
	}
}

var (
	sandbox = []apierr.Code{apierr.SandboxViolation}
	invalid = []apierr.Code{apierr.ValidationFailed}
	either  = []apierr.Code{apierr.ValidationFailed, apierr.SandboxViolation}
)

// The instance that runs caller SQL is locked down before the first
// statement: its settings, read through the public query operation.
func TestLockedConfiguration(t *testing.T) {
	th := newTestHost(t)
	uploadRecords(th, "c.csv", genRecords(10))
	q := th.call("table_query", map[string]any{"path": "c.csv", "query": `SELECT
		current_setting('enable_external_access'), current_setting('lock_configuration'),
		current_setting('autoinstall_known_extensions'), current_setting('autoload_known_extensions'),
		current_setting('threads'), current_setting('memory_limit'), current_setting('temp_directory')`})
	row := rowsOf(q["rows"])[0]
	if row[0] != false || row[1] != true || row[2] != false || row[3] != false || num(t, row[4]) != 2 || row[6] != "" {
		t.Fatalf("settings: %v", row)
	}
	if s, _ := row[5].(string); !strings.Contains(s, "MiB") && !strings.Contains(s, "MB") {
		t.Fatalf("memory_limit: %v", row[5])
	}
}

// A query that would run for ages (a cartesian explosion) is interrupted at
// the per-query limit or at the caller's deadline; the host carries on.
func TestQueryTimeout(t *testing.T) {
	th := newTestHost(t, func(_ *hostapi.Config, o *options) { o.QueryTimeout = time.Second })
	uploadRecords(th, "big.csv", genRecords(2000))
	th.call("table_get_map", map[string]any{"path": "big.csv"})
	explode := "SELECT count(*) FROM data a, data b, data c, data d WHERE a.importe + b.importe + c.importe + d.importe > 1e9"
	start := time.Now()
	err := th.callErr("table_query", map[string]any{"path": "big.csv", "query": explode}, apierr.Timeout)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("interrupt took %v", d)
	}
	if !strings.Contains(err.Error(), "LIMIT") {
		t.Fatalf("the message should say what to do: %v", err)
	}
	// The caller's own deadline is honoured too.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = th.h.Registry.CallTool(ctx, th.env, "table_query", map[string]any{"path": "big.csv", "query": explode})
	if apierr.CodeOf(err) != apierr.Timeout || time.Since(start) > 3*time.Second {
		t.Fatalf("deadline: %v after %v", err, time.Since(start))
	}
	// Explosions that return rows stop at the time or memory limit, never
	// at the host's memory: an export, and a window with no row cap.
	for _, args := range []map[string]any{
		{"path": "big.csv", "query": "SELECT * FROM data a, data b, data c", "target_path": "boom.csv", "format": "csv"},
		{"path": "big.csv", "query": "SELECT * FROM data a, data b, data c", "window_rows": 1e12},
		{"path": "big.csv", "query": "SELECT * FROM data a, data b", "window_rows": 1e12},
	} {
		tool := "table_query"
		if args["format"] != nil {
			tool = "table_export"
		}
		_, err := th.h.Registry.CallTool(context.Background(), th.env, tool, args)
		if c := apierr.CodeOf(err); c != apierr.Timeout && c != apierr.ResourceExhausted {
			t.Fatalf("%s %v: %v", tool, args["query"], err)
		}
	}
	if rss := rssBytes(); rss > 3<<30 {
		t.Fatalf("resident memory grew to %d MB", rss>>20)
	}
	q := th.call("table_query", map[string]any{"path": "big.csv", "query": "SELECT count(*) FROM data"})
	if num(t, rowsOf(q["rows"])[0][0]) != 2000 {
		t.Fatal("the engine should still answer")
	}
}

// The memory limit stops a query that needs more, with RESOURCE_EXHAUSTED.
func TestQueryMemoryLimit(t *testing.T) {
	th := newTestHost(t, func(_ *hostapi.Config, o *options) { o.MemoryLimit = 64 << 20 })
	uploadRecords(th, "m.csv", genRecords(10))
	th.callErr("table_query", map[string]any{"path": "m.csv", "query": "SELECT string_agg(x::VARCHAR || repeat('x', 100), ',') FROM range(5000000) t(x)"}, apierr.ResourceExhausted)
	th.call("table_query", map[string]any{"path": "m.csv", "query": "SELECT count(*) FROM data"})
}

func TestCheckSQL(t *testing.T) {
	cases := []struct {
		sql     string
		ok      bool
		orderBy bool
		text    string
	}{
		{"SELECT 1", true, false, "SELECT 1"},
		{"  select * from data order by 1 ;; ", true, true, "select * from data order by 1"},
		{"WITH t AS (SELECT * FROM data ORDER BY id) SELECT * FROM t", true, false, ""},
		{"SELECT row_number() OVER (ORDER BY id) FROM data", true, false, ""},
		{"SELECT 'x;y', \"a;b\" FROM data ORDER\n  BY 1", true, true, ""},
		{"SELECT $q$; DROP$q$, $$;$$", true, false, ""},
		{"SELECT E'it\\'s; fine'", true, false, ""},
		{"SELECT 1 -- ; DROP TABLE data", true, false, ""},
		{"SELECT 1 /* ; DROP */ ", true, false, ""},
		{"(SELECT 1) UNION ALL (SELECT 2) ORDER BY 1", true, true, ""},
		{"FROM data", true, false, ""},
		{"VALUES (1)", true, false, ""},
		{"SELECT 1; SELECT 2", false, false, ""},
		{"SELECT 1 /* unterminated", false, false, ""},
		{"SELECT 'unterminated", false, false, ""},
		{"SELECT $a$ unterminated", false, false, ""},
		{"PRAGMA version", false, false, ""},
		{"DESCRIBE data", false, false, ""},
		{"SUMMARIZE data", false, false, ""},
		{"-- only a comment", false, false, ""},
		{"", false, false, ""},
	}
	for _, c := range cases {
		q, err := checkSQL(c.sql)
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v", c.sql, err)
			continue
		}
		if err != nil {
			if apierr.CodeOf(err) != apierr.ValidationFailed {
				t.Errorf("%q: code %v", c.sql, err)
			}
			continue
		}
		if q.HasOrderBy != c.orderBy {
			t.Errorf("%q: order by %v", c.sql, q.HasOrderBy)
		}
		if c.text != "" && q.Text != c.text {
			t.Errorf("%q: text %q", c.sql, q.Text)
		}
	}
}
