package convert

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const sample = "# Quarterly report\n\n" +
	"Revenue grew **strongly** in *Q3*, see `totals.csv` and [the site](https://example.com/q3).\n\n" +
	"## Highlights\n\n" +
	"- First bullet\n- Second bullet with ~~old~~ text\n  - Nested item\n\n" +
	"1. Step one\n2. Step two\n\n" +
	"> A quoted remark\n\n" +
	"```go\nfunc main() {\n\tprintln(\"hello code\")\n}\n```\n\n" +
	"| Region | Sales | Growth |\n|:-------|------:|:------:|\n| North | 1200 | 5% |\n| South | 980 | 12% |\n\n" +
	"---\n\nCafé déjà vu – “quotes”.\n"

func TestParse(t *testing.T) {
	bs, err := parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	kinds := []blockKind{}
	for _, b := range bs {
		kinds = append(kinds, b.kind)
	}
	want := []blockKind{bHeading, bParagraph, bHeading, bList, bList, bQuote, bCode, bTable, bRule, bParagraph}
	if len(kinds) != len(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("block %d: %v, want %v", i, kinds[i], want[i])
		}
	}
	p := bs[1].spans
	var bold, italic, code, link bool
	for _, s := range p {
		bold = bold || (s.bold && s.text == "strongly")
		italic = italic || (s.italic && s.text == "Q3")
		code = code || (s.code && s.text == "totals.csv")
		link = link || (s.link == "https://example.com/q3" && s.text == "the site")
	}
	if !bold || !italic || !code || !link {
		t.Fatalf("inline styles lost: %+v", p)
	}
	if !bs[4].ordered || len(bs[4].items) != 2 || bs[3].ordered {
		t.Fatalf("lists: %+v %+v", bs[3], bs[4])
	}
	if tb := bs[7]; len(tb.header) != 3 || len(tb.rows) != 2 || tb.aligns[1] != "right" || tb.aligns[2] != "center" {
		t.Fatalf("table: %+v", tb)
	}
	if !strings.Contains(bs[6].code, "println(\"hello code\")") || bs[6].lang != "go" {
		t.Fatalf("code: %q", bs[6].code)
	}
}

func pdftotext(t *testing.T, pdf []byte) string {
	t.Helper()
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext (poppler-utils) is not installed; skipping the independent PDF text check")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pdf")
	os.WriteFile(in, pdf, 0o644)
	out, err := exec.Command(bin, "-layout", in, "-").CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext: %v\n%s", err, out)
	}
	return string(out)
}

func TestMarkdownToPDF(t *testing.T) {
	pdf, err := MarkdownToPDF(context.Background(), []byte(sample), Options{Title: "Quarterly report"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		t.Fatalf("not a PDF: %q", pdf[:min(len(pdf), 16)])
	}
	text := pdftotext(t, pdf)
	for _, want := range []string{"Quarterly report", "Revenue grew strongly in Q3", "totals.csv", "the site", "Highlights",
		"First bullet", "Nested item", "1.", "Step two", "A quoted remark", `println("hello code")`, "Region", "Sales", "North", "1200", "12%"} {
		if !strings.Contains(text, want) {
			t.Errorf("extracted text lacks %q:\n%s", want, text)
		}
	}
	if unicodeFonts() != nil && !strings.Contains(text, "Café déjà vu") {
		t.Errorf("accented text lost:\n%s", text)
	}
	if bin, err := exec.LookPath("pdffonts"); err == nil {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "a.pdf"), pdf, 0o644)
		out, _ := exec.Command(bin, filepath.Join(dir, "a.pdf")).CombinedOutput()
		if !strings.Contains(string(out), "bodyB") && !strings.Contains(string(out), "Bold") {
			t.Errorf("no bold font in the PDF (headings, **strong**):\n%s", out)
		}
	}
}

