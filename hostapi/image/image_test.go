package image

import (
	"bytes"
	"context"
	"encoding/base64"
	goimage "image"
	"image/color"
	"os/exec"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// out is an operation's output read back independently.
type out struct {
	body []byte
	dec  decoded
	info map[string]any
}

// check reads the file an operation wrote back through image_info and
// through Go's decoders, and compares both with what the test expects.
func (e *testEnv) check(res map[string]any, w, h int, format string, channels int, alpha bool) out {
	e.t.Helper()
	if num(res, "width") != w || num(res, "height") != h {
		e.t.Fatalf("result says %v×%v, want %d×%d (%v)", res["width"], res["height"], w, h, res)
	}
	id, _ := res["id"].(string)
	body := e.body(id)
	if num(res, "size") != len(body) {
		e.t.Fatalf("result size %v, body has %d bytes", res["size"], len(body))
	}
	info := e.mustTool("image_info", map[string]any{"id": id})
	want := map[string]any{"width": float64(w), "height": float64(h), "format": format, "channels": float64(channels),
		"bit_depth": float64(8), "has_alpha": alpha, "size": float64(len(body))}
	if !reflect.DeepEqual(info, want) {
		e.t.Fatalf("image_info of the output = %v, want %v", info, want)
	}
	dec := decode(e.t, body)
	if dec.format != format {
		e.t.Fatalf("Go reads the output as %s, want %s", dec.format, format)
	}
	if b := dec.img.Bounds(); b.Dx() != w || b.Dy() != h {
		e.t.Fatalf("Go reads the output as %d×%d, want %d×%d", b.Dx(), b.Dy(), w, h)
	}
	var goChannels int
	var goAlpha bool
	switch format {
	case formatPNG:
		goChannels = map[int]int{0: 1, 2: 3, 4: 2, 6: 4}[pngColorType(body)]
		goAlpha = goChannels == 2 || goChannels == 4
	default: // JPEG and WebP decode to YCbCr, Gray or NYCbCrA
		switch dec.img.(type) {
		case *goimage.Gray:
			goChannels = 1
		case *goimage.YCbCr:
			goChannels = 3
		case *goimage.NYCbCrA:
			goChannels, goAlpha = 4, true
		}
	}
	if goChannels != channels || goAlpha != alpha {
		e.t.Fatalf("Go reads %d channels (alpha %v), want %d (alpha %v); decoded as %T", goChannels, goAlpha, channels, alpha, dec.img)
	}
	return out{body: body, dec: dec, info: info}
}

func TestRegisteredOps(t *testing.T) {
	e := newEnv(t)
	want := map[string]string{
		"files.image.info": "image_info", "files.image.resize": "image_resize", "files.image.crop": "image_crop",
		"files.image.convert": "image_convert", "files.image.composite": "image_composite", "files.image.toBase64": "image_to_base64",
	}
	for name, tool := range want {
		op := e.h.Registry.ByName(name)
		if op == nil || op.Tool != tool || e.h.Registry.ByTool(tool) != op {
			t.Fatalf("%s / %s not registered together", name, tool)
		}
	}
	// The composite overlay items are keyed "ref" for both doors.
	props := e.h.Registry.ByTool("image_composite").InputSchema()["properties"].(hostapi.Schema)
	item := props["overlays"].(hostapi.Schema)["items"].(hostapi.Schema)["properties"].(hostapi.Schema)
	if _, ok := item["ref"]; !ok {
		t.Fatalf("overlay items have no ref: %v", item)
	}
	// Groups: resize(ref, width, height, {fit, output, overwrite, inPlace}).
	var groups []string
	for _, p := range e.h.Registry.ByName("files.image.resize").Params {
		groups = append(groups, p.Name+":"+p.Group)
	}
	if !reflect.DeepEqual(groups, []string{"id:", "width:", "height:", "fit:options", "output:options", "overwrite:options", "in_place:options"}) {
		t.Fatalf("resize params %v", groups)
	}
}

func TestInfo(t *testing.T) {
	e := newEnv(t)
	gray := goimage.NewGray(goimage.Rect(0, 0, 30, 20))
	rgb16 := goimage.NewRGBA64(goimage.Rect(0, 0, 12, 10))
	for i := range rgb16.Pix {
		rgb16.Pix[i] = 0xFF
	}
	opaque := noise(40, 30)
	cases := []struct {
		name string
		body []byte
		want InfoResult
	}{
		{"rgba.png", encPNG(t, quadrants(64, 48)), InfoResult{64, 48, "png", 4, 8, true, 0}},
		{"rgb.png", encPNG(t, opaque), InfoResult{40, 30, "png", 3, 8, false, 0}},
		{"gray.png", encPNG(t, gray), InfoResult{30, 20, "png", 1, 8, false, 0}},
		{"deep.png", encPNG(t, rgb16), InfoResult{12, 10, "png", 3, 16, false, 0}},
		{"photo.jpg", encJPEG(t, opaque), InfoResult{40, 30, "jpeg", 3, 8, false, 0}},
		{"anim.gif", encGIF(t, bands(24, 16, red, blue), bands(24, 16, green)), InfoResult{24, 16, "gif", 3, 8, false, 0}},
		{"scan.tiff", encTIFF(t, quadrants(50, 40)), InfoResult{50, 40, "tiff", 4, 8, true, 0}},
		// EXIF orientation 6 (turn 90°): width and height as displayed.
		{"phone.jpg", withOrientation(encJPEG(t, noise(40, 20)), 6), InfoResult{20, 40, "jpeg", 3, 8, false, 0}},
	}
	for _, c := range cases {
		f := e.upload(c.name, c.body)
		c.want.Size = f.Size
		v, err := e.h.Registry.Invoke(e.ctx, e.env, e.h.Registry.ByName("files.image.info"), map[string]any{"id": c.name})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := v.(InfoResult); got != c.want {
			t.Errorf("%s: info = %+v, want %+v", c.name, got, c.want)
		}
	}
	// Meta-tool shape: snake_case keys.
	m := e.mustTool("image_info", map[string]any{"id": "rgba.png"})
	if m["bit_depth"] != float64(8) || m["has_alpha"] != true || m["format"] != "png" {
		t.Fatalf("image_info = %v", m)
	}
	// WebP, written by convert, reads back the same way.
	e.mustTool("image_convert", map[string]any{"id": "rgba.png", "format": "webp"})
	m = e.mustTool("image_info", map[string]any{"id": "rgba.webp"})
	if m["format"] != "webp" || num(m, "width") != 64 || num(m, "channels") != 4 || m["has_alpha"] != true {
		t.Fatalf("webp info = %v", m)
	}
}

func TestResizeFits(t *testing.T) {
	e := newEnv(t)
	// 400×100: red, green, blue thirds.
	e.upload("photo.jpg", encJPEG(t, bands(400, 100, red, green, blue)))
	e.upload("logo.png", encPNG(t, bands(400, 100, red, green, blue)))
	e.upload("alpha.png", encPNG(t, bands(400, 100, clear, green, blue)))
	cases := []struct {
		args         map[string]any
		w, h         int
		name, format string
		channels     int
		alpha        bool
		pixel        goimage.Point
		want         color.NRGBA
		pixel2       goimage.Point
		want2        color.NRGBA
		tol          int
		description  string
	}{
		{map[string]any{"id": "photo.jpg", "width": 100, "height": 100, "fit": "cover"}, 100, 100, "photo_100x100.jpg", "jpeg", 3, false,
			goimage.Pt(5, 50), green, goimage.Pt(95, 50), green, 40, "cover keeps the centre third only"},
		{map[string]any{"id": "photo.jpg", "width": 100, "height": 100}, 100, 100, "photo_100x100.jpg", "jpeg", 3, false,
			goimage.Pt(50, 50), green, goimage.Pt(50, 50), green, 40, "cover is the default (overwrite of the same name)"},
		{map[string]any{"id": "photo.jpg", "width": 100, "height": 100, "fit": "fill", "output": "fill.jpg"}, 100, 100, "fill.jpg", "jpeg", 3, false,
			goimage.Pt(5, 50), red, goimage.Pt(95, 50), blue, 40, "fill stretches the whole image"},
		{map[string]any{"id": "photo.jpg", "width": 100, "height": 100, "fit": "inside"}, 100, 25, "photo_100x25.jpg", "jpeg", 3, false,
			goimage.Pt(5, 12), red, goimage.Pt(95, 12), blue, 40, "inside fits without padding"},
		{map[string]any{"id": "photo.jpg", "width": 100, "height": 100, "fit": "contain", "output": "contain.jpg"}, 100, 100, "contain.jpg", "jpeg", 3, false,
			goimage.Pt(50, 5), color.NRGBA{255, 255, 255, 255}, goimage.Pt(5, 50), red, 40, "contain pads JPEG with white"},
		{map[string]any{"id": "logo.png", "width": 100, "height": 100, "fit": "contain"}, 100, 100, "logo_100x100.png", "png", 4, true,
			goimage.Pt(50, 5), clear, goimage.Pt(95, 50), blue, 10, "contain pads PNG with transparency"},
		{map[string]any{"id": "photo.jpg", "width": 200, "height": nil}, 200, 50, "photo_200x50.jpg", "jpeg", 3, false,
			goimage.Pt(5, 25), red, goimage.Pt(195, 25), blue, 40, "null height keeps the aspect ratio"},
		{map[string]any{"id": "photo.jpg", "height": 20, "fit": "contain"}, 80, 20, "photo_80x20.jpg", "jpeg", 3, false,
			goimage.Pt(2, 10), red, goimage.Pt(78, 10), blue, 40, "omitted width keeps the aspect ratio, no padding"},
		{map[string]any{"id": "photo.jpg", "width": 800, "height": 200, "output": "big.png"}, 800, 200, "big.png", "png", 3, false,
			goimage.Pt(5, 100), red, goimage.Pt(795, 100), blue, 40, "upscale; the output extension picks PNG"},
		{map[string]any{"id": "alpha.png", "width": 60, "output": "small.webp"}, 60, 15, "small.webp", "webp", 4, true,
			goimage.Pt(5, 7), clear, goimage.Pt(58, 7), blue, 40, "webp output keeps alpha"},
	}
	for _, c := range cases {
		args := map[string]any{}
		for k, v := range c.args {
			args[k] = v
		}
		args["overwrite"] = true
		res, err := e.tool("image_resize", args)
		if err != nil {
			t.Fatalf("%s: %v", c.description, err)
		}
		if res["name"] != c.name {
			t.Fatalf("%s: name %v, want %s", c.description, res["name"], c.name)
		}
		o := e.check(res, c.w, c.h, c.format, c.channels, c.alpha)
		for _, p := range []struct {
			pt   goimage.Point
			want color.NRGBA
		}{{c.pixel, c.want}, {c.pixel2, c.want2}} {
			got := at(o.dec.img, p.pt.X, p.pt.Y)
			if p.want.A == 0 {
				if got.A != 0 {
					t.Fatalf("%s: pixel %v = %v, want transparent", c.description, p.pt, got)
				}
				continue
			}
			if !near(got, p.want, c.tol) {
				t.Fatalf("%s: pixel %v = %v, want ≈%v", c.description, p.pt, got, p.want)
			}
		}
	}
	// Each derived file is new and marked derived; the source is untouched.
	f, err := e.env.WS.Resolve(e.ctx, "photo_100x25.jpg")
	if err != nil || f.Source != "derived" {
		t.Fatalf("derived file: %+v %v", f, err)
	}
}

func TestResizeTargets(t *testing.T) {
	e := newEnv(t)
	src := e.upload("pics/photo.jpg", encJPEG(t, noise(120, 80)))
	e.upload("anim.gif", encGIF(t, bands(40, 20, red, blue), bands(40, 20, green)))

	res := e.mustTool("image_resize", map[string]any{"id": "pics/photo.jpg", "width": 60})
	if res["name"] != "pics/photo_60x40.jpg" {
		t.Fatalf("default name %v", res["name"])
	}
	e.check(res, 60, 40, "jpeg", 3, false)
	before := e.snapshot()

	// The same default name again: ALREADY_EXISTS, nothing changes.
	if _, err := e.tool("image_resize", map[string]any{"id": src.ID, "width": 60}); apierr.CodeOf(err) != apierr.AlreadyExists {
		t.Fatalf("existing default output: %v", err)
	}
	if _, err := e.tool("image_resize", map[string]any{"id": src.ID, "width": 30, "output": "pics/photo_60x40.jpg"}); apierr.CodeOf(err) != apierr.AlreadyExists {
		t.Fatalf("existing output: %v", err)
	}
	for _, bad := range []map[string]any{
		{"id": src.ID, "width": 30, "output": "thumb.gif"},
		{"id": src.ID, "width": 30, "output": "thumb"},
		{"id": src.ID, "width": 30, "output": "../x.png"},
		{"id": src.ID, "width": 30, "in_place": true, "output": "x.png"},
		{"id": src.ID},
		{"id": src.ID, "width": nil, "height": nil},
		{"id": src.ID, "width": 0},
		{"id": src.ID, "width": 1.5},
		{"id": src.ID, "width": 30, "fit": "stretch"},
		{"id": src.ID, "width": 20000, "height": 20, "output": "wide.webp"},
	} {
		if _, err := e.tool("image_resize", bad); apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Fatalf("%v: want VALIDATION_FAILED, got %v", bad, err)
		}
	}
	if !reflect.DeepEqual(before, e.snapshot()) {
		t.Fatal("a refused resize changed files")
	}

	// overwrite replaces the existing output, keeping its id.
	old, _ := e.env.WS.Resolve(e.ctx, "pics/photo_60x40.jpg")
	res = e.mustTool("image_resize", map[string]any{"id": src.ID, "width": 30, "output": "pics/photo_60x40.jpg", "overwrite": true})
	if res["id"] != old.ID {
		t.Fatalf("overwrite made a new file: %v vs %s", res["id"], old.ID)
	}
	e.check(res, 30, 20, "jpeg", 3, false)

	// GIF sources are written as PNG by default, and cannot change in place.
	res = e.mustTool("image_resize", map[string]any{"id": "anim.gif", "width": 20})
	if res["name"] != "anim_20x10.png" {
		t.Fatalf("gif default name %v", res["name"])
	}
	o := e.check(res, 20, 10, "png", 3, false)
	if c := at(o.dec.img, 2, 5); !near(c, red, 60) {
		t.Fatalf("first frame expected red on the left, got %v", c)
	}
	before = e.snapshot()
	if _, err := e.tool("image_resize", map[string]any{"id": "anim.gif", "width": 10, "in_place": true}); apierr.CodeOf(err) != apierr.UnsupportedFormat {
		t.Fatalf("gif in place: %v", err)
	}
	if !reflect.DeepEqual(before, e.snapshot()) {
		t.Fatal("refused in-place resize changed files")
	}

	// in_place rewrites the source (same id, new size) and keeps a backup.
	res = e.mustTool("image_resize", map[string]any{"id": "pics/photo.jpg", "width": 24, "height": 24, "in_place": true})
	if res["id"] != src.ID || res["name"] != "pics/photo.jpg" {
		t.Fatalf("in place answered %v", res)
	}
	e.check(res, 24, 24, "jpeg", 3, false)
	f, _ := e.env.WS.Resolve(e.ctx, src.ID)
	if !f.HasBackup || f.SHA256 == src.SHA256 {
		t.Fatalf("in place: backup %v, sha changed %v", f.HasBackup, f.SHA256 != src.SHA256)
	}
	if _, err := e.env.WS.Revert(e.ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	if f, _ := e.env.WS.Resolve(e.ctx, src.ID); f.SHA256 != src.SHA256 {
		t.Fatal("revert did not restore the original")
	}

	// The JS door: camelCase result from the same op.
	v, err := e.h.Registry.Invoke(e.ctx, e.env, e.h.Registry.ByName("files.image.resize"),
		map[string]any{"id": "pics/photo.jpg", "width": 12, "height": nil, "fit": "inside", "output": "js.png"})
	if err != nil {
		t.Fatal(err)
	}
	js := hostapi.Project(v, hostapi.CamelCase).(map[string]any)
	if js["name"] != "js.png" || js["width"] != float64(12) || js["height"] != float64(8) {
		t.Fatalf("JS result %v", js)
	}
}

func TestCrop(t *testing.T) {
	e := newEnv(t)
	src := e.upload("q.png", encPNG(t, quadrants(80, 60)))
	res := e.mustTool("image_crop", map[string]any{"id": "q.png", "left": 40, "top": 0, "width": 40, "height": 30})
	if res["name"] != "q_crop_40_0_40x30.png" {
		t.Fatalf("name %v", res["name"])
	}
	o := e.check(res, 40, 30, "png", 4, true)
	for _, p := range []goimage.Point{{0, 0}, {39, 0}, {0, 29}, {39, 29}, {20, 15}} {
		if c := at(o.dec.img, p.X, p.Y); c != green {
			t.Fatalf("crop of the green quadrant has %v at %v", c, p)
		}
	}
	// Bottom-left quarter into a JPEG, one pixel in from each edge.
	res = e.mustTool("image_crop", map[string]any{"id": "q.png", "left": 1, "top": 31, "width": 38, "height": 28, "output": "blue.jpg"})
	o = e.check(res, 38, 28, "jpeg", 3, false)
	if c := at(o.dec.img, 19, 14); !near(c, blue, 30) {
		t.Fatalf("blue crop has %v", c)
	}
	// The whole image is a valid region.
	res = e.mustTool("image_crop", map[string]any{"id": "q.png", "left": 0, "top": 0, "width": 80, "height": 60, "output": "all.webp"})
	e.check(res, 80, 60, "webp", 4, true)

	before := e.snapshot()
	for _, bad := range []map[string]any{
		{"id": "q.png", "left": 50, "top": 0, "width": 40, "height": 10},
		{"id": "q.png", "left": 0, "top": 59, "width": 1, "height": 2},
		{"id": "q.png", "left": 80, "top": 0, "width": 1, "height": 1},
		{"id": "q.png", "left": -1, "top": 0, "width": 1, "height": 1},
		{"id": "q.png", "left": 0, "top": 0, "width": 0, "height": 1},
		{"id": "q.png", "left": 0, "top": 0, "width": 10},
		{"id": "q.png", "left": 0, "top": 0, "width": 10, "height": 10, "quality": 5},
	} {
		if _, err := e.tool("image_crop", bad); apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Fatalf("%v: want VALIDATION_FAILED, got %v", bad, err)
		}
	}
	if _, err := e.tool("image_crop", map[string]any{"id": "q.png", "left": 50, "top": 0, "width": 40, "height": 10, "in_place": true}); apierr.CodeOf(err) != apierr.ValidationFailed {
		t.Fatalf("out of bounds in place: %v", err)
	}
	if !reflect.DeepEqual(before, e.snapshot()) {
		t.Fatal("a refused crop changed files")
	}
	// In place.
	res = e.mustTool("image_crop", map[string]any{"id": src.ID, "left": 0, "top": 0, "width": 40, "height": 30, "in_place": true})
	o = e.check(res, 40, 30, "png", 4, true)
	if res["id"] != src.ID || at(o.dec.img, 20, 15) != red {
		t.Fatalf("in-place crop: %v, pixel %v", res, at(o.dec.img, 20, 15))
	}
}

