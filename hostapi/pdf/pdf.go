// Package pdf implements the files.pdf.* operations and their pdf_* meta-tools
// (SPEC 3): page info, text extraction, blank pages, stamping text and images,
// AcroForm fields, merge and split.
//
// Two libraries do the work. pdfcpu reads and writes the PDF object model for
// every edit; pdfium (in WebAssembly, on wazero) extracts text the way a
// reader sees it, because pdfcpu only exposes content-stream operators. Form
// appearances and stamped text are written by this package directly into the
// object model, with the 14 standard fonts for Latin text and an embedded
// TrueType subset (found on the system at run time) for anything else.
package pdf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// area is the per-host state of the PDF operations: the lazily started
// pdfium runtime and the parsed Unicode fonts.
type area struct {
	text  *textEngine
	fonts *fontCache
}

// Options configure the PDF operations of a host.
type Options struct {
	// CacheDir holds pdfium's compiled machine code, shared by every data
	// directory and process that points at it. Empty: DefaultCacheDir(),
	// and the data directory's cache when that has no usable directory.
	CacheDir string
}

var disableConfigOnce sync.Once

// areas finds a host's PDF area for Warm.
var areas sync.Map // *hostapi.Host → *area

// Register adds the PDF operations to h with the default Options.
func Register(h *hostapi.Host) error { return RegisterWith(Options{})(h) }

// RegisterWith returns a Register that uses o. Nothing heavy happens when
// it runs: pdfium starts on first use, or when Warm asks for it.
func RegisterWith(o Options) func(h *hostapi.Host) error {
	return func(h *hostapi.Host) error {
		// pdfcpu would otherwise create ~/.config/pdfcpu and install fonts
		// there on first use; everything it needs is passed explicitly.
		disableConfigOnce.Do(api.DisableConfigDir)
		dirs := []string{o.CacheDir}
		if o.CacheDir == "" {
			dirs = []string{DefaultCacheDir(), filepath.Join(h.Store.CacheDir(), "wazero")}
		}
		a := &area{
			text:  newTextEngine(h.Log, dirs...),
			fonts: newFontCache(),
		}
		areas.Store(h, a)
		h.OnClose(func() error {
			areas.Delete(h)
			return a.text.close()
		})
		h.AddBlank(".pdf", writeBlank)
		h.Registry.Add(a.ops()...)
		return nil
	}
}

// Warm starts h's PDF engine and returns when it is ready to serve, or
// when ctx ends. A server calls it in the background when it starts
// (go pdf.Warm(ctx, h)), so that the first PDF request does not wait for
// pdfium to load — or, on a machine whose cache is cold, to compile.
// Requests that arrive earlier wait for the same start; none starts
// another. Commands that never touch a PDF never pay for it.
func Warm(ctx context.Context, h *hostapi.Host) error {
	v, ok := areas.Load(h)
	if !ok {
		return apierr.New(apierr.Internal, "the PDF operations are not registered on this host")
	}
	return v.(*area).text.warm(ctx)
}

// pdfHeader reports whether b starts like a PDF. Readers accept the header
// anywhere in the first KiB (some producers prepend junk).
func pdfHeader(b []byte) bool {
	head := b
	if len(head) > 1024 {
		head = head[:1024]
	}
	return bytes.Contains(head, []byte("%PDF-"))
}

// readPDF reads a workspace file that must be a PDF. Bodies are at most the
// store's per-file limit (50 MB by default), so holding one in memory is
// fine, and it lets a timed-out library call finish in the background on a
// private copy without touching the store.
func readPDF(ctx context.Context, c *hostapi.Call, ref string) (*store.File, []byte, error) {
	meta, data, err := readFile(ctx, c, ref)
	if err != nil {
		return nil, nil, err
	}
	if !pdfHeader(data) {
		return nil, nil, notPDF(meta)
	}
	return meta, data, nil
}

