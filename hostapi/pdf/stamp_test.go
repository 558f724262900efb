package pdf

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

type word struct {
	x, y float64
	text string
}

var wordRE = regexp.MustCompile(`<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="[\d.]+" yMax="[\d.]+">([^<]*)</word>`)

// popplerWords lists the words poppler finds on page, with their top-left
// corners in points from the displayed page's top-left.
func popplerWords(t *testing.T, data []byte, page int) []word {
	t.Helper()
	p := strconv.Itoa(page)
	out := popplerText(t, data, "-bbox", "-f", p, "-l", p)
	var words []word
	for _, m := range wordRE.FindAllStringSubmatch(out, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		words = append(words, word{x, y, m[3]})
	}
	return words
}

func findWord(t *testing.T, words []word, text string) word {
	t.Helper()
	for _, w := range words {
		if w.text == text {
			return w
		}
	}
	t.Fatalf("word %q not found in %v", text, words)
	return word{}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1.5 }

// render rasterizes page at 72 dpi with poppler, so pixels are points.
func render(t *testing.T, data []byte, page int) image.Image {
	t.Helper()
	bin, err := exec.LookPath("pdftoppm")
	if err != nil {
		t.Skip("pdftoppm (poppler-utils) is not installed; skipping the rendering check")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pdf")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p := strconv.Itoa(page)
	if out, err := exec.Command(bin, "-r", "72", "-f", p, "-l", p, "-singlefile", "-png", in, filepath.Join(dir, "out")).CombinedOutput(); err != nil {
		t.Fatalf("pdftoppm: %v %s", err, out)
	}
	f, err := os.Open(filepath.Join(dir, "out.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func rgbAt(img image.Image, x, y int) (r, g, b uint32) {
	r, g, b, _ = img.At(x, y).RGBA()
	return r >> 8, g >> 8, b >> 8
}

func TestAddTextPositionFontAndColor(t *testing.T) {
	e := newTestEnv(t)
	orig := e.upload("doc.pdf", rotated(t, textPDF(t, [][]string{{"first"}, {"second"}}), 90, "2"))

	res := e.mustTool("pdf_add_text", map[string]any{"id": "doc.pdf", "page": 1, "text": "Stamped words\nsecond line",
		"x": 100, "y": 200, "size": 20, "font": "Times-Bold", "color": "#FF0000"})
	if !reflect.DeepEqual(res, map[string]any{"ok": true}) {
		t.Fatalf("result = %v", res)
	}
	// On a rotated page, x and y are still measured on the page as displayed.
	e.mustTool("pdf_add_text", map[string]any{"id": "doc.pdf", "page": 2, "text": "Sideways", "x": 50, "y": 300})

	r := e.mustTool("pdf_extract_text", map[string]any{"id": "doc.pdf"})
	if got, want := pageTexts(t, r), []string{"first\nStamped words\nsecond line", "second\nSideways"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("text = %q, want %q", got, want)
	}
	body := e.body("doc.pdf")
	w := findWord(t, popplerWords(t, body, 1), "Stamped")
	if !near(w.x, 100) || !near(w.y, 200) {
		t.Fatalf("Stamped at (%v, %v), want (100, 200)", w.x, w.y)
	}
	if l2 := findWord(t, popplerWords(t, body, 1), "second"); !near(l2.x, 100) || !near(l2.y, 224) {
		t.Fatalf("second line at (%v, %v), want (100, 224): 1.2 × size below", l2.x, l2.y)
	}
	if s := findWord(t, popplerWords(t, body, 2), "Sideways"); !near(s.x, 50) || !near(s.y, 300) {
		t.Fatalf("Sideways at (%v, %v), want (50, 300)", s.x, s.y)
	}
	// The stamp is red where the glyphs are.
	img := render(t, body, 1)
	red := false
	for y := 200; y < 220 && !red; y++ {
		for x := 100; x < 160; x++ {
			if r, g, b := rgbAt(img, x, y); r > 200 && g < 80 && b < 80 {
				red = true
				break
			}
		}
	}
	if !red {
		t.Fatal("no red pixel where the red text was drawn")
	}

	// The first edit kept the original as the one-level backup.
	f := e.file("doc.pdf")
	if !f.HasBackup {
		t.Fatal("no backup after an in-place edit")
	}
	back, err := e.env.WS.Revert(e.ctx, "doc.pdf")
	if err != nil {
		t.Fatal(err)
	}
	if back.SHA256 != orig.SHA256 {
		t.Fatal("revert did not restore the original")
	}
}

func TestAddTextEveryStandardFont(t *testing.T) {
	e := newTestEnv(t)
	e.upload("fonts.pdf", textPDF(t, [][]string{{"fonts"}}))
	var want []string
	for i, name := range standardFontNames() {
		text := "Sample " + name
		if standardFonts[name].family == "" {
			text = "abc" // the symbol fonts draw their own glyphs for ASCII
		}
		e.mustTool("pdf_add_text", map[string]any{"id": "fonts.pdf", "page": 1, "text": text, "x": 72, "y": 100 + 30*i, "font": name, "size": 14})
		if standardFonts[name].family != "" {
			want = append(want, text)
		}
	}
	got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "fonts.pdf"}))[0]
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("extracted text lacks %q:\n%s", w, got)
		}
	}
}

