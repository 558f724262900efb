package image

import (
	"context"
	"fmt"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// maxSkipBytes is how many decoded bytes above a crop region may be
// streamed past.
const maxSkipBytes = 16 << 20

func crop(ctx context.Context, c *hostapi.Call) (any, error) {
	l, t := int(c.Args.IntOr("left", 0)), int(c.Args.IntOr("top", 0))
	w, h := int(c.Args.IntOr("width", 0)), int(c.Args.IntOr("height", 0))
	maxPixels := c.Host.Config.MaxImagePixels
	limit := fileLimit(c)
	name := func(src *source, out *encoded) string {
		return derivedName(src.file.Name, fmt.Sprintf("_crop_%d_%d_%dx%d", l, t, w, h), out.format)
	}
	return produce(ctx, c, c.Args.String("id"), targetOf(c), "", name, func(ctx context.Context, src *source, enc encoding) (*encoded, error) {
		hd, err := readHeader(src, maxPixels)
		if err != nil {
			return nil, err
		}
		// Streaming reads and keeps every row above the region, so a
		// region far down a big image is read with random access instead
		// (libvips decodes into memory up to 100 MB, to a temporary file
		// beyond).
		above := int64(t) * int64(hd.width) * int64(hd.bands) * int64(hd.bitDepth/8)
		img, err := upright(src, maxPixels, above <= maxSkipBytes)
		if err != nil {
			return nil, err
		}
		defer img.Close()
		iw, ih := img.Width(), img.Height()
		if l+w > iw || t+h > ih {
			return nil, apierr.New(apierr.ValidationFailed,
				"the region left=%d top=%d width=%d height=%d does not fit in the %d × %d image %q; keep left+width ≤ %d and top+height ≤ %d",
				l, t, w, h, iw, ih, src.file.Name, iw, ih)
		}
		if err := img.ExtractArea(l, t, w, h); err != nil {
			return nil, decodeError(src, err)
		}
		return encode(ctx, src, img, enc, limit)
	})
}