// readFile reads a workspace file's whole body.
func readFile(ctx context.Context, c *hostapi.Call, ref string) (*store.File, []byte, error) {
	var (
		meta *store.File
		data []byte
	)
	err := c.WS.View(ctx, ref, func(f *store.File, path string) error {
		meta = f
		b, err := readBody(f, path)
		data = b
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return meta, data, nil
}

// readBody reads the body of workspace file f, stored at path.
func readBody(f *store.File, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot read %q: %v", f.Name, err)
	}
	return b, nil
}

func notPDF(f *store.File) error {
	return apierr.New(apierr.UnsupportedFormat, "%q is not a PDF (detected %s); files.pdf.* works on PDF files only", f.Name, f.MimeType)
}

// editPDF rewrites the PDF the call's id names in place through the store
// (temp file, fsync, rename, one-level backup): the body is parsed with
// pdfcpu in mode cmd, edit changes the document, and it is written back,
// all under guard. Any error leaves the file unchanged.
func editPDF(ctx context.Context, c *hostapi.Call, cmd model.CommandMode, edit func(name string, doc *model.Context) error) error {
	_, err := c.WS.Modify(ctx, c.Args.String("id"), func(cur *store.File, curPath string, out io.Writer) error {
		data, err := readBody(cur, curPath)
		if err != nil {
			return err
		}
		if !pdfHeader(data) {
			return notPDF(cur)
		}
		body, err := guard(ctx, cur.Name, func() ([]byte, error) {
			doc, err := readDoc(cur.Name, data, cmd)
			if err != nil {
				return nil, err
			}
			if err := edit(cur.Name, doc); err != nil {
				return nil, err
			}
			return writeDoc(cur.Name, doc)
		})
		if err != nil {
			return err
		}
		_, err = out.Write(body)
		return err
	})
	return err
}

// guard runs fn, a call into a PDF library, so that a panic on a hostile
// file becomes a coded error and a deadline returns TIMEOUT at once. On a
// timeout fn keeps running on its private copy of the input until it
// finishes; its result is dropped.
func guard[T any](ctx context.Context, name string, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r.err = apierr.New(apierr.FileReadFailed,
					"%q could not be processed: the PDF library failed on its structure (%v); the file may be damaged — re-save it with another PDF program and try again", name, p)
			}
			done <- r
		}()
		r.v, r.err = fn()
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, apierr.Wrap(apierr.Timeout, ctx.Err(), "processing %q ran out of time; try fewer pages per call or raise the time limit", name)
	}
}

// pageError is the error for a page number outside 1..count.
func pageError(name string, page, count int) error {
	return apierr.New(apierr.ValidationFailed, "page %d is out of range: %q has %d page%s (pages are numbered from 1)", page, name, count, plural(count))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// libError turns a pdfcpu read error into a coded error that says what to do.
func libError(name string, err error) error {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return ae
	}
	msg := err.Error()
	switch {
	case errors.Is(err, pdfcpu.ErrWrongPassword), errors.Is(err, pdfcpu.ErrOwnerPasswordRequired), errors.Is(err, pdfcpu.ErrPermissionDenied):
		return apierr.Wrap(apierr.UnsupportedFormat, err, "%q is encrypted with a password; metaclaw cannot open password-protected PDFs — upload a copy saved without the password", name)
	case errors.Is(err, pdfcpu.ErrUnsupportedEncryptionFeature):
		return apierr.Wrap(apierr.UnsupportedFormat, err, "%q uses an encryption method the PDF library does not support; upload a copy saved without encryption", name)
	case errors.Is(err, pdfcpu.ErrPostScriptInput):
		return apierr.Wrap(apierr.UnsupportedFormat, err, "%q is PostScript, not PDF; convert it to PDF first", name)
	}
	return apierr.Wrap(apierr.FileReadFailed, err, "%q could not be read as a PDF (%s); the file may be truncated or damaged — re-export it from the program that made it", name, shorten(msg, 200))
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// writeFailed reports a failure to serialize an edited document.
func writeFailed(name string, err error) error {
	return apierr.Wrap(apierr.FileWriteFailed, err, "could not write the edited %q: %v", name, err)
}
