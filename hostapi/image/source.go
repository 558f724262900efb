package image

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Format names, as info reports them and convert takes them.
const (
	formatPNG  = "png"
	formatJPEG = "jpeg"
	formatWebP = "webp"
	formatGIF  = "gif"
	formatTIFF = "tiff"
)

// sniffFormat names the image format of b from its magic bytes, or "" when
// b is not one of the formats read here. Only these five ever reach
// libvips: its other loaders (SVG, PDF, ImageMagick…) are attack surface
// no operation needs.
func sniffFormat(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return formatPNG
	case bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}):
		return formatJPEG
	case len(b) >= 12 && bytes.Equal(b[:4], []byte("RIFF")) && bytes.Equal(b[8:12], []byte("WEBP")):
		return formatWebP
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return formatGIF
	case bytes.HasPrefix(b, []byte("II*\x00")), bytes.HasPrefix(b, []byte("MM\x00*")),
		bytes.HasPrefix(b, []byte("II+\x00")), bytes.HasPrefix(b, []byte("MM\x00+")):
		return formatTIFF
	}
	return ""
}

// source is an image file's body, mapped under the file's read lock so
// that the work on it needs no lock (and a derived output can be written
// back over the same name without deadlocking on the lock).
//
// The body is mapped read-only rather than read into the heap: a 12-MP
// JPEG is 3 MB that would be allocated, zeroed, copied and collected on
// every call, while libvips reads only what it decodes. Mapping is safe
// because the store never changes a body file in place: every write goes
// to a new file that is renamed over the name, so the mapped inode keeps
// its bytes even after a replacement. close unmaps it; every libvips image
// made from data must be closed first.
type source struct {
	file   *store.File
	data   []byte
	format string
	unmap  func()
}

// close releases the body; src is unusable after.
func (src *source) close() {
	if src != nil && src.unmap != nil {
		src.unmap()
		src.unmap = nil
		src.data = nil
	}
}

// readSource maps the image file ref; the caller closes it.
func readSource(ctx context.Context, c *hostapi.Call, ref string) (*source, error) {
	var src *source
	err := c.WS.View(ctx, ref, func(f *store.File, path string) error {
		var err error
		src, err = loadSource(f, path)
		return err
	})
	return src, err
}

// loadSource maps the body at path (a path the store handed out) and
// checks that it is an image in a supported format; the caller closes it.
func loadSource(f *store.File, path string) (*source, error) {
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot read %q: %v; run `metaclaw fsck`", f.Name, err)
	}
	format := sniffFormat(data)
	if format == "" {
		unmap()
		return nil, notAnImage(f)
	}
	return &source{file: f, data: data, format: format, unmap: unmap}, nil
}

// mapFile maps path read-only, its pages populated at once; an empty file
// or one that cannot be mapped is read into memory instead.
func mapFile(path string) ([]byte, func(), error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, nil, err
	}
	if size := st.Size(); size > 0 && size < 1<<31 {
		data, err := syscall.Mmap(int(fh.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
		if err == nil {
			return data, func() { _ = syscall.Munmap(data) }, nil
		}
	}
	data, err := io.ReadAll(fh)
	return data, func() {}, err
}

func notAnImage(f *store.File) error {
	kind := f.MimeType
	if kind == "" {
		kind = "unknown type"
	}
	return apierr.New(apierr.UnsupportedFormat,
		"%q (%s) is not an image in a supported format; image operations read PNG, JPEG, WebP, GIF and TIFF", f.Name, kind)
}

// header is what an image declares before any pixel is decoded.
type header struct {
	// width and height are as displayed: EXIF orientation applied.
	width, height int
	orientation   int
	bands         int
	bitDepth      int
	hasAlpha      bool
}

// rotated reports whether orientation turns the image by 90° or 270°.
func rotated(orientation int) bool { return orientation >= 5 && orientation <= 8 }

// open loads src lazily: libvips parses the header only and decodes pixels
// later, when an operation asks for them. An image whose header claims
// more pixels than maxPixels is refused here, before anything is decoded,
// so a 100,000 × 100,000 PNG of a few bytes never allocates its pixels.
// sequential access decodes strictly top to bottom with a small window of
// rows; random access (needed to rotate) decodes the whole image on demand.
func open(src *source, maxPixels int64, sequential bool) (*vips.ImageRef, error) {
	params := vips.NewImportParams()
	if sequential {
		params.Access.Set(vips.AccessSequential)
	}
	img, err := vips.LoadImageFromBuffer(src.data, params)
	if err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot read the %s image %q: %s; the file is corrupt or truncated",
			strings.ToUpper(src.format), src.file.Name, vipsMessage(err))
	}
	if err := checkPixels(src.file.Name, img.Width(), img.Height(), maxPixels); err != nil {
		img.Close()
		return nil, err
	}
	return img, nil
}

