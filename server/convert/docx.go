package convert

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// MarkdownToDOCX renders markdown as a WordprocessingML document (.docx):
// real heading styles (so Word and LibreOffice build a navigation pane),
// numbered and bulleted lists, emphasis, code, tables and hyperlinks.
// It stops with a coded error when ctx ends (TIMEOUT) or the document
// outgrows opt.MaxBytes (TOO_LARGE).
func MarkdownToDOCX(ctx context.Context, md []byte, opt Options) (out []byte, err error) {
	opt = opt.withDefaults()
	bud := &budget{ctx: ctx, opt: opt}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, recovered(p, "DOCX")
		}
	}()
	if len(md) > DefaultMaxInput {
		return nil, apierr.New(apierr.TooLarge, "the markdown is %d bytes; at most %d MB can be converted", len(md), DefaultMaxInput>>20)
	}
	blocks, err := parse(md)
	if err != nil {
		return nil, err
	}
	d := &docxDoc{b: bud}
	d.body.Grow(len(md) * 3)
	d.blocks(blocks, 0)
	d.check()
	d.body.WriteString(`<w:sectPr><w:pgSz w:w="11906" w:h="16838"/><w:pgMar w:top="1134" w:right="1134" w:bottom="1134" w:left="1134" w:header="567" w:footer="567" w:gutter="0"/></w:sectPr>`)

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name, content string) error {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			return err
		}
		_, err = w.Write([]byte(content))
		return err
	}
	parts := []struct{ name, content string }{
		{"[Content_Types].xml", contentTypesXML},
		{"_rels/.rels", rootRelsXML},
		{"docProps/core.xml", coreXML(opt.Title)},
		{"docProps/app.xml", appXML},
		{"word/document.xml", xmlHeader + `<w:document xmlns:w="` + nsW + `" xmlns:r="` + nsR + `"><w:body>` + d.body.String() + `</w:body></w:document>`},
		{"word/styles.xml", stylesXML},
		{"word/numbering.xml", d.numberingXML()},
		{"word/_rels/document.xml.rels", d.relsXML()},
	}
	for _, p := range parts {
		if err := add(p.name, p.content); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

const (
	xmlHeader = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n"
	nsW       = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	nsR       = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
)

type docxDoc struct {
	b    *budget
	body strings.Builder
	// links are hyperlink targets, relationship ids rIdLink1…
	links []string
	// ordered lists each get their own numbering instance so that numbers
	// restart; starts holds each instance's first number.
	starts []int
}

// esc escapes text for XML, dropping characters XML 1.0 cannot carry.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || (r >= 0xFFFE && r <= 0xFFFF) {
			continue
		}
		b.WriteRune(r)
	}
	var out bytes.Buffer
	xml.EscapeText(&out, []byte(b.String()))
	return out.String()
}

func (d *docxDoc) blocks(bs []block, quote int) {
	for _, b := range bs {
		d.check()
		d.block(b, quote, "")
	}
}

// check is called between units of work: it stops when the caller's time
// is up or the document has outgrown its budget.
func (d *docxDoc) check() {
	d.b.tick()
	d.b.bytes(int64(d.body.Len()))
}

