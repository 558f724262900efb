package pdf

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	pdfcpufont "github.com/pdfcpu/pdfcpu/pkg/font"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
	"golang.org/x/text/encoding/charmap"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// stdFont describes one of the 14 standard PDF fonts every reader has.
type stdFont struct {
	family          string // sans, serif, mono or "" for the symbol fonts
	bold, italic    bool
	ascent, descent float64 // glyph space, from the Adobe AFM files
}

var standardFonts = map[string]stdFont{
	"Helvetica":             {"sans", false, false, 718, -207},
	"Helvetica-Bold":        {"sans", true, false, 718, -207},
	"Helvetica-Oblique":     {"sans", false, true, 718, -207},
	"Helvetica-BoldOblique": {"sans", true, true, 718, -207},
	"Times-Roman":           {"serif", false, false, 683, -217},
	"Times-Bold":            {"serif", true, false, 676, -205},
	"Times-Italic":          {"serif", false, true, 683, -205},
	"Times-BoldItalic":      {"serif", true, true, 699, -205},
	"Courier":               {"mono", false, false, 629, -157},
	"Courier-Bold":          {"mono", true, false, 629, -157},
	"Courier-Oblique":       {"mono", false, true, 629, -157},
	"Courier-BoldOblique":   {"mono", true, true, 629, -157},
	"Symbol":                {"", false, false, 1010, -293},
	"ZapfDingbats":          {"", false, false, 820, -143},
}

