package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/metaclaw/metaclaw/server/client"
)

// The side-by-side benchmark of issue 17: each case of the table
// through our server's HTTP API, as users call it, and through the Node
// stack's harness (../shared/peers: ExcelJS, pdf-lib, pdfjs-dist, sharp)
// on the same fixtures, which the harness generates. It prints one table:
// both medians and their ratio (ours / Node's; below 1 is faster).
//
//	go test -run '^$' -bench SideBySide -benchtime 1x ./server/loadtest/
//
// METACLAW_PEERS names the harness directory (default ../shared/peers
// beside the repository); its node_modules must be installed (npm ci).
// Fixtures are generated once into METACLAW_PEERFIX (default
// $TMPDIR/metaclaw-peerfix) and reused.

// peerCase is one row of the table.
type peerCase struct {
	name string
	// node is the harness's benchmark name.
	node string
	// runs is how many timed runs of ours the median is taken over (after
	// one warm-up run).
	runs int
	// run performs the case once against the site and checks its answer.
	run func(ctx context.Context, s *site) error
}

const writeScript = `
	const rows = new Array(100000);
	for (let r = 0; r < 100000; r++) {
		rows[r] = [r + 1, "2024-01-" + String(1 + r % 28).padStart(2, "0"), "Customer " + (r % 977), "City " + (r % 20), "Category " + (r % 8),
			1 + r % 500, (r % 100000) / 100, ((1 + r % 500) * (r % 100000)) / 100, r % 10 === 0 ? null : "Order " + r, r % 2 === 0];
	}
	await files.create("written.xlsx", {overwrite: true});
	const res = await files.spreadsheet.writeRange("written.xlsx", "Sheet1", "A1", rows);
	return res;`

func peerCases() []peerCase {
	tool := func(name string, args map[string]any, check func(any) error) func(context.Context, *site) error {
		return func(ctx context.Context, s *site) error {
			res, err := s.c.CallTool(ctx, name, args)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return check(res)
		}
	}
	field := func(v any, path ...string) any {
		for _, k := range path {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		return v
	}
	merged := 0
	merge := make([]any, 50)
	for i := range merge {
		merge[i] = fmt.Sprintf("merge/part-%02d.pdf", i+1)
	}
	return []peerCase{
		{"xlsx A1:J50 of 100k rows", "xlsx-read-range", 20, tool("spreadsheet_read_range", map[string]any{"id": "big.xlsx", "sheet": "Data", "range": "A1:J50"},
			func(v any) error {
				if rows, _ := v.([]any); len(rows) != 50 {
					return fmt.Errorf("read_range: %d rows", len(rows))
				}
				return nil
			})},
		{"xlsx full read, 5,000-row pages", "xlsx-read-full", 3, func(ctx context.Context, s *site) error {
			total := 0
			for r := 1; ; r += 5000 {
				res, err := s.c.CallTool(ctx, "spreadsheet_read_range", map[string]any{"id": "big.xlsx", "sheet": "Data", "range": fmt.Sprintf("A%d:J%d", r, r+4999)})
				if err != nil {
					return err
				}
				rows, _ := res.([]any)
				total += len(rows)
				if len(rows) < 5000 {
					break
				}
			}
			if total != 100001 {
				return fmt.Errorf("full read: %d rows, want 100,001 (header and 100,000)", total)
			}
			return nil
		}},
		{"xlsx write 100k × 10 from a script", "xlsx-write-stream", 3, func(ctx context.Context, s *site) error {
			res, err := s.c.Run(ctx, client.RunRequest{Code: writeScript, TimeoutMs: 120_000})
			if err != nil {
				return err
			}
			if res["ok"] != true {
				return fmt.Errorf("script: %v", res["error"])
			}
			return nil
		}},
		{"PDF text, 20 pages", "pdf-text", 10, tool("pdf_extract_text", map[string]any{"id": "text.pdf"}, func(v any) error {
			if b, _ := json.Marshal(v); len(b) < 20*100 {
				return fmt.Errorf("extract_text: %.200s", b)
			}
			return nil
		})},
		{"PDF merge, 50 files", "pdf-merge", 10, func(ctx context.Context, s *site) error {
			// pdf_merge makes a new file: a new name each time.
			merged++
			name := fmt.Sprintf("merged/%d.pdf", merged)
			res, err := s.c.CallTool(ctx, "pdf_merge", map[string]any{"ids": merge, "output_name": name})
			if err != nil {
				return err
			}
			if field(res, "name") != name || fmt.Sprint(field(res, "pages")) != "101" {
				return fmt.Errorf("merge: %v", res)
			}
			return nil
		}},
		{"PDF form fill", "pdf-fill", 20, tool("pdf_fill_form", map[string]any{"id": "form.pdf",
			"fields": map[string]any{"name": "José Müller", "agree": true, "country": "Spain"}}, func(v any) error {
			if b, _ := json.Marshal(field(v, "filled")); string(b) != `["agree","country","name"]` {
				return fmt.Errorf("fill: %v", v)
			}
			return nil
		})},
		{"resize 4000×3000 JPEG → 800 px JPEG", "image-resize-jpeg", 10, tool("image_resize", map[string]any{"id": "photo.jpg", "width": 800, "output": "small.jpg", "overwrite": true},
			func(v any) error {
				if fmt.Sprint(field(v, "width")) != "800" {
					return fmt.Errorf("resize: %v", v)
				}
				return nil
			})},
		{"same → WebP", "image-resize-webp", 10, tool("image_resize", map[string]any{"id": "photo.jpg", "width": 800, "output": "small.webp", "overwrite": true},
			func(v any) error {
				if fmt.Sprint(field(v, "width")) != "800" {
					return fmt.Errorf("resize: %v", v)
				}
				return nil
			})},
		{"image info", "image-metadata", 50, tool("image_info", map[string]any{"id": "photo.jpg"}, func(v any) error {
			if fmt.Sprint(field(v, "width")) != "4000" || fmt.Sprint(field(v, "height")) != "3000" {
				return fmt.Errorf("info: %v", v)
			}
			return nil
		})},
	}
}

// peers finds node and the harness with its packages, or says why not.
func peers() (node, dir, why string) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", "", "node is not installed"
	}
	dir = os.Getenv("METACLAW_PEERS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "peers")
	}
	dir, _ = filepath.Abs(dir)
	if _, err := os.Stat(filepath.Join(dir, "bench-node.mjs")); err != nil {
		return "", "", "the Node harness is not at " + dir + " (set METACLAW_PEERS)"
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "exceljs")); err != nil {
		return "", "", "the Node harness at " + dir + " has no node_modules: run npm ci there (or copy it somewhere writable, npm ci, and set METACLAW_PEERS)"
	}
	return node, dir, ""
}