func TestOrientationAppliedFirst(t *testing.T) {
	e := newEnv(t)
	// Stored 40×20, red left half, blue right half; orientation 6 means
	// "turn 90° clockwise to display": red on top of a 20×40 image.
	e.upload("phone.jpg", withOrientation(encJPEG(t, bands(40, 20, red, blue)), 6))
	check := func(o out, w, h int) {
		t.Helper()
		if c := at(o.dec.img, w/2, h/5); !near(c, red, 40) {
			t.Fatalf("top should be red, got %v", c)
		}
		if c := at(o.dec.img, w/2, h*4/5); !near(c, blue, 40) {
			t.Fatalf("bottom should be blue, got %v", c)
		}
	}
	// Go's decoder ignores EXIF, so these reads prove the pixels were
	// turned (and image_info in check proves no orientation tag is left
	// to turn them again).
	check(e.check(e.mustTool("image_resize", map[string]any{"id": "phone.jpg", "width": 10}), 10, 20, "jpeg", 3, false), 10, 20)
	check(e.check(e.mustTool("image_convert", map[string]any{"id": "phone.jpg", "format": "png"}), 20, 40, "png", 3, false), 20, 40)
	check(e.check(e.mustTool("image_crop", map[string]any{"id": "phone.jpg", "left": 0, "top": 0, "width": 20, "height": 40, "output": "c.jpg"}), 20, 40, "jpeg", 3, false), 20, 40)
	// The region is validated against the displayed size.
	if _, err := e.tool("image_crop", map[string]any{"id": "phone.jpg", "left": 0, "top": 0, "width": 40, "height": 20}); apierr.CodeOf(err) != apierr.ValidationFailed {
		t.Fatalf("stored-size region should be out of bounds: %v", err)
	}
	b64 := e.mustTool("image_to_base64", map[string]any{"id": "phone.jpg"})
	raw, _ := base64.StdEncoding.DecodeString(b64["base64"].(string))
	dec := decode(t, raw)
	if b := dec.img.Bounds(); b.Dx() != 20 || b.Dy() != 40 {
		t.Fatalf("toBase64 of the phone photo is %v", b)
	}
	check(out{dec: dec}, 20, 40)
}

