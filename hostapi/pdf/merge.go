package pdf

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// maxMergeInputs bounds one merge call.
const maxMergeInputs = 500

// pdfName gives a derived file the .pdf extension when it has none.
func pdfName(name string) string {
	if strings.EqualFold(path.Ext(name), ".pdf") {
		return name
	}
	return name + ".pdf"
}

func (a *area) merge(ctx context.Context, c *hostapi.Call) (any, error) {
	refs := c.Args.Strings("ids")
	if len(refs) > maxMergeInputs {
		return nil, apierr.New(apierr.ValidationFailed, "ids: at most %d files can be merged in one call, got %d; merge in steps", maxMergeInputs, len(refs))
	}
	outName, err := store.CleanName(pdfName(c.Args.String("output_name")))
	if err != nil {
		return nil, err
	}
	if _, err := c.WS.Resolve(ctx, outName); err == nil {
		return nil, apierr.New(apierr.AlreadyExists, "file %q already exists; choose another output_name or delete it first", outName)
	}
	// The output may not exceed the per-file limit; inputs far beyond it
	// would only be read into memory to be refused at the end.
	maxFile, _ := c.Host.Store.Limits()
	var total int64
	for _, ref := range refs {
		f, err := c.WS.Resolve(ctx, ref)
		if err != nil {
			return nil, err
		}
		total += f.Size
	}
	if maxFile > 0 && total > 2*maxFile {
		return nil, apierr.New(apierr.TooLarge, "the %d files hold %d bytes in all; the merged file would exceed the %d-byte file limit — merge fewer files", len(refs), total, maxFile)
	}
	type input struct {
		name string
		data []byte
	}
	inputs := make([]input, len(refs))
	for i, ref := range refs {
		f, data, err := readPDF(ctx, c, ref)
		if err != nil {
			return nil, err
		}
		inputs[i] = input{f.Name, data}
	}
	type merged struct {
		body  []byte
		pages int
	}
	out, err := guard(ctx, inputs[0].name, func() (merged, error) {
		dest, err := readDoc(inputs[0].name, inputs[0].data, model.VALIDATE)
		if err != nil {
			return merged{}, err
		}
		dest.EnsureVersionForWriting()
		for i, in := range inputs[1:] {
			if err := ctx.Err(); err != nil {
				return merged{}, err
			}
			src, err := readDoc(in.name, in.data, model.VALIDATE)
			if err != nil {
				return merged{}, err
			}
			if err := pdfcpu.MergeXRefTables(fmt.Sprint(i+1), src, dest, false, false); err != nil {
				return merged{}, apierr.Wrap(apierr.FileReadFailed, err, "could not merge %q: %v", in.name, err)
			}
		}
		// The merged document is a new file: it is written unencrypted.
		dest.Encrypt, dest.EncKey, dest.E = nil, nil, nil
		body, err := writeDoc(outName, dest)
		return merged{body, dest.PageCount}, err
	})
	if err != nil {
		return nil, err
	}
	f, err := c.WS.Create(ctx, store.CreateOptions{Name: outName, Source: store.SourceDerived, MimeType: "application/pdf"}, bytes.NewReader(out.body))
	if err != nil {
		return nil, err
	}
	return FileResult{ID: f.ID, Name: f.Name, Pages: out.pages}, nil
}

// pageRange is an inclusive 1-based page range.
type pageRange struct{ from, to int }

// parseRange reads "3", "1-3", "5-" (to the end) or "-4" (from the start).
func parseRange(s string, count int) (pageRange, error) {
	bad := func() (pageRange, error) {
		return pageRange{}, apierr.New(apierr.ValidationFailed, "range %q is not valid; write pages as \"4\", \"1-3\" or \"5-\" (to the end)", s)
	}
	t := strings.ReplaceAll(s, " ", "")
	if t == "" {
		return bad()
	}
	lo, hi, isRange := strings.Cut(t, "-")
	r := pageRange{1, count}
	var err error
	if lo != "" {
		if r.from, err = strconv.Atoi(lo); err != nil {
			return bad()
		}
	}
	switch {
	case !isRange:
		r.to = r.from
	case hi != "":
		if r.to, err = strconv.Atoi(hi); err != nil {
			return bad()
		}
	}
	if isRange && lo == "" && hi == "" {
		return bad()
	}
	if r.from < 1 || r.to < 1 {
		return pageRange{}, apierr.New(apierr.ValidationFailed, "range %q: pages are numbered from 1", s)
	}
	if r.from > r.to {
		return pageRange{}, apierr.New(apierr.ValidationFailed, "range %q runs backwards; write the lower page first", s)
	}
	if r.to > count {
		return pageRange{}, apierr.New(apierr.ValidationFailed, "range %q is out of range: the document has %d page%s", s, count, plural(count))
	}
	return r, nil
}

func (r pageRange) label() string {
	if r.from == r.to {
		return "p" + strconv.Itoa(r.from)
	}
	return fmt.Sprintf("p%d-%d", r.from, r.to)
}

func (a *area) splitPages(ctx context.Context, c *hostapi.Call) (any, error) {
	f, data, err := readPDF(ctx, c, c.Args.String("id"))
	if err != nil {
		return nil, err
	}
	specs := c.Args.Strings("ranges")
	type part struct {
		name  string
		body  []byte
		pages int
	}
	base := strings.TrimSuffix(f.Name, path.Ext(f.Name))
	parts, err := guard(ctx, f.Name, func() ([]part, error) {
		doc, err := readDoc(f.Name, data, model.VALIDATE)
		if err != nil {
			return nil, err
		}
		count := doc.PageCount
		var ranges []pageRange
		for _, s := range specs {
			r, err := parseRange(s, count)
			if err != nil {
				return nil, err
			}
			ranges = append(ranges, r)
		}
		var out []part
		for i, r := range ranges {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			// pdfcpu copies pages out of the source context; a fresh read
			// per part keeps one extraction from affecting the next.
			if i > 0 {
				if doc, err = readDoc(f.Name, data, model.VALIDATE); err != nil {
					return nil, err
				}
			}
			nrs := make([]int, 0, r.to-r.from+1)
			for p := r.from; p <= r.to; p++ {
				nrs = append(nrs, p)
			}
			sub, err := pdfcpu.ExtractPages(doc, nrs, false)
			if err != nil {
				return nil, apierr.Wrap(apierr.FileReadFailed, err, "could not extract pages %d-%d of %q: %v", r.from, r.to, f.Name, err)
			}
			name := base + "_" + r.label() + ".pdf"
			body, err := writeDoc(name, sub)
			if err != nil {
				return nil, err
			}
			out = append(out, part{name, body, len(nrs)})
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	// Refuse before writing anything, so a clash leaves no partial result.
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p.name] {
			return nil, apierr.New(apierr.ValidationFailed, "ranges repeat %q; list each range once", strings.TrimPrefix(p.name, base+"_"))
		}
		seen[p.name] = true
		if _, err := c.WS.Resolve(ctx, p.name); err == nil {
			return nil, apierr.New(apierr.AlreadyExists, "file %q already exists; delete or rename it, then split again", p.name)
		}
	}
	res := make([]FileResult, 0, len(parts))
	for _, p := range parts {
		nf, err := c.WS.Create(ctx, store.CreateOptions{Name: p.name, Source: store.SourceDerived, MimeType: "application/pdf"}, bytes.NewReader(p.body))
		if err != nil {
			return nil, err
		}
		res = append(res, FileResult{ID: nf.ID, Name: nf.Name, Pages: p.pages})
	}
	return res, nil
}
