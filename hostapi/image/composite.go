package image

import (
	"context"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// maxOverlays bounds one composite call (each overlay is read whole).
const maxOverlays = 16

// overlay is one item of composite's overlays argument.
type overlay struct {
	Ref     string   `json:"ref"`
	Left    int      `json:"left"`
	Top     int      `json:"top"`
	Opacity *float64 `json:"opacity"`
}

func composite(ctx context.Context, c *hostapi.Call) (res any, err error) {
	defer recoverPanic(&err)
	var items []overlay
	if err := c.Args.Decode("overlays", &items); err != nil {
		return nil, err
	}
	// Overlays are read before the base: an in-place edit holds the base's
	// write lock while it works, and an overlay may be the base itself.
	layers := make([]*source, len(items))
	defer func() { // after produce, whose transform closes every overlay image
		for _, l := range layers {
			l.close()
		}
	}()
	for i, it := range items {
		if layers[i], err = readSource(ctx, c, it.Ref); err != nil {
			e := apierr.Of(err)
			return nil, apierr.Wrap(e.Code, err, "overlay %d: %s", i+1, e.Message)
		}
	}
	maxPixels := c.Host.Config.MaxImagePixels
	limit := fileLimit(c)
	name := func(src *source, out *encoded) string {
		return derivedName(src.file.Name, "_composite", out.format)
	}
	return produce(ctx, c, c.Args.String("id"), targetOf(c), "", name, func(ctx context.Context, src *source, enc encoding) (*encoded, error) {
		base, err := upright(src, maxPixels, true)
		if err != nil {
			return nil, err
		}
		defer base.Close()
		bw, bh := base.Width(), base.Height()
		hadAlpha, bandFormat := base.HasAlpha(), base.BandFormat()
		comps := make([]*vips.ImageComposite, 0, len(items))
		for i, it := range items {
			img, err := upright(layers[i], maxPixels, false)
			if err != nil {
				return nil, err
			}
			defer img.Close()
			ow, oh := img.Width(), img.Height()
			if it.Left >= bw || it.Top >= bh || it.Left+ow <= 0 || it.Top+oh <= 0 {
				return nil, apierr.New(apierr.ValidationFailed,
					"overlay %d (%q, %d × %d) at left=%d top=%d lies entirely outside the %d × %d base image; place it so that it overlaps",
					i+1, layers[i].file.Name, ow, oh, it.Left, it.Top, bw, bh)
			}
			if it.Opacity != nil && *it.Opacity < 1 {
				if err := fade(img, *it.Opacity); err != nil {
					return nil, decodeError(layers[i], err)
				}
			}
			comps = append(comps, &vips.ImageComposite{Image: img, BlendMode: vips.BlendModeOver, X: it.Left, Y: it.Top})
		}
		if err := base.CompositeMulti(comps); err != nil {
			return nil, decodeError(src, err)
		}
		// Compositing always yields an alpha band; a base without one was
		// opaque and stays opaque, so the band is dropped again.
		if !hadAlpha && base.HasAlpha() {
			if err := base.ExtractBand(0, base.Bands()-1); err != nil {
				return nil, decodeError(src, err)
			}
		}
		if base.BandFormat() != bandFormat {
			if err := base.Cast(bandFormat); err != nil {
				return nil, decodeError(src, err)
			}
		}
		return encode(ctx, src, base, enc, limit)
	})
}

// fade multiplies img's alpha by opacity, adding an opaque alpha band
// first when it has none.
func fade(img *vips.ImageRef, opacity float64) error {
	format := img.BandFormat()
	if err := img.AddAlpha(); err != nil {
		return err
	}
	a := make([]float64, img.Bands())
	b := make([]float64, img.Bands())
	for i := range a {
		a[i] = 1
	}
	a[len(a)-1] = opacity
	if err := img.Linear(a, b); err != nil {
		return err
	}
	return img.Cast(format)
}
