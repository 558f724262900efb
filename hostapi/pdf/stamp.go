package pdf

import (
	"bytes"
	"context"
	"fmt"
	"image"
	_ "image/jpeg" // DecodeConfig of JPEG images
	_ "image/png"  // DecodeConfig of PNG images
	"strconv"
	"strings"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Text and images are drawn in a new content stream appended to the page.
// The page's existing content is wrapped in q … Q first so that any
// graphics state it leaves behind (a transformation, a clip, a colour)
// cannot move or hide what is added. Coordinates are the reader's: points
// from the visible page's top-left corner, on rotated pages too.

// parseColor reads "#RRGGBB" or "#RGB" into an "r g b rg" operator.
func parseColor(s string) (string, error) {
	h := strings.TrimPrefix(s, "#")
	if len(h) == 3 {
		h = string([]byte{h[0], h[0], h[1], h[1], h[2], h[2]})
	}
	if len(h) != 6 || !strings.HasPrefix(s, "#") {
		return "", apierr.New(apierr.ValidationFailed, "color %q is not a #RRGGBB hex colour such as \"#1a73e8\"", s)
	}
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return "", apierr.New(apierr.ValidationFailed, "color %q is not a #RRGGBB hex colour such as \"#1a73e8\"", s)
	}
	r, g, b := float64(v>>16&0xff)/255, float64(v>>8&0xff)/255, float64(v&0xff)/255
	return fmt.Sprintf("%s %s %s rg", num(r), num(g), num(b)), nil
}

// pageResources returns page's resource dictionary, ready to take new
// entries. Inherited resources are copied onto the page first; a shared
// resource dictionary is extended in place, which is harmless because the
// names added are new.
func pageResources(x *model.XRefTable, page types.Dict, inh *model.InheritedPageAttrs) (types.Dict, error) {
	if o, ok := page.Find("Resources"); ok && o != nil {
		d, err := x.DereferenceDict(o)
		if err != nil {
			return nil, err
		}
		if d != nil {
			return d, nil
		}
	}
	res := types.Dict{}
	if inh != nil && inh.Resources != nil {
		res = inh.Resources.Clone().(types.Dict)
	}
	page["Resources"] = res
	return res, nil
}

// subDict returns res[key] (Font, XObject …), creating it when absent.
func subDict(x *model.XRefTable, res types.Dict, key string) (types.Dict, error) {
	if o, ok := res.Find(key); ok && o != nil {
		d, err := x.DereferenceDict(o)
		if err != nil {
			return nil, err
		}
		if d != nil {
			return d, nil
		}
	}
	d := types.Dict{}
	res[key] = d
	return d, nil
}

// freshName is a resource name not yet used in d.
func freshName(d types.Dict, prefix string) string {
	for i := 1; ; i++ {
		n := prefix + strconv.Itoa(i)
		if _, used := d[n]; !used {
			return n
		}
	}
}

// appendContent adds content as the page's last content stream.
func appendContent(x *model.XRefTable, page types.Dict, content string) error {
	o, found := page.Find("Contents")
	var existing types.Array
	if found && o != nil {
		switch v := o.(type) {
		case types.IndirectRef:
			obj, err := x.Dereference(v)
			if err != nil {
				return err
			}
			switch t := obj.(type) {
			case types.StreamDict:
				existing = types.Array{v}
			case types.Array:
				existing = append(types.Array(nil), t...)
			case nil:
			default:
				return fmt.Errorf("page /Contents is a %T", obj)
			}
		case types.Array:
			existing = append(types.Array(nil), v...)
		default:
			return fmt.Errorf("page /Contents is a %T", o)
		}
	}
	if len(existing) > 0 {
		content = "Q\n" + content
	}
	ours, err := newStream(x, []byte(content), nil)
	if err != nil {
		return err
	}
	if len(existing) == 0 {
		page["Contents"] = *ours
		return nil
	}
	open, err := newStream(x, []byte("q\n"), nil)
	if err != nil {
		return err
	}
	arr := append(types.Array{*open}, existing...)
	page["Contents"] = append(arr, *ours)
	return nil
}

// cmOp is the cm operator for a page frame's matrix.
func cmOp(f pageFrame) string {
	m := f.matrix()
	return fmt.Sprintf("%s %s %s %s %s %s cm", num(m[0]), num(m[1]), num(m[2]), num(m[3]), num(m[4]), num(m[5]))
}

