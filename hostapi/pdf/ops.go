package pdf

import (
	"github.com/metaclaw/metaclaw/hostapi"
)

// maxPages bounds every page number an operation accepts: far more pages
// than a 50 MB file can hold, and small enough for any int.
const maxPages = 1_000_000

// pageNumber is the schema of a page number from min to maxPages; numbers
// outside it are VALIDATION_FAILED before a handler sees them.
func pageNumber(min int) hostapi.Schema {
	return hostapi.Schema{"type": "integer", "minimum": min, "maximum": maxPages}
}

// ops declares every PDF operation once; the JS stubs, meta-tools, HTTP,
// MCP and TypeScript declarations all derive from these.
func (a *area) ops() []hostapi.Op {
	ref := hostapi.Ref("PDF file id or workspace path, e.g. \"reports/q3.pdf\"")
	pageParam := func(doc string) hostapi.Param {
		return hostapi.Param{Name: "page", Schema: pageNumber(1), Doc: doc, Required: true}
	}
	coord := func(name, doc string) hostapi.Param {
		return hostapi.Param{Name: name, Schema: hostapi.Schema{"type": "number", "minimum": 0, "maximum": maxPageSide}, Doc: doc, Required: true, Group: "position"}
	}
	return []hostapi.Op{
		{
			Name: "files.pdf.info", Tool: "pdf_info",
			Doc:      "Describe a PDF: page count, every page's size in points (as displayed, rotation applied), title, author, whether it has a fillable form and whether it is encrypted.",
			Params:   []hostapi.Param{ref},
			Result:   InfoResult{},
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "Page count, page sizes in points (this A4 report: 595 × 842), title and author of a three-page report",
				Args:  map[string]any{"id": "report.pdf"},
				Want:  map[string]any{"pages": 3, "page_sizes": []any{map[string]any{"page": 1, "width": 595, "height": 842}}, "title": "Quarterly Report", "author": "Finance Team", "has_form": false, "encrypted": false},
				Files: []string{"report.pdf"},
			}},
			Handler: a.info,
		},
		{
			Name: "files.pdf.extractText", Tool: "pdf_extract_text",
			Doc: "Extract the text a reader sees, page by page, in reading order: spaces between words, a newline between lines. " +
				"Returns {pages:[{page,text}], totalPages}. For long documents ask for a few pages at a time with pages: [1, 2, 3]. Scanned pages without a text layer come back empty.",
			Params: []hostapi.Param{ref,
				{Name: "pages", Schema: hostapi.Schema{"type": "array", "items": pageNumber(1), "minItems": 1, "maxItems": 10000}, Doc: "1-based page numbers to extract; default: all pages", Group: "options"},
			},
			Result:   ExtractTextResult{},
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "The text of page 2 only",
				Args:  map[string]any{"id": "report.pdf", "pages": []any{2}},
				Want:  map[string]any{"pages": []any{map[string]any{"page": 2, "text": "Regional results\nNorth: 1.9 million euros\nSouth: 2.3 million euros"}}, "total_pages": 3},
				Files: []string{"report.pdf"},
			}, {
				Doc:   "Every page",
				Args:  map[string]any{"id": "report.pdf"},
				Want:  map[string]any{"pages": []any{map[string]any{"page": 1}, map[string]any{"page": 2}, map[string]any{"page": 3, "text": "Outlook\nWe expect steady growth in Q4."}}, "total_pages": 3},
				Files: []string{"report.pdf"},
			}},
			Handler: a.extractText,
		},
		{
			Name: "files.pdf.addPage", Tool: "pdf_add_page",
			Doc: "Insert a blank page (in place; the previous version is kept for files.revert). Default: at the end, the same size as its neighbour. Returns {pages}, the new page count.",
			Params: []hostapi.Param{ref,
				{Name: "size", Schema: hostapi.Schema{"oneOf": []any{
					hostapi.Enum("A4", "Letter", "A3", "A5", "Legal"),
					hostapi.Schema{"type": "array", "items": hostapi.Schema{"type": "number", "exclusiveMinimum": 0, "maximum": maxPageSide}, "minItems": 2, "maxItems": 2},
				}}, Doc: "\"A4\", \"Letter\", \"A3\", \"A5\", \"Legal\" or [width, height] in points (72 points = 1 inch)", Group: "options"},
				{Name: "orientation", Schema: hostapi.Enum("portrait", "landscape"), Doc: "swap width and height to match; default: as the size says", Group: "options"},
				{Name: "after", Schema: pageNumber(0), Doc: "insert after this page number; 0 inserts before the first page; default: after the last page", Group: "options"},
			},
			Result: PagesResult{},
			Examples: []hostapi.Example{{
				Doc:   "Insert a landscape Letter page after page 1",
				Args:  map[string]any{"id": "report.pdf", "size": "Letter", "orientation": "landscape", "after": 1},
				Want:  map[string]any{"pages": 4},
				Files: []string{"report.pdf"},
			}, {
				Doc:   "Append a page of the same size as the last one",
				Args:  map[string]any{"id": "report.pdf"},
				Want:  map[string]any{"pages": 4},
				Files: []string{"report.pdf"},
			}},
			Handler: a.addPage,
		},
		{
			Name: "files.pdf.deletePage", Tool: "pdf_delete_page",
			Doc:         "Remove one page (in place; the previous version is kept for files.revert). Form fields on that page are removed too. Returns {pages}, the new page count.",
			Params:      []hostapi.Param{ref, pageParam("1-based number of the page to remove")},
			Result:      PagesResult{},
			Destructive: true,
			Examples: []hostapi.Example{{
				Doc:   "Remove the last page of a three-page report",
				Args:  map[string]any{"id": "report.pdf", "page": 3},
				Want:  map[string]any{"pages": 2},
				Files: []string{"report.pdf"},
			}},
			Handler: a.deletePage,
		},
		{
			Name: "files.pdf.addText", Tool: "pdf_add_text",
			Doc: "Draw text on a page (in place; the previous version is kept for files.revert). x, y are points from the page's top-left corner to the top-left of the text; \"\\n\" starts a new line. " +
				"Text outside Latin-1 (e.g. Vietnamese, Greek, Cyrillic) is drawn with an embedded Unicode font; it stays extractable.",
			Params: []hostapi.Param{ref,
				pageParam("1-based page number"),
				{Name: "text", Schema: hostapi.Schema{"type": "string", "minLength": 1, "maxLength": 100000}, Doc: "the text to draw", Required: true},
				coord("x", "points from the left edge"),
				coord("y", "points from the top edge"),
				{Name: "font", Schema: hostapi.Enum(standardFontNames()...), Doc: "one of the 14 standard PDF fonts; default Helvetica", Group: "style"},
				{Name: "size", Schema: hostapi.Schema{"type": "number", "exclusiveMinimum": 0, "maximum": 1000}, Doc: "font size in points; default 12", Group: "style"},
				{Name: "color", Schema: hostapi.Schema{"type": "string", "pattern": "^#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})$"}, Doc: "text colour as \"#RRGGBB\"; default black", Group: "style"},
			},
			Result: OKResult{},
			Examples: []hostapi.Example{{
				Doc:   "Stamp a red APPROVED in 24 pt near the top-right corner of page 1",
				Args:  map[string]any{"id": "report.pdf", "page": 1, "text": "APPROVED", "x": 400, "y": 40, "font": "Helvetica-Bold", "size": 24, "color": "#c00000"},
				Want:  map[string]any{"ok": true},
				Files: []string{"report.pdf"},
			}},
			Handler: a.addText,
		},
		{
			Name: "files.pdf.addImage", Tool: "pdf_add_image",
			Doc: "Place a PNG or JPEG from the workspace on a page (in place; the previous version is kept for files.revert). x, y are points from the page's top-left corner to the image's top-left; " +
				"give width and/or height in points (one of them keeps the aspect ratio; neither draws one pixel per point).",
			Params: []hostapi.Param{ref,
				pageParam("1-based page number"),
				{Name: "image_id", Schema: hostapi.FileRef(), Doc: "the PNG or JPEG file's id or workspace path", Required: true},
				coord("x", "points from the left edge"),
				coord("y", "points from the top edge"),
				{Name: "width", Schema: hostapi.Schema{"type": "number", "exclusiveMinimum": 0, "maximum": maxPageSide}, Doc: "width in points", Group: "size"},
				{Name: "height", Schema: hostapi.Schema{"type": "number", "exclusiveMinimum": 0, "maximum": maxPageSide}, Doc: "height in points", Group: "size"},
			},
			Result: OKResult{},
			Examples: []hostapi.Example{{
				Doc:   "Place a logo 120 points wide (height follows the aspect ratio) at the top-right of page 1",
				Args:  map[string]any{"id": "report.pdf", "page": 1, "image_id": "logo.png", "x": 440, "y": 30, "width": 120},
				Want:  map[string]any{"ok": true},
				Files: []string{"report.pdf", "logo.png"},
			}},
			Handler: a.addImage,
		},
		{
			Name: "files.pdf.renderPage", Tool: "pdf_render_page",
			Doc: "Render one page as an image file (source \"derived\"), the way a PDF viewer shows it, form field values and annotations included: " +
				"for a vision model (pass the result to files.image.toBase64) or a person. Default name like \"report_p1.png\" beside the PDF; " +
				"returns {id, name, page, width, height, size}. An existing output is replaced only with overwrite: true (otherwise ALREADY_EXISTS).",
			Params: []hostapi.Param{ref,
				pageParam("1-based page number"),
				{Name: "width", Schema: hostapi.Schema{"type": "integer", "minimum": minRenderWidth, "maximum": maxRenderWidth}, Group: "options",
					Doc: "image width in pixels; the height follows the page's shape. Default 1200 (an A4 page: 1200 × 1697)"},
				{Name: "format", Schema: hostapi.Enum("png", "jpeg", "jpg", "webp"), Group: "options",
					Doc: "png (default; sharp text), jpeg or webp (smaller for pages with photos); an output name's extension also picks it"},
				{Name: "output", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Group: "options",
					Doc: "name of the new image file, e.g. \"previews/q3-page1.png\"; default: the PDF's name with _p<page> and the format's extension"},
				{Name: "overwrite", Schema: hostapi.Boolean(), Group: "options", Doc: "replace the output file if it exists"},
			},
			Result: RenderResult{},
			Examples: []hostapi.Example{{
				Doc:   "Page 2 as a PNG 800 pixels wide, named after the PDF",
				Args:  map[string]any{"id": "report.pdf", "page": 2, "width": 800},
				Want:  map[string]any{"name": "report_p2.png", "page": 2, "width": 800, "height": 1132},
				Files: []string{"report.pdf"},
			}, {
				Doc:   "The first page of a form, field values included, as a JPEG under a chosen name",
				Args:  map[string]any{"id": "form.pdf", "page": 1, "output": "previews/form.jpg", "overwrite": true},
				Want:  map[string]any{"name": "previews/form.jpg", "page": 1, "width": 1200, "height": 1698},
				Files: []string{"form.pdf"},
			}},
			Handler: a.renderPage,
		},
		{
			Name: "files.pdf.getFormFields", Tool: "pdf_get_form_fields",
			Doc: "List the fillable form (AcroForm) fields: {fields:[{name, type, value, options?}]}. type is text, checkbox, radio, dropdown, listbox, button or signature; " +
				"value is a string (text, radio, dropdown; null when unset), a boolean (checkbox; signature: signed) or a list of strings (listbox). Use the names with fillForm.",
			Params:   []hostapi.Param{ref},
			Result:   FormFieldsResult{},
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:  "The fields of a registration form, with their current values and a dropdown's options",
				Args: map[string]any{"id": "form.pdf"},
				Want: map[string]any{"fields": []any{
					map[string]any{"name": "name", "type": "text", "value": ""},
					map[string]any{"name": "city", "type": "text", "value": "Paris"},
					map[string]any{"name": "agree", "type": "checkbox", "value": false},
					map[string]any{"name": "color", "type": "dropdown", "value": "red", "options": []any{"red", "green", "blue"}},
				}},
				Files: []string{"form.pdf"},
			}},
			Handler: a.getFormFields,
		},
		{
			Name: "files.pdf.fillForm", Tool: "pdf_fill_form",
			Doc: "Fill form fields by their full name (in place; the previous version is kept for files.revert): text takes a string, checkbox true/false, radio and dropdown one of the field's options, listbox an option or a list of them. " +
				"Appearances are regenerated so the values show in every viewer. Returns {filled:[names], notFound:[names]}; an invalid value changes nothing.",
			Params: []hostapi.Param{ref,
				{Name: "fields", Schema: hostapi.Schema{"type": "object", "minProperties": 1, "additionalProperties": hostapi.Schema{"type": []any{"string", "number", "boolean", "array", "null"}}}, Doc: "field name → value", Required: true},
			},
			Result:     FillFormResult{},
			Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "Fill a text field, tick a checkbox and pick a dropdown option; an unknown name is reported, not an error",
				Args:  map[string]any{"id": "form.pdf", "fields": map[string]any{"name": "Jane Doe", "agree": true, "color": "blue", "phone": "555-0100"}},
				Want:  map[string]any{"filled": []any{"agree", "color", "name"}, "not_found": []any{"phone"}},
				Files: []string{"form.pdf"},
			}},
			Handler: a.fillForm,
		},
		{
			Name: "files.pdf.merge", Tool: "pdf_merge",
			Doc: "Concatenate PDFs, in the order given, into a new file (source \"derived\"); form fields are kept. Returns {id, name, pages}. An existing output name is refused (ALREADY_EXISTS).",
			Params: []hostapi.Param{
				{Name: "ids", Schema: hostapi.Schema{"type": "array", "items": hostapi.FileRef(), "minItems": 1, "maxItems": maxMergeInputs}, Doc: "PDF file ids or workspace paths, in output order", Required: true},
				{Name: "output_name", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "name of the new file, e.g. \"reports/all.pdf\" (.pdf is added when missing)", Required: true},
			},
			Result: FileResult{},
			Examples: []hostapi.Example{{
				Doc:   "Append the form after the report in a new file",
				Args:  map[string]any{"ids": []any{"report.pdf", "form.pdf"}, "output_name": "packets/combined.pdf"},
				Want:  map[string]any{"name": "packets/combined.pdf", "pages": 4},
				Files: []string{"report.pdf", "form.pdf"},
			}},
			Handler: a.merge,
		},
		{
			Name: "files.pdf.splitPages", Tool: "pdf_split_pages",
			Doc: "Copy page ranges into new PDF files (source \"derived\"), one per range, named like \"report_p1-3.pdf\". Ranges: \"4\", \"1-3\", \"5-\" (to the end). " +
				"Returns [{id, name, pages}]. Nothing is written if an output name already exists (ALREADY_EXISTS).",
			Params: []hostapi.Param{ref,
				{Name: "ranges", Schema: hostapi.Schema{"type": "array", "items": hostapi.Schema{"type": "string", "pattern": "^\\s*\\d*\\s*(-\\s*\\d*)?\\s*$", "minLength": 1}, "minItems": 1, "maxItems": 1000}, Doc: "page ranges such as [\"1-3\", \"4\", \"5-\"]", Required: true},
			},
			Result: []FileResult(nil),
			Examples: []hostapi.Example{{
				Doc:   "Page 1 into one file, pages 2 to the end into another",
				Args:  map[string]any{"id": "report.pdf", "ranges": []any{"1", "2-"}},
				Want:  []any{map[string]any{"name": "report_p1.pdf", "pages": 1}, map[string]any{"name": "report_p2-3.pdf", "pages": 2}},
				Files: []string{"report.pdf"},
			}},
			Handler: a.splitPages,
		},
	}
}