func TestConvert(t *testing.T) {
	e := newEnv(t)
	// Transparent left half, green right half.
	e.upload("logo.png", encPNG(t, bands(40, 20, clear, green)))
	e.upload("photo.jpg", encJPEG(t, noise(200, 150)))
	e.upload("scan.tiff", encTIFF(t, quadrants(30, 20)))
	e.upload("anim.gif", encGIF(t, bands(16, 8, blue), bands(16, 8, red)))

	res := e.mustTool("image_convert", map[string]any{"id": "logo.png", "format": "jpeg"})
	if res["name"] != "logo.jpg" {
		t.Fatalf("name %v", res["name"])
	}
	o := e.check(res, 40, 20, "jpeg", 3, false)
	if c := at(o.dec.img, 5, 10); !near(c, color.NRGBA{255, 255, 255, 255}, 8) {
		t.Fatalf("transparency should become white in JPEG, got %v", c)
	}
	o = e.check(e.mustTool("image_convert", map[string]any{"id": "logo.png", "format": "webp"}), 40, 20, "webp", 4, true)
	if c := at(o.dec.img, 5, 10); c.A != 0 {
		t.Fatalf("WebP should keep transparency, got %v", c)
	}
	if c := at(o.dec.img, 35, 10); !near(c, green, 20) {
		t.Fatalf("WebP green half is %v", c)
	}
	e.check(e.mustTool("image_convert", map[string]any{"id": "photo.jpg", "format": "png"}), 200, 150, "png", 3, false)
	o = e.check(e.mustTool("image_convert", map[string]any{"id": "scan.tiff", "format": "jpg"}), 30, 20, "jpeg", 3, false)
	if c := at(o.dec.img, 3, 3); !near(c, red, 40) {
		t.Fatalf("tiff→jpeg top left %v", c)
	}
	o = e.check(e.mustTool("image_convert", map[string]any{"id": "anim.gif", "format": "png"}), 16, 8, "png", 3, false)
	if c := at(o.dec.img, 8, 4); !near(c, blue, 10) {
		t.Fatalf("gif→png should hold the first frame (blue), got %v", c)
	}

	// quality: lower quality, smaller file.
	lo := e.mustTool("image_convert", map[string]any{"id": "photo.jpg", "format": "webp", "quality": 5, "output": "lo.webp"})
	hi := e.mustTool("image_convert", map[string]any{"id": "photo.jpg", "format": "webp", "quality": 100, "output": "hi.webp"})
	e.check(lo, 200, 150, "webp", 3, false)
	if num(lo, "size") >= num(hi, "size") {
		t.Fatalf("quality 5 gave %v bytes, quality 100 %v", lo["size"], hi["size"])
	}
	jlo := e.mustTool("image_convert", map[string]any{"id": "photo.jpg", "format": "jpeg", "quality": 5})
	if jlo["name"] != "photo_converted.jpg" {
		t.Fatalf("same-format default name %v", jlo["name"])
	}
	jhi := e.mustTool("image_convert", map[string]any{"id": "photo.jpg", "format": "jpeg", "quality": 95, "output": "hi.jpeg"})
	if num(jlo, "size") >= num(jhi, "size") {
		t.Fatalf("jpeg quality 5 gave %v bytes, quality 95 %v", jlo["size"], jhi["size"])
	}

	before := e.snapshot()
	for _, bad := range []map[string]any{
		{"id": "photo.jpg", "format": "bmp"},
		{"id": "photo.jpg", "format": "gif"},
		{"id": "photo.jpg"},
		{"id": "photo.jpg", "format": "png", "output": "x.jpg"},
		{"id": "photo.jpg", "format": "png", "quality": 101},
		{"id": "photo.jpg", "format": "png", "in_place": true},
	} {
		if _, err := e.tool("image_convert", bad); apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Fatalf("%v: want VALIDATION_FAILED, got %v", bad, err)
		}
	}
	if _, err := e.tool("image_convert", map[string]any{"id": "photo.jpg", "format": "png"}); apierr.CodeOf(err) != apierr.AlreadyExists {
		t.Fatalf("second convert to the same name: %v", err)
	}
	if !reflect.DeepEqual(before, e.snapshot()) {
		t.Fatal("a refused convert changed files")
	}
}

