package pdf

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/enums"
	"github.com/klippa-app/go-pdfium/references"
	"github.com/klippa-app/go-pdfium/requests"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/image"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Page rendering: pdfium draws the page (with its annotations and form
// field appearances) into a bitmap inside its WebAssembly memory; the
// pixels are flattened onto white paper, reduced to one grey band when the
// page has no colour (most text pages: a third of the bytes to encode),
// and encoded by libvips with the image operations' encoders.

const (
	// defaultRenderWidth suits reading a page on screen and vision models,
	// which take about 1,600 pixels on the long side without scaling.
	defaultRenderWidth = 1200
	minRenderWidth     = 16
	maxRenderWidth     = 10000
	// maxRenderPixels bounds one bitmap (4 bytes a pixel inside pdfium's
	// 1 GiB memory) whatever the page's aspect ratio.
	maxRenderPixels = 50_000_000
)

// renderOpts are renderPage's options, resolved.
type renderOpts struct {
	page      int
	width     int
	format    string // png, jpeg or webp
	output    string // cleaned output name, or "" for the default name
	overwrite bool
}

func renderOptions(c *hostapi.Call) (renderOpts, error) {
	o := renderOpts{
		page:      int(c.Args.IntOr("page", 1)),
		width:     int(c.Args.IntOr("width", defaultRenderWidth)),
		format:    c.Args.String("format"),
		overwrite: c.Args.Bool("overwrite"),
	}
	if o.format == "jpg" {
		o.format = image.FormatJPEG
	}
	if out := c.Args.String("output"); out != "" {
		clean, err := store.CleanName(out)
		if err != nil {
			return o, err
		}
		named := image.FormatOf(clean)
		switch {
		case named == "":
			return o, apierr.New(apierr.ValidationFailed, "output %q must end in .png, .jpg, .jpeg or .webp, which picks the format written", clean)
		case o.format != "" && named != o.format:
			return o, apierr.New(apierr.ValidationFailed, "output %q must end in %s to hold a %s image", clean, image.Ext(o.format), strings.ToUpper(o.format))
		}
		o.output, o.format = clean, named
	}
	if o.format == "" {
		o.format = image.FormatPNG
	}
	return o, nil
}

// renderedName is the default name of page's image of the PDF srcName:
// "reports/q3.pdf" page 2 as PNG is "reports/q3_p2.png".
func renderedName(srcName string, page int, format string) string {
	stem := strings.TrimSuffix(srcName, path.Ext(srcName))
	if stem == "" || strings.HasSuffix(stem, "/") {
		stem = srcName
	}
	return fmt.Sprintf("%s_p%d%s", stem, page, image.Ext(format))
}

func (a *area) renderPage(ctx context.Context, c *hostapi.Call) (any, error) {
	o, err := renderOptions(c)
	if err != nil {
		return nil, err
	}
	if o.output != "" && !o.overwrite {
		if _, err := c.WS.Resolve(ctx, o.output); err == nil {
			return nil, apierr.New(apierr.AlreadyExists, "file %q already exists; pass overwrite: true to replace it, or choose another output name", o.output)
		}
	}
	f, data, err := readPDF(ctx, c, c.Args.String("id"))
	if err != nil {
		return nil, err
	}
	maxPixels := min(int64(maxRenderPixels), c.Host.Config.MaxImagePixels)
	r, err := a.text.render(ctx, f.Name, data, o.page, o.width, maxPixels)
	if err != nil {
		return nil, err
	}
	limit, _ := c.Host.Store.Limits()
	if limit <= 0 {
		limit = math.MaxInt64
	}
	out, err := image.EncodeRaster(ctx, f.Name, r.pix, r.width, r.height, r.bands, o.format, 0, limit)
	if err != nil {
		return nil, err
	}
	name := o.output
	if name == "" {
		name = renderedName(f.Name, o.page, o.format)
	}
	nf, err := c.WS.Create(ctx, store.CreateOptions{Name: name, MimeType: image.MimeType(o.format), Source: store.SourceDerived, Overwrite: o.overwrite}, bytes.NewReader(out))
	if err != nil {
		if apierr.Is(err, apierr.AlreadyExists) {
			return nil, apierr.New(apierr.AlreadyExists, "file %q already exists; pass overwrite: true to replace it, or output to choose another name", name)
		}
		return nil, err
	}
	return RenderResult{ID: nf.ID, Name: nf.Name, Page: o.page, Width: r.width, Height: r.height, Size: nf.Size}, nil
}

