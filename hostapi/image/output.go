package image

import (
	"bytes"
	"context"
	"encoding/binary"
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

// maxOptimizedJPEGPixels is the largest JPEG written with optimized
// Huffman tables: ~24 MB of coefficients held while encoding.
const maxOptimizedJPEGPixels = 8_000_000

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
	meta    metadata
	// fastPNG trades ~9 % of size for half the time (zlib level 3
	// instead of 6: 9.9 ms and 219 kB against 20 ms and 201 kB for a
	// 1200 px text page): for pages rendered to be looked at, not kept.
	fastPNG bool
}

// metadata is what an output keeps of the source's metadata.
type metadata int

const (
	// metaNone drops everything: toBase64 answers, rendered rasters.
	metaNone metadata = iota
	// metaProfile keeps the ICC profile, which keeps colours right, and
	// drops EXIF, XMP and IPTC (camera, GPS position, editing history) from
	// a new file, as sharp and web pipelines do: a thumbnail made to be
	// shared should not carry where the photo was taken.
	metaProfile
	// metaAll keeps everything: a file changed in place stays the user's.
	metaAll
)

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
	strip := enc.meta == metaNone
	if enc.meta == metaProfile && !img.HasICCProfile() {
		strip = true // nothing to keep; libvips would still write an EXIF block
	}
	if enc.meta == metaProfile && !strip {
		if err := img.RemoveMetadata(); err != nil {
			return nil, decodeError(src, err)
		}
		// The pixels are upright (the geometry applied the orientation);
		// an orientation of 1 left behind would make libvips write an
		// EXIF block just to say so.
		if img.Orientation() <= 1 {
			if err := img.RemoveOrientation(); err != nil {
				return nil, decodeError(src, err)
			}
		}
	}
	buf := &cappedBuffer{ctx: ctx, limit: limit}
	var err error
	switch enc.format {
	case formatJPEG:
		// Optimized Huffman tables, as sharp writes by default: about 15%
		// smaller for the same pixels, for a second pass over the
		// coefficients (~1 ms at 800 × 600). That pass holds every
		// coefficient of the image (3 bytes a pixel), so large outputs
		// stream with the standard tables instead.
		optimize := int64(img.Width())*int64(img.Height()) <= maxOptimizedJPEGPixels
		err = img.SaveToWriterJpeg(buf, &vips.JpegExportParams{Quality: q, StripMetadata: strip, OptimizeCoding: optimize})
	case formatPNG:
		p := vips.NewPngExportParams()
		p.StripMetadata = strip
		if enc.fastPNG {
			p.Compression = 3
		}
		err = img.SaveToWriterPng(buf, p)
	case formatWebP:
		p := vips.NewWebpExportParams()
		p.Quality = q
		err = img.SaveToWriterWebp(buf, p) // metadata: see webpWithoutMetadata
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
	data := buf.Bytes()
	if enc.format == formatWebP && enc.meta != metaAll {
		// libvips 8.14's webpsave writes an EXIF chunk even when told to
		// strip (268 bytes on an 11 KB thumbnail); drop it here.
		data = webpWithoutMetadata(data, enc.meta == metaProfile)
	}
	return &encoded{data: data, width: img.Width(), height: img.Height(), format: enc.format}, nil
}

// VP8X feature flags (WebP container specification).
const (
	vp8xICC  = 0x20
	vp8xEXIF = 0x08
	vp8xXMP  = 0x04
)

// webpWithoutMetadata drops the EXIF and XMP chunks of a WebP file, and
// its ICC profile unless keepICC, fixing the VP8X flags; a VP8X header
// left with nothing to announce goes too, leaving the simple format that
// every decoder reads. Input it does not understand is returned as is.
func webpWithoutMetadata(b []byte, keepICC bool) []byte {
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return b
	}
	type chunk struct {
		tag  string
		body []byte
	}
	var chunks []chunk
	for i := 12; i < len(b); {
		if i+8 > len(b) {
			return b
		}
		n := int(binary.LittleEndian.Uint32(b[i+4:]))
		if n < 0 || i+8+n > len(b) {
			return b
		}
		chunks = append(chunks, chunk{string(b[i : i+4]), b[i+8 : i+8+n]})
		i += 8 + n + n&1
	}
	drop := map[string]bool{"EXIF": true, "XMP ": true, "ICCP": !keepICC}
	var kept []chunk
	images := 0
	for _, c := range chunks {
		if drop[c.tag] {
			continue
		}
		if c.tag != "VP8X" {
			images++
		}
		kept = append(kept, c)
	}
	if len(kept) == len(chunks) {
		return b
	}
	out := make([]byte, 12, len(b))
	copy(out, "RIFF\x00\x00\x00\x00WEBP")
	for _, c := range kept {
		body := c.body
		if c.tag == "VP8X" && len(body) >= 1 {
			flags := body[0] &^ (vp8xEXIF | vp8xXMP)
			if !keepICC {
				flags &^= vp8xICC
			}
			if flags == 0 && images == 1 {
				continue // nothing left to announce: the simple format
			}
			body = append([]byte{flags}, body[1:]...)
		}
		var hdr [8]byte
		copy(hdr[:], c.tag)
		binary.LittleEndian.PutUint32(hdr[4:], uint32(len(body)))
		out = append(out, hdr[:]...)
		out = append(out, body...)
		if len(body)&1 == 1 {
			out = append(out, 0)
		}
	}
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out
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
