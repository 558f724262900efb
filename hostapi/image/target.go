package image

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// target is where an operation's result goes (SPEC 3): a new derived file,
// named by output or after the source, or the source itself (inPlace).
type target struct {
	output    string
	overwrite bool
	inPlace   bool
}

func targetOf(c *hostapi.Call) target {
	return target{output: c.Args.String("output"), overwrite: c.Args.Bool("overwrite"), inPlace: c.Args.Bool("in_place")}
}

// transform computes an operation's image from src, written as enc says
// (the format and the metadata kept are decided by produce).
type transform func(ctx context.Context, src *source, enc encoding) (*encoded, error)

// nameFunc is an operation's default output name for src's result.
type nameFunc func(src *source, out *encoded) string

// produce runs fn on the image ref and stores the result where t says.
// Nothing is written unless fn succeeds, so a failed operation leaves every
// file as it was. fixedFormat, when set, is the output format the caller
// chose (convert); otherwise the output name's extension, or the source's
// format, decides.
func produce(ctx context.Context, c *hostapi.Call, ref string, t target, fixedFormat string, name nameFunc, fn transform) (res *FileResult, err error) {
	defer recoverPanic(&err)
	if t.inPlace {
		if t.output != "" {
			return nil, apierr.New(apierr.ValidationFailed, "pass either in_place or output, not both: in_place changes %q itself", ref)
		}
		return produceInPlace(ctx, c, ref, fn)
	}
	outFormat := fixedFormat
	if t.output != "" {
		clean, err := store.CleanName(t.output)
		if err != nil {
			return nil, err
		}
		t.output = clean
		named := extFormat(path.Ext(clean))
		switch {
		case fixedFormat == "" && named == "":
			return nil, apierr.New(apierr.ValidationFailed, "output %q must end in .png, .jpg, .jpeg or .webp, which picks the format written", clean)
		case fixedFormat != "" && named != fixedFormat:
			return nil, apierr.New(apierr.ValidationFailed, "output %q must end in %s to hold a %s image", clean, canonicalExt(fixedFormat), strings.ToUpper(fixedFormat))
		}
		outFormat = named
		if !t.overwrite {
			if _, err := c.WS.Resolve(ctx, clean); err == nil {
				return nil, apierr.New(apierr.AlreadyExists, "file %q already exists; pass overwrite: true to replace it, or choose another output name", clean)
			}
		}
	}
	release, err := libvips.acquire(ctx)
	if err != nil {
		return nil, err
	}
	src, err := readSource(ctx, c, ref)
	if err != nil {
		release()
		return nil, err
	}
	defer src.close() // fn has closed every image made from it
	if outFormat == "" {
		outFormat = src.format
		if !writable(outFormat) {
			outFormat = formatPNG
		}
	}
	out, err := fn(ctx, src, encoding{format: outFormat, meta: metaProfile})
	release()
	if err != nil {
		return nil, err
	}
	outName := t.output
	if outName == "" {
		outName = name(src, out)
	}
	f, err := c.WS.Create(ctx, store.CreateOptions{Name: outName, MimeType: mimeType(out.format), Source: store.SourceDerived, Overwrite: t.overwrite},
		bytes.NewReader(out.data))
	if err != nil {
		if apierr.Is(err, apierr.AlreadyExists) && t.output == "" {
			return nil, apierr.New(apierr.AlreadyExists, "file %q already exists; pass overwrite: true to replace it, or output to choose another name", outName)
		}
		return nil, err
	}
	return &FileResult{ID: f.ID, Name: f.Name, Width: out.width, Height: out.height, Size: f.Size}, nil
}

// produceInPlace rewrites ref with fn's result under the file's write lock,
// so that no concurrent edit is lost; the store keeps the previous body as
// the backup files.revert restores.
func produceInPlace(ctx context.Context, c *hostapi.Call, ref string, fn transform) (*FileResult, error) {
	release, err := libvips.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var out *encoded
	f, err := c.WS.Modify(ctx, ref, func(cur *store.File, curPath string, w io.Writer) error {
		src, err := loadSource(cur, curPath)
		if err != nil {
			return err
		}
		defer src.close() // after fn, which closes every image made from it
		if !writable(src.format) {
			return apierr.New(apierr.UnsupportedFormat,
				"%q is a %s image, which is read but not written here, so it cannot be changed in place; write a new file instead, e.g. output: %q",
				cur.Name, strings.ToUpper(src.format), derivedName(cur.Name, "", formatPNG))
		}
		if out, err = fn(ctx, src, encoding{format: src.format, meta: metaAll}); err != nil {
			return err
		}
		_, err = w.Write(out.data)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &FileResult{ID: f.ID, Name: f.Name, Width: out.width, Height: out.height, Size: f.Size}, nil
}

// recoverPanic turns a panic inside the image libraries' Go code into a
// coded error for this call; the host carries on.
func recoverPanic(err *error) {
	if p := recover(); p != nil {
		*err = apierr.New(apierr.FileReadFailed, "the image could not be processed (%v); the file may be malformed", fmt.Sprint(p))
	}
}
