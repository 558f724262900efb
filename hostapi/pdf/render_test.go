package pdf

import (
	"bytes"
	"context"
	"fmt"
	goimage "image"
	"image/color"
	_ "image/jpeg"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "golang.org/x/image/webp" // an independent WebP reader for the outputs

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// decodeImage reads an output with Go's decoders, independent of libvips.
func decodeImage(t testing.TB, b []byte) (goimage.Image, string) {
	t.Helper()
	img, format, err := goimage.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("Go cannot decode the rendered page: %v", err)
	}
	return img, format
}

// darkIn counts the pixels darker than mid-grey in r.
func darkIn(img goimage.Image, r goimage.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if g := color.GrayModel.Convert(img.At(x, y)).(color.Gray); g.Y < 128 {
				n++
			}
		}
	}
	return n
}

// pt converts points to pixels of an image w pixels wide of a page
// pageW points wide.
func pt(v, w, pageW float64) int { return int(v * w / pageW) }

func TestRenderPage(t *testing.T) {
	e := newTestEnv(t)
	var blank bytes.Buffer
	if err := writeBlank(&blank); err != nil {
		t.Fatal(err)
	}
	e.upload("docs/memo.pdf", blank.Bytes())
	e.mustTool("pdf_add_text", map[string]any{"id": "docs/memo.pdf", "page": 1, "text": "HELLO WORLD", "x": 72, "y": 72, "size": 36})
	before := e.file("docs/memo.pdf")

	r := e.mustTool("pdf_render_page", map[string]any{"id": "docs/memo.pdf", "page": 1})
	if r["name"] != "docs/memo_p1.png" || r["page"] != 1.0 || r["width"] != 1200.0 || r["height"] != 1697.0 {
		t.Fatalf("render = %v", r)
	}
	f := e.file("docs/memo_p1.png")
	if f.MimeType != "image/png" || f.Source != "derived" || float64(f.Size) != r["size"] {
		t.Fatalf("stored file = %+v", f)
	}
	body := e.body("docs/memo_p1.png")
	img, format := decodeImage(t, body)
	if format != "png" || img.Bounds().Dx() != 1200 || img.Bounds().Dy() != 1697 {
		t.Fatalf("decoded %s %v", format, img.Bounds())
	}
	if _, grey := img.(*goimage.Gray); !grey {
		t.Errorf("a black-and-white page should be a grey PNG, got %T", img)
	}
	// The text's box: from (72, 72) points, 36 points high, ~250 wide.
	text := goimage.Rect(pt(72, 1200, 595.28), pt(72, 1200, 595.28), pt(330, 1200, 595.28), pt(72+36, 1200, 595.28))
	if n := darkIn(img, text); n < 2000 {
		t.Fatalf("only %d dark pixels where the text is", n)
	}
	if n := darkIn(img, goimage.Rect(0, 400, 1200, 1697)); n != 0 {
		t.Fatalf("%d dark pixels below the text, on an empty page", n)
	}
	if after := e.file("docs/memo.pdf"); after.SHA256 != before.SHA256 || after.HasBackup != before.HasBackup {
		t.Fatal("rendering changed the PDF")
	}

	// Again without overwrite: refused, the image unchanged.
	_, err := e.tool("pdf_render_page", map[string]any{"id": "docs/memo.pdf", "page": 1})
	wantCode(t, err, apierr.AlreadyExists)
	if !bytes.Equal(e.body("docs/memo_p1.png"), body) {
		t.Fatal("a refused render changed the image")
	}
	// With overwrite, at another width.
	r = e.mustTool("pdf_render_page", map[string]any{"id": "docs/memo.pdf", "page": 1, "width": 300, "overwrite": true})
	if r["name"] != "docs/memo_p1.png" || r["width"] != 300.0 || r["height"] != 424.0 {
		t.Fatalf("overwrite = %v", r)
	}
	if img, _ := decodeImage(t, e.body("docs/memo_p1.png")); img.Bounds().Dx() != 300 {
		t.Fatalf("overwritten image is %v", img.Bounds())
	}
}