func TestComposite(t *testing.T) {
	e := newEnv(t)
	e.upload("base.jpg", encJPEG(t, bands(100, 80, blue)))
	e.upload("glass.png", encPNG(t, bands(100, 80, clear))) // fully transparent base
	e.upload("gray.png", encPNG(t, goimage.NewGray(goimage.Rect(0, 0, 50, 50))))
	e.upload("mark.png", encPNG(t, bands(20, 20, red)))
	e.upload("half.png", encPNG(t, bands(20, 20, clear, green))) // transparent left half

	res := e.mustTool("image_composite", map[string]any{"id": "base.jpg", "overlays": []any{
		map[string]any{"ref": "mark.png", "left": 10, "top": 10},
		map[string]any{"ref": "mark.png", "left": 60, "top": 10, "opacity": 0.5},
		map[string]any{"ref": "half.png", "left": 10, "top": 50},
		map[string]any{"ref": "mark.png", "left": 90, "top": 70}, // clipped at the corner
	}})
	if res["name"] != "base_composite.jpg" {
		t.Fatalf("name %v", res["name"])
	}
	o := e.check(res, 100, 80, "jpeg", 3, false)
	for _, p := range []struct {
		x, y int
		want color.NRGBA
	}{
		{20, 20, red}, {50, 40, blue}, {70, 20, color.NRGBA{128, 0, 128, 255}},
		{12, 60, blue}, {25, 60, green}, {95, 75, red},
	} {
		if c := at(o.dec.img, p.x, p.y); !near(c, p.want, 40) {
			t.Fatalf("pixel %d,%d = %v, want ≈%v", p.x, p.y, c, p.want)
		}
	}

	// A transparent base keeps its alpha: only the overlay is opaque.
	res = e.mustTool("image_composite", map[string]any{"id": "glass.png", "overlays": []any{
		map[string]any{"ref": "mark.png", "left": 5, "top": 5, "opacity": 0.25}}})
	o = e.check(res, 100, 80, "png", 4, true)
	if c := at(o.dec.img, 50, 50); c.A != 0 {
		t.Fatalf("outside the overlay should stay transparent, got %v", c)
	}
	if c := at(o.dec.img, 10, 10); c.A < 55 || c.A > 75 || c.R < 240 {
		t.Fatalf("a 25%% red overlay on clear should be red at alpha ≈64, got %v", c)
	}
	// A grey base takes a colour overlay (the result is RGB).
	res = e.mustTool("image_composite", map[string]any{"id": "gray.png", "overlays": []any{map[string]any{"ref": "mark.png", "left": 0, "top": 0}}, "output": "g.png"})
	o = e.check(res, 50, 50, "png", 3, false)
	if c := at(o.dec.img, 5, 5); !near(c, red, 5) {
		t.Fatalf("grey base with red overlay: %v", c)
	}

	before := e.snapshot()
	for _, c := range []struct {
		args map[string]any
		code apierr.Code
	}{
		{map[string]any{"id": "base.jpg", "overlays": []any{map[string]any{"ref": "mark.png", "left": 100, "top": 0}}}, apierr.ValidationFailed},
		{map[string]any{"id": "base.jpg", "overlays": []any{map[string]any{"ref": "mark.png", "left": -20, "top": 0}}}, apierr.ValidationFailed},
		{map[string]any{"id": "base.jpg", "overlays": []any{}}, apierr.ValidationFailed},
		{map[string]any{"id": "base.jpg", "overlays": []any{map[string]any{"id": "mark.png"}}}, apierr.ValidationFailed},
		{map[string]any{"id": "base.jpg", "overlays": []any{map[string]any{"ref": "mark.png", "opacity": 2}}}, apierr.ValidationFailed},
		{map[string]any{"id": "base.jpg", "overlays": []any{map[string]any{"ref": "nope.png"}}}, apierr.NotFound},
		{map[string]any{"id": "base.jpg", "overlays": []any{map[string]any{"ref": "mark.png"}}, "in_place": true, "output": "x.jpg"}, apierr.ValidationFailed},
	} {
		if _, err := e.tool("image_composite", c.args); apierr.CodeOf(err) != c.code {
			t.Fatalf("%v: want %s, got %v", c.args, c.code, err)
		}
	}
	if !reflect.DeepEqual(before, e.snapshot()) {
		t.Fatal("a refused composite changed files")
	}
	// In place, with the base as its own overlay (read before the lock).
	base, _ := e.env.WS.Resolve(e.ctx, "base.jpg")
	res = e.mustTool("image_composite", map[string]any{"id": "base.jpg", "in_place": true, "overlays": []any{
		map[string]any{"ref": "mark.png", "left": 0, "top": 0}, map[string]any{"ref": "base.jpg", "left": 50, "top": 40}}})
	o = e.check(res, 100, 80, "jpeg", 3, false)
	if res["id"] != base.ID || !near(at(o.dec.img, 5, 5), red, 40) || !near(at(o.dec.img, 60, 50), blue, 40) {
		t.Fatalf("in-place composite: %v", res)
	}
}