func checkPosition(name string, page int, f pageFrame, x, y float64) error {
	w, h := f.size()
	if x > w || y > h {
		return apierr.New(apierr.ValidationFailed, "position {x: %s, y: %s} is off page %d of %q, which is %s × %s points; x and y are measured from the top-left corner", num(x), num(y), page, name, num(w), num(h))
	}
	return nil
}

// textLines splits text into the lines to draw; tabs become spaces and
// other control characters are dropped.
func textLines(text string) []string {
	text = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\t", "    ").Replace(text)
	text = strings.Map(func(r rune) rune {
		if r < 32 && r != '\n' {
			return -1
		}
		return r
	}, text)
	return strings.Split(text, "\n")
}

func (a *area) addText(ctx context.Context, c *hostapi.Call) (any, error) {
	page := int(c.Args.IntOr("page", 1))
	x, _ := c.Args.Float("x")
	y, _ := c.Args.Float("y")
	fontName := "Helvetica"
	if c.Args.Has("font") {
		fontName = c.Args.String("font")
	}
	size := 12.0
	if v, ok := c.Args.Float("size"); ok {
		size = v
	}
	color := "0 g"
	if c.Args.Has("color") {
		var err error
		if color, err = parseColor(c.Args.String("color")); err != nil {
			return nil, err
		}
	}
	lines := textLines(c.Args.String("text"))
	font, err := a.fonts.chooseFont(fontName, lines...)
	if err != nil {
		return nil, err
	}
	return stampPage(ctx, c, page, x, y, textStamp(font, lines, size, color, x, y))
}

// textStamp draws lines at (x, y), the top-left corner of the first
// line's box, in font at size points with the fill colour operator color.
func textStamp(font *pdfFont, lines []string, size float64, color string, x, y float64) func(t stampTarget) (string, error) {
	return func(t stampTarget) (string, error) {
		fonts, err := t.resources("Font")
		if err != nil {
			return "", err
		}
		fontKey := freshName(fonts, "MCF")
		_, h := t.frame.size()
		lead := size * 1.2
		var b strings.Builder
		fmt.Fprintf(&b, "q\n%s\nBT\n/%s %s Tf\n%s\n%s TL\n", cmOp(t.frame), fontKey, num(size), color, num(lead))
		fmt.Fprintf(&b, "%s %s Td\n", num(x), num(h-y-font.ascent()/1000*size))
		for i, l := range lines {
			if i > 0 {
				b.WriteString("T*\n")
			}
			if l != "" {
				fmt.Fprintf(&b, "%s Tj\n", font.operand(l))
			}
		}
		b.WriteString("ET\nQ\n")
		ref, err := font.object(t.xref)
		if err != nil {
			return "", writeFailed(t.name, err)
		}
		fonts[fontKey] = *ref
		return b.String(), nil
	}
}

// stampTarget is the page addText and addImage draw on.
type stampTarget struct {
	name  string // the file's name, for errors
	xref  *model.XRefTable
	page  types.Dict
	inh   *model.InheritedPageAttrs
	frame pageFrame
}

// resources returns the page's resource dictionary of one kind (Font,
// XObject …), created when absent, to hold what the drawn content names.
func (t stampTarget) resources(kind string) (types.Dict, error) {
	res, err := pageResources(t.xref, t.page, t.inh)
	if err != nil {
		return nil, libError(t.name, err)
	}
	d, err := subDict(t.xref, res, kind)
	if err != nil {
		return nil, libError(t.name, err)
	}
	return d, nil
}

// stampPage appends the content draw returns to a page of the PDF the
// call's id names, after checking that the page exists and that (x, y)
// lies on it. It answers both operations.
func stampPage(ctx context.Context, c *hostapi.Call, page int, x, y float64, draw func(t stampTarget) (string, error)) (any, error) {
	err := editPDF(ctx, c, model.ADDWATERMARKS, func(name string, doc *model.Context) error {
		return stampDoc(name, doc, page, x, y, draw)
	})
	if err != nil {
		return nil, err
	}
	return OKResult{OK: true}, nil
}

