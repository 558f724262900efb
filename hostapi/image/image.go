// Package image holds the files.image.* operations and their image_*
// meta-tools (SPEC 3): info, resize, crop, convert, composite and toBase64
// on libvips through govips. PNG, JPEG, WebP, GIF (first frame) and TIFF
// (first page) are read; PNG, JPEG and WebP are written. EXIF orientation
// is applied before any geometry, images above the host's pixel cap are
// refused from their header before anything is decoded, and libvips runs
// with its operation cache off and a bounded number of threads.
package image

import (
	"github.com/metaclaw/metaclaw/hostapi"
)

// InfoResult is info's answer.
type InfoResult struct {
	// Width and Height are as displayed, EXIF orientation applied.
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	Format   string `json:"format"`
	Channels int    `json:"channels"`
	BitDepth int    `json:"bitDepth"`
	HasAlpha bool   `json:"hasAlpha"`
	Size     int64  `json:"size"`
}

// FileResult is the answer of the operations that write an image.
type FileResult struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Size   int64  `json:"size"`
}

// Base64Result is toBase64's answer.
type Base64Result struct {
	Base64   string `json:"base64"`
	MimeType string `json:"mimeType"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
}

// Register adds the image operations to h. libvips itself starts on the
// first image call and stops when the last Host closes.
func Register(h *hostapi.Host) error {
	libvips.retain(h.Log)
	h.OnClose(libvips.release)
	h.Registry.Add(ops()...)
	return nil
}

// dimension is a target width or height: pixels, or null to follow the
// other side.
func dimension() hostapi.Schema {
	return hostapi.Schema{"type": []any{"integer", "null"}, "minimum": 1, "maximum": maxSide}
}

// pixels is the schema of a pixel offset or length from min to maxSide;
// values outside are VALIDATION_FAILED before a handler sees them, so no
// sum or product of them overflows.
func pixels(min int) hostapi.Schema {
	return hostapi.Schema{"type": "integer", "minimum": min, "maximum": maxSide}
}

// outputParams are the options of operations that write a file.
func outputParams(inPlace bool) []hostapi.Param {
	ps := []hostapi.Param{
		{Name: "output", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Group: "options",
			Doc: "Name of the new file; its extension (.png, .jpg, .jpeg, .webp) picks the format. " +
				"Default: the source's name with a suffix, in the same folder, e.g. photo_800x600.jpg. " +
				"A new file keeps the colour (ICC) profile and drops EXIF, XMP and IPTC metadata (camera, GPS position)."},
		{Name: "overwrite", Schema: hostapi.Boolean(), Group: "options",
			Doc: "Replace the output file if it already exists (otherwise ALREADY_EXISTS)."},
	}
	if inPlace {
		ps = append(ps, hostapi.Param{Name: "in_place", Schema: hostapi.Boolean(), Group: "options",
			Doc: "Change the source file itself instead of writing a new file (one-level undo with revert); its metadata is kept. PNG, JPEG and WebP sources only."})
	}
	return ps
}

func ops() []hostapi.Op {
	ref := hostapi.Ref("Image file id or workspace path (PNG, JPEG, WebP, GIF or TIFF), e.g. \"photos/cat.jpg\"")
	with := func(ps ...[]hostapi.Param) []hostapi.Param {
		var out []hostapi.Param
		for _, p := range ps {
			out = append(out, p...)
		}
		return out
	}
	quality := hostapi.Schema{"type": "integer", "minimum": 1, "maximum": 100}
	return []hostapi.Op{{
		Name: "files.image.info", Tool: "image_info",
		Doc: "Read an image's header without decoding it: width, height, format (png, jpeg, webp, gif, tiff), channels, bit depth, " +
			"whether it has alpha, and file size. Width and height are as displayed (EXIF rotation applied), the coordinates resize and crop use.",
		Params: []hostapi.Param{ref}, Result: InfoResult{}, ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:   "Size and format of a photo",
			Args:  map[string]any{"id": "photo.jpg"},
			Want:  map[string]any{"width": 640, "height": 480, "format": "jpeg", "channels": 3, "bit_depth": 8, "has_alpha": false},
			Files: []string{"photo.jpg"},
		}, {
			Doc:   "A PNG with transparency",
			Args:  map[string]any{"id": "logo.png"},
			Want:  map[string]any{"width": 200, "height": 100, "format": "png", "channels": 4, "has_alpha": true},
			Files: []string{"logo.png"},
		}},
		Handler: info,
	}, {
		Name: "files.image.resize", Tool: "image_resize",
		Doc: "Resize an image into a new file (or in place); returns the file's id, name, width, height and size. " +
			"Give width and/or height; null or omitted keeps the aspect ratio. fit: cover (default; fill the box, crop centred), " +
			"contain (fit inside, pad with transparency, or white for JPEG), fill (stretch), inside (fit inside, no padding).",
		Params: with([]hostapi.Param{ref,
			{Name: "width", Schema: dimension(), Doc: "Target width in pixels, or null to follow the height keeping the aspect ratio."},
			{Name: "height", Schema: dimension(), Doc: "Target height in pixels, or null to follow the width keeping the aspect ratio."},
			{Name: "fit", Schema: hostapi.Enum(fitCover, fitContain, fitFill, fitInside), Group: "options",
				Doc: "How the image fits a width × height box: cover (default), contain, fill or inside."},
		}, outputParams(true)),
		Result: FileResult{}, Destructive: true,
		Examples: []hostapi.Example{{
			Doc:   "Scale a 640 × 480 photo to 320 px wide; the height follows and the new file gets a default name",
			Args:  map[string]any{"id": "photo.jpg", "width": 320},
			Want:  map[string]any{"name": "photo_320x240.jpg", "width": 320, "height": 240},
			Files: []string{"photo.jpg"},
		}, {
			Doc:   "A 200 × 200 square thumbnail, cropped centred, written as WebP",
			Args:  map[string]any{"id": "photo.jpg", "width": 200, "height": 200, "fit": "cover", "output": "thumbs/photo.webp", "overwrite": true},
			Want:  map[string]any{"name": "thumbs/photo.webp", "width": 200, "height": 200},
			Files: []string{"photo.jpg"},
		}},
		Handler: resize,
	}, {
		Name: "files.image.crop", Tool: "image_crop",
		Doc: "Cut a rectangle out of an image into a new file (or in place); returns the file's id, name, width, height and size. " +
			"The region is in pixels of the image as displayed and must lie inside it (see image_info).",
		Params: with([]hostapi.Param{ref,
			{Name: "left", Schema: pixels(0), Required: true, Group: "region", Doc: "Left edge of the region, in pixels from the image's left."},
			{Name: "top", Schema: pixels(0), Required: true, Group: "region", Doc: "Top edge of the region, in pixels from the image's top."},
			{Name: "width", Schema: pixels(1), Required: true, Group: "region", Doc: "Width of the region in pixels."},
			{Name: "height", Schema: pixels(1), Required: true, Group: "region", Doc: "Height of the region in pixels."},
		}, outputParams(true)),
		Result: FileResult{}, Destructive: true,
		Examples: []hostapi.Example{{
			Doc:   "Cut a 200 × 150 region whose top-left corner is at (380, 40)",
			Args:  map[string]any{"id": "photo.jpg", "left": 380, "top": 40, "width": 200, "height": 150},
			Want:  map[string]any{"name": "photo_crop_380_40_200x150.jpg", "width": 200, "height": 150},
			Files: []string{"photo.jpg"},
		}},
		Handler: crop,
	}, {
		Name: "files.image.convert", Tool: "image_convert",
		Doc: "Write an image in another format (png, jpeg or webp) as a new file; returns the file's id, name, width, height and size. " +
			"Transparency becomes white in JPEG. Default name: the source's with the new extension, e.g. photo.webp.",
		Params: []hostapi.Param{ref,
			{Name: "format", Schema: hostapi.Enum(formatPNG, formatJPEG, "jpg", formatWebP), Required: true, Doc: "Output format: png, jpeg or webp."},
			{Name: "quality", Schema: quality, Group: "options", Doc: "JPEG/WebP quality 1-100 (default 80); ignored for PNG, which is lossless."},
			outputParams(false)[0], outputParams(false)[1],
		},
		Result: FileResult{}, Destructive: true,
		Examples: []hostapi.Example{{
			Doc:   "Write a PNG logo as WebP (transparency kept)",
			Args:  map[string]any{"id": "logo.png", "format": "webp", "quality": 90},
			Want:  map[string]any{"name": "logo.webp", "width": 200, "height": 100},
			Files: []string{"logo.png"},
		}, {
			Doc:   "A JPEG copy of a PNG under a chosen name (transparency becomes white)",
			Args:  map[string]any{"id": "logo.png", "format": "jpeg", "output": "logo-flat.jpg"},
			Want:  map[string]any{"name": "logo-flat.jpg", "width": 200, "height": 100},
			Files: []string{"logo.png"},
		}},
		Handler: convert,
	}, {
		Name: "files.image.composite", Tool: "image_composite",
		Doc: "Draw images over a base image, in order, into a new file (or in place); returns the file's id, name, width, height and size. " +
			"Each overlay is {ref, left, top, opacity}: a file ref, its position in pixels on the base, and opacity 0-1 (default 1). " +
			"The result keeps the base's size and its transparency.",
		Params: with([]hostapi.Param{ref,
			{Name: "overlays", Required: true, Doc: "Images to draw, bottom first: [{ref, left, top, opacity}].",
				Schema: hostapi.Schema{"type": "array", "minItems": 1, "maxItems": maxOverlays, "items": hostapi.Schema{
					"type": "object", "additionalProperties": false, "required": []any{"ref"},
					"properties": hostapi.Schema{
						"ref":     hostapi.Schema{"type": "string", "minLength": 1, "description": "Overlay image file id or workspace path."},
						"left":    hostapi.Schema{"type": "integer", "minimum": -maxSide, "maximum": maxSide, "description": "Overlay's left edge on the base, in pixels (default 0; may be negative)."},
						"top":     hostapi.Schema{"type": "integer", "minimum": -maxSide, "maximum": maxSide, "description": "Overlay's top edge on the base, in pixels (default 0; may be negative)."},
						"opacity": hostapi.Schema{"type": "number", "minimum": 0, "maximum": 1, "description": "Opacity 0-1 (default 1)."},
					}}}},
		}, outputParams(true)),
		Result: FileResult{}, Destructive: true,
		Examples: []hostapi.Example{{
			Doc:   "Put a logo at 80% opacity in the top-left corner of a photo",
			Args:  map[string]any{"id": "photo.jpg", "overlays": []any{map[string]any{"ref": "logo.png", "left": 20, "top": 20, "opacity": 0.8}}, "output": "photo_branded.jpg"},
			Want:  map[string]any{"name": "photo_branded.jpg", "width": 640, "height": 480},
			Files: []string{"photo.jpg", "logo.png"},
		}},
		Handler: composite,
	}, {
		Name: "files.image.toBase64", Tool: "image_to_base64",
		Doc: "Return an image as base64 for a vision model or a web page, with its MIME type, width and height. " +
			"It is shrunk to fit the maximum width and height (default 1568 × 1568; never enlarged), EXIF rotation applied and metadata removed. " +
			"The format defaults to jpeg, or png when the image has transparency.",
		Params: []hostapi.Param{ref,
			{Name: "max_width", Schema: hostapi.Schema{"type": "integer", "minimum": 1, "maximum": maxBase64Side}, Group: "options", Doc: "Largest width in pixels."},
			{Name: "max_height", Schema: hostapi.Schema{"type": "integer", "minimum": 1, "maximum": maxBase64Side}, Group: "options", Doc: "Largest height in pixels."},
			{Name: "format", Schema: hostapi.Enum(formatPNG, formatJPEG, "jpg", formatWebP), Group: "options", Doc: "png, jpeg or webp."},
		},
		Result: Base64Result{}, ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:   "A 64 px wide PNG of a logo for a vision model (PNG because the logo has transparency)",
			Args:  map[string]any{"id": "logo.png", "max_width": 64},
			Want:  map[string]any{"mime_type": "image/png", "width": 64, "height": 32},
			Files: []string{"logo.png"},
		}, {
			Doc:   "A photo as JPEG no larger than 320 × 320",
			Args:  map[string]any{"id": "photo.jpg", "max_width": 320, "max_height": 320, "format": "jpeg"},
			Want:  map[string]any{"mime_type": "image/jpeg", "width": 320, "height": 240},
			Files: []string{"photo.jpg"},
		}},
		Handler: toBase64,
	}}
}
