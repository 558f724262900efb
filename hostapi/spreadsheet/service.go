package spreadsheet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Tunables of the read path.
const (
	// directRows: ranges ending above this row are read by streaming the
	// sheet from its top; deeper ones go through the decoded cache.
	directRows = 10000
	// maxRangeCells caps one readRange answer (10 × 100,000).
	maxRangeCells = 1_000_000
	// cacheLimit is the size the decoded-sheet cache is pruned to.
	cacheLimit = 1 << 30
	// directCalcXML: formulas without cached values in sheets with more
	// XML than this are calculated once for the cache, not per read.
	directCalcXML = 4 << 20
)

// service is the spreadsheet area's state: where its caches live.
type service struct {
	cacheDir string
	builds   singleflight.Group
}

func newService(h *hostapi.Host) *service {
	return &service{cacheDir: filepath.Join(h.Store.CacheDir(), "spreadsheet")}
}

// guard runs fn and turns a panic inside a format library or the parsers
// into a coded error, so a hostile file never takes the host down.
func guard(what string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = apierr.New(apierr.FileReadFailed, "%s failed on malformed workbook content (%v); re-save the file as .xlsx and try again", what, p)
		}
	}()
	return fn()
}

// view opens ref under its read lock as a source and runs fn on it.
func (svc *service) view(ctx context.Context, c *hostapi.Call, fn func(src *source) error) error {
	return c.WS.View(ctx, c.Args.String("id"), func(f *store.File, p string) error {
		return guard("reading the spreadsheet", func() error {
			src, err := svc.openSource(f, p)
			if err != nil {
				return err
			}
			defer src.Close()
			return fn(src)
		})
	})
}

// decoded returns the decoded cache of sheet idx, building it with one
// streaming pass when it does not exist yet. Concurrent callers for the
// same sheet share one build.
func (svc *service) decoded(ctx context.Context, src *source, idx int) (*cacheFile, error) {
	name := cacheName(src.file.SHA256, idx)
	p := filepath.Join(svc.cacheDir, name)
	if cf, err := openCache(p); err == nil {
		now := time.Now()
		_ = os.Chtimes(p, now, now)
		return cf, nil
	}
	_, err, _ := svc.builds.Do(p, func() (any, error) {
		if cf, err := openCache(p); err == nil {
			cf.Close() // built by the caller we were waiting behind
			return nil, nil
		}
		os.Remove(p) // damaged or from an interrupted build
		if err := os.MkdirAll(svc.cacheDir, 0o700); err != nil {
			return nil, err
		}
		if err := svc.buildCache(ctx, src, idx, p, name); err != nil {
			return nil, err
		}
		pruneCache(svc.cacheDir, cacheLimit)
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	cf, err := openCache(p)
	if err != nil {
		return nil, fmt.Errorf("sheet cache: %w", err)
	}
	return cf, nil
}

// buildCache decodes sheet idx into the cache file p in one streaming pass.
// Formulas without cached values are then calculated once for the whole
// sheet (within a time budget), since excelize must load the entire sheet
// to calculate even one of them.
func (svc *service) buildCache(ctx context.Context, src *source, idx int, p, name string) error {
	tmp, err := os.CreateTemp(svc.cacheDir, name+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	b := newCacheBuilder(tmp)
	if err := src.stream(ctx, idx, 1, b.add); err != nil {
		tmp.Close()
		return err
	}
	meta, err := b.finish()
	if err == nil {
		err = tmp.Close()
	}
	if err != nil {
		return err
	}
	final := tmp.Name()
	if meta.Pending > 0 && src.kind == srcXLSX && src.wb.partSize(src.sheets[idx].Path) <= maxLoadXML {
		calc, err := os.CreateTemp(svc.cacheDir, name+".tmp*")
		if err != nil {
			return err
		}
		defer os.Remove(calc.Name())
		err = svc.calculateAll(ctx, src, idx, tmp.Name(), calc)
		if cerr := calc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		final = calc.Name()
	}
	return os.Rename(final, p)
}

// calculateAll copies the decoded sheet at from into to, replacing formula
// cells without values by their calculated values.
func (svc *service) calculateAll(ctx context.Context, src *source, idx int, from string, to io.Writer) error {
	cf, err := openCache(from)
	if err != nil {
		return err
	}
	defer cf.Close()
	f, err := openExcel(src.path)
	if err != nil {
		return err
	}
	defer f.Close()
	budget := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl)/2)
	}
	stopAt := time.Now().Add(budget)
	sheet, date1904 := src.sheets[idx].Name, src.wb.date1904
	b := newCacheBuilder(to)
	var out []colValue
	err = cf.rows(ctx, 1, maxRows, func(row int, in []colValue) error {
		out = out[:0]
		for _, cv := range in {
			if cv.v.k == kPending && time.Now().Before(stopAt) {
				cv.v = calcValue(f, sheet, cellName(cv.col, row), dateKind(cv.v.n), date1904)
				if cv.v.k == kEmpty {
					continue
				}
			}
			out = append(out, cv)
		}
		if len(out) == 0 {
			return nil
		}
		_, err := b.add(row, out)
		return err
	})
	if err != nil {
		return err
	}
	_, err = b.finish()
	return err
}

