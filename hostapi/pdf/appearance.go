package pdf

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// Appearance streams for filled form fields: what a reader shows without
// regenerating anything. They are drawn with our own font objects (a
// standard font, or an embedded Unicode subset when the value needs it), so
// that the value shows and extracts correctly whatever the form's default
// resources hold.

// daSpec is a parsed default appearance string such as "/Helv 0 Tf 0 g".
type daSpec struct {
	font  string
	size  float64
	color string
}

func parseDA(s string) daSpec {
	da := daSpec{color: "0 g"}
	var stack []string
	for _, tok := range strings.Fields(s) {
		switch tok {
		case "Tf":
			if len(stack) >= 2 {
				da.font = strings.TrimPrefix(stack[len(stack)-2], "/")
				da.size, _ = strconv.ParseFloat(stack[len(stack)-1], 64)
			}
			stack = stack[:0]
		case "g", "rg", "k":
			n := map[string]int{"g": 1, "rg": 3, "k": 4}[tok]
			if len(stack) >= n {
				da.color = strings.Join(append(append([]string(nil), stack[len(stack)-n:]...), tok), " ")
			}
			stack = stack[:0]
		default:
			stack = append(stack, tok)
		}
	}
	if da.size < 0 || math.IsNaN(da.size) || da.size > 1000 {
		da.size = 0
	}
	return da
}

// fieldDA is the field's default appearance, falling back to the form's.
func fieldDA(x *model.XRefTable, f *field) daSpec {
	s := f.da
	if s == "" && x.Form != nil {
		s, _ = dictText(x, x.Form, "DA")
	}
	return parseDA(s)
}

// standardFontFor maps the font a field's appearance names to the closest
// standard font: the form's /DR resources say which font it is.
func standardFontFor(x *model.XRefTable, resName string) string {
	base := resName
	if x.Form != nil {
		if dr, _ := derefDict(x, x.Form, "DR"); dr != nil {
			if fonts, _ := derefDict(x, dr, "Font"); fonts != nil {
				if fd, _ := derefDict(x, fonts, resName); fd != nil {
					if b := fd.NameEntry("BaseFont"); b != nil {
						base = *b
					}
				}
			}
		}
	}
	return standardLike(base)
}

// standardLike picks the standard font that looks most like font name.
func standardLike(name string) string {
	if i := strings.IndexByte(name, '+'); i == 6 {
		name = name[i+1:] // subset prefix
	}
	if _, ok := standardFonts[name]; ok && standardFonts[name].family != "" {
		return name
	}
	switch name { // Acrobat's short resource names
	case "Helv":
		return "Helvetica"
	case "HeBo":
		return "Helvetica-Bold"
	case "TiRo":
		return "Times-Roman"
	case "TiBo":
		return "Times-Bold"
	case "Cour":
		return "Courier"
	case "CoBo":
		return "Courier-Bold"
	}
	n := strings.ToLower(name)
	bold := strings.Contains(n, "bold") || strings.Contains(n, "black") || strings.Contains(n, "heavy")
	italic := strings.Contains(n, "italic") || strings.Contains(n, "oblique")
	switch {
	case strings.Contains(n, "times") || strings.Contains(n, "serif") && !strings.Contains(n, "sans") || strings.Contains(n, "roman") || strings.Contains(n, "georgia"):
		return pickStyle("Times-Roman", "Times-Bold", "Times-Italic", "Times-BoldItalic", bold, italic)
	case strings.Contains(n, "cour") || strings.Contains(n, "mono") || strings.Contains(n, "consol"):
		return pickStyle("Courier", "Courier-Bold", "Courier-Oblique", "Courier-BoldOblique", bold, italic)
	}
	return pickStyle("Helvetica", "Helvetica-Bold", "Helvetica-Oblique", "Helvetica-BoldOblique", bold, italic)
}

func pickStyle(regular, b, i, bi string, bold, italic bool) string {
	switch {
	case bold && italic:
		return bi
	case bold:
		return b
	case italic:
		return i
	}
	return regular
}

