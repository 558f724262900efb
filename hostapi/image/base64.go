package image

import (
	"context"
	"encoding/base64"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

const (
	// defaultBase64Side is the default box of toBase64: the long edge
	// vision models take without downscaling it themselves.
	defaultBase64Side = 1568
	maxBase64Side     = maxWebPSide
	// maxBase64Bytes caps the encoded image so that its base64 stays
	// within a run's default 10 MB result.
	maxBase64Bytes = 7 << 20
)

func toBase64(ctx context.Context, c *hostapi.Call) (res any, err error) {
	defer recoverPanic(&err)
	mw, mh := int(c.Args.IntOr("max_width", 0)), int(c.Args.IntOr("max_height", 0))
	if mw == 0 && mh == 0 {
		mw, mh = defaultBase64Side, defaultBase64Side
	}
	format := c.Args.String("format")
	if format == "jpg" {
		format = formatJPEG
	}
	release, err := libvips.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	src, err := readSource(ctx, c, c.Args.String("id"))
	if err != nil {
		return nil, err
	}
	defer src.close() // after img.Close, deferred below
	hd, err := readHeader(src, c.Host.Config.MaxImagePixels)
	if err != nil {
		return nil, err
	}
	if format == "" {
		format = formatJPEG
		if hd.hasAlpha {
			format = formatPNG
		}
	}
	// SizeDown: an image already inside the box keeps its size.
	enc := encoding{format: format, meta: metaNone}
	if src.format == formatJPEG {
		out, ok, err := resizeJPEGStream(ctx, src, jpegGeometry(hd, mw, mh, vips.InterestingNone, vips.SizeDown), enc, maxBase64Bytes)
		if ok {
			return base64Result(out, err)
		}
	}
	img, err := thumbnail(src, hd, mw, mh, vips.InterestingNone, vips.SizeDown)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	return base64Result(encode(ctx, src, img, enc, maxBase64Bytes))
}

// base64Result is toBase64's answer for an encoded image.
func base64Result(out *encoded, err error) (any, error) {
	if err != nil {
		if apierr.Is(err, apierr.TooLarge) {
			return nil, apierr.New(apierr.TooLarge, "the encoded image would exceed %d MB; ask for a smaller max_width/max_height or format jpeg", maxBase64Bytes>>20)
		}
		return nil, err
	}
	return Base64Result{Base64: base64.StdEncoding.EncodeToString(out.data), MimeType: mimeType(out.format),
		Width: out.width, Height: out.height}, nil
}