// stampDoc appends the content draw returns to page of doc, named name,
// after checking that the page exists and that (x, y) lies on it.
func stampDoc(name string, doc *model.Context, page int, x, y float64, draw func(t stampTarget) (string, error)) error {
	if page > doc.PageCount {
		return pageError(name, page, doc.PageCount)
	}
	pd, frame, inh, err := pageFrameOf(doc, page)
	if err != nil {
		return libError(name, err)
	}
	if err := checkPosition(name, page, frame, x, y); err != nil {
		return err
	}
	content, err := draw(stampTarget{name: name, xref: doc.XRefTable, page: pd, inh: inh, frame: frame})
	if err != nil {
		return err
	}
	if err := appendContent(doc.XRefTable, pd, content); err != nil {
		return libError(name, err)
	}
	return nil
}

// readImage reads a workspace PNG or JPEG and checks its pixel count
// before anything decodes it.
func readImage(ctx context.Context, c *hostapi.Call, ref string) (*store.File, []byte, image.Config, error) {
	meta, data, err := readFile(ctx, c, ref)
	if err != nil {
		return nil, nil, image.Config{}, err
	}
	cfg, err := imageHeader(meta.Name, meta.MimeType, data, c.Host.Config.MaxImagePixels)
	if err != nil {
		return nil, nil, image.Config{}, err
	}
	return meta, data, cfg, nil
}

// imageHeader reads the size of a PNG or JPEG, named name, from its header
// and refuses it when it is above maxPixels: pdfcpu decodes PNG pixels to
// embed them, so the check comes before anything decodes. mimeType is
// what the store detected, for the message.
func imageHeader(name, mimeType string, data []byte, maxPixels int64) (image.Config, error) {
	isPNG := bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n"))
	isJPEG := bytes.HasPrefix(data, []byte{0xFF, 0xD8, 0xFF})
	if !isPNG && !isJPEG {
		return image.Config{}, apierr.New(apierr.UnsupportedFormat, "%q is not a PNG or JPEG image (detected %s); convert it first, e.g. with files.image.convert(ref, \"png\")", name, mimeType)
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return image.Config{}, apierr.Wrap(apierr.UnsupportedFormat, err, "%q could not be read as an image (%v); the file may be damaged", name, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return image.Config{}, apierr.New(apierr.UnsupportedFormat, "%q declares a %d × %d image, which has no pixels; the file is damaged", name, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return image.Config{}, apierr.New(apierr.TooLarge, "%q is %d×%d pixels, more than the limit of %d pixels; resize it first with files.image.resize", name, cfg.Width, cfg.Height, maxPixels)
	}
	return cfg, nil
}

func (a *area) addImage(ctx context.Context, c *hostapi.Call) (any, error) {
	page := int(c.Args.IntOr("page", 1))
	x, _ := c.Args.Float("x")
	y, _ := c.Args.Float("y")
	img, imgData, cfg, err := readImage(ctx, c, c.Args.String("image_id"))
	if err != nil {
		return nil, err
	}
	// Missing dimensions keep the image's aspect ratio; with neither, one
	// pixel is one point.
	width, hasW := c.Args.Float("width")
	height, hasH := c.Args.Float("height")
	switch {
	case !hasW && !hasH:
		width, height = float64(cfg.Width), float64(cfg.Height)
	case !hasH:
		height = width * float64(cfg.Height) / float64(cfg.Width)
	case !hasW:
		width = height * float64(cfg.Width) / float64(cfg.Height)
	}
	return stampPage(ctx, c, page, x, y, imageStamp(img.Name, imgData, x, y, width, height))
}

// imageStamp draws the PNG or JPEG data, named name, with its top-left
// corner at (x, y), width × height points.
func imageStamp(name string, data []byte, x, y, width, height float64) func(t stampTarget) (string, error) {
	return func(t stampTarget) (string, error) {
		imgRef, _, _, err := model.CreateImageResource(t.xref, bytes.NewReader(data))
		if err != nil {
			return "", apierr.Wrap(apierr.UnsupportedFormat, err, "%q could not be embedded as an image (%v); the file may be damaged — re-save it as PNG or JPEG", name, err)
		}
		xobjects, err := t.resources("XObject")
		if err != nil {
			return "", err
		}
		key := freshName(xobjects, "MCIm")
		xobjects[key] = *imgRef
		_, h := t.frame.size()
		return fmt.Sprintf("q\n%s\n%s 0 0 %s %s %s cm\n/%s Do\nQ\n", cmOp(t.frame), num(width), num(height), num(x), num(h-y-height), key), nil
	}
}