// num formats a number for a content stream.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" || s == "" {
		return "0"
	}
	return s
}

// widgetBox is a widget's width and height from its /Rect.
func widgetBox(x *model.XRefTable, w types.Dict) (float64, float64, bool) {
	o, ok := w.Find("Rect")
	if !ok {
		return 0, 0, false
	}
	arr, err := x.DereferenceArray(o)
	if err != nil || len(arr) != 4 {
		return 0, 0, false
	}
	var v [4]float64
	for i := range v {
		f, err := x.DereferenceNumber(arr[i])
		if err != nil {
			return 0, 0, false
		}
		v[i] = f
	}
	width, height := math.Abs(v[2]-v[0]), math.Abs(v[3]-v[1])
	if width < 1 || height < 1 {
		return 0, 0, false
	}
	return width, height, true
}

// colorOp turns an /MK color array into a fill (or stroke) operator.
func colorOp(x *model.XRefTable, mk types.Dict, key string, stroke bool) string {
	if mk == nil {
		return ""
	}
	o, ok := mk.Find(key)
	if !ok {
		return ""
	}
	arr, err := x.DereferenceArray(o)
	if err != nil {
		return ""
	}
	var parts []string
	for _, e := range arr {
		f, err := x.DereferenceNumber(e)
		if err != nil {
			return ""
		}
		parts = append(parts, num(f))
	}
	ops := map[int]string{1: "g", 3: "rg", 4: "k"}
	op, ok := ops[len(parts)]
	if !ok {
		return ""
	}
	if stroke {
		op = strings.ToUpper(op)
	}
	return strings.Join(parts, " ") + " " + op
}

// frameContent draws a widget's background and border from /MK and /BS.
func frameContent(x *model.XRefTable, w types.Dict, width, height float64) string {
	mk, _ := derefDict(x, w, "MK")
	var b strings.Builder
	if bg := colorOp(x, mk, "BG", false); bg != "" {
		fmt.Fprintf(&b, "%s\n0 0 %s %s re f\n", bg, num(width), num(height))
	}
	if bc := colorOp(x, mk, "BC", true); bc != "" {
		bw := 1.0
		if bs, _ := derefDict(x, w, "BS"); bs != nil {
			if o, ok := bs.Find("W"); ok {
				if f, err := x.DereferenceNumber(o); err == nil {
					bw = f
				}
			}
		}
		if bw > 0 {
			fmt.Fprintf(&b, "%s\n%s w\n%s %s %s %s re S\n", bc, num(bw), num(bw/2), num(bw/2), num(width-bw), num(height-bw))
		}
	}
	return b.String()
}

// pendingAP is an appearance stream waiting for its font object.
type pendingAP struct {
	widget        types.Dict
	width, height float64
	content       string
}

func finishAppearances(x *model.XRefTable, font *pdfFont, aps []pendingAP) error {
	if len(aps) == 0 {
		return nil
	}
	fontRef, err := font.object(x)
	if err != nil {
		return err
	}
	for _, ap := range aps {
		ref, err := newStream(x, []byte(ap.content), types.Dict{
			"Type":      types.Name("XObject"),
			"Subtype":   types.Name("Form"),
			"BBox":      types.Array{types.Integer(0), types.Integer(0), types.Float(ap.width), types.Float(ap.height)},
			"Resources": types.Dict{"Font": types.Dict{"MCF0": *fontRef}},
		})
		if err != nil {
			return err
		}
		ap.widget["AP"] = types.Dict{"N": *ref}
	}
	return nil
}