// dropCaches removes the decoded caches of a file content that a write has
// just replaced.
func (svc *service) dropCaches(sha string) {
	if sha == "" {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(svc.cacheDir, sha+"-*"))
	for _, m := range matches {
		os.Remove(m)
	}
}

// sheetSize returns the used size (last row and column holding values).
func (svc *service) sheetSize(ctx context.Context, src *source, idx int) (cacheMeta, error) {
	if src.sheets[idx].Kind != "worksheet" {
		return cacheMeta{}, nil
	}
	cf, err := svc.decoded(ctx, src, idx)
	if err != nil {
		return cacheMeta{}, err
	}
	defer cf.Close()
	return cf.meta, nil
}

// grid is a rectangle of values being filled for readRange.
type grid struct {
	a       area
	cells   [][]any
	pending []pendingCell
}

type pendingCell struct {
	row, col int
	formula  string
	dk       dateKind
}

func newGrid(a area, rows int) *grid {
	g := &grid{a: a, cells: make([][]any, rows)}
	cols := a.cols()
	for i := range g.cells {
		g.cells[i] = make([]any, cols)
	}
	return g
}

func (g *grid) put(row int, vals []colValue) {
	i := row - g.a.r1
	if i < 0 || i >= len(g.cells) {
		return
	}
	r := g.cells[i]
	for _, cv := range vals {
		j := cv.col - g.a.c1
		if j < 0 || j >= len(r) {
			continue
		}
		if cv.v.k == kPending {
			g.pending = append(g.pending, pendingCell{row: row, col: cv.col, formula: cv.v.s, dk: dateKind(cv.v.n)})
			continue
		}
		r[j] = cv.v.toAny()
	}
}

