package pdf

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Fuzz targets for the PDF code this package owns: form filling (field
// tree walk, value planning, appearance streams) and stamping (page
// frames, resources, content streams, embedded fonts and images). Run one
// with e.g.
//
//	go test ./hostapi/pdf -run '^$' -fuzz '^FuzzFillForm$' -fuzztime 60s
//
// Plain `go test` runs the seeds below and the crashers kept in
// testdata/fuzz as regression tests.
//
// pdfcpu parses and writes the documents. It panics on some hostile
// inputs, which guard turns into coded errors in production; here a panic
// fails the target only when it starts in this package's own code.

// fuzzSeedPDFs are real documents from three producers and the edge
// cases the tests build: forms, rotated pages, many pages, a blank page.
func fuzzSeedPDFs(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, p := range []string{
		filepath.Join("..", "..", "testdata", "examples", "report.pdf"),
		filepath.Join("..", "..", "testdata", "examples", "form.pdf"),
		filepath.Join("testdata", "libreoffice-report.pdf"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	var blank bytes.Buffer
	if err := writeBlank(&blank); err != nil {
		f.Fatal(err)
	}
	form := formPDF(f)
	return append(seeds,
		blank.Bytes(),
		form,
		withButtonAndSignature(f, form),
		rotated(f, textPDF(f, [][]string{{"turned"}}), 90),
		manyPagesPDF(3),
	)
}

// fuzzFonts is one font cache for every fuzz input, as a host has.
var fuzzFonts = sync.OnceValue(newFontCache)

// ourPanic runs fn and reports a panic that started in this package's code
// as a failure; a panic inside pdfcpu becomes errLibraryPanic.
func ourPanic(t *testing.T, fn func() error) (err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		stack := string(debug.Stack())
		if panickedInPackage(stack) {
			t.Fatalf("panic in hostapi/pdf: %v\n%s", p, stack)
		}
		err = errLibraryPanic
	}()
	return fn()
}

var errLibraryPanic = errors.New("the PDF library panicked")

// fuzzInputLimit is how long one input may take. Go's fuzzer has no
// per-input timeout, so a slow input would stall it silently; the
// watchdog crashes the worker instead, which saves the input as a crasher.
const fuzzInputLimit = 10 * time.Second

// watchdog crashes the process with every goroutine's stack when the
// input being fuzzed runs longer than fuzzInputLimit; call the returned
// function when the input is done.
func watchdog() (stop func()) {
	timer := time.AfterFunc(fuzzInputLimit, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		panic(fmt.Sprintf("one input ran for more than %v:\n%s", fuzzInputLimit, buf))
	})
	return func() { timer.Stop() }
}

// panickedInPackage reports whether the innermost frame below the panic
// call in stack is this package's code.
func panickedInPackage(stack string) bool {
	lines := strings.Split(stack, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "panic(") {
			continue
		}
		for _, next := range lines[i+1:] {
			if strings.HasPrefix(next, "\t") || strings.HasPrefix(next, "runtime.") {
				continue // file:line of the panic call, or runtime frames
			}
			return strings.HasPrefix(next, "github.com/metaclaw/metaclaw/hostapi/pdf.")
		}
	}
	return false
}

// parseFuzzDoc parses data as pdfcpu does for an edit, or reports that it
// is no PDF worth editing.
func parseFuzzDoc(t *testing.T, data []byte, cmd model.CommandMode) *model.Context {
	var doc *model.Context
	err := ourPanic(t, func() error {
		var err error
		doc, err = readDoc("f.pdf", data, cmd)
		return err
	})
	if err != nil {
		return nil
	}
	return doc
}

// coded fails t unless err is nil or one of our coded errors other than
// INTERNAL.
func coded(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || errors.Is(err, errLibraryPanic) || errors.Is(err, errNothingToFill) {
		return
	}
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Code == apierr.Internal || ae.Message == "" {
		t.Fatalf("%s: not a coded error: %T %v", what, err, err)
	}
}

