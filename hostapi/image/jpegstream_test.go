package image

import (
	"bytes"
	"context"
	goimage "image"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// TestJPEGStreamMatchesLibvips: the streaming JPEG path gives the image
// libvips' own path gives — same size, same pixels within rounding — for
// every fit, orientation and colour layout it takes on.
func TestJPEGStreamMatchesLibvips(t *testing.T) {
	photo, grey := streamSources(t)
	withICC := func() []byte {
		img, err := vips.NewImageFromBuffer(photo)
		if err != nil {
			t.Fatal(err)
		}
		defer img.Close()
		if err := img.TransformICCProfile("srgb"); err != nil {
			t.Skipf("this libvips cannot attach its built-in sRGB profile: %v", err)
		}
		b, _, err := img.ExportJpeg(&vips.JpegExportParams{Quality: 90})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()
	cases := []struct {
		name   string
		data   []byte
		w, h   int
		crop   vips.Interesting
		size   vips.Size
		format string
	}{
		{"width only", photo, 200, 0, vips.InterestingNone, vips.SizeBoth, formatJPEG},
		{"height only, webp", photo, 0, 100, vips.InterestingNone, vips.SizeBoth, formatWebP},
		{"inside a box", photo, 300, 300, vips.InterestingNone, vips.SizeBoth, formatPNG},
		{"cover", photo, 150, 150, vips.InterestingCentre, vips.SizeBoth, formatJPEG},
		{"fill", photo, 200, 50, vips.InterestingNone, vips.SizeForce, formatPNG},
		{"never enlarged", photo, 2000, 2000, vips.InterestingNone, vips.SizeDown, formatJPEG},
		{"enlarged", photo, 1000, 0, vips.InterestingNone, vips.SizeBoth, formatJPEG},
		{"turned 90°", withOrientation(photo, 6), 120, 0, vips.InterestingNone, vips.SizeBoth, formatPNG},
		{"turned 180°, cover", withOrientation(photo, 3), 100, 80, vips.InterestingCentre, vips.SizeBoth, formatPNG},
		{"mirrored and turned, cover", withOrientation(photo, 5), 100, 60, vips.InterestingCentre, vips.SizeBoth, formatPNG},
		{"grey", encJPEG(t, grey), 100, 0, vips.InterestingNone, vips.SizeBoth, formatPNG},
		{"ICC profile", withICC, 160, 0, vips.InterestingNone, vips.SizeBoth, formatJPEG},
		// The reducer's edges: fewer source samples than filter taps,
		// one side kept while the other shrinks, widths not a multiple of
		// its four-at-a-time loop; beyond 3× after shrink-on-load,
		// vips_resize.
		{"tiny", encJPEG(t, noise(16, 8)), 6, 3, vips.InterestingNone, vips.SizeForce, formatPNG},
		{"same height", photo, 333, 480, vips.InterestingNone, vips.SizeForce, formatPNG},
		{"grey, odd width", encJPEG(t, grey), 37, 0, vips.InterestingNone, vips.SizeBoth, formatJPEG},
		{"one pixel", photo, 1, 1, vips.InterestingNone, vips.SizeForce, formatPNG},
		{"a column", photo, 3, 480, vips.InterestingNone, vips.SizeForce, formatPNG},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := &source{file: &store.File{Name: "p.jpg"}, data: c.data, format: formatJPEG}
			hd, err := readHeader(src, 1e9)
			if err != nil {
				t.Fatal(err)
			}
			both := func(format string) (fast, slow *encoded) {
				t.Helper()
				enc := encoding{format: format, meta: metaProfile}
				fast, ok, err := resizeJPEGStream(ctx, src, jpegGeometry(hd, c.w, c.h, c.crop, c.size), enc, 1<<30)
				if !ok || err != nil {
					t.Fatalf("stream: ok %v, %v", ok, err)
				}
				img, err := thumbnail(src, hd, c.w, c.h, c.crop, c.size)
				if err != nil {
					t.Fatal(err)
				}
				slow, err = encode(ctx, src, img, enc, 1<<30)
				img.Close()
				if err != nil {
					t.Fatal(err)
				}
				if fast.width != slow.width || fast.height != slow.height {
					t.Fatalf("stream %d × %d, libvips %d × %d", fast.width, fast.height, slow.width, slow.height)
				}
				return fast, slow
			}
			// Lossless, the two paths' pixels agree within rounding: a
			// shifted, mirrored or wrongly scaled result would be far off.
			fastPNG, slowPNG := both(formatPNG)
			fastIdeal, slowIdeal := decode(t, fastPNG.data).img, decode(t, slowPNG.data).img
			if d := meanDiff(fastIdeal, slowIdeal); d > 1 {
				t.Fatalf("the two paths differ by %.2f per channel on average", d)
			}
			if c.format == formatPNG {
				return
			}
			fast, slow := both(c.format)
			a, b := decode(t, fast.data), decode(t, slow.data)
			if a.format != c.format || a.img.Bounds() != b.img.Bounds() || a.img.Bounds().Dx() != fast.width {
				t.Fatalf("decoded %s %v and %v", a.format, a.img.Bounds(), b.img.Bounds())
			}
			// Lossy, each path's encoder costs the same: the stream path
			// writes its files as libvips' own does (quality, chroma
			// subsampling, Huffman tables; WebP through libwebp directly),
			// no further from its lossless pixels and no bigger.
			if df, ds := meanDiff(a.img, fastIdeal), meanDiff(b.img, slowIdeal); df > ds*1.1+0.1 {
				t.Fatalf("%s: the stream path's file is %.2f per channel from its lossless pixels, libvips' %.2f", c.format, df, ds)
			}
			if len(fast.data) > len(slow.data)*21/20+200 {
				t.Fatalf("%s: the stream path wrote %d bytes, libvips' %d", c.format, len(fast.data), len(slow.data))
			}
			fh, _ := readHeader(&source{file: src.file, data: fast.data, format: c.format}, 1e9)
			sh, _ := readHeader(&source{file: src.file, data: slow.data, format: c.format}, 1e9)
			if fh.orientation > 1 || fh.width != sh.width {
				t.Fatalf("stream output header %+v, libvips %+v", fh, sh)
			}
			if c.name == "ICC profile" {
				img, err := vips.NewImageFromBuffer(fast.data)
				if err != nil {
					t.Fatal(err)
				}
				has := img.HasICCProfile()
				img.Close()
				if !has {
					t.Fatal("the ICC profile was dropped")
				}
			}
		})
	}
}

