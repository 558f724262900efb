package spreadsheet

import (
	"strings"
)

// dateKind says how a number formatted with a style reads back.
type dateKind uint8

const (
	notDate  dateKind = iota
	dateOnly          // yyyy-mm-dd
	dateTime          // yyyy-mm-ddThh:mm:ss
	timeOnly          // hh:mm:ss
)

type xStyles struct {
	NumFmts []struct {
		ID   int    `xml:"numFmtId,attr"`
		Code string `xml:"formatCode,attr"`
	} `xml:"numFmts>numFmt"`
	CellXfs []struct {
		NumFmtID int `xml:"numFmtId,attr"`
		FillID   int `xml:"fillId,attr"`
		BorderID int `xml:"borderId,attr"`
	} `xml:"cellXfs>xf"`
	Borders []struct {
		Left, Right, Top, Bottom, Diagonal xLine
	} `xml:"borders>border"`
	Fills []struct {
		Pattern struct {
			Type string `xml:"patternType,attr"`
			Fg   struct {
				RGB string `xml:"rgb,attr"`
			} `xml:"fgColor"`
		} `xml:"patternFill"`
	} `xml:"fills>fill"`
}

type xLine struct {
	Color struct {
		RGB string `xml:"rgb,attr"`
	} `xml:"color"`
}

// styleTable maps a cell's style index (its s attribute) to a date kind,
// and to an explicit fill colour (excelize resolves fill colours only in
// workbooks that carry a theme part, which LibreOffice does not write).
type styleTable struct {
	kinds   []dateKind
	fills   []string
	borders []map[string]string // side → rgb
}

func (st *styleTable) border(style int, side string) string {
	if st == nil || style < 0 || style >= len(st.borders) {
		return ""
	}
	return st.borders[style][side]
}

func (st *styleTable) fill(style int) string {
	if st == nil || style < 0 || style >= len(st.fills) {
		return ""
	}
	return st.fills[style]
}

func newStyleTable(x xStyles) *styleTable {
	custom := make(map[int]string, len(x.NumFmts))
	for _, n := range x.NumFmts {
		custom[n.ID] = n.Code
	}
	st := &styleTable{kinds: make([]dateKind, len(x.CellXfs)), fills: make([]string, len(x.CellXfs))}
	for i, xf := range x.CellXfs {
		if xf.BorderID >= 0 && xf.BorderID < len(x.Borders) {
			b := x.Borders[xf.BorderID]
			sides := map[string]string{}
			for side, l := range map[string]xLine{"left": b.Left, "right": b.Right, "top": b.Top, "bottom": b.Bottom, "diagonalUp": b.Diagonal, "diagonalDown": b.Diagonal} {
				if l.Color.RGB != "" {
					sides[side] = l.Color.RGB
				}
			}
			if len(sides) > 0 {
				if st.borders == nil {
					st.borders = make([]map[string]string, len(x.CellXfs))
				}
				st.borders[i] = sides
			}
		}
		if xf.FillID >= 0 && xf.FillID < len(x.Fills) {
			if p := x.Fills[xf.FillID].Pattern; p.Type != "" && p.Type != "none" && p.Fg.RGB != "" {
				st.fills[i] = p.Fg.RGB
			}
		}
		if code, ok := custom[xf.NumFmtID]; ok {
			st.kinds[i] = formatDateKind(code)
		} else {
			st.kinds[i] = builtinDateKind(xf.NumFmtID)
		}
	}
	return st
}

func (st *styleTable) kind(style int) dateKind {
	if st == nil || style < 0 || style >= len(st.kinds) {
		return notDate
	}
	return st.kinds[style]
}