// rewritten writes doc and reads the result back: our edits must leave a
// document that parses again with the same page count.
func rewritten(t *testing.T, doc *model.Context, cmd model.CommandMode) *model.Context {
	t.Helper()
	pages := doc.PageCount
	var out []byte
	if err := ourPanic(t, func() error {
		var err error
		out, err = writeDoc("f.pdf", doc)
		return err
	}); err != nil {
		return nil // pdfcpu could not write what it read; guarded in production
	}
	var again *model.Context
	if err := ourPanic(t, func() error {
		var err error
		again, err = readDoc("f.pdf", out, cmd)
		return err
	}); err != nil {
		t.Fatalf("the edited document does not parse again: %v", err)
	}
	if again.PageCount != pages {
		t.Fatalf("the edit changed the page count from %d to %d", pages, again.PageCount)
	}
	return again
}

// FuzzFillForm fills one field of an arbitrary document with an arbitrary
// value. Properties: no panic in our code; a failure is a coded error; a
// filled document parses again, and a text field reads back the value.
func FuzzFillForm(f *testing.F) {
	for _, pdf := range fuzzSeedPDFs(f) {
		for _, c := range []struct {
			field, value string
			kind         uint8
		}{
			{"name", "Jane Doe", 0}, {"city", "Zürich (CH) \\ 100%", 0}, {"notes", "line one\nline two", 0},
			{"name", "Tiếng Việt – Ελληνικά", 0}, {"agree", "", 1}, {"agree", "", 2}, {"gender", "male", 0},
			{"color", "green", 0}, {"fruit", "plum", 3}, {"fruit", "", 4}, {"submit", "x", 0}, {"signature", "", 1},
		} {
			f.Add(pdf, c.field, c.value, c.kind)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, field, value string, kind uint8) {
		defer watchdog()()
		doc := parseFuzzDoc(t, data, model.FILLFORMFIELDS)
		if doc == nil {
			return
		}
		var v any
		switch kind % 5 {
		case 0:
			v = value
		case 1:
			v = true
		case 2:
			v = false
		case 3:
			v = []any{value}
		case 4:
			v = nil
		}
		a := &area{fonts: fuzzFonts()}
		var filled []string
		err := ourPanic(t, func() error {
			var err error
			filled, _, err = a.fill(doc.XRefTable, "f.pdf", map[string]any{field: v})
			return err
		})
		coded(t, "fill", err)
		if err != nil || len(filled) == 0 {
			return
		}
		again := rewritten(t, doc, model.LISTFORMFIELDS)
		if again == nil {
			return
		}
		s, isString := v.(string)
		if !isString || !utf8.ValidString(s) {
			return
		}
		for _, fl := range formFields(again.XRefTable) {
			if fl.name != field || fl.kind() != "text" {
				continue
			}
			if got := describeField(again.XRefTable, fl).Value; got != s {
				t.Fatalf("text field %q reads back %q, want %q", field, got, s)
			}
			return
		}
	})
}

// FuzzAddText stamps arbitrary text at an arbitrary position of an
// arbitrary page. Properties: no panic in our code; a failure is a coded
// error; the stamped document parses again with the same page count.
func FuzzAddText(f *testing.F) {
	for _, pdf := range fuzzSeedPDFs(f) {
		f.Add(pdf, 1, 72.0, 72.0, "APPROVED", 12.0, "Helvetica")
		f.Add(pdf, 1, 0.0, 0.0, "Tiếng Việt\n(Ελληνικά) \\ ✓", 24.0, "Times-Bold")
		f.Add(pdf, 2, 500.0, 800.0, "tab\there", 0.5, "Courier")
		f.Add(pdf, 1, 10.0, 10.0, "abc", 999.0, "ZapfDingbats")
	}
	f.Fuzz(func(t *testing.T, data []byte, page int, x, y float64, text string, size float64, font string) {
		defer watchdog()()
		// The schema admits pages ≥ 1, x, y ≥ 0 and sizes in (0, 1000].
		if page < 1 || !(x >= 0) || !(y >= 0) || math.IsInf(x, 0) || math.IsInf(y, 0) || !(size > 0 && size <= 1000) || len(text) > 100000 {
			return
		}
		doc := parseFuzzDoc(t, data, model.ADDWATERMARKS)
		if doc == nil {
			return
		}
		lines := textLines(text)
		pf, err := fuzzFonts().chooseFont(font, lines...)
		coded(t, "chooseFont", err)
		if err != nil {
			return
		}
		err = ourPanic(t, func() error {
			return stampDoc("f.pdf", doc, page, x, y, textStamp(pf, lines, size, "0 g", x, y))
		})
		coded(t, "stamp text", err)
		if err == nil {
			rewritten(t, doc, model.ADDWATERMARKS)
		}
	})
}

