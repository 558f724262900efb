package image

import (
	"context"

	"github.com/metaclaw/metaclaw/hostapi"
)

func convert(ctx context.Context, c *hostapi.Call) (any, error) {
	format := c.Args.String("format")
	if format == "jpg" {
		format = formatJPEG
	}
	quality := int(c.Args.IntOr("quality", 0))
	maxPixels := c.Host.Config.MaxImagePixels
	limit := fileLimit(c)
	name := func(src *source, out *encoded) string {
		n := derivedName(src.file.Name, "", out.format)
		if n == src.file.Name {
			n = derivedName(src.file.Name, "_converted", out.format)
		}
		return n
	}
	t := target{output: c.Args.String("output"), overwrite: c.Args.Bool("overwrite")}
	return produce(ctx, c, c.Args.String("id"), t, format, name, func(ctx context.Context, src *source, enc encoding) (*encoded, error) {
		img, err := upright(src, maxPixels, true)
		if err != nil {
			return nil, err
		}
		defer img.Close()
		enc.quality = quality
		return encode(ctx, src, img, enc, limit)
	})
}
