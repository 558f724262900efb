package pdf

import (
	"context"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/enums"
	"github.com/klippa-app/go-pdfium/references"
	"github.com/klippa-app/go-pdfium/requests"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func (a *area) info(ctx context.Context, c *hostapi.Call) (any, error) {
	f, data, err := readPDF(ctx, c, c.Args.String("id"))
	if err != nil {
		return nil, err
	}
	res, err := guard(ctx, f.Name, func() (InfoResult, error) {
		doc, err := readDoc(f.Name, data, model.LISTINFO)
		if err != nil {
			return InfoResult{}, err
		}
		pbs, err := doc.PageBoundaries(nil)
		if err != nil {
			return InfoResult{}, libError(f.Name, err)
		}
		res := InfoResult{
			Pages:     doc.PageCount,
			PageSizes: make([]PageSize, len(pbs)),
			Title:     doc.Title,
			Author:    doc.Author,
			HasForm:   hasFormFields(doc),
			Encrypted: doc.Encrypt != nil,
		}
		for i, pb := range pbs {
			w, h := newPageFrame(pb.MediaBox(), pb.CropBox(), pb.Rot).size()
			res.PageSizes[i] = PageSize{Page: i + 1, Width: w, Height: h}
		}
		return res, nil
	})
	if apierr.Is(err, apierr.FileReadFailed) {
		// pdfium reconstructs damaged cross-reference tables that pdfcpu
		// rejects, so a damaged file can still be described (and read).
		if alt, altErr := a.text.info(ctx, f.Name, data); altErr == nil {
			return alt, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// info describes a document through pdfium.
func (e *textEngine) info(ctx context.Context, name string, data []byte) (InfoResult, error) {
	var res InfoResult
	err := e.withDocument(ctx, name, data, func(inst pdfium.Pdfium, doc references.FPDF_DOCUMENT, count int) error {
		res.Pages = count
		res.PageSizes = make([]PageSize, 0, count)
		for i := 0; i < count; i++ {
			sz, err := inst.FPDF_GetPageSizeByIndex(&requests.FPDF_GetPageSizeByIndex{Document: doc, Index: i})
			if err != nil {
				return pdfiumOpenError(name, err)
			}
			res.PageSizes = append(res.PageSizes, PageSize{Page: i + 1, Width: round2(sz.Width), Height: round2(sz.Height)})
		}
		if m, err := inst.FPDF_GetMetaText(&requests.FPDF_GetMetaText{Document: doc, Tag: "Title"}); err == nil {
			res.Title = m.Value
		}
		if m, err := inst.FPDF_GetMetaText(&requests.FPDF_GetMetaText{Document: doc, Tag: "Author"}); err == nil {
			res.Author = m.Value
		}
		if sec, err := inst.FPDF_GetSecurityHandlerRevision(&requests.FPDF_GetSecurityHandlerRevision{Document: doc}); err == nil {
			res.Encrypted = sec.SecurityHandlerRevision != -1
		}
		if ft, err := inst.FPDF_GetFormType(&requests.FPDF_GetFormType{Document: doc}); err == nil {
			res.HasForm = ft.FormType != enums.FPDF_FORMTYPE_NONE
		}
		return nil
	})
	return res, err
}