// fixtures generates the harness's fixtures once (they are deterministic).
func fixtures(b *testing.B, node, dir string) string {
	out := os.Getenv("METACLAW_PEERFIX")
	if out == "" {
		out = filepath.Join(os.TempDir(), "metaclaw-peerfix")
	}
	if _, err := os.Stat(filepath.Join(out, "manifest.json")); err == nil {
		return out
	}
	cmd := exec.Command(node, "gen-fixtures.mjs", out)
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("node gen-fixtures.mjs %s: %v\n%s", out, err, msg)
	}
	return out
}

type nodeResult struct {
	Name     string  `json:"name"`
	MedianMs float64 `json:"median_ms"`
	Runs     int     `json:"runs"`
}

func runNode(node, dir, name, fix string) (nodeResult, error) {
	cmd := exec.Command(node, "bench-node.mjs", name, fix)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nodeResult{}, fmt.Errorf("node bench-node.mjs %s: %v: %s", name, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var r nodeResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return r, fmt.Errorf("node bench-node.mjs %s: %v: %s", name, err, out)
	}
	return r, nil
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

var sideBySide struct {
	once sync.Once
	rows [][3]float64 // ours ms, node ms, ratio
}

func BenchmarkSideBySide(b *testing.B) {
	node, dir, why := peers()
	if why != "" {
		b.Skip("side-by-side with the Node stack skipped: " + why)
	}
	cases := peerCases()
	// The comparison is measured once (warm-up, then a median over each
	// case's runs); b.N only repeats the report.
	sideBySide.once.Do(func() {
		fix := fixtures(b, node, dir)
		s := startSite(b, nil)
		for _, name := range []string{"big.xlsx", "text.pdf", "form.pdf", "photo.jpg"} {
			s.upload(b, filepath.Join(fix, name), name)
		}
		for i := 1; i <= 50; i++ {
			name := fmt.Sprintf("merge/part-%02d.pdf", i)
			s.upload(b, filepath.Join(fix, name), name)
		}
		ctx := context.Background()
		var tw strings.Builder
		w := tabwriter.NewWriter(&tw, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "case\tmetaclaw ms\tNode ms\tratio\t")
		for _, c := range cases {
			if err := c.run(ctx, s); err != nil { // warm-up, checked
				b.Fatalf("%s: %v", c.name, err)
			}
			ds := make([]time.Duration, c.runs)
			for i := range ds {
				t0 := time.Now()
				if err := c.run(ctx, s); err != nil {
					b.Fatalf("%s: %v", c.name, err)
				}
				ds[i] = time.Since(t0)
			}
			ours := float64(median(ds).Microseconds()) / 1000
			nr, err := runNode(node, dir, c.node, fix)
			if err != nil {
				b.Fatal(err)
			}
			ratio := ours / nr.MedianMs
			sideBySide.rows = append(sideBySide.rows, [3]float64{ours, nr.MedianMs, ratio})
			fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.2f\t\n", c.name, ours, nr.MedianMs, ratio)
		}
		w.Flush()
		fmt.Printf("\nside by side with the Node stack (metaclaw through HTTP, median of warm runs; Node: %s, median of its runs)\n%s\n", dir, tw.String())
	})
	if len(sideBySide.rows) != len(cases) {
		b.Fatal("the comparison did not finish")
	}
	for i, c := range cases {
		b.ReportMetric(sideBySide.rows[i][2], "ratio-"+c.node)
	}
}
