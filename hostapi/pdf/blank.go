package pdf

import (
	"bytes"
	"fmt"
	"io"
)

// writeBlank writes the document files.create makes for a ".pdf" name: one
// empty A4 portrait page (595.28 × 841.89 points). It is written byte by
// byte rather than through pdfcpu so that it costs nothing at start-up, is
// the same every time (no dates, no ids), and every reader opens it: a
// classic cross-reference table, PDF 1.7, and a binary comment line so
// that transfer tools treat it as binary.
func writeBlank(w io.Writer) error {
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595.28 841.89] /Resources << >> /Contents 4 0 R >>",
		"<< /Length 0 >>\nstream\n\nendstream",
		"<< /Producer (metaclaw) >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R /Info 5 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	_, err := w.Write(b.Bytes())
	return err
}
