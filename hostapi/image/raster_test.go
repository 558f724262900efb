package image

import (
	"bytes"
	"context"
	goimage "image"
	"image/color"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// TestEncodeRaster: pixels computed elsewhere (a rendered PDF page) come
// out in every writable format, grey as grey, colours as they were.
func TestEncodeRaster(t *testing.T) {
	ctx := context.Background()
	// 4 × 2 grey: a black left half, a white right half.
	grey := []byte{0, 0, 255, 255, 0, 0, 255, 255}
	// 2 × 2 RGB: red, green / blue, white.
	rgb := []byte{255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255}
	for _, format := range []string{FormatPNG, FormatJPEG, FormatWebP} {
		b, err := EncodeRaster(ctx, "g", grey, 4, 2, 1, format, 0, 1<<20)
		if err != nil {
			t.Fatalf("%s grey: %v", format, err)
		}
		d := decode(t, b)
		if d.format != format || d.img.Bounds() != goimage.Rect(0, 0, 4, 2) {
			t.Fatalf("%s grey: decoded %s %v", format, d.format, d.img.Bounds())
		}
		if !near(at(d.img, 0, 0), greyOf(0), 40) || !near(at(d.img, 3, 1), greyOf(255), 40) {
			t.Fatalf("%s grey pixels: %v %v", format, at(d.img, 0, 0), at(d.img, 3, 1))
		}
		if format == FormatPNG {
			if _, ok := d.img.(*goimage.Gray); !ok {
				t.Fatalf("a grey raster as PNG decodes as %T", d.img)
			}
		}
		b, err = EncodeRaster(ctx, "c", rgb, 2, 2, 3, format, 95, 1<<20)
		if err != nil {
			t.Fatalf("%s rgb: %v", format, err)
		}
		d = decode(t, b)
		if format == FormatPNG && (!near(at(d.img, 0, 0), red, 0) || !near(at(d.img, 1, 0), green, 0) || !near(at(d.img, 0, 1), blue, 0)) {
			t.Fatalf("png colours: %v %v %v", at(d.img, 0, 0), at(d.img, 1, 0), at(d.img, 0, 1))
		}
	}
	for _, c := range []struct {
		pix    []byte
		w, h   int
		bands  int
		format string
		limit  int64
		code   apierr.Code
	}{
		{grey, 4, 2, 2, FormatPNG, 1 << 20, apierr.Internal},
		{grey, 5, 2, 1, FormatPNG, 1 << 20, apierr.Internal},
		{grey, 4, 2, 1, "gif", 1 << 20, apierr.ValidationFailed},
		{bytes.Repeat([]byte{7, 200}, 5000), 100, 100, 1, FormatPNG, 50, apierr.TooLarge},
	} {
		if _, err := EncodeRaster(ctx, "x", c.pix, c.w, c.h, c.bands, c.format, 0, c.limit); apierr.CodeOf(err) != c.code {
			t.Errorf("%d×%d×%d %s: %v, want %s", c.w, c.h, c.bands, c.format, err, c.code)
		}
	}
	if got := FormatOf("a/b.JPG"); got != FormatJPEG || Ext(FormatJPEG) != ".jpg" || FormatOf("x.gif") != "" || MimeType(FormatWebP) != "image/webp" {
		t.Fatalf("format helpers: %q", got)
	}
}

// grey is an opaque grey of level v.
func greyOf(v uint8) color.NRGBA { return color.NRGBA{v, v, v, 255} }