func TestToBase64(t *testing.T) {
	e := newEnv(t)
	e.upload("big.jpg", encJPEG(t, noise(2000, 1000)))
	e.upload("small.png", encPNG(t, quadrants(50, 40)))
	e.upload("opaque.png", encPNG(t, noise(50, 40)))
	cases := []struct {
		args         map[string]any
		w, h         int
		mime, format string
	}{
		{map[string]any{"id": "big.jpg"}, 1568, 784, "image/jpeg", "jpeg"},
		{map[string]any{"id": "big.jpg", "max_width": 300}, 300, 150, "image/jpeg", "jpeg"},
		{map[string]any{"id": "big.jpg", "max_height": 100, "format": "webp"}, 200, 100, "image/webp", "webp"},
		{map[string]any{"id": "big.jpg", "max_width": 400, "max_height": 100, "format": "png"}, 200, 100, "image/png", "png"},
		{map[string]any{"id": "small.png", "max_width": 4000}, 50, 40, "image/png", "png"}, // never enlarged; alpha → png
		{map[string]any{"id": "small.png", "format": "jpeg"}, 50, 40, "image/jpeg", "jpeg"},
		{map[string]any{"id": "opaque.png"}, 50, 40, "image/jpeg", "jpeg"},
	}
	for _, c := range cases {
		m := e.mustTool("image_to_base64", c.args)
		if m["mime_type"] != c.mime || num(m, "width") != c.w || num(m, "height") != c.h {
			t.Fatalf("%v: got %v %v×%v, want %s %d×%d", c.args, m["mime_type"], m["width"], m["height"], c.mime, c.w, c.h)
		}
		raw, err := base64.StdEncoding.DecodeString(m["base64"].(string))
		if err != nil {
			t.Fatal(err)
		}
		d := decode(t, raw)
		if d.format != c.format || d.img.Bounds().Dx() != c.w || d.img.Bounds().Dy() != c.h {
			t.Fatalf("%v: decodes as %s %v", c.args, d.format, d.img.Bounds())
		}
	}
	// The JS door answers camelCase.
	v, err := e.h.Registry.Invoke(e.ctx, e.env, e.h.Registry.ByName("files.image.toBase64"), map[string]any{"id": "small.png", "max_width": 10})
	if err != nil {
		t.Fatal(err)
	}
	js := hostapi.Project(v, hostapi.CamelCase).(map[string]any)
	if js["mimeType"] != "image/png" || js["width"] != float64(10) || js["height"] != float64(8) {
		t.Fatalf("JS result %v", js)
	}
	if _, err := e.tool("image_to_base64", map[string]any{"id": "big.jpg", "format": "tiff"}); apierr.CodeOf(err) != apierr.ValidationFailed {
		t.Fatalf("unknown format: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	good := encJPEG(t, noise(300, 200))
	e.upload("truncated.jpg", good[:len(good)/2])
	pngBody := encPNG(t, noise(300, 200))
	e.upload("truncated.png", pngBody[:len(pngBody)/2])
	e.upload("huge.png", hugePNG(100_000, 100_000))
	e.upload("notes.txt", []byte("this is not an image\n"))
	e.upload("fake.png", []byte("\x89PNG\r\n\x1a\nnot really a png at all"))
	e.upload("icon.bmp", []byte("BM\x3e\x00\x00\x00\x00\x00\x00\x00\x3e\x00\x00\x00\x28\x00\x00\x00"))
	e.upload("good.jpg", good)
	before := e.snapshot()

	type call struct {
		tool string
		args map[string]any
		code apierr.Code
	}
	var calls []call
	for _, ref := range []string{"truncated.jpg", "truncated.png"} {
		calls = append(calls,
			call{"image_resize", map[string]any{"id": ref, "width": 50}, apierr.FileReadFailed},
			call{"image_resize", map[string]any{"id": ref, "width": 50, "in_place": true}, apierr.FileReadFailed},
			call{"image_crop", map[string]any{"id": ref, "left": 0, "top": 150, "width": 50, "height": 50}, apierr.FileReadFailed},
			call{"image_convert", map[string]any{"id": ref, "format": "webp"}, apierr.FileReadFailed},
			call{"image_to_base64", map[string]any{"id": ref}, apierr.FileReadFailed},
			call{"image_composite", map[string]any{"id": "good.jpg", "overlays": []any{map[string]any{"ref": ref}}}, apierr.FileReadFailed},
		)
	}
	for _, tool := range []struct {
		name string
		args map[string]any
	}{
		{"image_resize", map[string]any{"width": 10}},
		{"image_crop", map[string]any{"left": 0, "top": 0, "width": 1, "height": 1}},
		{"image_convert", map[string]any{"format": "png"}},
		{"image_to_base64", map[string]any{}},
		{"image_info", map[string]any{}},
	} {
		for ref, code := range map[string]apierr.Code{
			"huge.png": apierr.TooLarge, "notes.txt": apierr.UnsupportedFormat, "icon.bmp": apierr.UnsupportedFormat,
			"fake.png": apierr.FileReadFailed, "missing.png": apierr.NotFound,
		} {
			if tool.name == "image_info" && ref == "huge.png" {
				continue // info reads the header only; see below
			}
			args := map[string]any{"id": ref}
			for k, v := range tool.args {
				args[k] = v
			}
			calls = append(calls, call{tool.name, args, code})
		}
	}
	calls = append(calls,
		call{"image_composite", map[string]any{"id": "good.jpg", "overlays": []any{map[string]any{"ref": "huge.png"}}}, apierr.TooLarge},
		call{"image_composite", map[string]any{"id": "good.jpg", "overlays": []any{map[string]any{"ref": "notes.txt"}}}, apierr.UnsupportedFormat},
		call{"image_resize", map[string]any{"id": "good.jpg", "width": 20000, "height": 20000, "output": "up.png"}, apierr.TooLarge},
		call{"image_resize", map[string]any{"id": "huge.png", "width": 10, "in_place": true}, apierr.TooLarge},
	)
	for _, c := range calls {
		start := time.Now()
		_, err := e.tool(c.tool, c.args)
		if apierr.CodeOf(err) != c.code {
			t.Fatalf("%s %v: want %s, got %v", c.tool, c.args, c.code, err)
		}
		if d := time.Since(start); d > 30*time.Second { // a hang, not slowness on a busy machine
			t.Fatalf("%s %v took %v", c.tool, c.args, d)
		}
	}
	if !reflect.DeepEqual(before, e.snapshot()) {
		t.Fatal("bad input changed files")
	}
	// info describes the huge image from its header without decoding it.
	m := e.mustTool("image_info", map[string]any{"id": "huge.png"})
	if num(m, "width") != 100_000 || num(m, "height") != 100_000 {
		t.Fatalf("huge info %v", m)
	}
	// The truncated JPEG's header is intact, so info can still read it.
	if m := e.mustTool("image_info", map[string]any{"id": "truncated.jpg"}); num(m, "width") != 300 {
		t.Fatalf("truncated info %v", m)
	}
}

func TestHugeImageMemoryStaysBounded(t *testing.T) {
	e := newEnv(t)
	e.upload("huge.png", hugePNG(100_000, 100_000))
	e.upload("wide.png", hugePNG(1_000_000, 1_000))
	rss0 := vmRSS(t)
	for i := 0; i < 5; i++ {
		for _, ref := range []string{"huge.png", "wide.png"} {
			if _, err := e.tool("image_to_base64", map[string]any{"id": ref}); apierr.CodeOf(err) != apierr.TooLarge {
				t.Fatalf("%s: %v", ref, err)
			}
			if _, err := e.tool("image_convert", map[string]any{"id": ref, "format": "jpeg"}); apierr.CodeOf(err) != apierr.TooLarge {
				t.Fatalf("%s: %v", ref, err)
			}
		}
	}
	if grew := vmRSS(t) - rss0; grew > 100<<20 {
		t.Fatalf("resident memory grew by %d MB refusing huge images", grew>>20)
	}
}

// TestAtCapMemoryStaysBounded works on a real 100-megapixel image (the
// default cap): 300 MB of pixels once decoded, which libvips must stream
// or spill to disk rather than hold.
func TestAtCapMemoryStaysBounded(t *testing.T) {
	e := newEnv(t)
	e.upload("cap.png", flatPNG(10_000, 10_000))
	e.mustTool("image_info", map[string]any{"id": "cap.png"})
	if !resetPeak() {
		t.Skip("cannot reset the peak RSS counter (/proc/self/clear_refs); memory cannot be measured here")
	}
	base := vmRSS(t)
	big := e.mustTool("image_convert", map[string]any{"id": "cap.png", "format": "jpeg"})
	small := e.mustTool("image_resize", map[string]any{"id": "cap.png", "width": 500})
	corner := e.mustTool("image_crop", map[string]any{"id": "cap.png", "left": 9000, "top": 9900, "width": 100, "height": 100})
	grew := vmHWM(t) - base
	t.Logf("peak resident memory rose %d MB over %d MB", grew>>20, base>>20)
	if grew > 150<<20 {
		t.Fatalf("peak memory rose %d MB over %d MB working on a 100-megapixel image", grew>>20, base>>20)
	}
	// Checked after the measurement: decoding 100 megapixels in Go
	// would itself take 150 MB.
	cfg, format, err := goimage.DecodeConfig(bytes.NewReader(e.body(big["id"].(string))))
	if err != nil || format != "jpeg" || cfg.Width != 10_000 || cfg.Height != 10_000 {
		t.Fatalf("100-megapixel JPEG reads back as %s %d×%d (%v)", format, cfg.Width, cfg.Height, err)
	}
	e.check(small, 500, 500, "png", 3, false)
	e.check(corner, 100, 100, "png", 3, false)
}

func TestPixelCapIsConfigurable(t *testing.T) {
	e := newEnv(t, hostapi.Config{MaxImagePixels: 1000})
	e.upload("a.png", encPNG(t, noise(40, 30))) // 1200 pixels
	e.upload("b.png", encPNG(t, noise(30, 30))) // 900 pixels
	_, err := e.tool("image_convert", map[string]any{"id": "a.png", "format": "jpeg"})
	if apierr.CodeOf(err) != apierr.TooLarge {
		t.Fatalf("over the configured cap: %v", err)
	}
	e.check(e.mustTool("image_convert", map[string]any{"id": "b.png", "format": "jpeg"}), 30, 30, "jpeg", 3, false)
	if _, err := e.tool("image_resize", map[string]any{"id": "b.png", "width": 40, "height": 30}); apierr.CodeOf(err) != apierr.TooLarge {
		t.Fatalf("enlarging over the cap: %v", err)
	}
}

func TestDeadline(t *testing.T) {
	e := newEnv(t)
	e.upload("a.jpg", encJPEG(t, noise(64, 64)))
	e.upload("photo.jpg", photo4000())
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err := e.h.Registry.CallTool(ctx, e.env, "image_resize", map[string]any{"id": "a.jpg", "width": 10})
	if apierr.CodeOf(err) != apierr.Timeout {
		t.Fatalf("expired deadline: %v", err)
	}
	// A deadline in the middle of a long encode (12 megapixels to PNG
	// takes over a second) stops libvips at its next write.
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = e.h.Registry.CallTool(ctx, e.env, "image_convert", map[string]any{"id": "photo.jpg", "format": "png"})
	if apierr.CodeOf(err) != apierr.Timeout {
		t.Fatalf("deadline during the encode: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second { // ~100 ms; generous for a busy machine
		t.Fatalf("the deadline took %v to stop the encode", d)
	}
	if fs, _ := e.env.WS.List(e.ctx, "photo*"); len(fs) != 1 {
		t.Fatalf("a timed-out convert left files: %d", len(fs))
	}
}

func TestConcurrentCalls(t *testing.T) {
	e := newEnv(t)
	e.upload("a.jpg", encJPEG(t, noise(400, 300)))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w := 20 + i
			res, err := e.tool("image_resize", map[string]any{"id": "a.jpg", "width": w, "fit": "inside"})
			if err == nil && num(res, "width") != w {
				err = apierr.New(apierr.Internal, "width %v, want %d", res["width"], w)
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if fs, _ := e.env.WS.List(e.ctx, "a_*"); len(fs) != 16 {
		t.Fatalf("%d outputs, want 16", len(fs))
	}
}

// TestVipsheaderCrossCheck reads outputs with libvips' command-line tool.
func TestVipsheaderCrossCheck(t *testing.T) {
	bin, err := exec.LookPath("vipsheader")
	if err != nil {
		t.Skip("vipsheader not installed (apt-get install libvips-tools); the Go decoders check the outputs instead")
	}
	e := newEnv(t)
	e.upload("logo.png", encPNG(t, quadrants(120, 90)))
	e.upload("phone.jpg", withOrientation(encJPEG(t, noise(60, 30)), 8))
	for _, c := range []struct {
		tool          string
		args          map[string]any
		w, h, channel int
	}{
		{"image_resize", map[string]any{"id": "logo.png", "width": 50, "height": 50, "fit": "contain", "output": "a.webp"}, 50, 50, 4},
		{"image_resize", map[string]any{"id": "logo.png", "width": 50, "height": 20, "fit": "fill", "output": "b.jpg"}, 50, 20, 3},
		{"image_crop", map[string]any{"id": "logo.png", "left": 10, "top": 10, "width": 30, "height": 40}, 30, 40, 4},
		{"image_convert", map[string]any{"id": "phone.jpg", "format": "png"}, 30, 60, 3},
		{"image_composite", map[string]any{"id": "phone.jpg", "overlays": []any{map[string]any{"ref": "logo.png", "left": 0, "top": 0}}}, 30, 60, 3},
	} {
		res := e.mustTool(c.tool, c.args)
		w, h, b := vipsheader(t, bin, e.body(res["id"].(string)))
		if w != c.w || h != c.h || b != c.channel {
			t.Fatalf("%s %v: vipsheader reads %d×%d×%d, want %d×%d×%d", c.tool, c.args, w, h, b, c.w, c.h, c.channel)
		}
		// No orientation tag survives to turn the pixels a second time.
		out, _ := exec.Command(bin, "-f", "orientation", writeTemp(t, e.body(res["id"].(string)))).Output()
		if o := string(bytes.TrimSpace(out)); o != "" && o != "1" {
			t.Fatalf("%s left orientation %q", c.tool, o)
		}
	}
}

func TestColourSpacesAndDepth(t *testing.T) {
	e := newEnv(t)
	// Inputs Go cannot write are made with libvips itself: a CMYK JPEG
	// and a grey+alpha PNG.
	if err := libvips.start(); err != nil {
		t.Fatal(err)
	}
	cmyk, err := vips.NewImageFromBuffer(encPNG(t, bands(40, 20, red, blue)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cmyk.ToColorSpace(vips.InterpretationCMYK); err != nil {
		t.Fatal(err)
	}
	cmykJPEG, _, err := cmyk.ExportJpeg(&vips.JpegExportParams{Quality: 95})
	if err != nil {
		t.Fatal(err)
	}
	cmyk.Close()
	prog, err := vips.NewImageFromBuffer(encPNG(t, bands(64, 32, red, blue)))
	if err != nil {
		t.Fatal(err)
	}
	progJPEG, _, err := prog.ExportJpeg(&vips.JpegExportParams{Quality: 90, Interlace: true})
	if err != nil {
		t.Fatal(err)
	}
	prog.Close()
	ga, err := vips.NewImageFromBuffer(encPNG(t, goimage.NewGray(goimage.Rect(0, 0, 30, 20))))
	if err != nil {
		t.Fatal(err)
	}
	if err := ga.BandJoinConst([]float64{0}); err != nil { // fully transparent grey
		t.Fatal(err)
	}
	gaPNG, _, err := ga.ExportPng(vips.NewPngExportParams())
	if err != nil {
		t.Fatal(err)
	}
	ga.Close()
	deep := goimage.NewRGBA64(goimage.Rect(0, 0, 12, 10))
	for i := range deep.Pix {
		deep.Pix[i] = 0xFF
	}
	e.upload("cmyk.jpg", cmykJPEG)
	e.upload("progressive.jpg", progJPEG)
	e.upload("ga.png", gaPNG)
	e.upload("deep.png", encPNG(t, deep))
	e.upload("scan.tiff", encTIFF(t, quadrants(30, 20)))
	e.upload("anim.gif", encGIF(t, bands(16, 8, green), bands(16, 8, red)))

	if m := e.mustTool("image_info", map[string]any{"id": "cmyk.jpg"}); num(m, "channels") != 4 || m["has_alpha"] != false {
		t.Fatalf("CMYK info %v", m)
	}
	// CMYK comes out as sRGB with its hues (pure sRGB red and blue are
	// outside the CMYK gamut, so only the dominant channel is checked).
	o := e.check(e.mustTool("image_convert", map[string]any{"id": "cmyk.jpg", "format": "png"}), 40, 20, "png", 3, false)
	if c := at(o.dec.img, 5, 10); int(c.R) < int(c.G)+80 || int(c.R) < int(c.B)+80 {
		t.Fatalf("CMYK red became %v", c)
	}
	o = e.check(e.mustTool("image_resize", map[string]any{"id": "cmyk.jpg", "width": 20}), 20, 10, "jpeg", 3, false)
	if c := at(o.dec.img, 17, 5); int(c.B) < int(c.R)+60 || int(c.B) < int(c.G)+60 {
		t.Fatalf("CMYK blue became %v", c)
	}
	// Progressive JPEG, decoded through shrink-on-load.
	o = e.check(e.mustTool("image_resize", map[string]any{"id": "progressive.jpg", "width": 16}), 16, 8, "jpeg", 3, false)
	if c := at(o.dec.img, 2, 4); !near(c, red, 60) {
		t.Fatalf("progressive JPEG left became %v", c)
	}
	// Grey with alpha: kept in PNG, flattened onto white in JPEG.
	if m := e.mustTool("image_info", map[string]any{"id": "ga.png"}); num(m, "channels") != 2 || m["has_alpha"] != true {
		t.Fatalf("grey+alpha info %v", m)
	}
	e.check(e.mustTool("image_crop", map[string]any{"id": "ga.png", "left": 0, "top": 0, "width": 10, "height": 10}), 10, 10, "png", 2, true)
	o = e.check(e.mustTool("image_convert", map[string]any{"id": "ga.png", "format": "jpeg"}), 30, 20, "jpeg", 1, false)
	if c := at(o.dec.img, 5, 5); !near(c, color.NRGBA{255, 255, 255, 255}, 3) {
		t.Fatalf("transparent grey should flatten to white, got %v", c)
	}
	// 16 bits per sample: PNG keeps them, JPEG gets 8.
	res := e.mustTool("image_convert", map[string]any{"id": "deep.png", "format": "png", "output": "deep2.png"})
	if m := e.mustTool("image_info", map[string]any{"id": res["id"]}); num(m, "bit_depth") != 16 || num(m, "channels") != 3 {
		t.Fatalf("16-bit PNG → PNG: %v", m)
	}
	o = e.check(e.mustTool("image_convert", map[string]any{"id": "deep.png", "format": "jpeg"}), 12, 10, "jpeg", 3, false)
	if c := at(o.dec.img, 5, 5); !near(c, color.NRGBA{255, 255, 255, 255}, 3) {
		t.Fatalf("16-bit white became %v", c)
	}
	// TIFF and GIF (first frame) through toBase64.
	for ref, want := range map[string]color.NRGBA{"scan.tiff": red, "anim.gif": green} {
		m := e.mustTool("image_to_base64", map[string]any{"id": ref, "format": "png"})
		raw, _ := base64.StdEncoding.DecodeString(m["base64"].(string))
		if c := at(decode(t, raw).img, 1, 1); !near(c, want, 10) {
			t.Fatalf("%s top-left %v, want %v", ref, c, want)
		}
	}
}
