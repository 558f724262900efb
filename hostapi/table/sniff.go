package table

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"

	"github.com/metaclaw/metaclaw/hostapi/textenc"
)

// sniffBytes is how much of a file the delimiter sniffer looks at.
const sniffBytes = textenc.SniffBytes

// readHead returns up to n bytes from the start of path.
func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	m, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:m], nil
}

// transcode writes the UTF-8 form of src, written in enc, into dst.
func transcode(ctx context.Context, src, dst string, enc textenc.Encoding) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, enc.NewReader(ctxReader{ctx, in})); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ctxReader stops reading when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// sniffDelimiter picks the field delimiter of a text table from its first
// lines: among comma, semicolon, tab and pipe, the one that appears in the
// header and splits the most lines into the header's number of fields.
// Quoted fields (which may hold delimiters and line breaks) are skipped.
func sniffDelimiter(sample []byte, truncated bool) (byte, bool) {
	records := splitRecords(sample, 200)
	if truncated && len(records) > 1 {
		records = records[:len(records)-1]
	}
	var nonEmpty [][]byte
	for _, r := range records {
		if len(bytes.TrimSpace(r)) > 0 {
			nonEmpty = append(nonEmpty, r)
		}
	}
	if len(nonEmpty) == 0 {
		return 0, false
	}
	best, bestScore := byte(0), -1.0
	for _, d := range []byte{',', ';', '\t', '|'} {
		h := countOutsideQuotes(nonEmpty[0], d)
		if h == 0 {
			continue
		}
		same := 0
		for _, r := range nonEmpty {
			if countOutsideQuotes(r, d) == h {
				same++
			}
		}
		score := float64(same)/float64(len(nonEmpty))*1000 + float64(min(h, 999))
		if score > bestScore {
			best, bestScore = d, score
		}
	}
	return best, best != 0
}

// splitRecords splits text at line breaks that are not inside quotes.
func splitRecords(b []byte, max int) [][]byte {
	var out [][]byte
	inQ := false
	start := 0
	for i := 0; i < len(b) && len(out) < max; i++ {
		switch b[i] {
		case '"':
			inQ = !inQ
		case '\n':
			if !inQ {
				out = append(out, bytes.TrimRight(b[start:i], "\r"))
				start = i + 1
			}
		}
	}
	if start < len(b) && len(out) < max {
		out = append(out, b[start:])
	}
	return out
}

func countOutsideQuotes(line []byte, d byte) int {
	n := 0
	inQ := false
	for _, c := range line {
		switch {
		case c == '"':
			inQ = !inQ
		case c == d && !inQ:
			n++
		}
	}
	return n
}
