package image

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/davidbyttow/govips/v2/vips"
)

// photo4000 is the 4000×3000 photo of the Node harness (../shared/peers,
// gen-fixtures.mjs genPhoto): gradients, a wave and per-channel noise,
// JPEG quality 90 with 4:2:0 chroma, ~3.3 MB. With METACLAW_PEER_FIXTURES
// naming the harness's fixture directory its photo.jpg is used, byte for
// byte the file sharp is measured on; otherwise the same pixels are
// generated here and encoded by libvips with the same settings.
var photo4000 = sync.OnceValue(func() []byte {
	if dir := os.Getenv("METACLAW_PEER_FIXTURES"); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "photo.jpg"))
		if err != nil {
			panic(err)
		}
		return b
	}
	const w, h = 4000, 3000
	raw := make([]byte, w*h*3)
	rnd := mulberry32(4000)
	o := 0
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			n := int(rnd() * 16777216)
			wave := 100 * math.Sin(float64(x+2*y)/170) * math.Cos(float64(x-y)/330)
			raw[o] = clampF(float64(x)*255/(w-1) + float64(n&31-16))
			raw[o+1] = clampF(float64(y)*255/(h-1) + float64((n>>5)&31-16))
			raw[o+2] = clampF(128 + wave + float64((n>>10)&31-16))
			o += 3
		}
	}
	if err := libvips.start(); err != nil {
		panic(err)
	}
	img, err := vips.NewImageFromMemory(raw, w, h, 3, vips.BandFormatUchar, vips.InterpretationSRGB)
	if err != nil {
		panic(err)
	}
	defer img.Close()
	b, _, err := img.ExportJpeg(&vips.JpegExportParams{Quality: 90, SubsampleMode: vips.VipsForeignSubsampleOn, OptimizeCoding: true})
	if err != nil {
		panic(err)
	}
	return b
})

// mulberry32 is the harness's prng (common.mjs), for the same noise.
func mulberry32(seed uint32) func() float64 {
	a := seed
	return func() float64 {
		a += 0x6d2b79f5
		t := a
		t = (t ^ t>>15) * (t | 1)
		t ^= t + (t^t>>7)*(t|61)
		return float64(t^t>>14) / 4294967296
	}
}

// clampF rounds like a JS typed array store: ToUint8Clamp truncates
// after clamping for Buffer writes of non-integers.
func clampF(v float64) uint8 { return uint8(min(max(v, 0), 255)) }

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
	cpu := cpuTime()
	best := time.Duration(math.MaxInt64)
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res := e.mustTool("image_resize", args)
		best = min(best, time.Since(start))
		if num(res, "width") != 800 || num(res, "height") != 600 {
			b.Fatalf("got %v", res)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu)
	b.ReportMetric(float64(best)/float64(time.Millisecond), "best-ms")
	if peakOK {
		b.ReportMetric(float64(vmHWM(b))/(1<<20), "peak-RSS-MB")
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since start: on a shared
// machine it varies less than wall time, and it is what the work costs.
// The benchmarks also report best-ms, the fastest single call: on a busy
// machine the closest to what an idle one shows.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
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
	cpu := cpuTime()
	best := time.Duration(math.MaxInt64)
	for i := 0; i < b.N; i++ {
		start := time.Now()
		m := e.mustTool("image_info", map[string]any{"id": "photo.jpg"})
		best = min(best, time.Since(start))
		if num(m, "width") != 4000 {
			b.Fatalf("got %v", m)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu)
	b.ReportMetric(float64(best)/float64(time.Millisecond), "best-ms")
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