// block writes b; numPr places it in a list (a <w:numPr> element) when set.
func (d *docxDoc) block(b block, quote int, numPr string) {
	w := &d.body
	switch b.kind {
	case bParagraph:
		w.WriteString("<w:p><w:pPr>")
		switch {
		case numPr != "":
			w.WriteString(`<w:pStyle w:val="ListParagraph"/>` + numPr)
		case quote > 0:
			w.WriteString(`<w:pStyle w:val="Quote"/>`)
		}
		w.WriteString("</w:pPr>")
		d.runs(b.spans, "")
		w.WriteString("</w:p>")
	case bHeading:
		fmt.Fprintf(w, `<w:p><w:pPr><w:pStyle w:val="Heading%d"/></w:pPr>`, b.level)
		d.runs(b.spans, "")
		w.WriteString("</w:p>")
	case bCode:
		w.WriteString(`<w:p><w:pPr><w:pStyle w:val="Code"/></w:pPr>`)
		for i, line := range strings.Split(b.code, "\n") {
			if i > 0 {
				w.WriteString("<w:r><w:br/></w:r>")
			}
			if line != "" {
				w.WriteString(`<w:r><w:t xml:space="preserve">` + esc(line) + `</w:t></w:r>`)
			}
		}
		w.WriteString("</w:p>")
	case bList:
		d.list(b, 0, quote)
	case bQuote:
		d.blocks(b.quote, quote+1)
	case bRule:
		w.WriteString(`<w:p><w:pPr><w:pBdr><w:bottom w:val="single" w:sz="6" w:space="1" w:color="C4C9D4"/></w:pBdr></w:pPr></w:p>`)
	case bTable:
		d.table(b)
	}
}

func (d *docxDoc) list(b block, level, quote int) {
	numID := 1 // the bullet instance
	if b.ordered {
		d.starts = append(d.starts, b.start)
		numID = 1 + len(d.starts)
	}
	numPr := fmt.Sprintf(`<w:numPr><w:ilvl w:val="%d"/><w:numId w:val="%d"/></w:numPr>`, min(level, 8), numID)
	for _, item := range b.items {
		d.check()
		first := true
		for _, ib := range item {
			switch {
			case ib.kind == bList:
				d.list(ib, level+1, quote)
			case first && ib.kind == bParagraph:
				d.block(ib, quote, numPr)
			case ib.kind == bParagraph:
				// A later paragraph of the item: indented, no marker.
				d.body.WriteString(fmt.Sprintf(`<w:p><w:pPr><w:pStyle w:val="ListParagraph"/><w:ind w:left="%d"/></w:pPr>`, 720*(level+1)))
				d.runs(ib.spans, "")
				d.body.WriteString("</w:p>")
			default:
				d.block(ib, quote, "")
			}
			first = false
		}
		if len(item) == 0 {
			d.block(block{kind: bParagraph}, quote, numPr)
		}
	}
}

// runs writes spans as runs; rPr is extra run properties for every run.
func (d *docxDoc) runs(sp []span, rPr string) {
	w := &d.body
	for _, s := range sp {
		props := rPr
		if s.code {
			props += `<w:rStyle w:val="CodeChar"/>`
		} else if s.link != "" {
			props += `<w:rStyle w:val="Hyperlink"/>`
		}
		if s.bold {
			props += "<w:b/>"
		}
		if s.italic {
			props += "<w:i/>"
		}
		if s.strike {
			props += "<w:strike/>"
		}
		if s.link != "" {
			d.links = append(d.links, s.link)
			fmt.Fprintf(w, `<w:hyperlink r:id="rIdLink%d" w:history="1">`, len(d.links))
		}
		for i, part := range strings.Split(s.text, "\n") {
			if i > 0 {
				w.WriteString("<w:r><w:br/></w:r>")
			}
			if part == "" {
				continue
			}
			w.WriteString("<w:r>")
			if props != "" {
				w.WriteString("<w:rPr>" + props + "</w:rPr>")
			}
			w.WriteString(`<w:t xml:space="preserve">` + esc(part) + `</w:t></w:r>`)
		}
		if s.link != "" {
			w.WriteString("</w:hyperlink>")
		}
	}
}

// maxDocxCols is the most columns one Word table gets (Word itself stops
// at 63; narrower columns are unreadable on a portrait page). Wider tables
// become several tables, each repeating the first column.
const maxDocxCols = 12

