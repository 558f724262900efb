package image

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"hash/crc32"
	goimage "image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/image/tiff"
	_ "golang.org/x/image/webp" // independent WebP reader for the outputs

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Test fixtures are generated here; the readers below check outputs
// independently of libvips (Go's decoders, the PNG header itself, and
// vipsheader when it is installed).

func TestMain(m *testing.M) {
	code := m.Run()
	// Exercise the real shutdown once, at the end of the process.
	libvips.mu.Lock()
	if libvips.started && !libvips.stopped {
		if err := libvips.shutdownLocked(); err != nil {
			println("libvips shutdown:", err.Error())
			code = 1
		}
	}
	libvips.mu.Unlock()
	os.Exit(code)
}

type testEnv struct {
	t   testing.TB
	h   *hostapi.Host
	env *hostapi.Env
	ctx context.Context
}

func newEnv(t *testing.T, cfg ...hostapi.Config) *testEnv { return newEnvTB(t, cfg...) }

func newEnvTB(t testing.TB, cfg ...hostapi.Config) *testEnv {
	t.Helper()
	var c hostapi.Config
	if len(cfg) > 0 {
		c = cfg[0]
		c.DataDir = ""
	}
	h := hosttest.New(t, c, Register)
	return &testEnv{t: t, h: h, env: h.Env("default", "test-session"), ctx: context.Background()}
}

func (e *testEnv) upload(name string, body []byte) *store.File {
	e.t.Helper()
	return hosttest.Upload(e.t, e.env.WS, name, body, false)
}

// tool calls a meta-tool and returns its snake_case result.
func (e *testEnv) tool(name string, args map[string]any) (map[string]any, error) {
	res, err := e.h.Registry.CallTool(e.ctx, e.env, name, args)
	if err != nil {
		return nil, err
	}
	return res.(map[string]any), nil
}

func (e *testEnv) mustTool(name string, args map[string]any) map[string]any {
	e.t.Helper()
	m, err := e.tool(name, args)
	if err != nil {
		e.t.Fatalf("%s %v: %v", name, args, err)
	}
	return m
}

func (e *testEnv) body(ref string) []byte {
	e.t.Helper()
	r, err := e.env.WS.Open(e.ctx, ref)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// snapshot maps every file name to its sha256, to prove failures change
// nothing.
func (e *testEnv) snapshot() map[string]string {
	e.t.Helper()
	fs, err := e.env.WS.List(e.ctx, "**")
	if err != nil {
		e.t.Fatal(err)
	}
	m := map[string]string{}
	for _, f := range fs {
		m[f.Name] = f.SHA256
	}
	return m
}

var (
	red   = color.NRGBA{255, 0, 0, 255}
	green = color.NRGBA{0, 255, 0, 255}
	blue  = color.NRGBA{0, 0, 255, 255}
	clear = color.NRGBA{0, 0, 0, 0}
)

// bands is an image of vertical stripes of the given colours.
func bands(w, h int, cs ...color.NRGBA) *goimage.NRGBA {
	img := goimage.NewNRGBA(goimage.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, cs[x*len(cs)/w])
		}
	}
	return img
}

// quadrants is an image whose four quarters are red (top left), green
// (top right), blue (bottom left) and transparent (bottom right).
func quadrants(w, h int) *goimage.NRGBA {
	img := goimage.NewNRGBA(goimage.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := clear
			switch {
			case x < w/2 && y < h/2:
				c = red
			case y < h/2:
				c = green
			case x < w/2:
				c = blue
			}
			img.SetNRGBA(x, y, c)
		}
	}
	return img
}

// noise is a photo-like RGB image (gradients plus a pattern), so that
// JPEG and WebP sizes are realistic.
func noise(w, h int) *goimage.RGBA {
	img := goimage.NewRGBA(goimage.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := img.PixOffset(x, y)
			img.Pix[i] = uint8(x * 255 / w)
			img.Pix[i+1] = uint8(y * 255 / h)
			img.Pix[i+2] = uint8((x*x + y*7) % 251)
			img.Pix[i+3] = 255
		}
	}
	return img
}