func TestMarkdownToPDFLongAndHostile(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Long\n\n")
	for i := 0; i < 400; i++ {
		b.WriteString("Paragraph with a verylongwordwithoutanyspacesthatmustbebrokensomewhereinsidethetablecellorline ")
		b.WriteString("and some more text to wrap across the page width.\n\n")
	}
	b.WriteString("| a | b |\n|---|---|\n")
	for i := 0; i < 200; i++ {
		b.WriteString("| cell with a rather long text that wraps | x |\n")
	}
	b.WriteString("\x00\x01 control chars, emoji 🙂, CJK 漢字\n")
	pdf, err := MarkdownToPDF(context.Background(), []byte(b.String()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	text := pdftotext(t, pdf)
	if !strings.Contains(text, "Paragraph with a") || strings.Count(text, "cell with a rather") < 150 {
		t.Fatalf("long document text missing (%d bytes)", len(text))
	}
	// Empty input still makes a valid one-page PDF.
	if pdf, err := MarkdownToPDF(context.Background(), nil, Options{}); err != nil || !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		t.Fatalf("empty markdown: %v", err)
	}
}

func docxText(t *testing.T, docx []byte) (string, map[string][]byte) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(docx), int64(len(docx)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	parts := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		parts[f.Name] = b
		// Every part must be well-formed XML.
		dec := xml.NewDecoder(bytes.NewReader(b))
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s is not well-formed XML: %v", f.Name, err)
			}
		}
	}
	doc, ok := parts["word/document.xml"]
	if !ok {
		t.Fatal("no word/document.xml")
	}
	// Concatenate w:t texts, one paragraph per line.
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var sb strings.Builder
	inT := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch e := tok.(type) {
		case xml.StartElement:
			inT = e.Name.Local == "t"
		case xml.EndElement:
			if e.Name.Local == "p" {
				sb.WriteByte('\n')
			}
			inT = false
		case xml.CharData:
			if inT {
				sb.Write(e)
			}
		}
	}
	return sb.String(), parts
}

func TestMarkdownToDOCX(t *testing.T) {
	docx, err := MarkdownToDOCX(context.Background(), []byte(sample+"\n\x01bad \\<xml> & chars\n"), Options{Title: "Quarterly & report"})
	if err != nil {
		t.Fatal(err)
	}
	text, parts := docxText(t, docx)
	for _, want := range []string{"Quarterly report", "strongly", "totals.csv", "First bullet", "Nested item", "Step two",
		"A quoted remark", `println("hello code")`, "Region", "North", "12%", "Café déjà vu", "bad <xml> & chars"} {
		if !strings.Contains(text, want) {
			t.Errorf("document text lacks %q:\n%s", want, text)
		}
	}
	doc := string(parts["word/document.xml"])
	for _, want := range []string{`w:val="Heading1"`, `w:val="Heading2"`, "<w:b/>", "<w:i/>", "<w:numId", "<w:tbl>", `r:id="rIdLink1"`} {
		if !strings.Contains(doc, want) {
			t.Errorf("document.xml lacks %s", want)
		}
	}
	if !strings.Contains(string(parts["word/_rels/document.xml.rels"]), "https://example.com/q3") {
		t.Error("hyperlink relationship missing")
	}
	for _, p := range []string{"[Content_Types].xml", "_rels/.rels", "word/styles.xml", "word/numbering.xml", "docProps/core.xml"} {
		if _, ok := parts[p]; !ok {
			t.Errorf("part %s missing", p)
		}
	}

	// An independent reader: LibreOffice converts it to text.
	lo, err := exec.LookPath("libreoffice")
	if err != nil {
		if lo, err = exec.LookPath("soffice"); err != nil {
			t.Skip("LibreOffice is not installed; skipping the independent DOCX check")
		}
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "report.docx")
	os.WriteFile(in, docx, 0o644)
	cmd := exec.Command(lo, "--headless", "--convert-to", "txt:Text", "--outdir", dir, in)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("libreoffice: %v\n%s", err, out)
	}
	txt, err := os.ReadFile(filepath.Join(dir, "report.txt"))
	if err != nil {
		t.Fatalf("libreoffice wrote no text: %v", err)
	}
	for _, want := range []string{"Quarterly report", "Revenue grew strongly", "First bullet", "Step two", "North", "Café déjà vu"} {
		if !strings.Contains(string(txt), want) {
			t.Errorf("LibreOffice text lacks %q:\n%s", want, txt)
		}
	}
}