func (d *docxDoc) table(b block) {
	ncols := len(b.header)
	for _, r := range b.rows {
		ncols = max(ncols, len(r))
	}
	if ncols == 0 {
		return
	}
	if ncols <= maxDocxCols {
		d.tableGroup(b, allColumns(ncols))
		return
	}
	for start := 1; start < ncols; start += maxDocxCols - 1 {
		cols := []int{0}
		for c := start; c < min(ncols, start+maxDocxCols-1); c++ {
			cols = append(cols, c)
		}
		fmt.Fprintf(&d.body, `<w:p><w:pPr><w:keepNext/></w:pPr><w:r><w:rPr><w:i/><w:color w:val="787E8C"/></w:rPr><w:t xml:space="preserve">%s</w:t></w:r></w:p>`,
			esc(fmt.Sprintf("Columns %d–%d of %d, with column 1", cols[1]+1, cols[len(cols)-1]+1, ncols)))
		d.tableGroup(b, cols)
	}
}

// tableGroup writes the columns cols of table b as one Word table.
func (d *docxDoc) tableGroup(b block, cols []int) {
	w := &d.body
	ncols := len(cols)
	const textWidth = 11906 - 2*1134 // twentieths of a point
	colW := textWidth / ncols
	w.WriteString(`<w:tbl><w:tblPr><w:tblStyle w:val="TableGrid"/><w:tblW w:w="` + fmt.Sprint(colW*ncols) + `" w:type="dxa"/>` +
		`<w:tblBorders><w:top w:val="single" w:sz="4" w:space="0" w:color="C4C9D4"/><w:left w:val="single" w:sz="4" w:space="0" w:color="C4C9D4"/>` +
		`<w:bottom w:val="single" w:sz="4" w:space="0" w:color="C4C9D4"/><w:right w:val="single" w:sz="4" w:space="0" w:color="C4C9D4"/>` +
		`<w:insideH w:val="single" w:sz="4" w:space="0" w:color="C4C9D4"/><w:insideV w:val="single" w:sz="4" w:space="0" w:color="C4C9D4"/></w:tblBorders>` +
		`<w:tblLayout w:type="fixed"/><w:tblCellMar><w:left w:w="80" w:type="dxa"/><w:right w:w="80" w:type="dxa"/></w:tblCellMar></w:tblPr><w:tblGrid>`)
	for c := 0; c < ncols; c++ {
		fmt.Fprintf(w, `<w:gridCol w:w="%d"/>`, colW)
	}
	w.WriteString("</w:tblGrid>")
	row := func(cells [][]span, header bool) {
		w.WriteString("<w:tr>")
		if header {
			w.WriteString("<w:trPr><w:tblHeader/></w:trPr>")
		}
		for _, c := range cols {
			fmt.Fprintf(w, `<w:tc><w:tcPr><w:tcW w:w="%d" w:type="dxa"/>`, colW)
			if header {
				w.WriteString(`<w:shd w:val="clear" w:color="auto" w:fill="ECEFF5"/>`)
			}
			w.WriteString(`</w:tcPr><w:p><w:pPr><w:spacing w:before="40" w:after="40"/>`)
			if c < len(b.aligns) {
				switch b.aligns[c] {
				case "center":
					w.WriteString(`<w:jc w:val="center"/>`)
				case "right":
					w.WriteString(`<w:jc w:val="right"/>`)
				}
			}
			w.WriteString("</w:pPr>")
			if c < len(cells) {
				rPr := ""
				if header {
					rPr = "<w:b/>"
				}
				d.runs(cells[c], rPr)
			}
			w.WriteString("</w:p></w:tc>")
		}
		w.WriteString("</w:tr>")
	}
	if len(b.header) > 0 {
		row(b.header, true)
	}
	for _, r := range b.rows {
		d.check()
		row(r, false)
	}
	w.WriteString("</w:tbl>")
	// Word needs a paragraph between a table and what follows.
	w.WriteString("<w:p/>")
}

