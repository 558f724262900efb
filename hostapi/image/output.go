package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Defaults of the encoders, the same as sharp's.
const (
	defaultQuality = 80
	// maxWebPSide and maxJPEGSide are the largest width or height those
	// formats can store.
	maxWebPSide = 16383
	maxJPEGSide = 65535
)

// writable reports whether images are written in format.
func writable(format string) bool {
	return format == formatPNG || format == formatJPEG || format == formatWebP
}

// mimeType is format's MIME type.
func mimeType(format string) string {
	return "image/" + format
}

// extFormat is the output format an extension names, or "".
func extFormat(ext string) string {
	switch strings.ToLower(ext) {
	case ".png":
		return formatPNG
	case ".jpg", ".jpeg", ".jpe", ".jfif":
		return formatJPEG
	case ".webp":
		return formatWebP
	}
	return ""
}

// canonicalExt is the extension a new file of format gets.
func canonicalExt(format string) string {
	if format == formatJPEG {
		return ".jpg"
	}
	return "." + format
}

// derivedName is a default output name: srcName's stem plus suffix, in the
// same folder, with format's extension (the source's own spelling, such as
// ".JPG", when the format does not change).
func derivedName(srcName, suffix, format string) string {
	dir, base := path.Split(srcName)
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	if stem == "" {
		stem, ext = base, ""
	}
	if extFormat(ext) != format {
		ext = canonicalExt(format)
	}
	return dir + stem + suffix + ext
}

// encoding is how an image is written.
type encoding struct {
	format  string
	quality int // jpeg and webp; 0 means the default
	// strip drops EXIF, XMP, IPTC and ICC metadata (toBase64 answers).
	// Files keep theirs: the ICC profile keeps colours right and autorot
	// has already removed the orientation tag.
	strip bool
}

// encoded is an image written in memory.
type encoded struct {
	data          []byte
	width, height int
	format        string
}

// errOverLimit stops the encoder once the output outgrows its limit.
var errOverLimit = errors.New("output over the size limit")

// cappedBuffer collects encoder output up to limit bytes, so that an
// output the store would refuse anyway is stopped early, not buffered. It
// is also where a deadline stops libvips: the JPEG and PNG encoders write
// as they go, and a failed write ends the whole pipeline. (libvips' kill
// flag would be the other way, but it is only seen on the image the saver
// builds internally, which govips does not expose.)
type cappedBuffer struct {
	bytes.Buffer
	ctx   context.Context
	limit int64
	over  bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	if int64(b.Len())+int64(len(p)) > b.limit {
		b.over = true
		return 0, errOverLimit
	}
	return b.Buffer.Write(p)
}

// checkSides refuses output sizes format cannot store.
func checkSides(format string, w, h int) error {
	switch {
	case format == formatWebP && (w > maxWebPSide || h > maxWebPSide):
		return apierr.New(apierr.ValidationFailed, "a WebP image can be at most %d pixels wide and high, not %d × %d; choose png or jpeg, or a smaller size", maxWebPSide, w, h)
	case format == formatJPEG && (w > maxJPEGSide || h > maxJPEGSide):
		return apierr.New(apierr.ValidationFailed, "a JPEG image can be at most %d pixels wide and high, not %d × %d; choose png, or a smaller size", maxJPEGSide, w, h)
	}
	return nil
}

// encode writes img (which it may change: colour space, flattening) as
// enc.format, refusing outputs bigger than limit bytes. Pixels are decoded
// here, lazily, so a truncated source fails here; ctx's end stops the
// pipeline at the encoder's next write.
func encode(ctx context.Context, src *source, img *vips.ImageRef, enc encoding, limit int64) (*encoded, error) {
	if err := checkSides(enc.format, img.Width(), img.Height()); err != nil {
		return nil, err
	}
	if err := prepare(img, enc.format); err != nil {
		return nil, decodeError(src, err)
	}
	q := enc.quality
	if q <= 0 {
		q = defaultQuality
	}
	if err := ctx.Err(); err != nil {
		return nil, apierr.From(err)
	}
	buf := &cappedBuffer{ctx: ctx, limit: limit}
	var err error
	switch enc.format {
	case formatJPEG:
		err = img.SaveToWriterJpeg(buf, &vips.JpegExportParams{Quality: q, StripMetadata: enc.strip})
	case formatPNG:
		p := vips.NewPngExportParams()
		p.StripMetadata = enc.strip
		err = img.SaveToWriterPng(buf, p)
	case formatWebP:
		p := vips.NewWebpExportParams()
		p.Quality, p.StripMetadata = q, enc.strip
		err = img.SaveToWriterWebp(buf, p)
	default:
		err = fmt.Errorf("cannot write %s", enc.format)
	}
	switch {
	case ctx.Err() != nil:
		return nil, apierr.From(ctx.Err())
	case buf.over:
		return nil, apierr.New(apierr.TooLarge, "the %s output would be bigger than the %s per-file limit; make it smaller (fewer pixels, jpeg or webp, lower quality)",
			strings.ToUpper(enc.format), humanBytes(limit))
	case err != nil:
		return nil, decodeError(src, err)
	}
	return &encoded{data: buf.Bytes(), width: img.Width(), height: img.Height(), format: enc.format}, nil
}

// prepare makes img writable as format: CMYK and other colour spaces go
// to sRGB, 16-bit images to 8 bits for JPEG and WebP (PNG keeps 16 bits),
// and JPEG, which has no alpha, gets transparency flattened onto white
// rather than libvips' default black.
func prepare(img *vips.ImageRef, format string) error {
	to, change := vips.InterpretationSRGB, true
	switch img.Interpretation() {
	case vips.InterpretationSRGB, vips.InterpretationBW:
		change = false
	case vips.InterpretationRGB16:
		change = format != formatPNG
	case vips.InterpretationGrey16:
		to, change = vips.InterpretationBW, format != formatPNG
	}
	if change {
		if err := img.ToColorSpace(to); err != nil {
			return err
		}
	}
	if format == formatJPEG && img.HasAlpha() {
		if err := img.Flatten(&vips.Color{R: 255, G: 255, B: 255}); err != nil {
			return err
		}
	}
	return nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
