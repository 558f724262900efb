package image

import (
	"bytes"
	"fmt"
	goimage "image"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi/store"
)

// speckled is a photo-like image with per-pixel noise, so that the
// entropy-coded data is dense and Huffman codes of every length occur.
func speckled(w, h int, seed uint32) *goimage.RGBA {
	img := noise(w, h)
	rnd := mulberry32(seed)
	for i := 0; i < len(img.Pix); i += 4 {
		n := int(rnd() * 16777216)
		img.Pix[i] = clamp(int(img.Pix[i]) + n&63 - 32)
		img.Pix[i+1] = clamp(int(img.Pix[i+1]) + (n>>6)&63 - 32)
		img.Pix[i+2] = clamp(int(img.Pix[i+2]) + (n>>12)&63 - 32)
	}
	return img
}

func greyChannel(img *goimage.RGBA) *goimage.Gray {
	g := goimage.NewGray(img.Bounds())
	for i := range g.Pix {
		g.Pix[i] = img.Pix[4*i+1]
	}
	return g
}

// jpegVariant encodes img as a JPEG: layout "420" or "444" through
// libvips, "grey" through Go's encoder (one component); with restart
// markers every dri MCUs through libvips' command-line tool (the caller
// skips when it is not installed).
func jpegVariant(t testing.TB, img *goimage.RGBA, layout string, q, dri int) []byte {
	t.Helper()
	if dri > 0 {
		bin, err := exec.LookPath("vips")
		if err != nil {
			t.Skip("vips command-line tool not installed")
		}
		var src goimage.Image = img
		if layout == "grey" {
			src = greyChannel(img)
		}
		dir := t.TempDir()
		in, out := filepath.Join(dir, "in.png"), filepath.Join(dir, "out.jpg")
		if err := os.WriteFile(in, encPNG(t, src), 0o600); err != nil {
			t.Fatal(err)
		}
		mode := "on"
		if layout == "444" {
			mode = "off"
		}
		cmd := exec.Command(bin, "jpegsave", in, out, fmt.Sprintf("--Q=%d", q), fmt.Sprintf("--restart-interval=%d", dri), "--subsample-mode="+mode)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("vips jpegsave: %v: %s", err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if layout == "grey" {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, greyChannel(img), &jpeg.Options{Quality: q}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if err := libvips.start(); err != nil {
		t.Fatal(err)
	}
	rgb := make([]byte, 0, img.Bounds().Dx()*img.Bounds().Dy()*3)
	for i := 0; i < len(img.Pix); i += 4 {
		rgb = append(rgb, img.Pix[i:i+3]...)
	}
	v, err := vips.NewImageFromMemory(rgb, img.Bounds().Dx(), img.Bounds().Dy(), 3, vips.BandFormatUchar, vips.InterpretationSRGB)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	mode := vips.VipsForeignSubsampleOn
	if layout == "444" {
		mode = vips.VipsForeignSubsampleOff
	}
	b, _, err := v.ExportJpeg(&vips.JpegExportParams{Quality: q, SubsampleMode: mode, OptimizeCoding: q == 90})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parallelScale says whether jpegpar.c decodes a layout at 1/denom: where
// every component comes out of its scaled IDCT at the output's size.
func parallelScale(layout string, denom int) bool {
	if layout == "420" {
		return denom == 4 || denom == 8
	}
	return denom >= 2
}

// compareDecoders decodes data at 1/denom with libjpeg alone and with the
// parallel decoder allowed (chunks of minChunk bytes) and requires the
// same outcome: the same pixels, or the same error. parallel is
// decodeJPEG's.
func compareDecoders(t *testing.T, data []byte, denom, minChunk int) (parallel int) {
	t.Helper()
	want, ww, wh, wb, wpar, wok, werr := decodeJPEG(data, denom, 0, minChunk)
	got, gw, gh, gb, gpar, gok, gerr := decodeJPEG(data, denom, 2, minChunk)
	if wpar != 0 {
		t.Fatal("no threads, yet the parallel decoder ran")
	}
	if wok != gok || (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("libjpeg: ok %v, %v; parallel allowed: ok %v, %v", wok, werr, gok, gerr)
	}
	if werr != nil || !wok {
		return gpar
	}
	if ww != gw || wh != gh || wb != gb {
		t.Fatalf("libjpeg %d × %d × %d, parallel %d × %d × %d", ww, wh, wb, gw, gh, gb)
	}
	if !bytes.Equal(want, got) {
		maxd, sum, first := 0, 0, -1
		for i := range want {
			d := int(want[i]) - int(got[i])
			if d < 0 {
				d = -d
			}
			if d > 0 && first < 0 {
				first = i
			}
			maxd = max(maxd, d)
			sum += d
		}
		t.Fatalf("pixels differ (parallel %v): max %d, mean %.4f, first at sample %d (row %d)", gpar, maxd, float64(sum)/float64(len(want)), first, first/(gw*gb))
	}
	return gpar
}

// TestParallelJPEGMatchesLibjpeg: the parallel decoder's pixels are
// libjpeg-turbo's, bit for bit, for each layout, quality, size (MCU
// multiples or not), restart interval and scale; the tiny chunk size puts
// the split (and so the resynchronisation) into every file.
func TestParallelJPEGMatchesLibjpeg(t *testing.T) {
	sizes := [][2]int{{301, 203}, {64, 48}, {97, 33}, {640, 480}}
	split, whole := 0, 0
	defer func() {
		// Thread 0 falls into step with thread 1 in almost every file;
		// the few where it does not are decoded by thread 0 alone.
		t.Logf("%d of %d parallel decodes used thread 1's blocks", split, whole)
		if split < whole*3/4 {
			t.Errorf("only %d of %d parallel decodes used thread 1's blocks", split, whole)
		}
	}()
	for _, layout := range []string{"420", "444", "grey"} {
		for _, q := range []int{50, 90, 100} {
			for _, dri := range []int{0, 5} {
				for si, sz := range sizes {
					if dri > 0 && si > 1 {
						continue // two sizes are enough with restarts
					}
					name := fmt.Sprintf("%s q%d dri%d %dx%d", layout, q, dri, sz[0], sz[1])
					t.Run(name, func(t *testing.T) {
						data := jpegVariant(t, speckled(sz[0], sz[1], uint32(si+q)), layout, q, dri)
						for _, denom := range []int{1, 2, 4, 8} {
							par := compareDecoders(t, data, denom, 1)
							if par > 0 {
								whole++
							}
							if par == 2 {
								split++
							}
							if (par > 0) != parallelScale(layout, denom) {
								t.Fatalf("1/%d: parallel %v, want %v", denom, par, parallelScale(layout, denom))
							}
						}
					})
				}
			}
		}
	}
}

// TestParallelJPEGPhoto: the benchmark's 12-megapixel photo, decoded at
// the scales the resize takes, with the default chunk size.
func TestParallelJPEGPhoto(t *testing.T) {
	if testing.Short() {
		t.Skip("12-megapixel photo")
	}
	for _, denom := range []int{4, 8} {
		if p := compareDecoders(t, photo4000(), denom, jpegMinChunk); p != 2 {
			t.Fatalf("1/%d: decodeJPEG's parallel %d, want 2 (both threads)", denom, p)
		}
	}
}

// TestParallelJPEGDamaged: truncated files and flipped bytes give what
// libjpeg alone gives — the same error, or the same (repaired) pixels.
func TestParallelJPEGDamaged(t *testing.T) {
	good := jpegVariant(t, speckled(320, 240, 7), "420", 90, 0)
	ran := 0
	for _, cut := range []int{len(good) - 1, len(good) - 2, len(good) - 40, len(good) * 3 / 4, len(good) / 2, 700} {
		if compareDecoders(t, good[:cut], 4, 1) != 0 {
			t.Fatalf("cut at %d: the parallel decoder took a truncated file", cut)
		}
	}
	rnd := mulberry32(99)
	for i := 0; i < 60; i++ {
		bad := bytes.Clone(good)
		at := 700 + int(rnd()*float64(len(bad)-702))
		bad[at] ^= byte(1 + int(rnd()*255))
		if compareDecoders(t, bad, 4, 1) != 0 {
			ran++
		}
	}
	t.Logf("%d of 60 damaged files decoded in parallel (the damage still decodes as valid codes)", ran)
}

// FuzzParallelJPEG feeds arbitrary bytes to the parallel decoder (chunks
// of one byte, so every scan is split) and to libjpeg alone, at the
// scales the parallel decoder takes, and requires the same outcome: the
// same pixels or the same error; nothing crashes or hangs. Seeds: small
// JPEGs of each layout, with and without restart markers (those kept in
// testdata/fuzz/FuzzParallelJPEG, made by libvips' command-line tool),
// truncated ones. Run it with
//
//	go test ./hostapi/image -run '^$' -fuzz '^FuzzParallelJPEG$' -fuzztime 60s
func FuzzParallelJPEG(f *testing.F) {
	img := speckled(40, 24, 3)
	for _, layout := range []string{"420", "444", "grey"} {
		for _, q := range []int{50, 95} {
			b := jpegVariant(f, img, layout, q, 0)
			f.Add(b)
			f.Add(b[:len(b)*2/3])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog()()
		if sniffFormat(data) != formatJPEG {
			return
		}
		if err := libvips.start(); err != nil {
			t.Fatal(err)
		}
		src := &source{file: &store.File{Name: "f.jpg", MimeType: mimeType(formatJPEG)}, data: data, format: formatJPEG}
		if _, err := readHeader(src, 1<<20); err != nil {
			return // refused before any decode, as every operation does
		}
		for _, denom := range []int{2, 4, 8} {
			fuzzDecoders(t, data, denom)
		}
	})
}

// fuzzDecoders decodes data at 1/denom with libjpeg alone, with the
// parallel decoder on one thread and on two (split after the first byte),
// and requires the same outcome from all three, and the same pixels from
// the two runs of the parallel decoder when it decodes the whole file.
// (When it gives up part way, libjpeg decodes the rest.) (Its pixels equal libjpeg-turbo's
// on real files — TestParallelJPEGMatchesLibjpeg; on coefficients no
// encoder writes, outside the 16-bit range libjpeg-turbo's SIMD IDCT
// works in, they are those of libjpeg-turbo's C IDCT, jidctred.c, which
// libjpeg-turbo itself gives on CPUs without SIMD.)
func fuzzDecoders(t *testing.T, data []byte, denom int) {
	t.Helper()
	type result struct {
		pix          []byte
		w, h, b, par int
		ok           bool
		err          string
	}
	run := func(threads int) result {
		pix, w, h, b, par, ok, err := decodeJPEG(data, denom, threads, 1)
		r := result{pix: pix, w: w, h: h, b: b, par: par, ok: ok}
		if err != nil {
			r.err = err.Error()
		}
		return r
	}
	lib, one, two := run(0), run(1), run(2)
	for _, r := range []result{one, two} {
		if r.ok != lib.ok || r.err != lib.err || r.w != lib.w || r.h != lib.h || r.b != lib.b {
			t.Fatalf("libjpeg: ok %v, %q, %d × %d × %d; parallel decoder (%d): ok %v, %q, %d × %d × %d",
				lib.ok, lib.err, lib.w, lib.h, lib.b, r.par, r.ok, r.err, r.w, r.h, r.b)
		}
	}
	if lib.par != 0 {
		t.Fatal("no threads, yet the parallel decoder ran")
	}
	if (one.par > 0) != (two.par > 0) || one.par == 2 {
		t.Fatalf("the parallel decoder took the file on one thread: %d, on two: %d", one.par, two.par)
	}
	if one.par > 0 && !bytes.Equal(one.pix, two.pix) {
		t.Fatal("the parallel decoder gives different pixels on one thread and on two")
	}
}
