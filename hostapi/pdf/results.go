package pdf

// Results of the PDF operations (SPEC 3). The registry projects the json
// names to camelCase for scripts and snake_case for meta-tools.

// PageSize is one page's visible size in points, rotation applied.
type PageSize struct {
	Page   int     `json:"page"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
}

// InfoResult answers files.pdf.info.
type InfoResult struct {
	Pages     int        `json:"pages"`
	PageSizes []PageSize `json:"pageSizes"`
	Title     string     `json:"title"`
	Author    string     `json:"author"`
	HasForm   bool       `json:"hasForm"`
	Encrypted bool       `json:"encrypted"`
}

// PageText is the text of one page in reading order.
type PageText struct {
	Page int    `json:"page"`
	Text string `json:"text"`
}

// ExtractTextResult answers files.pdf.extractText.
type ExtractTextResult struct {
	Pages      []PageText `json:"pages"`
	TotalPages int        `json:"totalPages"`
}

// PagesResult is the page count after an edit.
type PagesResult struct {
	Pages int `json:"pages"`
}

// OKResult acknowledges an edit.
type OKResult struct {
	OK bool `json:"ok"`
}

// FormField is one AcroForm field. Value is a string for text, radio and
// dropdown fields (null when unset), a boolean for checkboxes and
// signatures (signed or not), a list of strings for list boxes, and null
// for push buttons.
type FormField struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Value   any      `json:"value"`
	Options []string `json:"options,omitempty"`
}

// FormFieldsResult answers files.pdf.getFormFields.
type FormFieldsResult struct {
	Fields []FormField `json:"fields"`
}

// FillFormResult answers files.pdf.fillForm.
type FillFormResult struct {
	Filled   []string `json:"filled"`
	NotFound []string `json:"notFound"`
}

// FileResult describes a PDF an operation created.
type FileResult struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Pages int    `json:"pages"`
}

// RenderResult describes the image file renderPage wrote.
type RenderResult struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Page   int    `json:"page"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Size   int64  `json:"size"`
}
