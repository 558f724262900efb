package pdf

import (
	"strings"
	"testing"
)

func TestTrueTypeSubset(t *testing.T) {
	fc := newFontCache()
	var tt *trueType
	for _, p := range fontCandidates(standardFonts["Helvetica"]) {
		if tt = fc.load(p); tt != nil {
			break
		}
	}
	if tt == nil {
		t.Skip("no Unicode TrueType font installed (fonts-dejavu-core or fonts-liberation2)")
	}
	gids, missing := tt.glyphs([]rune("Việt"))
	if len(missing) != 0 {
		t.Fatalf("%s lacks %q", tt.name, missing)
	}
	unused, _ := tt.glyphs([]rune("Z"))
	used := map[uint16]bool{}
	for _, g := range gids {
		used[g] = true
	}
	sub := tt.subset(used)
	if len(sub) >= len(tt.data)/4 {
		t.Fatalf("subset is %d bytes of %d", len(sub), len(tt.data))
	}
	if checksum(sub) != 0xB1B0AFBA {
		t.Fatalf("file checksum = %#x, want 0xB1B0AFBA", checksum(sub))
	}
	tables, err := readTables(sub)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"head", "hhea", "hmtx", "maxp", "loca", "glyf"} {
		if tables[tag] == nil {
			t.Fatalf("subset lacks %q", tag)
		}
	}
	// Glyph ids stay put (CIDToGIDMap Identity): kept glyphs and the parts
	// of composite ones have outlines, dropped ones are empty.
	s := &trueType{tables: tables, longLoca: true}
	for _, g := range gids {
		if a, b := s.glyphRange(int(g)); b <= a {
			t.Errorf("glyph %d was dropped", g)
		}
		for _, c := range tt.components(int(g)) {
			if a, b := s.glyphRange(c); b <= a {
				t.Errorf("component %d of glyph %d was dropped", c, g)
			}
		}
	}
	if a, b := s.glyphRange(int(unused[0])); a != b {
		t.Errorf("unused glyph %d was kept", unused[0])
	}
}

func TestToUnicodeCMap(t *testing.T) {
	cm := string(toUnicodeCMap([]int{3, 70}, map[uint16]rune{3: 'ệ', 70: '𝄞'}))
	for _, want := range []string{"2 beginbfchar", "<0003> <1EC7>", "<0046> <D834DD1E>", "endcmap"} {
		if !strings.Contains(cm, want) {
			t.Errorf("CMap lacks %q:\n%s", want, cm)
		}
	}
}
