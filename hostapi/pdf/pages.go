package pdf

import (
	"context"
	"fmt"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// paperSizes are the named sizes addPage accepts, portrait, in points.
var paperSizes = map[string][2]float64{
	"A3":     {841.89, 1190.55},
	"A4":     {595.28, 841.89},
	"A5":     {419.53, 595.28},
	"Letter": {612, 792},
	"Legal":  {612, 1008},
}

// maxPageSide is the largest page side PDF readers support (200 inches).
const maxPageSide = 14400

// pageSize resolves addPage's size and orientation; ok is false when no
// size was given.
func pageSize(c *hostapi.Call) (w, h float64, ok bool, err error) {
	switch v := c.Args.Raw("size").(type) {
	case nil:
	case string:
		s, found := paperSizes[v]
		if !found {
			return 0, 0, false, apierr.New(apierr.ValidationFailed, "unknown page size %q; use A4, Letter, A3, A5, Legal or [width, height] in points", v)
		}
		w, h, ok = s[0], s[1], true
	case []any:
		var wh []float64
		if err := c.Args.Decode("size", &wh); err != nil || len(wh) != 2 {
			return 0, 0, false, apierr.New(apierr.ValidationFailed, "size must be \"A4\", \"Letter\" or [width, height] in points")
		}
		w, h, ok = wh[0], wh[1], true
		if w <= 0 || h <= 0 || w > maxPageSide || h > maxPageSide {
			return 0, 0, false, apierr.New(apierr.ValidationFailed, "page size [%s, %s] is out of range; each side must be more than 0 and at most %d points", num(w), num(h), maxPageSide)
		}
	}
	return w, h, ok, nil
}

func orient(w, h float64, orientation string) (float64, float64) {
	switch orientation {
	case "portrait":
		if w > h {
			return h, w
		}
	case "landscape":
		if h > w {
			return h, w
		}
	}
	return w, h
}

func (a *area) addPage(ctx context.Context, c *hostapi.Call) (any, error) {
	w, h, sized, err := pageSize(c)
	if err != nil {
		return nil, err
	}
	orientation := c.Args.String("orientation")
	after, hasAfter := c.Args.Int("after")
	return editPages(ctx, c, model.INSERTPAGESAFTER, func(name string, doc *model.Context) error {
		n := doc.PageCount
		pos := int64(n)
		if hasAfter {
			pos = after
		}
		if pos > int64(n) {
			return apierr.New(apierr.ValidationFailed, "after: %d is out of range: %q has %d page%s; use 0 to insert at the start or %d for the end", pos, name, n, plural(n), n)
		}
		// Without a size the new page matches its neighbour.
		neighbour := int(pos)
		if neighbour == 0 {
			neighbour = 1
		}
		_, frame, _, err := pageFrameOf(doc, neighbour)
		if err != nil {
			return libError(name, err)
		}
		pw, ph := w, h
		if !sized {
			pw, ph = frame.size()
		}
		pw, ph = orient(pw, ph, orientation)
		if err := insertBlankPage(doc, int(pos), pw, ph); err != nil {
			return libError(name, err)
		}
		return nil
	})
}

// editPages runs edit, which adds or removes pages, on the PDF the call's
// id names and answers its new page count.
func editPages(ctx context.Context, c *hostapi.Call, cmd model.CommandMode, edit func(name string, doc *model.Context) error) (any, error) {
	var pages int
	err := editPDF(ctx, c, cmd, func(name string, doc *model.Context) error {
		if err := edit(name, doc); err != nil {
			return err
		}
		pages = doc.PageCount
		return nil
	})
	if err != nil {
		return nil, err
	}
	return PagesResult{Pages: pages}, nil
}

// insertBlankPage puts a w×h page after page pos (0: before page 1).
func insertBlankPage(doc *model.Context, pos int, w, h float64) error {
	x := doc.XRefTable
	ref := pos
	if ref == 0 {
		ref = 1
	}
	_, neighbourRef, _, err := doc.PageDict(ref, false)
	if err != nil {
		return err
	}
	parentRef, parent, kids, err := parentKids(x, *neighbourRef)
	if err != nil {
		return err
	}
	if parentRef == nil {
		return fmt.Errorf("page %d has no parent in the page tree", ref)
	}
	at := -1
	for i, k := range kids {
		if ir, ok := k.(types.IndirectRef); ok && ir == *neighbourRef {
			at = i
			break
		}
	}
	if at < 0 {
		return fmt.Errorf("page %d is missing from its parent's kids", ref)
	}
	if pos > 0 {
		at++
	}
	// Rotate 0 and a direct MediaBox override anything the page would
	// otherwise inherit from its parent node.
	page := types.Dict{
		"Type":      types.Name("Page"),
		"Parent":    *parentRef,
		"MediaBox":  types.Array{types.Integer(0), types.Integer(0), types.Float(round2(w)), types.Float(round2(h))},
		"Resources": types.Dict{},
		"Rotate":    types.Integer(0),
	}
	pageRef, err := x.IndRefForNewObject(page)
	if err != nil {
		return err
	}
	newKids := make(types.Array, 0, len(kids)+1)
	newKids = append(newKids, kids[:at]...)
	newKids = append(newKids, *pageRef)
	newKids = append(newKids, kids[at:]...)
	parent["Kids"] = newKids
	if err := adjustCounts(x, parentRef, +1); err != nil {
		return err
	}
	doc.PageCount++
	return nil
}

// parentKids returns node's parent in the page tree and the parent's
// kids; parentRef is nil when node has no parent.
func parentKids(x *model.XRefTable, node types.IndirectRef) (parentRef *types.IndirectRef, parent types.Dict, kids types.Array, err error) {
	d, err := x.DereferenceDict(node)
	if err != nil {
		return nil, nil, nil, err
	}
	parentRef = d.IndirectRefEntry("Parent")
	if parentRef == nil {
		return nil, nil, nil, nil
	}
	parent, err = x.DereferenceDict(*parentRef)
	if err != nil {
		return nil, nil, nil, err
	}
	kids, err = x.DereferenceArray(parent["Kids"])
	if err != nil {
		return nil, nil, nil, err
	}
	return parentRef, parent, kids, nil
}

// adjustCounts adds delta to /Count of node and all its ancestors.
func adjustCounts(x *model.XRefTable, node *types.IndirectRef, delta int) error {
	for i := 0; node != nil && i < 64; i++ {
		d, err := x.DereferenceDict(*node)
		if err != nil {
			return err
		}
		c, _ := dictInt(x, d, "Count")
		d["Count"] = types.Integer(c + delta)
		node = d.IndirectRefEntry("Parent")
	}
	return nil
}

func (a *area) deletePage(ctx context.Context, c *hostapi.Call) (any, error) {
	page := int(c.Args.IntOr("page", 1))
	return editPages(ctx, c, model.REMOVEPAGES, func(name string, doc *model.Context) error {
		if page > doc.PageCount {
			return pageError(name, page, doc.PageCount)
		}
		if doc.PageCount == 1 {
			return apierr.New(apierr.ValidationFailed, "%q has only one page, and a PDF needs at least one; delete the file with files.delete instead", name)
		}
		if err := removePage(doc, page); err != nil {
			return libError(name, err)
		}
		return nil
	})
}

// removePage unlinks page pageNr from the page tree and drops the form
// fields whose widgets were on it, so the form does not list fields nobody
// can see.
func removePage(doc *model.Context, pageNr int) error {
	x := doc.XRefTable
	pd, pageRef, _, err := doc.PageDict(pageNr, false)
	if err != nil {
		return err
	}
	node := *pageRef
	for depth := 0; depth < 64; depth++ {
		parentRef, parent, kids, err := parentKids(x, node)
		if err != nil {
			return err
		}
		if parentRef == nil {
			return fmt.Errorf("page %d is not attached to the page tree", pageNr)
		}
		var rest types.Array
		for _, k := range kids {
			if ir, ok := k.(types.IndirectRef); ok && ir == node {
				continue
			}
			rest = append(rest, k)
		}
		parent["Kids"] = rest
		// An intermediate node left empty goes too; the root stays.
		if len(rest) > 0 || parent.IndirectRefEntry("Parent") == nil {
			if err := adjustCounts(x, parentRef, -1); err != nil {
				return err
			}
			break
		}
		node = *parentRef
	}
	doc.PageCount--
	removeWidgetsOf(x, pd)
	return nil
}

// removeWidgetsOf drops from the AcroForm the widgets listed in page's
// /Annots, and fields left without widgets.
func removeWidgetsOf(x *model.XRefTable, page types.Dict) {
	if x.Form == nil {
		return
	}
	annots, err := x.DereferenceArray(page["Annots"])
	if err != nil || len(annots) == 0 {
		return
	}
	gone := map[types.IndirectRef]bool{}
	for _, a := range annots {
		if ir, ok := a.(types.IndirectRef); ok {
			gone[ir] = true
		}
	}
	var prune func(arr types.Array, depth int) types.Array
	prune = func(arr types.Array, depth int) types.Array {
		var out types.Array
		for _, o := range arr {
			if ir, ok := o.(types.IndirectRef); ok && gone[ir] {
				continue
			}
			if depth < maxFieldDepth {
				if d, err := x.DereferenceDict(o); err == nil && d != nil {
					if kids, err := x.DereferenceArray(d["Kids"]); err == nil && len(kids) > 0 {
						left := prune(kids, depth+1)
						if len(left) == 0 {
							continue
						}
						d["Kids"] = left
					}
				}
			}
			out = append(out, o)
		}
		return out
	}
	fields, err := x.DereferenceArray(x.Form["Fields"])
	if err != nil {
		return
	}
	x.Form["Fields"] = prune(fields, 0)
}