// standardFontNames lists the standard fonts in a stable order (for the
// parameter schema).
func standardFontNames() []string {
	names := make([]string, 0, len(standardFonts))
	for n := range standardFonts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// unicodeFontDirs are where Debian's fonts-liberation2 / fonts-liberation and
// fonts-dejavu-core packages install their TrueType files. Liberation comes
// first because it is metric-compatible with Helvetica, Times and Courier.
var unicodeFontDirs = []string{
	"/usr/share/fonts/truetype/liberation2",
	"/usr/share/fonts/truetype/liberation",
	"/usr/share/fonts/truetype/dejavu",
}

var unicodeFontFiles = map[string][4]string{ // family → regular, bold, italic, bold italic
	"liberation-sans":  {"LiberationSans-Regular.ttf", "LiberationSans-Bold.ttf", "LiberationSans-Italic.ttf", "LiberationSans-BoldItalic.ttf"},
	"liberation-serif": {"LiberationSerif-Regular.ttf", "LiberationSerif-Bold.ttf", "LiberationSerif-Italic.ttf", "LiberationSerif-BoldItalic.ttf"},
	"liberation-mono":  {"LiberationMono-Regular.ttf", "LiberationMono-Bold.ttf", "LiberationMono-Italic.ttf", "LiberationMono-BoldItalic.ttf"},
	"dejavu-sans":      {"DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSans-BoldOblique.ttf"},
	"dejavu-serif":     {"DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSerif-Italic.ttf", "DejaVuSerif-BoldItalic.ttf"},
	"dejavu-mono":      {"DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "DejaVuSansMono-Oblique.ttf", "DejaVuSansMono-BoldOblique.ttf"},
}

// fontCandidates lists font files to try for text in a standard font's
// style that the standard font cannot show, best match first.
func fontCandidates(st stdFont) []string {
	style := 0
	if st.bold {
		style |= 1
	}
	if st.italic {
		style |= 2
	}
	fam := st.family
	if fam == "" {
		fam = "sans"
	}
	var names []string
	add := func(key string, style int) {
		names = append(names, unicodeFontFiles[key][style])
	}
	for _, maker := range []string{"liberation", "dejavu"} {
		add(maker+"-"+fam, style)
	}
	for _, maker := range []string{"liberation", "dejavu"} {
		add(maker+"-"+fam, 0)
	}
	// DejaVu Sans covers the most scripts of the lot.
	add("dejavu-sans", style)
	add("dejavu-sans", 0)
	var paths []string
	seen := map[string]bool{}
	for _, n := range names {
		for _, d := range unicodeFontDirs {
			p := filepath.Join(d, n)
			if !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		}
	}
	return paths
}

// fontCache holds parsed TrueType files for the life of the host.
type fontCache struct {
	mu     sync.Mutex
	byPath map[string]*trueType // nil: missing or unusable
}

func newFontCache() *fontCache { return &fontCache{byPath: map[string]*trueType{}} }

func (fc *fontCache) load(path string) *trueType {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if t, ok := fc.byPath[path]; ok {
		return t
	}
	var t *trueType
	if data, err := os.ReadFile(path); err == nil {
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		if parsed, err := parseTrueType(name, data); err == nil {
			t = parsed
		}
	}
	fc.byPath[path] = t
	return t
}

// pdfFont is a font chosen for some text: a standard font with
// WinAnsiEncoding, or an embedded subset of a Unicode TrueType font.
type pdfFont struct {
	std  string
	tt   *trueType
	used map[uint16]rune // glyph → the character it shows (for ToUnicode)
}

// winAnsi encodes s for a standard font, reporting false when a character
// has no code in Windows-1252.
func winAnsi(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r >= 0x80 && r <= 0x9F {
			return nil, false
		}
		b, ok := charmap.Windows1252.EncodeRune(r)
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

func describeRunes(rs []rune) string {
	seen := map[rune]bool{}
	var parts []string
	for _, r := range rs {
		if seen[r] || len(parts) == 10 {
			continue
		}
		seen[r] = true
		parts = append(parts, fmt.Sprintf("%q (U+%04X)", r, r))
	}
	return strings.Join(parts, ", ")
}

// chooseFont picks how to draw texts in the standard font name: the
// standard font itself when every character is in its encoding, otherwise
// the closest installed Unicode TrueType font, embedded as a subset.
func (fc *fontCache) chooseFont(name string, texts ...string) (*pdfFont, error) {
	st, ok := standardFonts[name]
	if !ok {
		return nil, apierr.New(apierr.ValidationFailed, "unknown font %q; use one of: %s", name, strings.Join(standardFontNames(), ", "))
	}
	all := strings.Join(texts, "")
	if st.family == "" {
		for _, r := range all {
			if r < 32 || r > 126 {
				return nil, apierr.New(apierr.ValidationFailed, "font %s draws only the ASCII characters, as its own symbols; %s cannot be drawn with it — choose a text font such as Helvetica", name, describeRunes([]rune{r}))
			}
		}
		return &pdfFont{std: name}, nil
	}
	if _, ok := winAnsi(all); ok {
		return &pdfFont{std: name}, nil
	}
	var outside []rune
	for _, r := range all {
		if _, ok := winAnsi(string(r)); !ok {
			outside = append(outside, r)
		}
	}
	runes := []rune(all)
	var best []rune
	found := false
	for _, p := range fontCandidates(st) {
		t := fc.load(p)
		if t == nil {
			continue
		}
		found = true
		if _, missing := t.glyphs(runes); len(missing) == 0 {
			return &pdfFont{tt: t, used: map[uint16]rune{}}, nil
		} else if best == nil || len(missing) < len(best) {
			best = missing
		}
	}
	if !found {
		return nil, apierr.New(apierr.UnsupportedFormat,
			"the text has characters the standard PDF fonts cannot draw (%s), and no Unicode TrueType font is installed to embed instead (looked in %s); install the Debian package fonts-dejavu-core or fonts-liberation2, or use only Latin-1 characters",
			describeRunes(outside), strings.Join(unicodeFontDirs, ", "))
	}
	return nil, apierr.New(apierr.ValidationFailed, "no installed font has glyphs for %s; remove those characters or install a font that covers them", describeRunes(best))
}

// ascent and descent are in glyph space (1/1000 of the font size).
func (f *pdfFont) ascent() float64 {
	if f.tt != nil {
		return f.tt.scale(f.tt.ascent)
	}
	return standardFonts[f.std].ascent
}

func (f *pdfFont) descent() float64 {
	if f.tt != nil {
		return f.tt.scale(f.tt.descent)
	}
	return standardFonts[f.std].descent
}

// width is the advance of s in glyph space.
func (f *pdfFont) width(s string) float64 {
	if f.tt != nil {
		gids, _ := f.tt.glyphs([]rune(s))
		var w float64
		for _, g := range gids {
			w += f.tt.width(g)
		}
		return w
	}
	b, ok := winAnsi(s)
	if !ok || f.standardSymbolic() {
		b = []byte(s)
	}
	var w float64
	for _, c := range b {
		cw, err := pdfcpufont.CharWidth(f.std, rune(c))
		if err == nil {
			w += float64(cw)
		}
	}
	return w
}

func (f *pdfFont) standardSymbolic() bool { return f.std != "" && standardFonts[f.std].family == "" }

// operand encodes s as a string operand for Tj and records the glyphs used.
func (f *pdfFont) operand(s string) string {
	if f.tt != nil {
		runes := []rune(s)
		gids, _ := f.tt.glyphs(runes)
		var sb strings.Builder
		sb.WriteByte('<')
		for i, g := range gids {
			if _, ok := f.used[g]; !ok {
				f.used[g] = runes[i]
			}
			fmt.Fprintf(&sb, "%04X", g)
		}
		sb.WriteByte('>')
		return sb.String()
	}
	b, ok := winAnsi(s)
	if !ok || f.standardSymbolic() {
		b = []byte(s)
	}
	return pdfLiteral(b)
}

// pdfLiteral writes b as a PDF literal string.
func pdfLiteral(b []byte) string {
	var sb strings.Builder
	sb.WriteByte('(')
	for _, c := range b {
		switch {
		case c == '(' || c == ')' || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c < 32 || c > 126:
			fmt.Fprintf(&sb, "\\%03o", c)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte(')')
	return sb.String()
}

// object adds the font's dictionary to the document. For an embedded font
// call it after every operand: the subset holds only the glyphs used.
func (f *pdfFont) object(x *model.XRefTable) (*types.IndirectRef, error) {
	if f.tt == nil {
		d := types.Dict{
			"Type":     types.Name("Font"),
			"Subtype":  types.Name("Type1"),
			"BaseFont": types.Name(f.std),
		}
		if !f.standardSymbolic() {
			d["Encoding"] = types.Name("WinAnsiEncoding")
		}
		return x.IndRefForNewObject(d)
	}
	return f.type0(x)
}

func (f *pdfFont) type0(x *model.XRefTable) (*types.IndirectRef, error) {
	t := f.tt
	gids := make([]int, 0, len(f.used))
	usedSet := map[uint16]bool{}
	for g := range f.used {
		gids = append(gids, int(g))
		usedSet[g] = true
	}
	sort.Ints(gids)

	// A subset tag tells readers that only some glyphs are present.
	h := fnv.New32a()
	for _, g := range gids {
		fmt.Fprintf(h, "%d,", g)
	}
	sum := h.Sum32()
	tag := make([]byte, 6)
	for i := range tag {
		tag[i] = byte('A' + sum%26)
		sum /= 26
	}
	base := string(tag) + "+" + strings.ReplaceAll(t.name, " ", "")

	sub := t.subset(usedSet)
	// Length1 is the length of the font program before compression.
	ff, err := newStream(x, sub, types.Dict{"Length1": types.Integer(len(sub))})
	if err != nil {
		return nil, err
	}
	flags := 32 // nonsymbolic
	if t.italic {
		flags |= 64
	}
	fd := types.Dict{
		"Type":        types.Name("FontDescriptor"),
		"FontName":    types.Name(base),
		"Flags":       types.Integer(flags),
		"FontBBox":    types.Array{types.Float(t.scale(t.bbox[0])), types.Float(t.scale(t.bbox[1])), types.Float(t.scale(t.bbox[2])), types.Float(t.scale(t.bbox[3]))},
		"ItalicAngle": types.Integer(0),
		"Ascent":      types.Float(t.scale(t.ascent)),
		"Descent":     types.Float(t.scale(t.descent)),
		"CapHeight":   types.Float(t.scale(t.capHeight)),
		"StemV":       types.Integer(80),
		"FontFile2":   *ff,
	}
	if t.italic {
		fd["ItalicAngle"] = types.Integer(-12)
	}
	fdRef, err := x.IndRefForNewObject(fd)
	if err != nil {
		return nil, err
	}
	w := types.Array{}
	for _, g := range gids {
		w = append(w, types.Integer(g), types.Array{types.Float(round2(t.width(uint16(g))))})
	}
	cid := types.Dict{
		"Type":           types.Name("Font"),
		"Subtype":        types.Name("CIDFontType2"),
		"BaseFont":       types.Name(base),
		"CIDSystemInfo":  types.Dict{"Registry": types.StringLiteral("Adobe"), "Ordering": types.StringLiteral("Identity"), "Supplement": types.Integer(0)},
		"FontDescriptor": *fdRef,
		"DW":             types.Integer(1000),
		"W":              w,
		"CIDToGIDMap":    types.Name("Identity"),
	}
	cidRef, err := x.IndRefForNewObject(cid)
	if err != nil {
		return nil, err
	}
	tu, err := newStream(x, toUnicodeCMap(gids, f.used), nil)
	if err != nil {
		return nil, err
	}
	return x.IndRefForNewObject(types.Dict{
		"Type":            types.Name("Font"),
		"Subtype":         types.Name("Type0"),
		"BaseFont":        types.Name(base),
		"Encoding":        types.Name("Identity-H"),
		"DescendantFonts": types.Array{*cidRef},
		"ToUnicode":       *tu,
	})
}

// toUnicodeCMap maps each glyph id back to its character so that text
// drawn with the embedded font can be extracted and searched.
func toUnicodeCMap(gids []int, chars map[uint16]rune) []byte {
	var b strings.Builder
	b.WriteString("/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n" +
		"/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n" +
		"/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n" +
		"1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n")
	for i := 0; i < len(gids); i += 100 {
		chunk := gids[i:min(i+100, len(gids))]
		fmt.Fprintf(&b, "%d beginbfchar\n", len(chunk))
		for _, g := range chunk {
			fmt.Fprintf(&b, "<%04X> <", g)
			for _, u := range utf16Units(chars[uint16(g)]) {
				fmt.Fprintf(&b, "%04X", u)
			}
			b.WriteString(">\n")
		}
		b.WriteString("endbfchar\n")
	}
	b.WriteString("endcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n")
	return []byte(b.String())
}

func utf16Units(r rune) []uint16 {
	if r < 0x10000 {
		return []uint16{uint16(r)}
	}
	r -= 0x10000
	return []uint16{uint16(0xD800 + (r >> 10)), uint16(0xDC00 + (r & 0x3FF))}
}

// newStream adds a Flate-compressed stream object with the extra entries.
func newStream(x *model.XRefTable, content []byte, extra types.Dict) (*types.IndirectRef, error) {
	sd, err := x.NewStreamDictForBuf(content)
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		sd.Dict[k] = v
	}
	if err := sd.Encode(); err != nil {
		return nil, err
	}
	return x.IndRefForNewObject(*sd)
}