// checkPixels refuses a width × height image above the pixel cap.
func checkPixels(name string, w, h int, maxPixels int64) error {
	if int64(w)*int64(h) > maxPixels {
		return apierr.New(apierr.TooLarge,
			"%q is %d × %d pixels (%.1f megapixels); images are limited to %.1f megapixels, so it was not decoded",
			name, w, h, float64(w)*float64(h)/1e6, float64(maxPixels)/1e6)
	}
	return nil
}

// readHeader reads src's header without decoding pixels.
func readHeader(src *source, maxPixels int64) (header, error) {
	img, err := open(src, maxPixels, false)
	if err != nil {
		return header{}, err
	}
	defer img.Close()
	return headerOf(img), nil
}

func headerOf(img *vips.ImageRef) header {
	h := header{
		width: img.Width(), height: img.Height(), orientation: img.Orientation(),
		bands: img.Bands(), bitDepth: bitDepth(img.BandFormat()), hasAlpha: img.HasAlpha(),
	}
	if rotated(h.orientation) {
		h.width, h.height = h.height, h.width
	}
	return h
}

// upright loads src with EXIF orientation applied, so that geometry works
// on the image as displayed. With stream set, an image that needs no
// rotation is read with sequential access (bounded memory, for pipelines
// that read each pixel once top to bottom); an image that must be rotated
// is decoded on demand for random access.
func upright(src *source, maxPixels int64, stream bool) (*vips.ImageRef, error) {
	img, err := open(src, maxPixels, false)
	if err != nil {
		return nil, err
	}
	if o := img.Orientation(); o > 1 && o <= 8 {
		if err := img.AutoRotate(); err != nil {
			img.Close()
			return nil, decodeError(src, err)
		}
		return img, nil
	}
	if !stream {
		return img, nil
	}
	img.Close()
	return open(src, maxPixels, true)
}

// bitDepth is the bits per sample of a libvips band format.
func bitDepth(f vips.BandFormat) int {
	switch f {
	case vips.BandFormatUchar, vips.BandFormatChar:
		return 8
	case vips.BandFormatUshort, vips.BandFormatShort:
		return 16
	case vips.BandFormatUint, vips.BandFormatInt, vips.BandFormatFloat:
		return 32
	case vips.BandFormatDouble, vips.BandFormatComplex:
		return 64
	case vips.BandFormatDpComplex:
		return 128
	}
	return 8
}

// vipsMessage is the libvips part of a govips error, without the Go stack
// govips appends.
func vipsMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\nStack:"); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(msg)
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	if msg == "" {
		msg = "the data does not parse as this format"
	}
	return msg
}

// decodeError reports a failure while decoding or processing src's pixels,
// which is where a truncated or corrupt body shows up with lazy loading.
func decodeError(src *source, err error) error {
	if ae, ok := err.(*apierr.Error); ok {
		return ae
	}
	return apierr.Wrap(apierr.FileReadFailed, err, "cannot decode the %s image %q: %s; the file is corrupt or truncated",
		strings.ToUpper(src.format), src.file.Name, vipsMessage(err))
}