// readArea reads area a of sheet idx as a 2-D array. Rows after the last
// row holding a value in the whole sheet are dropped; columns are exactly
// those asked for.
func (svc *service) readArea(ctx context.Context, src *source, idx int, a area) ([][]any, error) {
	if src.sheets[idx].Kind != "worksheet" {
		_, err := src.wb.openSheet(idx) // names why
		return nil, err
	}
	p := filepath.Join(svc.cacheDir, cacheName(src.file.SHA256, idx))
	_, statErr := os.Stat(p)
	direct := statErr != nil && !a.wholeCols && !a.wholeRows && a.r2 < directRows &&
		int64(a.rows())*int64(a.cols()) <= maxRangeCells
	var g *grid
	if direct {
		g = newGrid(a, a.rows())
		last := 0
		more := false
		err := src.stream(ctx, idx, a.r1, func(row int, vals []colValue) (bool, error) {
			if row > a.r2 {
				more = true
				return true, nil
			}
			g.put(row, vals)
			last = row
			return false, nil
		})
		if err != nil {
			return nil, err
		}
		if !more {
			keep := max(last-a.r1+1, 0)
			g.cells = g.cells[:keep]
		}
		if len(g.pending) > 0 && src.kind == srcXLSX && src.wb.partSize(src.sheets[idx].Path) > directCalcXML {
			// Calculating loads the whole sheet; do it once, for the cache.
			direct = false
		}
	}
	if !direct {
		var err error
		for attempt := 0; ; attempt++ {
			g, a, err = svc.readCached(ctx, src, idx, a)
			if errors.Is(err, errBadCache) && attempt == 0 {
				svc.dropCaches(src.file.SHA256) // rebuild once
				continue
			}
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(g.pending) > 0 {
		if err := svc.computePending(ctx, src, idx, g.pending, func(pc pendingCell, v value) {
			g.cells[pc.row-a.r1][pc.col-a.c1] = v.toAny()
		}); err != nil {
			return nil, err
		}
	}
	return g.cells, nil
}

// readCached reads area a from the decoded cache of sheet idx.
func (svc *service) readCached(ctx context.Context, src *source, idx int, a area) (*grid, area, error) {
	cf, err := svc.decoded(ctx, src, idx)
	if err != nil {
		return nil, a, err
	}
	defer cf.Close()
	a = a.bound(cf.meta.Rows, cf.meta.Columns)
	rows := max(min(a.r2, cf.meta.Rows)-a.r1+1, 0)
	if int64(rows)*int64(a.cols()) > maxRangeCells {
		return nil, a, apierr.New(apierr.TooLarge,
			"range %s holds %d rows × %d columns, over the limit of %d cells per call; read it in pages such as %s",
			a, rows, a.cols(), maxRangeCells, pageExample(a))
	}
	g := newGrid(a, rows)
	err = cf.rows(ctx, a.r1, a.r1+rows-1, func(row int, vals []colValue) error {
		g.put(row, vals)
		return nil
	})
	return g, a, err
}

func pageExample(a area) string {
	per := max(maxRangeCells/a.cols(), 1)
	return fmt.Sprintf("\"%s:%s\"", cellName(a.c1, a.r1), cellName(a.c2, a.r1+min(per, 5000)-1))
}

// computePending evaluates formulas that carry no cached value with
// excelize's calculation engine.
func (svc *service) computePending(ctx context.Context, src *source, idx int, cells []pendingCell, set func(pendingCell, value)) error {
	if src.kind != srcXLSX || len(cells) == 0 {
		return nil
	}
	if size := src.wb.partSize(src.sheets[idx].Path); size > maxLoadXML {
		return apierr.New(apierr.TooLarge,
			"%d formula cells in the range have no stored results, and the sheet (%d MB of XML) is too large to calculate them here (limit %d MB); "+
				"open and save the workbook in Excel or LibreOffice so that it stores the results, or read the formulas with readCell", len(cells), size>>20, maxLoadXML>>20)
	}
	return guard("calculating formulas", func() error {
		f, err := openExcel(src.path)
		if err != nil {
			return err
		}
		defer f.Close()
		sheet := src.sheets[idx].Name
		for i, pc := range cells {
			if i&63 == 63 {
				if err := ctx.Err(); err != nil {
					return apierr.Wrap(apierr.Timeout, err, "the time limit ran out while calculating %d formulas without cached values; read a smaller range", len(cells))
				}
			}
			set(pc, calcValue(f, sheet, cellName(pc.col, pc.row), pc.dk, src.wb.date1904))
		}
		return nil
	})
}

// typedCalc types a calculated value the way a cell would hold it.
func typedCalc(s string, dk dateKind, date1904 bool) value {
	switch {
	case s == "":
		return value{}
	case s == "TRUE":
		return value{k: kBool, n: 1}
	case s == "FALSE":
		return value{k: kBool}
	case strings.HasPrefix(s, "#") && strings.ContainsAny(s, "!?/A"):
		return value{k: kError, s: s}
	}
	if looksNumeric(s) || strings.ContainsAny(s, "eE") {
		if v := numberValue(s, dk, date1904); v.k != kString {
			return v
		}
	}
	return value{k: kString, s: s}
}