// widgetAppearances gives every widget of f that has a usable /Rect a
// variable-text (/Tx) appearance: the widget's frame, then what body draws,
// clipped to the inside of the border. body's text names font as /MCF0.
func widgetAppearances(x *model.XRefTable, f *field, font *pdfFont, body func(b *strings.Builder, width, height float64)) error {
	var aps []pendingAP
	for _, w := range f.widgets {
		width, height, ok := widgetBox(x, w)
		if !ok {
			continue
		}
		var b strings.Builder
		b.WriteString(frameContent(x, w, width, height))
		b.WriteString("/Tx BMC\nq\n")
		fmt.Fprintf(&b, "1 1 %s %s re W n\n", num(width-2), num(height-2))
		body(&b, width, height)
		b.WriteString("Q\nEMC\n")
		aps = append(aps, pendingAP{widget: w, width: width, height: height, content: b.String()})
	}
	return finishAppearances(x, font, aps)
}

const fieldPadding = 2.0

// textAppearances draws value into every widget of a text or dropdown field.
func (a *area) textAppearances(x *model.XRefTable, f *field, value string) error {
	da := fieldDA(x, f)
	flat := strings.NewReplacer("\r\n", "\n", "\r", "\n", "\t", " ").Replace(value)
	multiline := f.kind() == "text" && f.ff&ffMultiline != 0
	if !multiline {
		flat = strings.ReplaceAll(flat, "\n", " ")
	}
	font, err := a.fonts.chooseFont(standardFontFor(x, da.font), strings.ReplaceAll(flat, "\n", ""))
	if err != nil {
		return err
	}
	maxLen, _ := dictInt(x, f.dict, "MaxLen")
	comb := f.kind() == "text" && f.ff&ffComb != 0 && !multiline && maxLen > 0
	return widgetAppearances(x, f, font, func(b *strings.Builder, width, height float64) {
		b.WriteString("BT\n")
		asc, desc := font.ascent(), font.descent()
		lineH := (asc - desc) / 1000
		size := da.size
		switch {
		case multiline:
			if size == 0 {
				size = 12
			}
			fmt.Fprintf(b, "/MCF0 %s Tf\n%s\n", num(size), da.color)
			lines := wrapText(font, flat, size, width-2*fieldPadding)
			y := height - fieldPadding - asc/1000*size
			lead := lineH * size
			for i, l := range lines {
				if y < -lead {
					break
				}
				if i == 0 {
					fmt.Fprintf(b, "%s %s Td\n", num(fieldPadding), num(y))
				} else {
					fmt.Fprintf(b, "0 %s Td\n", num(-lead))
				}
				fmt.Fprintf(b, "%s Tj\n", font.operand(l))
				y -= lead
			}
		case comb:
			if size == 0 {
				size = math.Min(12, (height-2*fieldPadding)/lineH)
			}
			fmt.Fprintf(b, "/MCF0 %s Tf\n%s\n", num(size), da.color)
			cell := width / float64(maxLen)
			y := (height-lineH*size)/2 - desc/1000*size
			for i, r := range []rune(flat) {
				if i >= maxLen {
					break
				}
				cw := font.width(string(r)) / 1000 * size
				fmt.Fprintf(b, "1 0 0 1 %s %s Tm %s Tj\n", num(float64(i)*cell+(cell-cw)/2), num(y), font.operand(string(r)))
			}
		default:
			tw := font.width(flat) / 1000
			if size == 0 {
				size = math.Min(12, (height-2*fieldPadding)/lineH)
				if tw > 0 {
					size = math.Min(size, (width-2*fieldPadding)/tw)
				}
				size = math.Max(size, 4)
			}
			fmt.Fprintf(b, "/MCF0 %s Tf\n%s\n", num(size), da.color)
			xPos := fieldPadding
			switch f.q {
			case 1:
				xPos = (width - tw*size) / 2
			case 2:
				xPos = width - fieldPadding - tw*size
			}
			y := (height-lineH*size)/2 - desc/1000*size
			fmt.Fprintf(b, "%s %s Td\n%s Tj\n", num(xPos), num(y), font.operand(flat))
		}
		b.WriteString("ET\n")
	})
}

