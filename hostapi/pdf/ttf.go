package pdf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"golang.org/x/image/font/sfnt"
)

// trueType is a parsed TrueType (glyf-outline) font file: enough of it to
// map runes to glyphs, measure them and write a subset for embedding as a
// PDF CIDFontType2 font.
type trueType struct {
	name       string // PostScript-ish name used in the PDF (no spaces)
	data       []byte
	tables     map[string][]byte
	sf         *sfnt.Font
	unitsPerEm int
	numGlyphs  int
	advances   []uint16 // hmtx advance widths, numberOfHMetrics entries
	longLoca   bool
	bbox       [4]int16
	ascent     int16
	descent    int16
	capHeight  int16
	italic     bool
}

// readTables splits a TrueType file into its tables.
func readTables(data []byte) (map[string][]byte, error) {
	if len(data) < 12 {
		return nil, errors.New("font file too short")
	}
	switch binary.BigEndian.Uint32(data) {
	case 0x00010000, 0x74727565: // TrueType outlines ("true")
	default:
		return nil, errors.New("not a TrueType font with glyf outlines")
	}
	n := int(binary.BigEndian.Uint16(data[4:]))
	if 12+16*n > len(data) {
		return nil, errors.New("truncated table directory")
	}
	tables := map[string][]byte{}
	for i := 0; i < n; i++ {
		rec := data[12+16*i:]
		tag := string(rec[:4])
		off := int(binary.BigEndian.Uint32(rec[8:]))
		ln := int(binary.BigEndian.Uint32(rec[12:]))
		if off < 0 || ln < 0 || off+ln > len(data) {
			return nil, fmt.Errorf("table %q out of bounds", tag)
		}
		tables[tag] = data[off : off+ln]
	}
	return tables, nil
}

func parseTrueType(name string, data []byte) (*trueType, error) {
	tables, err := readTables(data)
	if err != nil {
		return nil, err
	}
	t := &trueType{name: name, data: data, tables: tables}
	for _, tag := range []string{"head", "hhea", "maxp", "hmtx", "loca", "glyf"} {
		if t.tables[tag] == nil {
			return nil, fmt.Errorf("missing %q table", tag)
		}
	}
	head, hhea, maxp := t.tables["head"], t.tables["hhea"], t.tables["maxp"]
	if len(head) < 54 || len(hhea) < 36 || len(maxp) < 6 {
		return nil, errors.New("truncated head, hhea or maxp table")
	}
	t.unitsPerEm = int(binary.BigEndian.Uint16(head[18:]))
	if t.unitsPerEm == 0 {
		return nil, errors.New("unitsPerEm is zero")
	}
	for i := range t.bbox {
		t.bbox[i] = int16(binary.BigEndian.Uint16(head[36+2*i:]))
	}
	t.italic = binary.BigEndian.Uint16(head[44:])&2 != 0
	t.longLoca = binary.BigEndian.Uint16(head[50:]) == 1
	t.ascent = int16(binary.BigEndian.Uint16(hhea[4:]))
	t.descent = int16(binary.BigEndian.Uint16(hhea[6:]))
	t.capHeight = t.ascent
	if os2 := t.tables["OS/2"]; len(os2) >= 90 && binary.BigEndian.Uint16(os2) >= 2 {
		t.capHeight = int16(binary.BigEndian.Uint16(os2[88:]))
	}
	t.numGlyphs = int(binary.BigEndian.Uint16(maxp[4:]))
	nh := int(binary.BigEndian.Uint16(hhea[34:]))
	hmtx := t.tables["hmtx"]
	if nh == 0 || nh > t.numGlyphs || 4*nh > len(hmtx) {
		return nil, errors.New("corrupt hmtx table")
	}
	t.advances = make([]uint16, nh)
	for i := range t.advances {
		t.advances[i] = binary.BigEndian.Uint16(hmtx[4*i:])
	}
	locaEntries := len(t.tables["loca"]) / 2
	if t.longLoca {
		locaEntries = len(t.tables["loca"]) / 4
	}
	if locaEntries < t.numGlyphs+1 {
		return nil, errors.New("loca table shorter than the glyph count")
	}
	sf, err := sfnt.Parse(data)
	if err != nil {
		return nil, err
	}
	t.sf = sf
	return t, nil
}

// glyphs maps every rune of s to a glyph id; missing lists the runes the
// font has no glyph for.
func (t *trueType) glyphs(s []rune) (gids []uint16, missing []rune) {
	var buf sfnt.Buffer
	gids = make([]uint16, len(s))
	for i, r := range s {
		g, err := t.sf.GlyphIndex(&buf, r)
		if err != nil || g == 0 {
			missing = append(missing, r)
			continue
		}
		gids[i] = uint16(g)
	}
	return gids, missing
}

// width is the advance of glyph g in PDF glyph space (1/1000 em).
func (t *trueType) width(g uint16) float64 {
	i := int(g)
	if i >= len(t.advances) {
		i = len(t.advances) - 1
	}
	return float64(t.advances[i]) * 1000 / float64(t.unitsPerEm)
}

// scale converts font units to PDF glyph space.
func (t *trueType) scale(v int16) float64 { return float64(v) * 1000 / float64(t.unitsPerEm) }

func (t *trueType) glyphRange(g int) (int, int) {
	loca := t.tables["loca"]
	if t.longLoca {
		return int(binary.BigEndian.Uint32(loca[4*g:])), int(binary.BigEndian.Uint32(loca[4*g+4:]))
	}
	return 2 * int(binary.BigEndian.Uint16(loca[2*g:])), 2 * int(binary.BigEndian.Uint16(loca[2*g+2:]))
}

