package textenc

import (
	"bytes"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/saintfish/chardet"
	"golang.org/x/text/encoding/ianaindex"
)

// detectLegacy names the single-byte (or legacy multi-byte) encoding of a
// text that is not UTF-8. head is the start of the text and sample the
// part from the line holding the first byte that is not UTF-8.
//
// chardet proposes candidates from language statistics, but it gives
// mostly-ASCII tables (where only names carry accents) low scores, is
// unreliable on short texts, and reports ties in a random order (its
// recognizers race in goroutines). So it reads only the lines that hold
// non-ASCII bytes, its candidates are ordered deterministically, and each
// is checked by decoding: Windows-1252 wins over a candidate that decodes
// the sample to the same text (windows-1254 for "é", say), to invalid
// sequences, or to implausible text (letters of another script glued to
// Latin ones) where Windows-1252 reads plausibly. The confidence is raised
// when the chosen decoding looks like real text.
//
// ISO-8859-1 is decoded as its superset Windows-1252, which is what files
// written on Windows actually use; it is reported as windows-1252 when
// bytes 0x80–0x9F (€, curly quotes, dashes) occur.
func detectLegacy(head, sample []byte) Encoding {
	src := head
	if invalidAt(head) < 0 {
		// head is UTF-8 (or ASCII); the evidence lies further on.
		src = sample
	}
	lines := nonASCIILines(src, 16<<10)
	hasC1 := false
	for _, b := range lines {
		if b >= 0x80 && b <= 0x9F {
			hasC1 = true
			break
		}
	}
	western := Encoding{Name: "windows-1252", Confidence: 0.3, codec: windows1252}
	results, _ := chardet.NewTextDetector().DetectAll(lines)
	sort.SliceStable(results, func(i, j int) bool {
		a, b := results[i], results[j]
		if a.Confidence != b.Confidence {
			return a.Confidence > b.Confidence
		}
		if wa, wb := isWestern(a.Charset), isWestern(b.Charset); wa != wb {
			return wa
		}
		return a.Charset < b.Charset
	})
	var best *Encoding
	westernConf := 0.0 // chardet's own score for the Western reading
	for _, r := range results {
		conf := float64(r.Confidence) / 100
		name := strings.ToLower(r.Charset)
		if isWestern(name) {
			if conf > westernConf {
				westernConf = conf
				if name == "iso-8859-1" && !hasC1 {
					western.Name = name
				}
			}
			continue
		}
		if best != nil || strings.HasPrefix(name, "utf-") {
			// The text is not valid UTF-8 (checked before) and has no
			// UTF-16 pattern, so a Unicode guess is wrong.
			continue
		}
		if enc, err := ianaindex.IANA.Encoding(r.Charset); err == nil && enc != nil {
			best = &Encoding{Name: name, Confidence: conf, codec: enc}
		}
	}
	western.Confidence = max(western.Confidence, westernConf)
	wText, wScore, wBad := plausibility(western, lines)
	chosen := western
	if best != nil && best.Confidence > westernConf {
		bText, bScore, bBad := plausibility(*best, lines)
		switch {
		case bText == wText:
			western.Confidence = best.Confidence
		case bBad && !wBad:
		case bScore < 0.9 && wScore >= 0.9:
		default:
			chosen = *best
		}
	}
	_, score, _ := plausibility(chosen, lines)
	if score >= 0.9 {
		chosen.Confidence = max(chosen.Confidence, 0.5+0.45*score)
	}
	return chosen
}

func isWestern(charset string) bool {
	switch strings.ToLower(charset) {
	case "iso-8859-1", "windows-1252":
		return true
	}
	return false
}

// nonASCIILines collects up to max bytes of the lines of b that contain
// bytes ≥ 0x80 (all of b when there are none).
func nonASCIILines(text []byte, max int) []byte {
	var out []byte
	b := text
	for len(b) > 0 && len(out) < max {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i+1]
		}
		b = b[len(line):]
		for _, c := range line {
			if c >= 0x80 {
				out = append(out, line...)
				break
			}
		}
	}
	if len(out) == 0 {
		return text
	}
	return out
}

// plausibility decodes sample with e and scores the result: the share of
// non-ASCII characters that look like real text (letters next to letters,
// punctuation, symbols such as € “ ” – …); 1 when there are none. bad
// reports bytes that are invalid in e.
func plausibility(e Encoding, sample []byte) (text string, score float64, bad bool) {
	decoded, err := e.codec.NewDecoder().Bytes(sample)
	if err != nil {
		return "", 0, true
	}
	text = string(decoded)
	rs := []rune(text)
	high, good := 0, 0
	for i, r := range rs {
		if r < 0x80 {
			continue
		}
		high++
		near := (i > 0 && unicode.IsLetter(rs[i-1])) || (i+1 < len(rs) && unicode.IsLetter(rs[i+1]))
		switch {
		case r == utf8.RuneError:
			bad = true
		case unicode.IsControl(r):
		case unicode.IsLetter(r) && near && !mixedScripts(rs, i), unicode.IsPunct(r), unicode.IsSymbol(r):
			good++
		}
	}
	if high == 0 {
		return text, 1, bad
	}
	return text, float64(good) / float64(high), bad
}

// mixedScripts reports whether the letter rs[i] touches a Latin letter
// while not being Latin itself ("M疝aga"): the mark of a wrong multi-byte
// decoding of Latin text.
func mixedScripts(rs []rune, i int) bool {
	if unicode.Is(unicode.Latin, rs[i]) {
		return false
	}
	for _, j := range []int{i - 1, i + 1} {
		if j >= 0 && j < len(rs) && rs[j] < 0x80 && unicode.IsLetter(rs[j]) {
			return true
		}
	}
	return false
}