// wrapText breaks text into lines no wider than width points.
func wrapText(font *pdfFont, text string, size, width float64) []string {
	var lines []string
	fits := func(s string) bool { return font.width(s)/1000*size <= width }
	for _, para := range strings.Split(text, "\n") {
		words := strings.Fields(para)
		if len(words) == 0 {
			lines = append(lines, "")
			continue
		}
		line := ""
		for _, w := range words {
			cand := w
			if line != "" {
				cand = line + " " + w
			}
			if fits(cand) {
				line = cand
				continue
			}
			if line != "" {
				lines = append(lines, line)
			}
			// A word wider than the field is broken between characters.
			line = ""
			for _, r := range w {
				if fits(line+string(r)) || line == "" {
					line += string(r)
					continue
				}
				lines = append(lines, line)
				line = string(r)
			}
		}
		lines = append(lines, line)
	}
	return lines
}

// listAppearances draws a list box's options with the selected ones
// highlighted.
func (a *area) listAppearances(x *model.XRefTable, f *field, display []string, selected map[int]bool) error {
	da := fieldDA(x, f)
	font, err := a.fonts.chooseFont(standardFontFor(x, da.font), display...)
	if err != nil {
		return err
	}
	size := da.size
	if size == 0 {
		size = 12
	}
	lineH := (font.ascent() - font.descent()) / 1000 * size
	return widgetAppearances(x, f, font, func(b *strings.Builder, width, height float64) {
		top := height - 1
		for i := range display {
			if selected[i] {
				fmt.Fprintf(b, "0.6 0.75 0.86 rg\n1 %s %s %s re f\n", num(top-float64(i+1)*lineH), num(width-2), num(lineH))
			}
		}
		fmt.Fprintf(b, "BT\n/MCF0 %s Tf\n%s\n", num(size), da.color)
		for i, s := range display {
			y := top - float64(i)*lineH - font.ascent()/1000*size
			if y < -lineH {
				break
			}
			fmt.Fprintf(b, "1 0 0 1 %s %s Tm %s Tj\n", num(fieldPadding), num(y), font.operand(s))
		}
		b.WriteString("ET\n")
	})
}

// buttonAppearance gives a checkbox or radio widget that has no appearance
// streams an "on" look (a ZapfDingbats glyph) and an empty "Off" look.
func buttonAppearance(x *model.XRefTable, w types.Dict, state, glyph string) error {
	width, height, ok := widgetBox(x, w)
	if !ok {
		return nil
	}
	if mk, _ := derefDict(x, w, "MK"); mk != nil {
		if s, err := dictText(x, mk, "CA"); err == nil && len(s) == 1 {
			glyph = s
		}
	}
	fontRef, err := x.IndRefForNewObject(types.Dict{
		"Type": types.Name("Font"), "Subtype": types.Name("Type1"), "BaseFont": types.Name("ZapfDingbats"),
	})
	if err != nil {
		return err
	}
	size := math.Min(width, height) * 0.8
	font := &pdfFont{std: "ZapfDingbats"}
	gw := font.width(glyph) / 1000 * size
	frame := frameContent(x, w, width, height)
	on := fmt.Sprintf("%sq\nBT\n/ZaDb %s Tf\n0 g\n%s %s Td\n%s Tj\nET\nQ\n", frame, num(size), num((width-gw)/2), num((height-size*0.7)/2), pdfLiteral([]byte(glyph)))
	form := func(content string) (*types.IndirectRef, error) {
		return newStream(x, []byte(content), types.Dict{
			"Type":      types.Name("XObject"),
			"Subtype":   types.Name("Form"),
			"BBox":      types.Array{types.Integer(0), types.Integer(0), types.Float(width), types.Float(height)},
			"Resources": types.Dict{"Font": types.Dict{"ZaDb": *fontRef}},
		})
	}
	onRef, err := form(on)
	if err != nil {
		return err
	}
	offRef, err := form(frame)
	if err != nil {
		return err
	}
	w["AP"] = types.Dict{"N": types.Dict{types.EncodeName(state): *onRef, "Off": *offRef}}
	return nil
}
