package image

import (
	"bytes"
	goimage "image"
	"image/jpeg"
	"math/rand"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/davidbyttow/govips/v2/vips"
)

// photo4000 is a 4000×3000 photo-like JPEG (smooth gradients plus sensor
// noise, quality 90), generated once per benchmark binary.
var photo4000 = sync.OnceValue(func() []byte {
	const w, h = 4000, 3000
	img := goimage.NewRGBA(goimage.Rect(0, 0, w, h))
	rng := rand.New(rand.NewSource(1))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := img.PixOffset(x, y)
			n := rng.Intn(24) - 12
			img.Pix[i] = clamp(x*200/w + 30 + n)
			img.Pix[i+1] = clamp(y*180/h + 40 + n)
			img.Pix[i+2] = clamp((x+y)*150/(w+h) + 60 + n)
			img.Pix[i+3] = 255
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		panic(err)
	}
	return b.Bytes()
})

func clamp(v int) uint8 { return uint8(min(max(v, 0), 255)) }

// benchEnv is a host holding the 4000×3000 photo as photo.jpg.
func benchEnv(b *testing.B) *testEnv {
	b.Helper()
	e := newEnvTB(b)
	e.upload("photo.jpg", photo4000())
	return e
}

// resetPeak restarts the kernel's peak-RSS counter (VmHWM), so that the
// peak read afterwards covers only what follows.
func resetPeak() bool {
	runtime.GC()
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

func benchResize(b *testing.B, output string) {
	e := benchEnv(b)
	args := map[string]any{"id": "photo.jpg", "width": 800, "output": output, "overwrite": true}
	e.mustTool("image_resize", args) // warm up: libvips start, first output
	peakOK := resetPeak()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := e.mustTool("image_resize", args)
		if num(res, "width") != 800 || num(res, "height") != 600 {
			b.Fatalf("got %v", res)
		}
	}
	b.StopTimer()
	if peakOK {
		b.ReportMetric(float64(vmHWM(b))/(1<<20), "peak-RSS-MB")
	}
}

// BenchmarkResizeJPEG800: 4000×3000 JPEG → 800 px wide JPEG (target ≤ 60 ms,
// peak memory ≤ 150 MB), through the whole meta-tool path including the
// durable write of the derived file.
func BenchmarkResizeJPEG800(b *testing.B) { benchResize(b, "out.jpg") }

// BenchmarkResizeWebP800: the same into WebP (target ≤ 100 ms).
func BenchmarkResizeWebP800(b *testing.B) { benchResize(b, "out.webp") }

// BenchmarkInfo: header read of the 4000×3000 JPEG (target ≤ 2 ms).
func BenchmarkInfo(b *testing.B) {
	e := benchEnv(b)
	e.mustTool("image_info", map[string]any{"id": "photo.jpg"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if m := e.mustTool("image_info", map[string]any{"id": "photo.jpg"}); num(m, "width") != 4000 {
			b.Fatalf("got %v", m)
		}
	}
}

// BenchmarkResizeCore is the libvips part of the JPEG resize alone
// (decode with shrink-on-load, resample, encode), without the store.
func BenchmarkResizeCore(b *testing.B) {
	e := benchEnv(b)
	e.mustTool("image_info", map[string]any{"id": "photo.jpg"})
	src := &source{data: photo4000(), format: formatJPEG}
	src.file, _ = e.env.WS.Resolve(e.ctx, "photo.jpg")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		hd, err := readHeader(src, 1e9)
		if err != nil {
			b.Fatal(err)
		}
		img, err := thumbnail(src, hd, 800, 0, vips.InterestingNone, vips.SizeBoth)
		if err != nil {
			b.Fatal(err)
		}
		out, err := encode(e.ctx, src, img, encoding{format: formatJPEG}, 50<<20)
		img.Close()
		if err != nil || out.width != 800 {
			b.Fatal(err)
		}
	}
}