func (d *docxDoc) relsXML() string {
	var b strings.Builder
	b.WriteString(xmlHeader + `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">`)
	b.WriteString(`<Relationship Id="rIdStyles" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/>`)
	b.WriteString(`<Relationship Id="rIdNumbering" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/numbering" Target="numbering.xml"/>`)
	for i, l := range d.links {
		fmt.Fprintf(&b, `<Relationship Id="rIdLink%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink" Target="%s" TargetMode="External"/>`,
			i+1, escAttr(l))
	}
	b.WriteString(`</Relationships>`)
	return b.String()
}

func escAttr(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(esc(s))
}

func (d *docxDoc) numberingXML() string {
	var b strings.Builder
	b.WriteString(xmlHeader + `<w:numbering xmlns:w="` + nsW + `">`)
	bullets := []string{"\u2022", "\u25E6", "\u25AA"}
	b.WriteString(`<w:abstractNum w:abstractNumId="0"><w:multiLevelType w:val="hybridMultilevel"/>`)
	for l := 0; l < 9; l++ {
		fmt.Fprintf(&b, `<w:lvl w:ilvl="%d"><w:start w:val="1"/><w:numFmt w:val="bullet"/><w:lvlText w:val="%s"/><w:lvlJc w:val="left"/>`+
			`<w:pPr><w:ind w:left="%d" w:hanging="360"/></w:pPr></w:lvl>`, l, bullets[l%3], 720*(l+1))
	}
	b.WriteString(`</w:abstractNum>`)
	formats := []string{"decimal", "lowerLetter", "lowerRoman"}
	b.WriteString(`<w:abstractNum w:abstractNumId="1"><w:multiLevelType w:val="hybridMultilevel"/>`)
	for l := 0; l < 9; l++ {
		fmt.Fprintf(&b, `<w:lvl w:ilvl="%d"><w:start w:val="1"/><w:numFmt w:val="%s"/><w:lvlText w:val="%%%d."/><w:lvlJc w:val="left"/>`+
			`<w:pPr><w:ind w:left="%d" w:hanging="360"/></w:pPr></w:lvl>`, l, formats[l%3], l+1, 720*(l+1))
	}
	b.WriteString(`</w:abstractNum>`)
	b.WriteString(`<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>`)
	for i, start := range d.starts {
		fmt.Fprintf(&b, `<w:num w:numId="%d"><w:abstractNumId w:val="1"/><w:lvlOverride w:ilvl="0"><w:startOverride w:val="%d"/></w:lvlOverride></w:num>`, i+2, start)
	}
	b.WriteString(`</w:numbering>`)
	return b.String()
}

func coreXML(title string) string {
	now := time.Now().UTC().Format(time.RFC3339)
	return xmlHeader + `<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" ` +
		`xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">` +
		`<dc:title>` + esc(title) + `</dc:title><dc:creator>metaclaw</dc:creator>` +
		`<dcterms:created xsi:type="dcterms:W3CDTF">` + now + `</dcterms:created><dcterms:modified xsi:type="dcterms:W3CDTF">` + now + `</dcterms:modified>` +
		`</cp:coreProperties>`
}

const contentTypesXML = xmlHeader + `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
	`<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>` +
	`<Default Extension="xml" ContentType="application/xml"/>` +
	`<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>` +
	`<Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>` +
	`<Override PartName="/word/numbering.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.numbering+xml"/>` +
	`<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>` +
	`<Override PartName="/docProps/app.xml" ContentType="application/vnd.openxmlformats-officedocument.extended-properties+xml"/>` +
	`</Types>`

const rootRelsXML = xmlHeader + `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
	`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>` +
	`<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/>` +
	`<Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/extended-properties" Target="docProps/app.xml"/>` +
	`</Relationships>`

const appXML = xmlHeader + `<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-properties"><Application>metaclaw</Application></Properties>`

