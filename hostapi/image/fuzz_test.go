package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// FuzzHeader feeds arbitrary bytes to the image header check that every
// operation runs before decoding, then to a small thumbnail and an
// encoder, and JPEGs also to the streaming path (jpegstream.go). Properties: anything sniffFormat lets through is refused with
// a coded error or has a header within the pixel cap (so no image above
// the cap is ever decoded); decoding and encoding what passes either work
// or fail with a coded error; nothing panics, crashes or hangs. Run it with
//
//	go test ./hostapi/image -run '^$' -fuzz '^FuzzHeader$' -fuzztime 60s
//
// Plain `go test` runs the seeds and the crashers kept in testdata/fuzz.
func FuzzHeader(f *testing.F) {
	for _, name := range []string{"photo.jpg", "logo.png"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2]) // truncated
	}
	jpg := encJPEG(f, noise(64, 48))
	for _, seed := range [][]byte{
		jpg,
		withOrientation(jpg, 6),
		encPNG(f, quadrants(20, 10)),
		encGIF(f, bands(16, 16, red, green), bands(16, 16, blue, red)),
		encTIFF(f, noise(24, 12)),
		webpOf(f, encPNG(f, quadrants(30, 20))),
		hugePNG(100000, 100000),
		hugePNG(1, 1<<31-1),
		flatPNG(40, 30),
		{0xFF, 0xD8, 0xFF, 0xE0},
		[]byte("GIF89a\xff\xff\xff\xff"),
		[]byte("RIFF\x00\x00\x00\x00WEBPVP8 "),
		[]byte("II*\x00\x08\x00\x00\x00"),
	} {
		f.Add(seed)
	}
	const maxPixels = 1 << 20 // small, so that every input decodes fast
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog()()
		format := sniffFormat(data)
		if format == "" {
			return
		}
		if err := libvips.start(); err != nil {
			t.Fatal(err)
		}
		src := &source{file: &store.File{Name: "f." + format, MimeType: mimeType(format)}, data: data, format: format}
		hd, err := readHeader(src, maxPixels)
		coded(t, "header", err)
		if err != nil {
			return
		}
		if hd.width <= 0 || hd.height <= 0 || int64(hd.width)*int64(hd.height) > maxPixels {
			t.Fatalf("the header check let a %d × %d image through (cap %d pixels)", hd.width, hd.height, maxPixels)
		}
		img, err := thumbnail(src, hd, 48, 48, vips.InterestingNone, vips.SizeDown)
		coded(t, "thumbnail", err)
		if err != nil {
			return
		}
		defer img.Close()
		out, err := encode(context.Background(), src, img, encoding{format: formatPNG}, 8<<20)
		coded(t, "encode", err)
		if err == nil && (out.width > 48 || out.height > 48 || out.width < 1 || out.height < 1) {
			t.Fatalf("a 48 × 48 thumbnail came out %d × %d", out.width, out.height)
		}
		if format != formatJPEG {
			return
		}
		// The streaming JPEG path (libjpeg in C, fed from memory) on the
		// same input, as resize and toBase64 take it.
		fast, ok, err := resizeJPEGStream(context.Background(), src, jpegGeometry(hd, 48, 48, vips.InterestingCentre, vips.SizeBoth), encoding{format: formatJPEG, meta: metaProfile}, 8<<20)
		coded(t, "stream", err)
		if ok && err == nil && (fast.width > 48 || fast.height > 48 || fast.width < 1 || fast.height < 1) {
			t.Fatalf("a 48 × 48 streamed thumbnail came out %d × %d", fast.width, fast.height)
		}
	})
}

// webpOf converts a PNG to WebP with libvips, for a seed.
func webpOf(t testing.TB, png []byte) []byte {
	t.Helper()
	if err := libvips.start(); err != nil {
		t.Fatal(err)
	}
	img, err := vips.NewImageFromBuffer(png)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	b, _, err := img.ExportWebp(vips.NewWebpExportParams())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// coded fails t unless err is nil or a coded error other than INTERNAL.
func coded(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Code == apierr.Internal || ae.Message == "" {
		t.Fatalf("%s: not a coded error: %T %v", what, err, err)
	}
}

// watchdog crashes the process with every goroutine's stack when one
// fuzz input runs longer than 10 s: Go's fuzzer has no per-input timeout,
// and a crash saves the input as a crasher.
func watchdog() (stop func()) {
	const limit = 10 * time.Second
	timer := time.AfterFunc(limit, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		panic(fmt.Sprintf("one input ran for more than %v:\n%s", limit, buf))
	})
	return func() { timer.Stop() }
}
