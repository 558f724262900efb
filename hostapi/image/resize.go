package image

import (
	"context"
	"fmt"
	"math"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Fit modes of resize, as sharp names them.
const (
	fitCover   = "cover"
	fitContain = "contain"
	fitFill    = "fill"
	fitInside  = "inside"
)

// maxSide bounds a requested width or height; the pixel cap bounds their
// product.
const maxSide = 1_000_000

// vipsMaxCoord is libvips' largest coordinate (VIPS_MAX_COORD); as a
// thumbnail target it means "no limit on this side".
const vipsMaxCoord = 10_000_000

func resize(ctx context.Context, c *hostapi.Call) (any, error) {
	w, h := int(c.Args.IntOr("width", 0)), int(c.Args.IntOr("height", 0))
	if w == 0 && h == 0 {
		return nil, apierr.New(apierr.ValidationFailed, "give width, height or both; a null side follows the other, keeping the aspect ratio")
	}
	fit := c.Args.String("fit")
	if fit == "" {
		fit = fitCover
	}
	maxPixels := c.Host.Config.MaxImagePixels
	limit := fileLimit(c)
	name := func(src *source, out *encoded) string {
		return derivedName(src.file.Name, fmt.Sprintf("_%dx%d", out.width, out.height), out.format)
	}
	return produce(ctx, c, c.Args.String("id"), targetOf(c), "", name, func(ctx context.Context, src *source, enc encoding) (*encoded, error) {
		hd, err := readHeader(src, maxPixels)
		if err != nil {
			return nil, err
		}
		// The box the result fills; with one side open it is the image
		// scaled to the given side.
		bw, bh := w, h
		if bw == 0 {
			bw = max(1, int(math.Round(float64(hd.width)*float64(h)/float64(hd.height))))
		}
		if bh == 0 {
			bh = max(1, int(math.Round(float64(hd.height)*float64(w)/float64(hd.width))))
		}
		if int64(bw)*int64(bh) > maxPixels {
			return nil, apierr.New(apierr.TooLarge, "a %d × %d result would be %.1f megapixels; images are limited to %.1f megapixels",
				bw, bh, float64(bw)*float64(bh)/1e6, float64(maxPixels)/1e6)
		}
		if err := checkSides(enc.format, bw, bh); err != nil {
			return nil, err
		}
		crop, size := vips.InterestingNone, vips.SizeBoth
		if w > 0 && h > 0 {
			switch fit {
			case fitCover:
				crop = vips.InterestingCentre
			case fitFill:
				size = vips.SizeForce
			}
		}
		if src.format == formatJPEG && !(fit == fitContain && w > 0 && h > 0) {
			out, ok, err := resizeJPEGStream(ctx, src, jpegGeometry(hd, w, h, crop, size), enc, limit)
			if ok {
				return out, err
			}
		}
		img, err := thumbnail(src, hd, w, h, crop, size)
		if err != nil {
			return nil, err
		}
		defer img.Close()
		if fit == fitContain && w > 0 && h > 0 && (img.Width() != w || img.Height() != h) {
			if err := pad(img, w, h, enc.format); err != nil {
				return nil, decodeError(src, err)
			}
		}
		return encode(ctx, src, img, enc, limit)
	})
}

// thumbnail loads src scaled into w × h (0: that side unbounded),
// resampled with lanczos3 and turned upright by its EXIF orientation. crop
// InterestingCentre fills the box and cuts the overflow from the centre
// (cover); size SizeForce stretches to the box (fill); SizeDown never
// enlarges. hd is src's header.
//
// JPEG, the common case, is decoded at 1/2, 1/4 or 1/8 scale when the
// result is at least that much smaller (libjpeg's shrink-on-load, as sharp
// does by default), then reduced once with vips_resize. libvips' own
// thumbnail keeps a further factor of two in reserve and decodes four
// times the pixels (~40% slower for a 12-MP photo to 800 px), and
// vips_thumbnail_image on the shrunk image still costs ~12% more than the
// one resize, for the same pixels. Other formats go through libvips'
// thumbnail, which knows their shrink-on-load (WebP) and alpha handling.
func thumbnail(src *source, hd header, w, h int, crop vips.Interesting, size vips.Size) (*vips.ImageRef, error) {
	if src.format != formatJPEG {
		tw, th := w, h
		if tw == 0 {
			tw = vipsMaxCoord
		}
		if th == 0 {
			th = vipsMaxCoord
		}
		img, err := vips.LoadThumbnailFromBuffer(src.data, tw, th, crop, size, vips.NewImportParams())
		if err != nil {
			return nil, decodeError(src, err)
		}
		return img, nil
	}
	params := vips.NewImportParams()
	turn := hd.orientation > 1 && hd.orientation <= 8
	if !turn {
		// Decoded top to bottom, a few lines at a time; turning needs
		// random access to the (shrunk) image instead.
		params.Access.Set(vips.AccessSequential)
	}
	if s := jpegShrink(hd, w, h, crop != vips.InterestingNone || size == vips.SizeForce); s > 1 {
		params.JpegShrinkFactor.Set(s)
	}
	img, err := vips.LoadImageFromBuffer(src.data, params)
	if err != nil {
		return nil, decodeError(src, err)
	}
	if turn {
		if err := img.AutoRotate(); err != nil {
			img.Close()
			return nil, decodeError(src, err)
		}
	}
	if err := fitInto(img, w, h, crop != vips.InterestingNone, size); err != nil {
		img.Close()
		return nil, decodeError(src, err)
	}
	return img, nil
}

// fitInto resizes img into w × h (0: that side unbounded) with lanczos3,
// as fitGeometry says.
func fitInto(img *vips.ImageRef, w, h int, cover bool, size vips.Size) error {
	g := fitGeometry(img.Width(), img.Height(), w, h, cover, size)
	if g.hs != 1 || g.vs != 1 {
		if err := img.ResizeWithVScale(g.hs, g.vs, vips.KernelLanczos3); err != nil {
			return err
		}
	}
	if g.crop.width > 0 {
		return img.ExtractArea(g.crop.left, g.crop.top, g.crop.width, g.crop.height)
	}
	return nil
}

// geometry is how an iw × ih image is fitted into a box: scaled by hs × vs
// to rw × rh, then cut to crop when crop.width > 0.
type geometry struct {
	hs, vs float64
	rw, rh int
	crop   struct{ left, top, width, height int }
}

func (g geometry) outW() int {
	if g.crop.width > 0 {
		return g.crop.width
	}
	return g.rw
}

func (g geometry) outH() int {
	if g.crop.width > 0 {
		return g.crop.height
	}
	return g.rh
}

// fitGeometry sizes an iw × ih image for a w × h box (0: that side
// unbounded) the way libvips' thumbnail does: inside the box, or filling
// it and cropped from the centre when cover is set; stretched to it for
// SizeForce; never enlarged for SizeDown. The scales give exactly the
// rounded target size.
func fitGeometry(iw, ih, w, h int, cover bool, size vips.Size) geometry {
	fw, fh := float64(iw), float64(ih)
	sx, sy := math.Inf(1), math.Inf(1)
	if w > 0 {
		sx = float64(w) / fw
	}
	if h > 0 {
		sy = float64(h) / fh
	}
	hs, vs := min(sx, sy), min(sx, sy)
	switch {
	case size == vips.SizeForce && w > 0 && h > 0:
		hs, vs = sx, sy
	case cover && w > 0 && h > 0:
		hs, vs = max(sx, sy), max(sx, sy)
	}
	if size == vips.SizeDown && hs > 1 && vs > 1 {
		hs, vs = 1, 1
	}
	var g geometry
	g.rw = max(1, int(math.Round(fw*hs)))
	g.rh = max(1, int(math.Round(fh*vs)))
	g.hs, g.vs = float64(g.rw)/fw, float64(g.rh)/fh
	if cover && w > 0 && h > 0 && (g.rw > w || g.rh > h) {
		cw, ch := min(w, g.rw), min(h, g.rh)
		g.crop.left, g.crop.top, g.crop.width, g.crop.height = (g.rw-cw)/2, (g.rh-ch)/2, cw, ch
	}
	return g
}

// jpegGeometry is the streaming path's plan for fitting a JPEG with header
// hd into w × h: the same decode scale and fit as thumbnail.
func jpegGeometry(hd header, w, h int, crop vips.Interesting, size vips.Size) streamGeometry {
	orient := hd.orientation
	if orient < 1 || orient > 8 {
		orient = 1
	}
	return streamGeometry{w: w, h: h, cover: crop != vips.InterestingNone, size: size,
		denom: jpegShrink(hd, w, h, crop != vips.InterestingNone || size == vips.SizeForce), orient: orient}
}

// jpegShrink is the JPEG decode scale (1, 2, 4 or 8) for a result in the
// w × h box: the largest power of two that still decodes at least as many
// pixels as the result needs on each side. fills says the result fills
// the box (cover, fill) rather than fitting inside it.
func jpegShrink(hd header, w, h int, fills bool) int {
	fx, fy := math.Inf(1), math.Inf(1)
	if w > 0 {
		fx = float64(hd.width) / float64(w)
	}
	if h > 0 {
		fy = float64(hd.height) / float64(h)
	}
	f := min(fx, fy)
	if w > 0 && h > 0 && !fills {
		f = max(fx, fy)
	}
	for _, s := range []int{8, 4, 2} {
		if f >= float64(s) {
			return s
		}
	}
	return 1
}

// pad centres img on a w × h canvas: transparent where the output format
// has alpha, white for JPEG.
func pad(img *vips.ImageRef, w, h int, format string) error {
	left, top := (w-img.Width())/2, (h-img.Height())/2
	if format == formatJPEG {
		if err := prepare(img, format); err != nil {
			return err
		}
		return img.EmbedBackground(left, top, w, h, &vips.Color{R: 255, G: 255, B: 255})
	}
	if err := img.AddAlpha(); err != nil {
		return err
	}
	return img.EmbedBackgroundRGBA(left, top, w, h, &vips.ColorRGBA{})
}

// fileLimit is the largest file the store accepts.
func fileLimit(c *hostapi.Call) int64 {
	limit, _ := c.Host.Store.Limits()
	return limit
}