// raster is a rendered page: 1 (grey) or 3 (sRGB) bands, no padding.
type raster struct {
	pix                  []byte
	width, height, bands int
}

// render draws page (1-based) of data width pixels wide, refusing a
// bitmap above maxPixels before drawing it.
func (e *textEngine) render(ctx context.Context, name string, data []byte, page, width int, maxPixels int64) (raster, error) {
	var out raster
	err := e.withDocument(ctx, name, data, func(inst pdfium.Pdfium, doc references.FPDF_DOCUMENT, count int) error {
		if page > count {
			return pageError(name, page, count)
		}
		size, err := inst.FPDF_GetPageSizeByIndex(&requests.FPDF_GetPageSizeByIndex{Document: doc, Index: page - 1})
		if err != nil {
			return pdfiumOpenError(name, err)
		}
		if !(size.Width > 0) || !(size.Height > 0) {
			return apierr.New(apierr.FileReadFailed, "page %d of %q has no area (%s × %s points); the file may be damaged", page, name, num(size.Width), num(size.Height))
		}
		height := int(math.Round(float64(width) * size.Height / size.Width))
		if height < 1 || int64(width)*int64(height) > maxPixels {
			return apierr.New(apierr.TooLarge, "page %d of %q is %s × %s points; at %d pixels wide its image would be %d × %d pixels, more than the %d-pixel limit — ask for a smaller width",
				page, name, num(size.Width), num(size.Height), width, width, height, maxPixels)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// pdfium leaves form fields out of a page's annotations when the
		// document has a form; they are drawn by the form-fill layer.
		form := false
		if ft, err := inst.FPDF_GetFormType(&requests.FPDF_GetFormType{Document: doc}); err == nil {
			form = ft.FormType != enums.FPDF_FORMTYPE_NONE
		}
		res, err := inst.RenderPageInPixels(&requests.RenderPageInPixels{
			Page:        requests.Page{ByIndex: &requests.PageByIndex{Document: doc, Index: page - 1}},
			Width:       width,
			Height:      height,
			RenderFlags: enums.FPDF_RENDER_FLAG_ANNOT,
			RenderForm:  form,
			Document:    &doc,
		})
		if err != nil {
			return apierr.Wrap(apierr.FileReadFailed, err, "page %d of %q could not be rendered (%v); the page may be damaged", page, name, err)
		}
		defer res.Cleanup()
		img := res.Result.Image
		b := img.Bounds()
		// The pixels are a view into pdfium's memory: copy them out
		// before the instance goes back to the pool.
		pix, bands := flatten(img.Pix, img.Stride, b.Dx(), b.Dy())
		out = raster{pix: pix, width: b.Dx(), height: b.Dy(), bands: bands}
		return nil
	})
	return out, err
}

// flatten turns pdfium's RGBA bitmap (not premultiplied; transparent where
// a page with transparency has no paint) into opaque pixels on white:
// one grey band when every pixel is grey, else three sRGB bands. Pixels
// are read as little-endian words (R in the low byte), four bytes a load.
func flatten(rgba []byte, stride, w, h int) ([]byte, int) {
	grey := true
	for y := 0; y < h && grey; y++ {
		row := rgba[y*stride : y*stride+4*w]
		for i := 0; i+4 <= len(row); i += 4 {
			p := binary.LittleEndian.Uint32(row[i:])
			if uint8(p) != uint8(p>>8) || uint8(p) != uint8(p>>16) {
				grey = false
				break
			}
		}
	}
	bands := 3
	if grey {
		bands = 1
	}
	out := make([]byte, w*h*bands)
	o := 0
	for y := 0; y < h; y++ {
		row := rgba[y*stride : y*stride+4*w]
		for i := 0; i+4 <= len(row); i += 4 {
			p := binary.LittleEndian.Uint32(row[i:])
			a := p >> 24
			if a == 255 {
				out[o] = uint8(p)
				if bands == 3 {
					out[o+1], out[o+2] = uint8(p>>8), uint8(p>>16)
				}
				o += bands
				continue
			}
			for c := 0; c < bands; c++ {
				v := p >> (8 * c) & 0xff
				out[o] = byte((v*a + 255*(255-a) + 127) / 255)
				o++
			}
		}
	}
	return out, bands
}
