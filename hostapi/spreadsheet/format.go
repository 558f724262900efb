package spreadsheet

import (
	"fmt"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

var hAligns = []string{"general", "left", "center", "right", "fill", "justify", "centerContinuous", "distributed"}

// borderNames are the line styles border accepts, in excelize's order
// (index = excelize's Border.Style).
var borderNames = []string{"none", "thin", "medium", "dashed", "dotted", "thick", "double", "hair",
	"mediumDashed", "dashDot", "mediumDashDot", "dashDotDot", "mediumDashDotDot", "slantDashDot"}

// formatOpts is a parsed set of formatting changes; nil fields are left
// as the cell has them.
type formatOpts struct {
	bold, italic, wrap   *bool
	fontColor, fillColor *string
	numFmt               *string
	width                *float64
	hAlign               *string
	border               *int // index into borderNames; 0 removes
}

func (o formatOpts) styleChanges() bool {
	return o.bold != nil || o.italic != nil || o.wrap != nil || o.fontColor != nil || o.fillColor != nil ||
		o.numFmt != nil || o.hAlign != nil || o.border != nil
}

func (o formatOpts) empty() bool { return !o.styleChanges() && o.width == nil }

// parseFormat reads format options from m, accepting snake_case (tools)
// and camelCase (scripts) keys.
func parseFormat(m map[string]any) (formatOpts, error) {
	var o formatOpts
	get := func(snake string) (any, bool) {
		if v, ok := m[snake]; ok && v != nil {
			return v, true
		}
		camel := snake
		if i := strings.IndexByte(snake, '_'); i >= 0 {
			camel = snake[:i] + strings.ToUpper(snake[i+1:i+2]) + snake[i+2:]
		}
		v, ok := m[camel]
		return v, ok && v != nil
	}
	boolOpt := func(name string) *bool {
		if v, ok := get(name); ok {
			if b, ok := v.(bool); ok {
				return &b
			}
		}
		return nil
	}
	strOpt := func(name string) *string {
		if v, ok := get(name); ok {
			if s, ok := v.(string); ok {
				return &s
			}
		}
		return nil
	}
	o.bold, o.italic, o.wrap = boolOpt("bold"), boolOpt("italic"), boolOpt("wrap_text")
	for _, c := range []struct {
		name string
		dst  **string
	}{{"font_color", &o.fontColor}, {"fill_color", &o.fillColor}} {
		if s := strOpt(c.name); s != nil {
			hex := strings.ToUpper(strings.TrimPrefix(*s, "#"))
			if len(hex) != 6 || strings.Trim(hex, "0123456789ABCDEF") != "" {
				return o, apierr.New(apierr.ValidationFailed, "%s %q is not a colour; use hex such as \"#FF0000\"", c.name, *s)
			}
			*c.dst = &hex
		}
	}
	if s := strOpt("number_format"); s != nil {
		if strings.TrimSpace(*s) == "" || len(*s) > 255 {
			return o, apierr.New(apierr.ValidationFailed, "number_format must be a format code such as \"0.00\" or \"yyyy-mm-dd\"")
		}
		o.numFmt = s
	}
	if v, ok := get("column_width"); ok {
		// Canonical numbers (decode.go): int64 or float64.
		var w float64
		switch n := v.(type) {
		case int64:
			w = float64(n)
		case float64:
			w = n
		default:
			w = -1
		}
		if w <= 0 || w > 255 {
			return o, apierr.New(apierr.ValidationFailed, "column_width must be a number of characters between 0 and 255")
		}
		o.width = &w
	}
	if s := strOpt("horizontal_alignment"); s != nil {
		found := false
		for _, a := range hAligns {
			if strings.EqualFold(a, *s) {
				a := a
				o.hAlign, found = &a, true
			}
		}
		if !found {
			return o, apierr.New(apierr.ValidationFailed, "horizontal_alignment %q is not one of %s", *s, strings.Join(hAligns, ", "))
		}
	}
	if v, ok := get("border"); ok {
		switch b := v.(type) {
		case bool:
			n := 0
			if b {
				n = 1
			}
			o.border = &n
		case string:
			for i, name := range borderNames {
				if strings.EqualFold(name, b) {
					n := i
					o.border = &n
				}
			}
			if o.border == nil {
				return o, apierr.New(apierr.ValidationFailed, "border %q is not one of true, false, %s", b, strings.Join(borderNames, ", "))
			}
		}
	}
	return o, nil
}

// builtinByCode maps the format codes of locale-independent built-in
// formats back to their ids, so "0.00%" stays built-in format 10.
var builtinByCode = func() map[string]int {
	m := map[string]int{}
	for _, id := range []int{0, 1, 2, 3, 4, 9, 10, 11, 12, 13, 45, 46, 47, 48, 49} {
		m[builtinNumFmt[id]] = id
	}
	return m
}()

// apply merges o into st (a copy of the cell's current style).
func (o formatOpts) apply(st *excelize.Style) {
	if o.bold != nil || o.italic != nil || o.fontColor != nil {
		if st.Font == nil {
			st.Font = &excelize.Font{}
		}
		if o.bold != nil {
			st.Font.Bold = *o.bold
		}
		if o.italic != nil {
			st.Font.Italic = *o.italic
		}
		if o.fontColor != nil {
			st.Font.Color, st.Font.ColorTheme, st.Font.ColorIndexed, st.Font.ColorTint = *o.fontColor, nil, 0, 0
		}
	}
	if o.fillColor != nil {
		st.Fill = excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{*o.fillColor}}
	}
	if o.numFmt != nil {
		setNumFmt(st, *o.numFmt)
	}
	if o.hAlign != nil || o.wrap != nil {
		if st.Alignment == nil {
			st.Alignment = &excelize.Alignment{}
		}
		if o.hAlign != nil {
			st.Alignment.Horizontal = *o.hAlign
			if *o.hAlign == "general" {
				st.Alignment.Horizontal = ""
			}
		}
		if o.wrap != nil {
			st.Alignment.WrapText = *o.wrap
		}
	}
	if o.border != nil {
		st.Border = nil
		if *o.border > 0 {
			for _, side := range []string{"left", "right", "top", "bottom"} {
				st.Border = append(st.Border, excelize.Border{Type: side, Color: "000000", Style: *o.border})
			}
		}
	}
}

