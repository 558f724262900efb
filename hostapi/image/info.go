package image

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// info answers from the header alone. libvips pulls only the bytes the
// header needs from the open file (a few kilobytes of a multi-megabyte
// photo) and decodes no pixel, so info is fast and also describes images
// above the pixel cap, which the other operations refuse.
func info(ctx context.Context, c *hostapi.Call) (res any, err error) {
	defer recoverPanic(&err)
	release, err := libvips.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var out InfoResult
	err = c.WS.View(ctx, c.Args.String("id"), func(f *store.File, path string) error {
		fh, err := os.Open(path)
		if err != nil {
			return apierr.Wrap(apierr.FileReadFailed, err, "cannot read %q: %v; run `metaclaw fsck`", f.Name, err)
		}
		defer fh.Close()
		magic := make([]byte, 16)
		n, _ := io.ReadFull(fh, magic)
		format := sniffFormat(magic[:n])
		if format == "" {
			return notAnImage(f)
		}
		if _, err := fh.Seek(0, io.SeekStart); err != nil {
			return apierr.Wrap(apierr.FileReadFailed, err, "cannot read %q: %v", f.Name, err)
		}
		params := vips.NewImportParams()
		params.Access.Set(vips.AccessSequential) // lazy: nothing beyond the header is read
		img, err := vips.LoadImageFromReader(fh, params)
		if err != nil {
			return apierr.Wrap(apierr.FileReadFailed, err, "cannot read the %s image %q: %s; the file is corrupt or truncated",
				strings.ToUpper(format), f.Name, vipsMessage(err))
		}
		hd := headerOf(img)
		img.Close()
		out = InfoResult{Width: hd.width, Height: hd.height, Format: format, Channels: hd.bands,
			BitDepth: hd.bitDepth, HasAlpha: hd.hasAlpha, Size: f.Size}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