// Composite glyph flags (OpenType glyf table).
const (
	argsAreWords  = 0x0001
	haveScale     = 0x0008
	moreComps     = 0x0020
	haveXYScale   = 0x0040
	haveTwoByTwo  = 0x0080
	compHeaderLen = 10
)

// components lists the glyphs a composite glyph is built from.
func (t *trueType) components(g int) []int {
	start, end := t.glyphRange(g)
	glyf := t.tables["glyf"]
	if start >= end || end > len(glyf) || end-start < compHeaderLen {
		return nil
	}
	d := glyf[start:end]
	if int16(binary.BigEndian.Uint16(d)) >= 0 {
		return nil // simple glyph
	}
	var out []int
	p := compHeaderLen
	for p+4 <= len(d) {
		flags := binary.BigEndian.Uint16(d[p:])
		out = append(out, int(binary.BigEndian.Uint16(d[p+2:])))
		p += 4
		if flags&argsAreWords != 0 {
			p += 4
		} else {
			p += 2
		}
		switch {
		case flags&haveScale != 0:
			p += 2
		case flags&haveXYScale != 0:
			p += 4
		case flags&haveTwoByTwo != 0:
			p += 8
		}
		if flags&moreComps == 0 {
			break
		}
	}
	return out
}

// subset returns a font file that keeps glyph ids stable (so that a PDF
// CIDToGIDMap of Identity still holds) but carries outlines only for the
// used glyphs, their components and .notdef. Tables a PDF reader does not
// need for an embedded CIDFontType2 (cmap, name, post, layout tables) are
// dropped.
func (t *trueType) subset(used map[uint16]bool) []byte {
	keep := map[int]bool{0: true}
	var stack []int
	for g := range used {
		if int(g) < t.numGlyphs && !keep[int(g)] {
			keep[int(g)] = true
			stack = append(stack, int(g))
		}
	}
	for len(stack) > 0 {
		g := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range t.components(g) {
			if c < t.numGlyphs && !keep[c] {
				keep[c] = true
				stack = append(stack, c)
			}
		}
	}
	glyf := t.tables["glyf"]
	var newGlyf []byte
	loca := make([]byte, 4*(t.numGlyphs+1))
	for g := 0; g < t.numGlyphs; g++ {
		binary.BigEndian.PutUint32(loca[4*g:], uint32(len(newGlyf)))
		if !keep[g] {
			continue
		}
		start, end := t.glyphRange(g)
		if start < end && end <= len(glyf) {
			newGlyf = append(newGlyf, glyf[start:end]...)
			for len(newGlyf)%4 != 0 {
				newGlyf = append(newGlyf, 0)
			}
		}
	}
	binary.BigEndian.PutUint32(loca[4*t.numGlyphs:], uint32(len(newGlyf)))

	head := append([]byte(nil), t.tables["head"]...)
	binary.BigEndian.PutUint32(head[8:], 0)  // checkSumAdjustment, set below
	binary.BigEndian.PutUint16(head[50:], 1) // long loca offsets

	out := map[string][]byte{"head": head, "loca": loca, "glyf": newGlyf}
	for _, tag := range []string{"hhea", "hmtx", "maxp", "cvt ", "fpgm", "prep", "OS/2"} {
		if b := t.tables[tag]; b != nil {
			out[tag] = b
		}
	}
	file := writeSFNT(out)
	// head.checkSumAdjustment makes the whole file sum to 0xB1B0AFBA.
	headOff := tableOffset(file, "head")
	binary.BigEndian.PutUint32(file[headOff+8:], 0xB1B0AFBA-checksum(file))
	return file
}

func checksum(b []byte) uint32 {
	var sum uint32
	for i := 0; i < len(b); i += 4 {
		var w [4]byte
		copy(w[:], b[i:])
		sum += binary.BigEndian.Uint32(w[:])
	}
	return sum
}

func writeSFNT(tables map[string][]byte) []byte {
	tags := make([]string, 0, len(tables))
	for tag := range tables {
		tags = append(tags, tag)
	}
	sort.Strings(tags)
	n := len(tags)
	entrySelector := 0
	for 1<<(entrySelector+1) <= n {
		entrySelector++
	}
	searchRange := (1 << entrySelector) * 16
	hdr := make([]byte, 12+16*n)
	binary.BigEndian.PutUint32(hdr, 0x00010000)
	binary.BigEndian.PutUint16(hdr[4:], uint16(n))
	binary.BigEndian.PutUint16(hdr[6:], uint16(searchRange))
	binary.BigEndian.PutUint16(hdr[8:], uint16(entrySelector))
	binary.BigEndian.PutUint16(hdr[10:], uint16(n*16-searchRange))
	body := []byte{}
	off := len(hdr)
	for i, tag := range tags {
		b := tables[tag]
		rec := hdr[12+16*i:]
		copy(rec, tag)
		binary.BigEndian.PutUint32(rec[4:], checksum(b))
		binary.BigEndian.PutUint32(rec[8:], uint32(off+len(body)))
		binary.BigEndian.PutUint32(rec[12:], uint32(len(b)))
		body = append(body, b...)
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
	}
	return append(hdr, body...)
}

func tableOffset(file []byte, tag string) int {
	n := int(binary.BigEndian.Uint16(file[4:]))
	for i := 0; i < n; i++ {
		rec := file[12+16*i:]
		if string(rec[:4]) == tag {
			return int(binary.BigEndian.Uint32(rec[8:]))
		}
	}
	return -1
}