// unicodeFontInstalled reports whether a TrueType font addText can embed
// is on this machine (Debian fonts-dejavu-core or fonts-liberation2).
func unicodeFontInstalled() bool {
	fc := newFontCache()
	for _, p := range fontCandidates(standardFonts["Helvetica"]) {
		if fc.load(p) != nil {
			return true
		}
	}
	return false
}

func TestAddTextNonLatin(t *testing.T) {
	e := newTestEnv(t)
	f := e.upload("u.pdf", textPDF(t, [][]string{{"Latin"}}))
	text := "Tiếng Việt, Ελληνικά, Русский — 5 €"
	args := map[string]any{"id": "u.pdf", "page": 1, "text": text, "x": 72, "y": 300, "size": 16}
	if !unicodeFontInstalled() {
		_, err := e.tool("pdf_add_text", args)
		wantCode(t, err, apierr.UnsupportedFormat)
		if !strings.Contains(err.Error(), "fonts-dejavu-core") {
			t.Fatalf("error should say what to install: %v", err)
		}
		e.unchanged("u.pdf", f)
		t.Skip("no Unicode TrueType font installed; checked the refusal only")
	}
	e.mustTool("pdf_add_text", args)
	body := e.body("u.pdf")
	if got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "u.pdf"})); !reflect.DeepEqual(got, []string{"Latin\n" + text}) {
		t.Fatalf("pdfium reads %q", got)
	}
	if got := popplerText(t, body); !strings.Contains(got, text) {
		t.Fatalf("poppler reads %q", got)
	}
	// Only the glyphs used are embedded, not the whole font file.
	if int64(len(body)) > f.Size+60_000 {
		t.Fatalf("file grew by %d bytes; the font subset should be small", int64(len(body))-f.Size)
	}
	// A WinAnsi character such as € alone needs no embedded font.
	e.mustTool("pdf_add_text", map[string]any{"id": "u.pdf", "page": 1, "text": "Preis: 5 € – „gut“", "x": 72, "y": 400})
	if got := popplerText(t, e.body("u.pdf")); !strings.Contains(got, "Preis: 5 € – „gut“") {
		t.Fatalf("poppler reads %q", got)
	}

	// Characters no installed font covers are refused, naming them.
	before := e.file("u.pdf")
	_, err := e.tool("pdf_add_text", map[string]any{"id": "u.pdf", "page": 1, "text": "日本語 𓀀", "x": 72, "y": 500})
	wantCode(t, err, apierr.ValidationFailed)
	if !strings.Contains(err.Error(), "U+") {
		t.Fatalf("error should name the characters: %v", err)
	}
	e.unchanged("u.pdf", before)

	_, err = e.tool("pdf_add_text", map[string]any{"id": "u.pdf", "page": 1, "text": "é", "x": 72, "y": 500, "font": "Symbol"})
	wantCode(t, err, apierr.ValidationFailed)
	e.unchanged("u.pdf", before)
}