func encPNG(t testing.TB, img goimage.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encJPEG(t testing.TB, img goimage.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encGIF(t testing.TB, frames ...goimage.Image) []byte {
	t.Helper()
	g := &gif.GIF{}
	for _, f := range frames {
		p := goimage.NewPaletted(f.Bounds(), []color.Color{color.Black, color.White, red, green, blue})
		for y := f.Bounds().Min.Y; y < f.Bounds().Max.Y; y++ {
			for x := f.Bounds().Min.X; x < f.Bounds().Max.X; x++ {
				p.Set(x, y, f.At(x, y))
			}
		}
		g.Image = append(g.Image, p)
		g.Delay = append(g.Delay, 10)
	}
	var b bytes.Buffer
	if err := gif.EncodeAll(&b, g); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encTIFF(t testing.TB, img goimage.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := tiff.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// withOrientation inserts an EXIF APP1 segment carrying orientation o
// right after a JPEG's SOI marker.
func withOrientation(jpg []byte, o uint16) []byte {
	var tiffHdr bytes.Buffer
	tiffHdr.WriteString("II*\x00")
	binary.Write(&tiffHdr, binary.LittleEndian, uint32(8)) // IFD0 offset
	binary.Write(&tiffHdr, binary.LittleEndian, uint16(1)) // one entry
	binary.Write(&tiffHdr, binary.LittleEndian, uint16(0x0112))
	binary.Write(&tiffHdr, binary.LittleEndian, uint16(3)) // SHORT
	binary.Write(&tiffHdr, binary.LittleEndian, uint32(1))
	binary.Write(&tiffHdr, binary.LittleEndian, o)
	binary.Write(&tiffHdr, binary.LittleEndian, uint16(0))
	binary.Write(&tiffHdr, binary.LittleEndian, uint32(0)) // no next IFD
	payload := append([]byte("Exif\x00\x00"), tiffHdr.Bytes()...)
	seg := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(len(payload)+2))
	seg = append(seg, payload...)
	out := append([]byte{}, jpg[:2]...)
	out = append(out, seg...)
	return append(out, jpg[2:]...)
}

// pngChunk encodes one PNG chunk with its CRC.
func pngChunk(typ string, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, uint32(len(data)))
	b.WriteString(typ)
	b.Write(data)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	return b.Bytes()
}

// hugePNG is a valid-looking PNG of a few hundred bytes whose header
// claims w × h RGBA pixels.
func hugePNG(w, h uint32) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(make([]byte, 4096))
	zw.Close()
	b := []byte("\x89PNG\r\n\x1a\n")
	b = append(b, pngChunk("IHDR", ihdr)...)
	b = append(b, pngChunk("IDAT", z.Bytes())...)
	return append(b, pngChunk("IEND", nil)...)
}

// flatPNG is a real w × h black RGB PNG; all-zero rows compress to
// almost nothing, so a 100-megapixel image is a few hundred kilobytes.
func flatPNG(w, h int) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, 2
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestSpeed)
	row := make([]byte, 1+3*w)
	for y := 0; y < h; y++ {
		zw.Write(row)
	}
	zw.Close()
	b := []byte("\x89PNG\r\n\x1a\n")
	b = append(b, pngChunk("IHDR", ihdr)...)
	b = append(b, pngChunk("IDAT", z.Bytes())...)
	return append(b, pngChunk("IEND", nil)...)
}

// decoded is an output read back with Go's own decoders.
type decoded struct {
	format string
	img    goimage.Image
}

func decode(t testing.TB, b []byte) decoded {
	t.Helper()
	img, format, err := goimage.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("Go cannot decode the output: %v", err)
	}
	return decoded{format, img}
}

// pngColorType is the colour type byte of a PNG's IHDR: 0 grey, 2 RGB,
// 3 palette, 4 grey+alpha, 6 RGBA.
func pngColorType(b []byte) int { return int(b[25]) }

// at returns the 8-bit non-premultiplied colour at x, y.
func at(img goimage.Image, x, y int) color.NRGBA {
	return color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
}

// near reports whether two colours are within tol on every channel.
func near(a, b color.NRGBA, tol int) bool {
	d := func(x, y uint8) bool { v := int(x) - int(y); return v <= tol && v >= -tol }
	return d(a.R, b.R) && d(a.G, b.G) && d(a.B, b.B) && d(a.A, b.A)
}

// vipsheader reads width, height and bands with libvips' own command-line
// tool, a reader outside this package's code paths; the caller skips when
// the tool is not installed.
func vipsheader(t *testing.T, bin string, b []byte) (w, h, bands int) {
	t.Helper()
	path := writeTemp(t, b)
	field := func(name string) int {
		out, err := exec.Command(bin, "-f", name, path).Output()
		if err != nil {
			t.Fatalf("vipsheader -f %s: %v", name, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("vipsheader -f %s: %q", name, out)
		}
		return n
	}
	return field("width"), field("height"), field("bands")
}

// num reads a numeric result field.
func num(m map[string]any, k string) int {
	f, _ := m[k].(float64)
	return int(f)
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "out-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// vmRSS is the process's resident memory in bytes (Linux).
func vmRSS(t testing.TB) int64 {
	return procStatus(t, "VmRSS:")
}

// vmHWM is the process's peak resident memory in bytes (Linux).
func vmHWM(t testing.TB) int64 {
	return procStatus(t, "VmHWM:")
}

func procStatus(t testing.TB, key string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status: memory cannot be measured here")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line)
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	t.Skip("no " + key + " in /proc/self/status")
	return 0
}