// TestJPEGStreamWebPByRows: converting a WebP picture to YUV row by row,
// as the rows are computed, writes the bytes one conversion of the whole
// picture writes: even and odd heights, rows arriving in strips of any
// parity, grey (converted to RGB first).
func TestJPEGStreamWebPByRows(t *testing.T) {
	photo, grey := streamSources(t)
	for _, c := range []struct {
		data []byte
		w, h int
	}{{photo, 600, 0}, {photo, 0, 101}, {photo, 99, 33}, {photo, 640, 480}, {photo, 1, 1}, {encJPEG(t, grey), 0, 77}} {
		src := &source{file: &store.File{Name: "p.jpg"}, data: c.data, format: formatJPEG}
		hd, err := readHeader(src, 1e9)
		if err != nil {
			t.Fatal(err)
		}
		size := vips.SizeBoth
		if c.w > 0 && c.h > 0 {
			size = vips.SizeForce
		}
		g := jpegGeometry(hd, c.w, c.h, vips.InterestingNone, size)
		encodeWebP := func(byRows bool) *encoded {
			t.Helper()
			webpByRows = byRows
			defer func() { webpByRows = true }()
			out, ok, err := resizeJPEGStream(context.Background(), src, g, encoding{format: formatWebP}, 1<<30)
			if !ok || err != nil {
				t.Fatalf("ok %v, %v", ok, err)
			}
			return out
		}
		rows, whole := encodeWebP(true), encodeWebP(false)
		if rows.width != whole.width || rows.height != whole.height || !bytes.Equal(rows.data, whole.data) {
			t.Fatalf("%d × %d: by rows %d bytes, whole %d bytes, not the same", rows.width, rows.height, len(rows.data), len(whole.data))
		}
		if d := decode(t, rows.data); d.format != formatWebP || d.img.Bounds().Dx() != rows.width || d.img.Bounds().Dy() != rows.height {
			t.Fatalf("decoded %s %v, want %d × %d", d.format, d.img.Bounds(), rows.width, rows.height)
		}
	}
}