func TestAddTextBadInput(t *testing.T) {
	e := newTestEnv(t)
	f := e.upload("a.pdf", textPDF(t, [][]string{{"one"}, {"two"}}))
	e.upload("notes.txt", []byte("just text\n"))
	for _, c := range []struct {
		args map[string]any
		code apierr.Code
	}{
		{map[string]any{"id": "a.pdf", "page": 3, "text": "x", "x": 1, "y": 1}, apierr.ValidationFailed},
		{map[string]any{"id": "a.pdf", "page": 1, "text": "x", "x": 10000, "y": 1}, apierr.ValidationFailed},
		{map[string]any{"id": "a.pdf", "page": 1, "text": "x", "x": 1, "y": 900}, apierr.ValidationFailed},
		{map[string]any{"id": "a.pdf", "page": 1, "text": "x", "x": -1, "y": 1}, apierr.ValidationFailed},
		{map[string]any{"id": "a.pdf", "page": 1, "text": "x", "x": 1, "y": 1, "color": "red"}, apierr.ValidationFailed},
		{map[string]any{"id": "a.pdf", "page": 1, "text": "x", "x": 1, "y": 1, "font": "Comic Sans"}, apierr.ValidationFailed},
		{map[string]any{"id": "a.pdf", "page": "one", "text": "x", "x": 1, "y": 1}, apierr.ValidationFailed},
		{map[string]any{"id": "a.pdf", "page": 1, "x": 1, "y": 1}, apierr.ValidationFailed},
		{map[string]any{"id": "missing.pdf", "page": 1, "text": "x", "x": 1, "y": 1}, apierr.NotFound},
		{map[string]any{"id": "notes.txt", "page": 1, "text": "x", "x": 1, "y": 1}, apierr.UnsupportedFormat},
	} {
		_, err := e.tool("pdf_add_text", c.args)
		wantCode(t, err, c.code)
	}
	e.unchanged("a.pdf", f)
	if e.file("a.pdf").HasBackup {
		t.Fatal("failed calls must not create a backup")
	}
}