// builtinDateKind classifies Excel's built-in number formats. 14–22 and
// 45–47 are the universal date/time formats; 27–36, 50–58 and 71–81 are the
// locale (CJK, Thai) date and time formats Excel also treats as dates.
// Elapsed durations (46 "[h]:mm:ss", 79) stay numbers.
func builtinDateKind(id int) dateKind {
	switch {
	case id >= 14 && id <= 17, id >= 27 && id <= 31, id == 34, id == 35, id == 36,
		id >= 50 && id <= 54, id == 57, id == 58, id >= 71 && id <= 74, id == 81:
		return dateOnly
	case id >= 18 && id <= 21, id == 32, id == 33, id == 45, id == 47, id == 55, id == 56,
		id == 75, id == 76, id == 78, id == 80:
		return timeOnly
	case id == 22, id == 77:
		return dateTime
	}
	return notDate
}

// builtinNumFmt holds the format codes of Excel's built-in number formats
// that are locale-independent, for reporting a cell's numberFormat.
var builtinNumFmt = map[int]string{
	0: "General", 1: "0", 2: "0.00", 3: "#,##0", 4: "#,##0.00",
	5: `"$"#,##0_);("$"#,##0)`, 6: `"$"#,##0_);[Red]("$"#,##0)`,
	7: `"$"#,##0.00_);("$"#,##0.00)`, 8: `"$"#,##0.00_);[Red]("$"#,##0.00)`,
	9: "0%", 10: "0.00%", 11: "0.00E+00", 12: "# ?/?", 13: "# ??/??",
	14: "mm-dd-yy", 15: "d-mmm-yy", 16: "d-mmm", 17: "mmm-yy",
	18: "h:mm AM/PM", 19: "h:mm:ss AM/PM", 20: "hh:mm", 21: "hh:mm:ss", 22: "m/d/yy hh:mm",
	37: "#,##0 ;(#,##0)", 38: "#,##0 ;[Red](#,##0)", 39: "#,##0.00 ;(#,##0.00)", 40: "#,##0.00 ;[Red](#,##0.00)",
	41: `_(* #,##0_);_(* \(#,##0\);_(* "-"_);_(@_)`, 42: `_("$"* #,##0_);_("$"* \(#,##0\);_("$"* "-"_);_(@_)`,
	43: `_(* #,##0.00_);_(* \(#,##0.00\);_(* "-"??_);_(@_)`, 44: `_("$"* #,##0.00_);_("$"* \(#,##0.00\);_("$"* "-"??_);_(@_)`,
	45: "mm:ss", 46: "[h]:mm:ss", 47: "mm:ss.0", 48: "##0.0E+0", 49: "@",
}

// formatDateKind classifies a custom number format code: it looks at the
// first section with quoted text, escaped characters and bracketed parts
// (colours, conditions, locales) removed, and finds date or time tokens.
// Elapsed-time formats ([h]:mm) are durations and read as numbers.
func formatDateKind(code string) dateKind {
	var b strings.Builder
	inQuote := false
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case inQuote:
			if c == '"' {
				inQuote = false
			}
		case c == '"':
			inQuote = true
		case c == '\\' || c == '_' || c == '*':
			i++ // the next character is literal (or padding)
		case c == '[':
			j := strings.IndexByte(code[i:], ']')
			if j < 0 {
				return notDate
			}
			inner := strings.ToLower(code[i+1 : i+j])
			if inner != "" && strings.Trim(inner, "hms") == "" {
				return notDate // elapsed time
			}
			i += j
		case c == ';':
			i = len(code)
		default:
			b.WriteByte(c)
		}
	}
	s := strings.ToLower(b.String())
	if s == "general" || strings.Contains(s, "general") {
		return notDate
	}
	s = strings.ReplaceAll(s, "am/pm", "")
	s = strings.ReplaceAll(s, "a/p", "")
	hasDate := strings.ContainsAny(s, "yd") || strings.Contains(s, "e") && !strings.ContainsAny(s, "0#?")
	hasTime := strings.ContainsAny(s, "hs")
	if !hasDate && !hasTime && strings.Contains(s, "m") && !strings.ContainsAny(s, "0#?") {
		hasDate = true // "mmm", "mmmm": month names
	}
	switch {
	case hasDate && hasTime:
		return dateTime
	case hasDate:
		return dateOnly
	case hasTime:
		return timeOnly
	}
	return notDate
}