// FuzzAddImage stamps an arbitrary image on a page of a seed document.
// The header check must refuse anything above the pixel cap before a
// decoder sees it; what passes it must embed or fail with a coded error.
func FuzzAddImage(f *testing.F) {
	pdfs := fuzzSeedPDFs(f)
	imgs := [][]byte{pngBytes(f, 16, 9), jpegBytes(f, 20, 12), bombPNG(100000, 100000), bombPNG(0, 5)}
	if b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", "logo.png")); err == nil {
		imgs = append(imgs, b)
	}
	if b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", "photo.jpg")); err == nil {
		imgs = append(imgs, b)
	}
	for i, img := range imgs {
		f.Add(pdfs[i%len(pdfs)], img, 40.0, 40.0, 120.0, 0.0)
	}
	const maxPixels = 4 << 20 // small, so that every input decodes fast
	f.Fuzz(func(t *testing.T, data, img []byte, x, y, w, h float64) {
		defer watchdog()()
		if !(x >= 0) || !(y >= 0) || math.IsInf(x, 0) || math.IsInf(y, 0) || !(w >= 0 && w <= maxPageSide) || !(h >= 0 && h <= maxPageSide) {
			return
		}
		cfg, err := imageHeader("i.png", "image/png", img, maxPixels)
		coded(t, "image header", err)
		if err != nil {
			return
		}
		if int64(cfg.Width)*int64(cfg.Height) > maxPixels || cfg.Width <= 0 || cfg.Height <= 0 {
			t.Fatalf("header check let a %d × %d image through", cfg.Width, cfg.Height)
		}
		doc := parseFuzzDoc(t, data, model.ADDWATERMARKS)
		if doc == nil {
			return
		}
		if w == 0 {
			w = float64(cfg.Width)
		}
		if h == 0 {
			h = w * float64(cfg.Height) / float64(cfg.Width)
		}
		err = ourPanic(t, func() error {
			return stampDoc("f.pdf", doc, 1, x, y, imageStamp("i.png", img, x, y, w, h))
		})
		coded(t, "stamp image", err)
		if err == nil {
			rewritten(t, doc, model.ADDWATERMARKS)
		}
	})
}

// bombPNG is a PNG signature and header declaring w × h pixels, with no
// pixel data: a decompression bomb's calling card.
func bombPNG(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := []byte{byte(w >> 24), byte(w >> 16), byte(w >> 8), byte(w), byte(h >> 24), byte(h >> 16), byte(h >> 8), byte(h), 8, 2, 0, 0, 0}
	writeChunk(&b, "IHDR", ihdr)
	writeChunk(&b, "IEND", nil)
	return b.Bytes()
}

func writeChunk(b *bytes.Buffer, typ string, data []byte) {
	n := len(data)
	b.Write([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	start := b.Len()
	b.WriteString(typ)
	b.Write(data)
	crc := crc32.ChecksumIEEE(b.Bytes()[start:])
	b.Write([]byte{byte(crc >> 24), byte(crc >> 16), byte(crc >> 8), byte(crc)})
}

func TestPanickedInPackage(t *testing.T) {
	ours := "goroutine 1 [running]:\nruntime/debug.Stack()\n\t/x/stack.go:26\npanic({0x1, 0x2})\n\t/go/panic.go:783\ngithub.com/metaclaw/metaclaw/hostapi/pdf.formFields(...)\n\t/w/forms.go:10\n"
	theirs := "goroutine 1 [running]:\npanic({0x1, 0x2})\n\t/go/panic.go:783\nruntime.panicmem(...)\n\t/go/panic.go:262\ngithub.com/pdfcpu/pdfcpu/pkg/pdfcpu.x()\n\t/p/x.go:1\ngithub.com/metaclaw/metaclaw/hostapi/pdf.readDoc()\n"
	if !panickedInPackage(ours) || panickedInPackage(theirs) {
		t.Fatal("panickedInPackage misreads a stack")
	}
}