func TestAddImage(t *testing.T) {
	e := newTestEnv(t)
	e.upload("doc.pdf", textPDF(t, [][]string{{"with images"}}))
	e.upload("logo.png", pngBytes(t, 100, 50))
	e.upload("photo.jpg", jpegBytes(t, 64, 48))

	res := e.mustTool("pdf_add_image", map[string]any{"id": "doc.pdf", "page": 1, "image_id": "logo.png", "x": 300, "y": 100, "width": 200})
	if res["ok"] != true {
		t.Fatalf("result = %v", res)
	}
	// Only a height: the width follows the 4:3 aspect ratio (96 points).
	e.mustTool("pdf_add_image", map[string]any{"id": "doc.pdf", "page": 1, "image_id": "photo.jpg", "x": 50, "y": 400, "height": 72})

	body := e.body("doc.pdf")
	imgs, err := api.Images(bytes.NewReader(body), nil, model.NewDefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[[2]int]bool{}
	for _, m := range imgs {
		for _, im := range m {
			sizes[[2]int{im.Width, im.Height}] = true
		}
	}
	if !sizes[[2]int{100, 50}] || !sizes[[2]int{64, 48}] {
		t.Fatalf("embedded images = %v", sizes)
	}
	// The PNG covers x 300–500, y 100–200 (width 200, aspect kept); the
	// JPEG covers x 50–146, y 400–472.
	img := render(t, body, 1)
	white := func(x, y int) bool { r, g, b := rgbAt(img, x, y); return r > 245 && g > 245 && b > 245 }
	for _, p := range [][2]int{{310, 110}, {490, 190}, {400, 150}, {60, 410}, {140, 465}} {
		if white(p[0], p[1]) {
			t.Errorf("(%d, %d) should be covered by an image", p[0], p[1])
		}
	}
	for _, p := range [][2]int{{290, 150}, {510, 150}, {400, 90}, {400, 210}, {155, 440}, {100, 480}} {
		if !white(p[0], p[1]) {
			t.Errorf("(%d, %d) should be blank", p[0], p[1])
		}
	}
}

func TestAddImageBadInput(t *testing.T) {
	e := newTestEnv(t)
	f := e.upload("doc.pdf", textPDF(t, [][]string{{"x"}}))
	e.upload("notes.txt", []byte("not an image"))
	e.upload("other.pdf", textPDF(t, [][]string{{"y"}}))
	e.upload("broken.png", append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 64)...))
	e.upload("logo.png", pngBytes(t, 20, 20))
	for _, c := range []struct {
		args map[string]any
		code apierr.Code
	}{
		{map[string]any{"id": "doc.pdf", "page": 1, "image_id": "notes.txt", "x": 1, "y": 1}, apierr.UnsupportedFormat},
		{map[string]any{"id": "doc.pdf", "page": 1, "image_id": "other.pdf", "x": 1, "y": 1}, apierr.UnsupportedFormat},
		{map[string]any{"id": "doc.pdf", "page": 1, "image_id": "broken.png", "x": 1, "y": 1}, apierr.UnsupportedFormat},
		{map[string]any{"id": "doc.pdf", "page": 1, "image_id": "missing.png", "x": 1, "y": 1}, apierr.NotFound},
		{map[string]any{"id": "doc.pdf", "page": 2, "image_id": "logo.png", "x": 1, "y": 1}, apierr.ValidationFailed},
		{map[string]any{"id": "doc.pdf", "page": 1, "image_id": "logo.png", "x": 1, "y": 1, "width": 0}, apierr.ValidationFailed},
		{map[string]any{"id": "notes.txt", "page": 1, "image_id": "logo.png", "x": 1, "y": 1}, apierr.UnsupportedFormat},
	} {
		_, err := e.tool("pdf_add_image", c.args)
		wantCode(t, err, c.code)
	}
	e.unchanged("doc.pdf", f)

	// Images over the pixel cap are refused before decoding.
	small := newTestEnvWith(t, hostapi.Config{DataDir: t.TempDir(), MaxImagePixels: 100})
	small.upload("doc.pdf", textPDF(t, [][]string{{"x"}}))
	small.upload("logo.png", pngBytes(t, 20, 20))
	_, err := small.tool("pdf_add_image", map[string]any{"id": "doc.pdf", "page": 1, "image_id": "logo.png", "x": 1, "y": 1})
	wantCode(t, err, apierr.TooLarge)
}

// TestConcurrentEdits: edits of one file serialize on its write lock, so
// none is lost.
func TestConcurrentEdits(t *testing.T) {
	e := newTestEnv(t)
	e.upload("shared.pdf", textPDF(t, [][]string{{"base"}}))
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func(i int) {
			_, err := e.tool("pdf_add_text", map[string]any{"id": "shared.pdf", "page": 1, "text": "stamp" + strconv.Itoa(i), "x": 72, "y": 200 + 40*i})
			errs <- err
		}(i)
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Text comes out in content order, which here is the order the
	// edits took the lock.
	lines := strings.Split(pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "shared.pdf"}))[0], "\n")
	sort.Strings(lines)
	if want := []string{"base", "stamp0", "stamp1", "stamp2", "stamp3"}; !reflect.DeepEqual(lines, want) {
		t.Fatalf("lines = %q, want %q", lines, want)
	}
}