func headingStyle(level int, size int, color string) string {
	return fmt.Sprintf(`<w:style w:type="paragraph" w:styleId="Heading%d"><w:name w:val="heading %d"/><w:basedOn w:val="Normal"/><w:next w:val="Normal"/><w:qFormat/>`+
		`<w:pPr><w:keepNext/><w:spacing w:before="%d" w:after="120"/><w:outlineLvl w:val="%d"/></w:pPr>`+
		`<w:rPr><w:b/><w:color w:val="%s"/><w:sz w:val="%d"/><w:szCs w:val="%d"/></w:rPr></w:style>`,
		level, level, 360-30*level, level-1, color, size, size)
}

var stylesXML = xmlHeader + `<w:styles xmlns:w="` + nsW + `">` +
	`<w:docDefaults><w:rPrDefault><w:rPr><w:rFonts w:ascii="Calibri" w:hAnsi="Calibri" w:eastAsia="Calibri" w:cs="Calibri"/><w:sz w:val="22"/><w:szCs w:val="22"/><w:lang w:val="en-US"/></w:rPr></w:rPrDefault>` +
	`<w:pPrDefault><w:pPr><w:spacing w:after="120" w:line="276" w:lineRule="auto"/></w:pPr></w:pPrDefault></w:docDefaults>` +
	`<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/><w:qFormat/></w:style>` +
	headingStyle(1, 36, "1C2030") + headingStyle(2, 30, "1C2030") + headingStyle(3, 26, "2A3145") +
	headingStyle(4, 24, "2A3145") + headingStyle(5, 22, "2A3145") + headingStyle(6, 22, "4A5265") +
	`<w:style w:type="paragraph" w:styleId="ListParagraph"><w:name w:val="List Paragraph"/><w:basedOn w:val="Normal"/><w:qFormat/><w:pPr><w:spacing w:after="60"/><w:contextualSpacing/></w:pPr></w:style>` +
	`<w:style w:type="paragraph" w:styleId="Quote"><w:name w:val="Quote"/><w:basedOn w:val="Normal"/><w:qFormat/>` +
	`<w:pPr><w:pBdr><w:left w:val="single" w:sz="18" w:space="8" w:color="C4C9D4"/></w:pBdr><w:ind w:left="360"/></w:pPr><w:rPr><w:i/><w:color w:val="5A6070"/></w:rPr></w:style>` +
	`<w:style w:type="paragraph" w:styleId="Code"><w:name w:val="Code"/><w:basedOn w:val="Normal"/>` +
	`<w:pPr><w:shd w:val="clear" w:color="auto" w:fill="F4F5F8"/><w:spacing w:after="120" w:line="240" w:lineRule="auto"/></w:pPr>` +
	`<w:rPr><w:rFonts w:ascii="Courier New" w:hAnsi="Courier New" w:cs="Courier New"/><w:sz w:val="19"/><w:szCs w:val="19"/></w:rPr></w:style>` +
	`<w:style w:type="character" w:styleId="CodeChar"><w:name w:val="Code Char"/><w:rPr><w:rFonts w:ascii="Courier New" w:hAnsi="Courier New" w:cs="Courier New"/><w:color w:val="B03038"/><w:sz w:val="20"/></w:rPr></w:style>` +
	`<w:style w:type="character" w:styleId="Hyperlink"><w:name w:val="Hyperlink"/><w:rPr><w:color w:val="2654D6"/><w:u w:val="single"/></w:rPr></w:style>` +
	`<w:style w:type="table" w:styleId="TableGrid"><w:name w:val="Table Grid"/><w:tblPr><w:tblBorders>` +
	`<w:top w:val="single" w:sz="4" w:space="0" w:color="auto"/><w:left w:val="single" w:sz="4" w:space="0" w:color="auto"/>` +
	`<w:bottom w:val="single" w:sz="4" w:space="0" w:color="auto"/><w:right w:val="single" w:sz="4" w:space="0" w:color="auto"/>` +
	`<w:insideH w:val="single" w:sz="4" w:space="0" w:color="auto"/><w:insideV w:val="single" w:sz="4" w:space="0" w:color="auto"/>` +
	`</w:tblBorders></w:tblPr></w:style>` +
	`</w:styles>`
