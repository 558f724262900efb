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
// field appearances) onto white paper in a bitmap inside its WebAssembly
// memory; the pixels are read out once, reduced to one grey band when the
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
		// document has a form; they are drawn by the form-fill layer,
		// which go-pdfium's RenderPageInPixels sets up.
		if ft, err := inst.FPDF_GetFormType(&requests.FPDF_GetFormType{Document: doc}); err == nil && ft.FormType != enums.FPDF_FORMTYPE_NONE {
			out, err = renderWithForm(inst, doc, name, page, width, height)
			return err
		}
		out, err = renderOpaque(inst, doc, name, page, width, height)
		return err
	})
	return out, err
}

// renderWithForm draws a page of a document with a form through
// go-pdfium, whose RenderPageInPixels draws the form-fill layer too, onto
// a transparent bitmap that flatten puts on white paper.
func renderWithForm(inst pdfium.Pdfium, doc references.FPDF_DOCUMENT, name string, page, width, height int) (raster, error) {
	res, err := inst.RenderPageInPixels(&requests.RenderPageInPixels{
		Page:        requests.Page{ByIndex: &requests.PageByIndex{Document: doc, Index: page - 1}},
		Width:       width,
		Height:      height,
		RenderFlags: enums.FPDF_RENDER_FLAG_ANNOT,
		RenderForm:  true,
		Document:    &doc,
	})
	if err != nil {
		return raster{}, renderError(name, page, err)
	}
	defer res.Cleanup()
	img := res.Result.Image
	b := img.Bounds()
	// The pixels are a view into pdfium's memory: copy them out
	// before the instance goes back to the pool.
	pix, bands := flatten(img.Pix, img.Stride, b.Dx(), b.Dy())
	return raster{pix: pix, width: b.Dx(), height: b.Dy(), bands: bands}, nil
}

func renderError(name string, page int, err error) error {
	return apierr.Wrap(apierr.FileReadFailed, err, "page %d of %q could not be rendered (%v); the page may be damaged", page, name, err)
}

// renderOpaque draws a page onto white paper in an opaque bitmap (B, G,
// R and an unused byte a pixel): the same pixels as renderWithForm's, in
// less time — pdfium composites into an opaque bitmap in its own byte
// order fastest (the R, G, B order flag takes its slower generic path, and
// an alpha channel needs flattening afterwards), and the paper is made
// white by Go in the bitmap's memory (FPDFBitmap_FillRect of 8 MB in
// WebAssembly: ~15 ms). The pixels are read once, from pdfium's memory
// into the raster the encoder takes.
func renderOpaque(inst pdfium.Pdfium, doc references.FPDF_DOCUMENT, name string, page, width, height int) (raster, error) {
	pg, err := inst.FPDF_LoadPage(&requests.FPDF_LoadPage{Document: doc, Index: page - 1})
	if err != nil {
		return raster{}, renderError(name, page, err)
	}
	defer inst.FPDF_ClosePage(&requests.FPDF_ClosePage{Page: pg.Page})
	out := raster{width: width, height: height}
	err = drawPage(inst, pg.Page, width, height, func(buf []byte, stride int) {
		out.pix, out.bands = fromBGRX(buf, stride, width, height)
	})
	if err != nil {
		return raster{}, renderError(name, page, err)
	}
	return out, nil
}

// drawPage renders pg into a new w × h opaque white bitmap and hands its
// pixels (B, G, R, x) to use: a view into pdfium's memory, valid only
// during the call, so nothing is copied but what use keeps.
func drawPage(inst pdfium.Pdfium, pg references.FPDF_PAGE, w, h int, use func(buf []byte, stride int)) error {
	bm, err := inst.FPDFBitmap_CreateEx(&requests.FPDFBitmap_CreateEx{Width: w, Height: h, Format: enums.FPDF_BITMAP_FORMAT_BGRX, Pointer: uint64(0)})
	if err != nil {
		return err
	}
	defer inst.FPDFBitmap_Destroy(&requests.FPDFBitmap_Destroy{Bitmap: bm.Bitmap})
	// A bitmap pdfium could not allocate has no stride (and no buffer).
	st, err := inst.FPDFBitmap_GetStride(&requests.FPDFBitmap_GetStride{Bitmap: bm.Bitmap})
	if err != nil {
		return err
	}
	if st.Stride < 4*w {
		return fmt.Errorf("no memory for a %d × %d bitmap", w, h)
	}
	buf, err := inst.FPDFBitmap_GetBuffer(&requests.FPDFBitmap_GetBuffer{Bitmap: bm.Bitmap})
	if err != nil {
		return err
	}
	pix := buf.Buffer
	if len(pix) < h*st.Stride {
		return fmt.Errorf("pdfium's %d × %d bitmap has %d bytes", w, h, len(pix))
	}
	// White paper: the buffer is a view of pdfium's memory, which
	// WebAssembly memories never move (they only grow, and rendering
	// into an existing bitmap allocates nothing that size).
	pix[0] = 0xff
	for n := 1; n < len(pix); n *= 2 {
		copy(pix[n:], pix[:n])
	}
	_, err = inst.FPDF_RenderPageBitmap(&requests.FPDF_RenderPageBitmap{Bitmap: bm.Bitmap, Page: requests.Page{ByReference: &pg},
		SizeX: w, SizeY: h, Flags: enums.FPDF_RENDER_FLAG_ANNOT})
	if err != nil {
		return err
	}
	// Read the buffer again: were the memory to have grown while
	// rendering, the old view would be stale.
	buf, err = inst.FPDFBitmap_GetBuffer(&requests.FPDFBitmap_GetBuffer{Bitmap: bm.Bitmap})
	if err != nil {
		return err
	}
	use(buf.Buffer, st.Stride)
	return nil
}

// fromBGRX copies an opaque B, G, R, x bitmap out: one grey band when
// every pixel is grey (read in the same pass), else three sRGB bands.
func fromBGRX(buf []byte, stride, w, h int) ([]byte, int) {
	grey := make([]byte, w*h)
	for y := 0; y < h; y++ {
		row := buf[y*stride : y*stride+4*w]
		g := grey[y*w : (y+1)*w]
		for x := range g {
			p := binary.LittleEndian.Uint32(row[4*x:])
			if uint8(p) != uint8(p>>8) || uint8(p) != uint8(p>>16) {
				return toRGB(buf, stride, w, h), 3
			}
			g[x] = uint8(p)
		}
	}
	return grey, 1
}

// toRGB copies a B, G, R, x bitmap out as R, G, B.
func toRGB(buf []byte, stride, w, h int) []byte {
	out := make([]byte, 3*w*h)
	o := 0
	for y := 0; y < h; y++ {
		row := buf[y*stride : y*stride+4*w]
		for i := 0; i+4 <= len(row); i += 4 {
			out[o], out[o+1], out[o+2] = row[i+2], row[i+1], row[i]
			o += 3
		}
	}
	return out
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