func setNumFmt(st *excelize.Style, code string) {
	st.DecimalPlaces, st.NegRed = nil, false
	if id, ok := builtinByCode[code]; ok {
		st.NumFmt, st.CustomNumFmt = id, nil
		return
	}
	if strings.EqualFold(code, "general") {
		st.NumFmt, st.CustomNumFmt = 0, nil
		return
	}
	c := code
	st.NumFmt, st.CustomNumFmt = 0, &c
}

// styleMerger creates merged styles once per distinct source style.
type styleMerger struct {
	e    *editor
	o    formatOpts
	memo map[int]int
}

func (e *editor) merger(o formatOpts) *styleMerger {
	return &styleMerger{e: e, o: o, memo: map[int]int{}}
}

func (m *styleMerger) merged(from int) (int, error) {
	if id, ok := m.memo[from]; ok {
		return id, nil
	}
	st := m.e.baseStyle(from)
	m.o.apply(st)
	id, err := m.e.f.NewStyle(st)
	if err != nil {
		return 0, apierr.Wrap(apierr.ValidationFailed, err, "the format cannot be applied: %v", err)
	}
	m.e.created[id] = cloneStyle(st)
	m.memo[from] = id
	return id, nil
}

// baseStyle is style id as a starting point for a merge. excelize resolves
// fill and border colours only in workbooks with a theme part, so colours
// it cannot see are taken from the stylesheet as stored; styles made
// during this edit are taken as they were made.
func (e *editor) baseStyle(id int) *excelize.Style {
	if st, ok := e.created[id]; ok {
		return cloneStyle(st)
	}
	st, err := e.f.GetStyle(id)
	if err != nil || st == nil {
		return &excelize.Style{}
	}
	orig, err := e.wb.styleTable()
	if err != nil {
		return st
	}
	if st.Fill.Type == "pattern" && (len(st.Fill.Color) == 0 || st.Fill.Color[0] == "") {
		if rgb := hexColor(orig.fill(id)); rgb != nil {
			st.Fill.Color = []string{(*rgb)[1:]}
		}
	}
	for i := range st.Border {
		if st.Border[i].Color == "" {
			if rgb := hexColor(orig.border(id, st.Border[i].Type)); rgb != nil {
				st.Border[i].Color = (*rgb)[1:]
			}
		}
	}
	return st
}

func cloneStyle(st *excelize.Style) *excelize.Style {
	c := *st
	c.Border = append([]excelize.Border(nil), st.Border...)
	c.Fill.Color = append([]string(nil), st.Fill.Color...)
	c.Font = clonePtr(st.Font)
	c.Alignment = clonePtr(st.Alignment)
	c.Protection = clonePtr(st.Protection)
	c.CustomNumFmt = clonePtr(st.CustomNumFmt)
	c.DecimalPlaces = clonePtr(st.DecimalPlaces)
	return &c
}

