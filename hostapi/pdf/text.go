package pdf

import (
	"bytes"
	"context"
	"errors"
	"strings"

	"github.com/klippa-app/go-pdfium"
	pdfiumerr "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/references"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/responses"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func (a *area) extractText(ctx context.Context, c *hostapi.Call) (any, error) {
	f, data, err := readPDF(ctx, c, c.Args.String("id"))
	if err != nil {
		return nil, err
	}
	var pages []int
	if c.Args.Has("pages") {
		if err := c.Args.Decode("pages", &pages); err != nil {
			return nil, err
		}
	}
	return a.text.extract(ctx, f.Name, data, pages)
}

// extract returns the text of the given 1-based pages (all when empty).
func (e *textEngine) extract(ctx context.Context, name string, data []byte, pages []int) (ExtractTextResult, error) {
	var res ExtractTextResult
	err := e.withDocument(ctx, name, data, func(inst pdfium.Pdfium, doc references.FPDF_DOCUMENT, count int) error {
		res.TotalPages = count
		if len(pages) == 0 {
			pages = make([]int, count)
			for i := range pages {
				pages[i] = i + 1
			}
		}
		for _, p := range pages {
			if p < 1 || p > count {
				return pageError(name, p, count)
			}
		}
		res.Pages = make([]PageText, 0, len(pages))
		for _, p := range pages {
			if err := ctx.Err(); err != nil {
				return err
			}
			text, err := pageText(inst, doc, p-1)
			if err != nil {
				return apierr.Wrap(apierr.FileReadFailed, err, "page %d of %q could not be read (%v); the page may be damaged — try the other pages with {pages: [...]}", p, name, err)
			}
			res.Pages = append(res.Pages, PageText{Page: p, Text: text})
		}
		return nil
	})
	return res, err
}

// withDocument opens data in a pdfium instance and runs fn on the
// document and its page count; the document is closed after.
func (e *textEngine) withDocument(ctx context.Context, name string, data []byte, fn func(inst pdfium.Pdfium, doc references.FPDF_DOCUMENT, count int) error) error {
	return e.withInstance(ctx, name, func(inst pdfium.Pdfium) error {
		doc, err := openDocument(inst, name, data)
		if err != nil {
			return err
		}
		defer inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: doc.Document})
		cnt, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: doc.Document})
		if err != nil {
			return pdfiumOpenError(name, err)
		}
		return fn(inst, doc.Document, cnt.PageCount)
	})
}

// openDocument hands data to pdfium; the caller closes the document.
func openDocument(inst pdfium.Pdfium, name string, data []byte) (*responses.OpenDocument, error) {
	doc, err := inst.OpenDocument(&requests.OpenDocument{FileReader: bytes.NewReader(data), FileReaderSize: int64(len(data))})
	if err != nil {
		if errors.Is(err, pdfiumerr.ErrPassword) || errors.Is(err, pdfiumerr.ErrSecurity) {
			return nil, apierr.Wrap(apierr.UnsupportedFormat, err, "%q is encrypted with a password; metaclaw cannot open password-protected PDFs — upload a copy saved without the password", name)
		}
		return nil, pdfiumOpenError(name, err)
	}
	return doc, nil
}

func pageText(inst pdfium.Pdfium, doc references.FPDF_DOCUMENT, index int) (string, error) {
	pg, err := inst.FPDF_LoadPage(&requests.FPDF_LoadPage{Document: doc, Index: index})
	if err != nil {
		return "", err
	}
	defer inst.FPDF_ClosePage(&requests.FPDF_ClosePage{Page: pg.Page})
	tp, err := inst.FPDFText_LoadPage(&requests.FPDFText_LoadPage{Page: requests.Page{ByReference: &pg.Page}})
	if err != nil {
		return "", err
	}
	defer inst.FPDFText_ClosePage(&requests.FPDFText_ClosePage{TextPage: tp.TextPage})
	n, err := inst.FPDFText_CountChars(&requests.FPDFText_CountChars{TextPage: tp.TextPage})
	if err != nil {
		return "", err
	}
	if n.Count <= 0 {
		return "", nil
	}
	t, err := inst.FPDFText_GetText(&requests.FPDFText_GetText{TextPage: tp.TextPage, StartIndex: 0, Count: n.Count})
	if err != nil {
		return "", err
	}
	return cleanText(t.Text), nil
}

// cleanText turns pdfium's page text into plain lines: "\n" between lines,
// no trailing blanks, no control characters pdfium uses as markers.
func cleanText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\r':
			return '\n'
		case r == 2: // pdfium's mark for a hyphen it found at a line break
			return '-'
		case r == '\n' || r == '\t':
			return r
		case r < 32, r == 0xFFFE, r == 0xFFFF:
			return -1
		}
		return r
	}, s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}
