package image

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/davidbyttow/govips/v2/vips"
)

// TestResizeQuality holds the resize outputs to a quality bar: the 800 px
// JPEG and WebP of the harness photo must stay within a small perceptual
// distance of an ideal reference (the photo decoded at full size and
// reduced with lanczos3, never compressed). With METACLAW_PEER_OUTPUTS
// naming a directory where the Node harness saved sharp's outputs
// (node bench-node.mjs image-resize-jpeg DIR --save OUT), the same is
// measured for sharp, and ours must be as good: SSIM no lower, size no
// larger than sharp's by more than 2%.
func TestResizeQuality(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes a 12-megapixel photo")
	}
	e := newEnv(t)
	e.upload("photo.jpg", photo4000())
	ref := reference(t, photo4000(), 800)
	sharpDir := os.Getenv("METACLAW_PEER_OUTPUTS")
	for _, c := range []struct{ out, sharpName string }{{"q.jpg", "resized.jpg"}, {"q.webp", "resized.webp"}} {
		res := e.mustTool("image_resize", map[string]any{"id": "photo.jpg", "width": 800, "output": c.out})
		ours := e.body(c.out)
		ssim, psnr := compareTo(t, ref, ours)
		t.Logf("%s: %d bytes, SSIM %.4f, PSNR %.2f dB against the lanczos3 reference", c.out, len(ours), ssim, psnr)
		if num(res, "width") != 800 || num(res, "height") != 600 {
			t.Fatalf("%s: %v", c.out, res)
		}
		if ssim < 0.90 || psnr < 30 {
			t.Errorf("%s: SSIM %.4f, PSNR %.2f dB: below the bar (0.90, 30 dB)", c.out, ssim, psnr)
		}
		if sharpDir == "" {
			continue
		}
		theirs, err := os.ReadFile(filepath.Join(sharpDir, c.sharpName))
		if err != nil {
			t.Fatal(err)
		}
		sSSIM, sPSNR := compareTo(t, ref, theirs)
		t.Logf("sharp %s: %d bytes, SSIM %.4f, PSNR %.2f dB", c.sharpName, len(theirs), sSSIM, sPSNR)
		if ssim < sSSIM-0.0005 || float64(len(ours)) > 1.02*float64(len(theirs)) {
			t.Errorf("%s: ours %d bytes SSIM %.4f, sharp's %d bytes SSIM %.4f", c.out, len(ours), ssim, len(theirs), sSSIM)
		}
	}
}

// reference decodes data at full size and reduces it to width pixels
// with lanczos3: what an 800 px image would be with no shortcut and no
// compression. It returns the luma plane.
func reference(t *testing.T, data []byte, width int) *plane {
	t.Helper()
	if err := libvips.start(); err != nil {
		t.Fatal(err)
	}
	img, err := vips.NewImageFromBuffer(data)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if err := img.Resize(float64(width)/float64(img.Width()), vips.KernelLanczos3); err != nil {
		t.Fatal(err)
	}
	return lumaOf(t, img)
}

// compareTo decodes encoded with libvips and returns its SSIM and PSNR
// against ref, on luma.
func compareTo(t *testing.T, ref *plane, encoded []byte) (ssim, psnr float64) {
	t.Helper()
	img, err := vips.NewImageFromBuffer(encoded)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	p := lumaOf(t, img)
	if p.w != ref.w || p.h != ref.h {
		t.Fatalf("size %d×%d, reference %d×%d", p.w, p.h, ref.w, ref.h)
	}
	return meanSSIM(ref, p), psnrOf(ref, p)
}

// plane is one 8-bit channel.
type plane struct {
	w, h int
	pix  []float64
}

func lumaOf(t *testing.T, img *vips.ImageRef) *plane {
	t.Helper()
	if img.Bands() > 3 {
		if err := img.ExtractBand(0, 3); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := img.ToBytes()
	if err != nil {
		t.Fatal(err)
	}
	w, h, b := img.Width(), img.Height(), img.Bands()
	p := &plane{w: w, h: h, pix: make([]float64, w*h)}
	for i := range p.pix {
		px := raw[i*b : i*b+b]
		if b >= 3 {
			p.pix[i] = 0.299*float64(px[0]) + 0.587*float64(px[1]) + 0.114*float64(px[2])
		} else {
			p.pix[i] = float64(px[0])
		}
	}
	return p
}

func psnrOf(a, b *plane) float64 {
	var mse float64
	for i := range a.pix {
		d := a.pix[i] - b.pix[i]
		mse += d * d
	}
	mse /= float64(len(a.pix))
	if mse == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/mse)
}

// meanSSIM is the structural similarity of a and b averaged over 8×8
// windows with a stride of 4 (Wang et al. 2004, with its constants).
func meanSSIM(a, b *plane) float64 {
	const win, step = 8, 4
	c1, c2 := math.Pow(0.01*255, 2), math.Pow(0.03*255, 2)
	var sum float64
	n := 0
	for y := 0; y+win <= a.h; y += step {
		for x := 0; x+win <= a.w; x += step {
			var ma, mb, va, vb, cov float64
			for j := 0; j < win; j++ {
				for i := 0; i < win; i++ {
					k := (y+j)*a.w + x + i
					ma += a.pix[k]
					mb += b.pix[k]
				}
			}
			ma /= win * win
			mb /= win * win
			for j := 0; j < win; j++ {
				for i := 0; i < win; i++ {
					k := (y+j)*a.w + x + i
					da, db := a.pix[k]-ma, b.pix[k]-mb
					va += da * da
					vb += db * db
					cov += da * db
				}
			}
			va /= win*win - 1
			vb /= win*win - 1
			cov /= win*win - 1
			sum += ((2*ma*mb + c1) * (2*cov + c2)) / ((ma*ma + mb*mb + c1) * (va + vb + c2))
			n++
		}
	}
	return sum / float64(n)
}