// meanDiff is the mean absolute difference per 8-bit channel.
// streamSources starts libvips and makes the sources the stream tests
// resize: a 640 × 480 noise photo (as JPEG) and a 320 × 240 grey ramp.
func streamSources(t *testing.T) (photo []byte, grey *goimage.Gray) {
	t.Helper()
	if err := libvips.start(); err != nil {
		t.Fatal(err)
	}
	grey = goimage.NewGray(goimage.Rect(0, 0, 320, 240))
	for i := range grey.Pix {
		grey.Pix[i] = uint8(i * 7)
	}
	return encJPEG(t, noise(640, 480)), grey
}

func meanDiff(a, b goimage.Image) float64 {
	var sum float64
	n := 0
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			p, q := at(a, x, y), at(b, x, y)
			sum += math.Abs(float64(p.R)-float64(q.R)) + math.Abs(float64(p.G)-float64(q.G)) + math.Abs(float64(p.B)-float64(q.B))
			n += 3
		}
	}
	return sum / float64(n)
}

// TestJPEGStreamStops: a deadline stops the decoder and the pipeline at
// once, leaving nothing behind; CMYK goes to libvips' path.
func TestJPEGStreamStops(t *testing.T) {
	if err := libvips.start(); err != nil {
		t.Fatal(err)
	}
	src := &source{file: &store.File{Name: "photo.jpg"}, data: photo4000(), format: formatJPEG}
	hd, err := readHeader(src, 1e9)
	if err != nil {
		t.Fatal(err)
	}
	g := jpegGeometry(hd, 800, 0, vips.InterestingNone, vips.SizeBoth)
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i+1)*2*time.Millisecond)
		start := time.Now()
		_, ok, err := resizeJPEGStream(ctx, src, g, encoding{format: formatJPEG, meta: metaProfile}, 1<<30)
		cancel()
		if !ok || apierr.CodeOf(err) != apierr.Timeout {
			t.Fatalf("deadline during the decode: ok %v, %v", ok, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("stopping took %v", d)
		}
	}
	// The decoder goroutines have ended (resizeJPEGStream waits for them).
	if after := runtime.NumGoroutine(); after > before+1 {
		t.Fatalf("goroutines: %d before, %d after", before, after)
	}
	out, ok, err := resizeJPEGStream(context.Background(), src, g, encoding{format: formatJPEG, meta: metaProfile}, 1<<30)
	if !ok || err != nil || out.width != 800 || out.height != 600 {
		t.Fatalf("after the deadlines: %v %v %v", ok, err, out)
	}
	// An output over the limit is refused.
	if _, _, err := resizeJPEGStream(context.Background(), src, g, encoding{format: formatJPEG, meta: metaProfile}, 1000); apierr.CodeOf(err) != apierr.TooLarge {
		t.Fatalf("over the limit: %v", err)
	}

	cmyk, err := vips.NewImageFromBuffer(encPNG(t, bands(40, 20, red, blue)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cmyk.ToColorSpace(vips.InterpretationCMYK); err != nil {
		t.Fatal(err)
	}
	cmykJPEG, _, err := cmyk.ExportJpeg(&vips.JpegExportParams{Quality: 95})
	cmyk.Close()
	if err != nil {
		t.Fatal(err)
	}
	csrc := &source{file: &store.File{Name: "cmyk.jpg"}, data: cmykJPEG, format: formatJPEG}
	chd, _ := readHeader(csrc, 1e9)
	if _, ok, err := resizeJPEGStream(context.Background(), csrc, jpegGeometry(chd, 20, 0, vips.InterestingNone, vips.SizeBoth), encoding{format: formatJPEG}, 1<<30); ok || err != nil {
		t.Fatalf("CMYK: ok %v, %v; want the libvips path", ok, err)
	}
	// In-place edits keep every piece of metadata: libvips' path.
	if _, ok, _ := resizeJPEGStream(context.Background(), src, g, encoding{format: formatJPEG, meta: metaAll}, 1<<30); ok {
		t.Fatal("metaAll took the streaming path")
	}
}