func TestRenderPageFormats(t *testing.T) {
	e := newTestEnv(t)
	e.upload("a.pdf", textPDF(t, [][]string{{"first page"}, {"second page"}}))
	e.mustTool("pdf_add_text", map[string]any{"id": "a.pdf", "page": 2, "text": "RED", "x": 72, "y": 200, "size": 48, "color": "#ff0000"})
	for _, c := range []struct {
		args   map[string]any
		name   string
		format string
	}{
		{map[string]any{"format": "jpeg"}, "a_p2.jpg", "jpeg"},
		{map[string]any{"format": "jpg", "output": "x/y.jpeg"}, "x/y.jpeg", "jpeg"},
		{map[string]any{"format": "webp"}, "a_p2.webp", "webp"},
		{map[string]any{"output": "shots/page.webp"}, "shots/page.webp", "webp"},
		{map[string]any{"output": "shots/page.png"}, "shots/page.png", "png"},
	} {
		args := map[string]any{"id": "a.pdf", "page": 2, "width": 600}
		for k, v := range c.args {
			args[k] = v
		}
		r := e.mustTool("pdf_render_page", args)
		if r["name"] != c.name || r["width"] != 600.0 || r["height"] != 849.0 {
			t.Fatalf("%v: %v", c.args, r)
		}
		img, format := decodeImage(t, e.body(c.name))
		if format != c.format || img.Bounds().Dx() != 600 || img.Bounds().Dy() != 849 {
			t.Fatalf("%v: decoded %s %v", c.args, format, img.Bounds())
		}
		// The red text is red: R high, G and B low, where it is drawn.
		red := 0
		box := goimage.Rect(pt(72, 600, 595), pt(200, 600, 595), pt(180, 600, 595), pt(248, 600, 595))
		for y := box.Min.Y; y < box.Max.Y; y++ {
			for x := box.Min.X; x < box.Max.X; x++ {
				r, g, b, _ := img.At(x, y).RGBA()
				if r > 0xc000 && g < 0x5000 && b < 0x5000 {
					red++
				}
			}
		}
		if red < 200 {
			t.Fatalf("%v: %d red pixels where the red text is", c.args, red)
		}
	}
}

func TestRenderPageRotatedAndForm(t *testing.T) {
	e := newTestEnv(t)
	e.upload("turned.pdf", rotated(t, textPDF(t, [][]string{{"sideways"}}), 90))
	r := e.mustTool("pdf_render_page", map[string]any{"id": "turned.pdf", "page": 1, "width": 842})
	if r["width"] != 842.0 || r["height"] != 595.0 {
		t.Fatalf("a page turned by 90° renders %v × %v", r["width"], r["height"])
	}

	// Field values show in the image, as in a viewer.
	e.upload("form.pdf", formPDF(t))
	empty := e.mustTool("pdf_render_page", map[string]any{"id": "form.pdf", "page": 1, "width": 595, "output": "empty.png"})
	e.mustTool("pdf_fill_form", map[string]any{"id": "form.pdf", "fields": map[string]any{"name": "Jane Doe", "agree": true}})
	filled := e.mustTool("pdf_render_page", map[string]any{"id": "form.pdf", "page": 1, "width": 595, "output": "filled.png"})
	if empty["height"] != filled["height"] {
		t.Fatal("sizes differ")
	}
	a, _ := decodeImage(t, e.body("empty.png"))
	b, _ := decodeImage(t, e.body("filled.png"))
	// The name field holds its text around y = 90 points, from x = 100:
	// one pixel a point.
	field := goimage.Rect(100, 80, 300, 100)
	if da, db := darkIn(a, field), darkIn(b, field); da != 0 || db < 60 {
		t.Fatalf("dark pixels in the name field: %d before filling, %d after", da, db)
	}
}

func TestRenderPageBadInput(t *testing.T) {
	e := newTestEnvWith(t, hostapi.Config{DataDir: t.TempDir(), MaxImagePixels: 4_000_000})
	e.upload("a.pdf", textPDF(t, [][]string{{"one"}, {"two"}}))
	e.upload("notes.txt", []byte("not a pdf"))
	good := textPDF(t, [][]string{{"x"}})
	e.upload("half.pdf", good[:len(good)/2])
	// A page 10 points wide and 14,400 high: any width makes a tall image.
	e.upload("tall.pdf", rawPDF([]string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Count 1 /Kids [3 0 R] >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 10 14400] >>"}))
	before := snapshot(t, e)
	for _, c := range []struct {
		args map[string]any
		code apierr.Code
		says string
	}{
		{map[string]any{"id": "a.pdf", "page": 3}, apierr.ValidationFailed, "has 2 pages"},
		{map[string]any{"id": "a.pdf", "page": 0}, apierr.ValidationFailed, "page"},
		{map[string]any{"id": "a.pdf", "page": 1, "width": 8}, apierr.ValidationFailed, "width"},
		{map[string]any{"id": "a.pdf", "page": 1, "width": 20000}, apierr.ValidationFailed, "width"},
		{map[string]any{"id": "a.pdf", "page": 1, "format": "gif"}, apierr.ValidationFailed, "format"},
		{map[string]any{"id": "a.pdf", "page": 1, "output": "p.txt"}, apierr.ValidationFailed, ".png"},
		{map[string]any{"id": "a.pdf", "page": 1, "output": "p.png", "format": "jpeg"}, apierr.ValidationFailed, ".jpg"},
		{map[string]any{"id": "a.pdf", "page": 1, "output": "../p.png"}, apierr.ValidationFailed, ""},
		{map[string]any{"id": "a.pdf", "page": 1, "output": "notes.txt.png", "overwrite": "yes"}, apierr.ValidationFailed, "overwrite"},
		{map[string]any{"id": "a.pdf", "page": 1, "width": 4000}, apierr.TooLarge, "smaller width"},
		{map[string]any{"id": "tall.pdf", "page": 1, "width": 100}, apierr.TooLarge, "smaller width"},
		{map[string]any{"id": "nope.pdf", "page": 1}, apierr.NotFound, ""},
		{map[string]any{"id": "notes.txt", "page": 1}, apierr.UnsupportedFormat, "not a PDF"},
		{map[string]any{"id": "half.pdf", "page": 1}, apierr.FileReadFailed, ""},
	} {
		_, err := e.tool("pdf_render_page", c.args)
		wantCode(t, err, c.code)
		if !bytes.Contains([]byte(err.Error()), []byte(c.says)) {
			t.Errorf("%v: %v does not say %q", c.args, err, c.says)
		}
	}
	// A deadline stops the render; nothing is written.
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err := e.h.Registry.CallTool(ctx, e.env, "pdf_render_page", map[string]any{"id": "a.pdf", "page": 1})
	wantCode(t, err, apierr.Timeout)
	if after := snapshot(t, e); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("failed renders changed files:\n%v\n%v", before, after)
	}
}

