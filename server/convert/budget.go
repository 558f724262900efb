package convert

import (
	"context"
	"errors"
	"fmt"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Defaults of the budgets in Options.
const (
	// DefaultMaxInput is the largest markdown source converted.
	DefaultMaxInput = 8 << 20
	// DefaultMaxPages is the most pages a PDF may get.
	DefaultMaxPages = 2000
	// DefaultMaxBytes is the largest document written.
	DefaultMaxBytes = 64 << 20
	// MaxNesting is how deeply block quotes and lists may nest. The parser's
	// work grows with the square of the nesting depth of a line (a 200 KB
	// line of ">" takes goldmark 20 s), so deeper sources are refused before
	// they are parsed; no real document comes near it.
	MaxNesting = 24
)

// Options tune a conversion.
type Options struct {
	// Title is the document title (PDF /Title, DOCX core title).
	Title string
	// MaxPages caps a PDF's page count (default DefaultMaxPages).
	MaxPages int
	// MaxBytes caps the size of the document built (default
	// DefaultMaxBytes); a DOCX is measured before compression.
	MaxBytes int64

	// coreFonts lays a PDF out in the standard fonts (Windows-1252 only)
	// even when Unicode fonts are installed: the fuzz targets use it,
	// since parsing six TrueType fonts per call would dominate them.
	coreFonts bool
}

func (o Options) withDefaults() Options {
	if o.MaxPages <= 0 {
		o.MaxPages = DefaultMaxPages
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return o
}

// budget stops a conversion that runs out of time or space: its checks are
// called between units of layout work (a block, a table row, a chunk of a
// paragraph), and a failed check unwinds the layout with a panic that the
// conversion's entry point turns back into the coded error. The layout code
// stays free of error plumbing, and nothing keeps running after the caller
// has gone.
type budget struct {
	ctx context.Context
	opt Options
}

// stop is the panic value that carries a budget's error out of the layout.
type stop struct{ err error }

func (b *budget) fail(err error) { panic(stop{err}) }

// tick checks the deadline and the caller.
func (b *budget) tick() {
	if err := b.ctx.Err(); err != nil {
		b.fail(ctxError(err))
	}
}

// bytes checks a document size against MaxBytes.
func (b *budget) bytes(n int64) {
	if n > b.opt.MaxBytes {
		b.fail(apierr.New(apierr.TooLarge, "the converted document would be larger than %d MB; convert a shorter markdown file", b.opt.MaxBytes>>20))
	}
}

func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return apierr.Wrap(apierr.Timeout, err, "the conversion did not finish within its time limit; convert a shorter markdown file")
	}
	return apierr.Wrap(apierr.Timeout, err, "the conversion was cancelled (the caller went away)")
}

// recovered turns what a layout panicked with into an error: a budget's
// stop as it is, anything else (a library's panic on strange input) as
// INTERNAL.
func recovered(p any, what string) error {
	if s, ok := p.(stop); ok {
		return s.err
	}
	return apierr.New(apierr.Internal, "%s layout failed unexpectedly (%v); the markdown may use a construct the converter cannot lay out", what, fmt.Sprint(p))
}