// clonePtr is a pointer to a copy of *p, or nil for nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// formatArea applies o to every cell of a (closed) area, merging with each
// cell's style; runs of cells that end up with the same style are set at
// once.
func (e *editor) formatArea(sheet string, a area, o formatOpts) error {
	f := e.f
	if o.width != nil {
		if err := f.SetColWidth(sheet, colName(a.c1), colName(a.c2), *o.width); err != nil {
			return excelWriteError(err)
		}
	}
	if !o.styleChanges() {
		return nil
	}
	if cells := int64(a.rows()) * int64(a.cols()); cells > maxFormatCells {
		return apierr.New(apierr.TooLarge, "range %s has %d cells, over the limit of %d for one setFormat; format it in parts", a, cells, maxFormatCells)
	}
	m := e.merger(o)
	for r := a.r1; r <= a.r2; r++ {
		runStart, runStyle := 0, -1
		flush := func(end int) error {
			if runStyle < 0 {
				return nil
			}
			return f.SetCellStyle(sheet, cellName(runStart, r), cellName(end, r), runStyle)
		}
		for col := a.c1; col <= a.c2; col++ {
			cur, err := f.GetCellStyle(sheet, cellName(col, r))
			if err != nil {
				return excelWriteError(err)
			}
			ns, err := m.merged(cur)
			if err != nil {
				return err
			}
			if ns != runStyle {
				if err := flush(col - 1); err != nil {
					return excelWriteError(err)
				}
				runStart, runStyle = col, ns
			}
		}
		if err := flush(a.c2); err != nil {
			return excelWriteError(err)
		}
	}
	return nil
}

const maxFormatCells = 2_000_000

// CellFormat is the formatting readCell reports.
type CellFormat struct {
	NumberFormat        string  `json:"numberFormat"`
	Bold                bool    `json:"bold"`
	Italic              bool    `json:"italic"`
	FontColor           *string `json:"fontColor"`
	FillColor           *string `json:"fillColor"`
	HorizontalAlignment *string `json:"horizontalAlignment"`
	WrapText            bool    `json:"wrapText"`
	Border              *string `json:"border"`
	ColumnWidth         float64 `json:"columnWidth"`
}

// describeStyle reads a style back as readCell's format.
func describeStyle(f *excelize.File, style int) CellFormat {
	out := CellFormat{NumberFormat: "General"}
	st, err := f.GetStyle(style)
	if err != nil || st == nil {
		return out
	}
	switch {
	case st.CustomNumFmt != nil:
		out.NumberFormat = *st.CustomNumFmt
	case st.NumFmt != 0:
		if code, ok := builtinNumFmt[st.NumFmt]; ok {
			out.NumberFormat = code
		} else {
			out.NumberFormat = fmt.Sprintf("[built-in format %d]", st.NumFmt)
		}
	}
	if st.Font != nil {
		out.Bold, out.Italic = st.Font.Bold, st.Font.Italic
		c := st.Font.Color
		if c == "" && (st.Font.ColorTheme != nil || st.Font.ColorIndexed > 0) {
			c = f.GetBaseColor("", st.Font.ColorIndexed, st.Font.ColorTheme)
			if c != "" && st.Font.ColorTint != 0 {
				c = excelize.ThemeColor(c, st.Font.ColorTint)
			}
		}
		out.FontColor = hexColor(c)
	}
	if len(st.Fill.Color) > 0 && st.Fill.Color[0] != "" && (st.Fill.Type == "gradient" || st.Fill.Pattern > 0) {
		out.FillColor = hexColor(st.Fill.Color[0])
	}
	if st.Alignment != nil {
		if st.Alignment.Horizontal != "" {
			h := st.Alignment.Horizontal
			out.HorizontalAlignment = &h
		}
		out.WrapText = st.Alignment.WrapText
	}
	for _, b := range st.Border {
		if b.Style > 0 && b.Style < len(borderNames) {
			name := borderNames[b.Style]
			out.Border = &name
			break
		}
	}
	return out
}

func hexColor(c string) *string {
	c = strings.ToUpper(strings.TrimPrefix(c, "#"))
	if len(c) == 8 {
		c = c[2:]
	}
	if len(c) != 6 {
		return nil
	}
	c = "#" + c
	return &c
}