func TestFlatten(t *testing.T) {
	// 2 × 1: a white opaque pixel and a half-transparent black one.
	pix, bands := flatten([]byte{255, 255, 255, 255, 0, 0, 0, 128}, 8, 2, 1)
	if bands != 1 || !bytes.Equal(pix, []byte{255, 127}) {
		t.Fatalf("grey flatten = %v, %d bands", pix, bands)
	}
	// Colour, with a stride wider than the row.
	pix, bands = flatten([]byte{255, 0, 0, 255, 0, 0, 255, 0, 9, 9, 9, 9}, 12, 2, 1)
	if bands != 3 || !bytes.Equal(pix, []byte{255, 0, 0, 255, 255, 255}) {
		t.Fatalf("colour flatten = %v, %d bands", pix, bands)
	}
}

func TestFromBGRX(t *testing.T) {
	// 2 × 2 with a stride of 12 (4 bytes of padding a row): grey pixels
	// come out as one band.
	grey := []byte{10, 10, 10, 0, 200, 200, 200, 0, 9, 9, 9, 9, 255, 255, 255, 0, 0, 0, 0, 0, 9, 9, 9, 9}
	if pix, bands := fromBGRX(grey, 12, 2, 2); bands != 1 || !bytes.Equal(pix, []byte{10, 200, 255, 0}) {
		t.Fatalf("grey = %v, %d bands", pix, bands)
	}
	// One blue pixel in the last row makes the whole image colour, R, G, B.
	colour := []byte{10, 10, 10, 0, 200, 200, 200, 0, 9, 9, 9, 9, 255, 255, 255, 0, 255, 0, 0, 0, 9, 9, 9, 9}
	if pix, bands := fromBGRX(colour, 12, 2, 2); bands != 3 || !bytes.Equal(pix, []byte{10, 10, 10, 200, 200, 200, 255, 255, 255, 0, 0, 255}) {
		t.Fatalf("colour = %v, %d bands", pix, bands)
	}
}

// TestRenderMatchesPoppler compares the page image with poppler's
// pdftoppm, an independent renderer: the text lies in the same place.
func TestRenderMatchesPoppler(t *testing.T) {
	e := newTestEnv(t)
	data, err := os.ReadFile(filepath.Join("testdata", "libreoffice-report.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	e.upload("lo.pdf", data)
	e.mustTool("pdf_render_page", map[string]any{"id": "lo.pdf", "page": 1, "width": 595, "output": "lo.png"})
	ours, _ := decodeImage(t, e.body("lo.png"))
	theirs := render(t, data, 1) // poppler at 72 dpi: one pixel a point
	if abs(ours.Bounds().Dx()-theirs.Bounds().Dx()) > 1 || abs(ours.Bounds().Dy()-theirs.Bounds().Dy()) > 1 {
		t.Fatalf("sizes: ours %v, poppler %v", ours.Bounds(), theirs.Bounds())
	}
	// Compare ink per band of 20 rows: the same rows carry text.
	w, h := min(ours.Bounds().Dx(), theirs.Bounds().Dx()), min(ours.Bounds().Dy(), theirs.Bounds().Dy())
	for y := 0; y+20 <= h; y += 20 {
		band := goimage.Rect(0, y, w, y+20)
		a, b := darkIn(ours, band), darkIn(theirs, band)
		if (a == 0) != (b == 0) || abs(a-b) > max(a, b)/2+20 {
			t.Fatalf("rows %d-%d: %d dark pixels here, %d in poppler's render", y, y+20, a, b)
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
