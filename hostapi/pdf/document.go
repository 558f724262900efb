package pdf

import (
	"bytes"
	"math"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// newConf is the pdfcpu configuration of one operation: relaxed validation
// (real-world files are sloppy), no optimization pass (it costs more than
// the edits themselves), and resource limits sized for the store's 50 MB
// files so that a decompression bomb fails instead of eating memory.
func newConf(cmd model.CommandMode) *model.Configuration {
	conf := model.NewDefaultConfiguration()
	conf.Cmd = cmd
	conf.ValidationMode = model.ValidationRelaxed
	conf.Optimize = false
	conf.OptimizeBeforeWriting = false
	conf.Limits.MaxStreamBytes = 128 << 20
	conf.Limits.MaxDecodeBytes = 256 << 20
	conf.Limits.MaxImageBytes = 256 << 20
	conf.Limits.MaxObjectCount = 2_000_000
	conf.Limits.MaxXRefEntries = 2_000_000
	return conf
}

// readDoc parses and validates a PDF. Call it inside guard: pdfcpu panics on
// some hostile inputs.
func readDoc(name string, data []byte, cmd model.CommandMode) (*model.Context, error) {
	ctx, err := api.ReadAndValidate(bytes.NewReader(data), newConf(cmd))
	if err != nil {
		return nil, libError(name, err)
	}
	if err := ctx.EnsurePageCount(); err != nil {
		return nil, libError(name, err)
	}
	return ctx, nil
}

// writeDoc serializes ctx.
func writeDoc(name string, ctx *model.Context) ([]byte, error) {
	var buf bytes.Buffer
	if err := api.WriteContext(ctx, &buf); err != nil {
		return nil, writeFailed(name, err)
	}
	return buf.Bytes(), nil
}

// pageFrame is what a page looks like to a reader: its visible box (the
// crop box) in user space and the clockwise rotation applied on display.
type pageFrame struct {
	box types.Rectangle
	rot int
}

func newPageFrame(media, crop *types.Rectangle, rotate int) pageFrame {
	box := media
	if crop != nil {
		box = crop
	}
	if box == nil {
		box = types.NewRectangle(0, 0, 595.28, 841.89)
	}
	r := ((rotate % 360) + 360) % 360
	r = r / 90 * 90
	return pageFrame{box: *box, rot: r}
}

// size is the page's visible width and height in points, rotation applied.
func (p pageFrame) size() (w, h float64) {
	w, h = p.box.Width(), p.box.Height()
	if p.rot%180 != 0 {
		w, h = h, w
	}
	return round2(w), round2(h)
}

// matrix maps a y-up coordinate system with its origin at the visible
// bottom-left corner (as a reader sees the page) to the page's user space.
// Content drawn after "matrix cm" therefore appears upright on rotated
// pages too.
func (p pageFrame) matrix() [6]float64 {
	b := p.box
	switch p.rot {
	case 90:
		return [6]float64{0, 1, -1, 0, b.UR.X, b.LL.Y}
	case 180:
		return [6]float64{-1, 0, 0, -1, b.UR.X, b.UR.Y}
	case 270:
		return [6]float64{0, -1, 1, 0, b.LL.X, b.UR.Y}
	}
	return [6]float64{1, 0, 0, 1, b.LL.X, b.LL.Y}
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// pageFrameOf returns page pageNr's dict and frame.
func pageFrameOf(ctx *model.Context, pageNr int) (types.Dict, pageFrame, *model.InheritedPageAttrs, error) {
	d, _, inh, err := ctx.PageDict(pageNr, false)
	if err != nil {
		return nil, pageFrame{}, nil, err
	}
	return d, newPageFrame(inh.MediaBox, inh.CropBox, inh.Rotate), inh, nil
}
