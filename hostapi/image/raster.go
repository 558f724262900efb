package image

import (
	"context"
	"path"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Formats an image file can be written in, by the names EncodeRaster takes.
const (
	FormatPNG  = formatPNG
	FormatJPEG = formatJPEG
	FormatWebP = formatWebP
)

// FormatOf is the format a file name's extension asks for (".png",
// ".jpg", ".jpeg", ".webp"), or "".
func FormatOf(name string) string { return extFormat(path.Ext(name)) }

// Ext is the extension a new file of format gets (".jpg" for jpeg).
func Ext(format string) string { return canonicalExt(format) }

// MimeType is format's MIME type.
func MimeType(format string) string { return mimeType(format) }

// EncodeRaster encodes 8-bit pixels that another area computed (a PDF
// page rendered by pdfium) with the encoders, settings and limits of the
// image operations: bands is 1 (grey) or 3 (sRGB), rows follow each other
// without padding; format is png, jpeg or webp; quality applies to jpeg
// and webp (0: the default, 80); an output above limit bytes is
// TOO_LARGE. name labels errors. PNG is written without row filters at
// zlib level 3 (see encoding.fastPNG): other filters are both bigger and
// slower on rendered documents, and level 6 costs twice the time for 9 %.
func EncodeRaster(ctx context.Context, name string, pix []byte, width, height, bands int, format string, quality int, limit int64) (data []byte, err error) {
	defer recoverPanic(&err)
	if bands != 1 && bands != 3 {
		return nil, apierr.New(apierr.Internal, "a raster has 1 or 3 bands, not %d", bands)
	}
	if width <= 0 || height <= 0 || len(pix) != width*height*bands {
		return nil, apierr.New(apierr.Internal, "a %d × %d raster of %d bands needs %d bytes, not %d", width, height, bands, width*height*bands, len(pix))
	}
	if !writable(format) {
		return nil, apierr.New(apierr.ValidationFailed, "cannot write %q images; choose png, jpeg or webp", format)
	}
	release, err := libvips.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	interp := vips.InterpretationSRGB
	if bands == 1 {
		interp = vips.InterpretationBW
	}
	img, err := vips.NewImageFromMemory(pix, width, height, bands, vips.BandFormatUchar, interp)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "cannot hand the pixels of %q to the encoder: %v", name, err)
	}
	defer img.Close()
	src := &source{file: &store.File{Name: name}, format: "raw"}
	out, err := encode(ctx, src, img, encoding{format: format, quality: quality, meta: metaNone, fastPNG: true}, limit)
	if err != nil {
		return nil, err
	}
	return out.data, nil
}
