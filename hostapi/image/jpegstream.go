package image

/*
#cgo pkg-config: vips libjpeg libwebp
#cgo LDFLAGS: -lm
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>
#include <vips/vips.h>
#include <webp/encode.h>
#include "reduce.h"
#include "jpegpar.h"

// A JPEG decoded by libjpeg on one thread while libvips resizes and
// encodes the rows already decoded on others (see jpegstream.go).

typedef struct {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	char msg[JMSG_LENGTH_MAX];
} mc_jerr;

typedef struct {
	struct jpeg_decompress_struct d;
	mc_jerr err;
	int created;
	unsigned char *pix;
	int width, height, bands;
	size_t stride;
	JOCTET *icc;
	unsigned int icc_len;
	GMutex lock;
	GCond cond;
	int rows;  // rows decoded so far
	int state; // 0 decoding, 1 done, -1 failed, -2 cancelled
	int cancelled; // atomic: the parallel decoder's view of state -2
	int parallel;  // jpegpar.c decoded the scan: 1 on one thread, 2 on two
	unsigned char *scratch; // rows libjpeg decodes again after jpegpar.c gave up
	char why[JMSG_LENGTH_MAX + 64];
} mc_jpeg;

static void mc_error_exit(j_common_ptr c) {
	mc_jerr *e = (mc_jerr *) c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jb, 1);
}

// A file that ends early is an error here, as it is for libvips: libjpeg
// would otherwise go on with grey rows. Other warnings are tolerated.
static void mc_emit(j_common_ptr c, int level) {
	if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF)
		mc_error_exit(c);
}

static mc_jpeg *mc_jpeg_new(void) {
	mc_jpeg *j = g_new0(mc_jpeg, 1);
	g_mutex_init(&j->lock);
	g_cond_init(&j->cond);
	return j;
}

// mc_jpeg_open reads the header of data for decoding at 1/denom scale into
// a buffer of at most max_bytes. 0: ready; 1: not for this path (CMYK,
// 12-bit, too big); -1: damaged (why says how).
static int mc_jpeg_open(mc_jpeg *j, const unsigned char *data, size_t n, int denom, size_t max_bytes) {
	j->d.err = jpeg_std_error(&j->err.pub);
	j->err.pub.error_exit = mc_error_exit;
	j->err.pub.emit_message = mc_emit;
	if (setjmp(j->err.jb)) {
		snprintf(j->why, sizeof j->why, "%s", j->err.msg);
		return -1;
	}
	jpeg_create_decompress(&j->d);
	j->created = 1;
	jpeg_mem_src(&j->d, data, n);
	jpeg_save_markers(&j->d, JPEG_APP0 + 2, 0xFFFF);
	jpeg_read_header(&j->d, TRUE);
	if (j->d.data_precision != 8)
		return 1;
	switch (j->d.jpeg_color_space) {
	case JCS_GRAYSCALE:
		j->d.out_color_space = JCS_GRAYSCALE;
		break;
	case JCS_YCbCr:
	case JCS_RGB:
		j->d.out_color_space = JCS_RGB;
		break;
	default:
		return 1;
	}
	j->d.scale_num = 1;
	j->d.scale_denom = denom;
	jpeg_calc_output_dimensions(&j->d);
	j->width = j->d.output_width;
	j->height = j->d.output_height;
	j->bands = j->d.output_components;
	j->stride = (size_t) j->width * j->bands;
	if (j->width < 1 || j->height < 1 || j->stride * j->height > max_bytes)
		return 1;
	j->pix = g_try_malloc(j->stride * j->height);
	if (!j->pix)
		return 1;
	if (!jpeg_read_icc_profile(&j->d, &j->icc, &j->icc_len))
		j->icc = NULL;
	return 0;
}

static void mc_jpeg_finish(mc_jpeg *j, int state, const char *why) {
	g_mutex_lock(&j->lock);
	if (j->state == 0) {
		j->state = state;
		if (state == -2)
			__atomic_store_n(&j->cancelled, 1, __ATOMIC_RELAXED);
		if (why)
			snprintf(j->why, sizeof j->why, "%s", why);
	}
	g_cond_broadcast(&j->cond);
	g_mutex_unlock(&j->lock);
}

static void mc_jpeg_publish(void *ctx, int rows) {
	mc_jpeg *j = (mc_jpeg *) ctx;
	g_mutex_lock(&j->lock);
	if (rows > j->rows)
		j->rows = rows;
	g_cond_broadcast(&j->cond);
	g_mutex_unlock(&j->lock);
}

// mc_jpeg_decode decodes every row into pix, telling waiting generators
// after each batch of rows. It stops early when cancelled. The scan is
// decoded on up to threads threads (jpegpar.c) when its layout allows,
// otherwise by libjpeg.
static void mc_jpeg_decode(mc_jpeg *j, int threads, size_t min_chunk) {
	int rc = mc_jpar_decode(&j->d, j->pix, j->stride, threads, min_chunk, mc_jpeg_publish, j, &j->cancelled);
	switch (rc) {
	case 1:
	case 2:
		j->parallel = rc;
		mc_jpeg_finish(j, 1, NULL);
		return;
	case -2:
		return;
	}
	if (setjmp(j->err.jb)) {
		mc_jpeg_finish(j, -1, j->err.msg);
		return;
	}
	jpeg_start_decompress(&j->d);
	// Rows the parallel decoder published before it gave up may be in use:
	// libjpeg decodes them again (it must, to get further) into scratch.
	g_mutex_lock(&j->lock);
	int published = j->rows;
	g_mutex_unlock(&j->lock);
	if (published > 0 && !(j->scratch = g_try_malloc(j->stride * 16))) {
		mc_jpeg_finish(j, -1, "out of memory");
		return;
	}
	while (j->d.output_scanline < j->d.output_height) {
		g_mutex_lock(&j->lock);
		int cancelled = j->state == -2;
		g_mutex_unlock(&j->lock);
		if (cancelled)
			return;
		JSAMPROW rows[16];
		int first = j->d.output_scanline;
		int want = j->height - first < 16 ? j->height - first : 16;
		for (int i = 0; i < want; i++)
			rows[i] = first + i < published ? j->scratch + (size_t) i * j->stride : j->pix + (size_t) (first + i) * j->stride;
		int got = 0;
		while (got < want)
			got += jpeg_read_scanlines(&j->d, rows + got, want - got);
		g_mutex_lock(&j->lock);
		if (first + got > j->rows)
			j->rows = first + got;
		g_cond_broadcast(&j->cond);
		g_mutex_unlock(&j->lock);
	}
	mc_jpeg_finish(j, 1, NULL);
}

static void mc_jpeg_cancel(mc_jpeg *j) {
	mc_jpeg_finish(j, -2, "cancelled");
}

// mc_jpeg_wait waits until the first need rows are decoded: 0, or -1 with
// a libvips error when the decoder stopped first.
static int mc_jpeg_wait(void *ctx, int need) {
	mc_jpeg *j = (mc_jpeg *) ctx;
	g_mutex_lock(&j->lock);
	while (j->rows < need && j->state == 0)
		g_cond_wait(&j->cond, &j->lock);
	int ok = j->rows >= need && j->state >= 0;
	g_mutex_unlock(&j->lock);
	if (!ok) {
		vips_error("metaclaw", "%s", j->why);
		return -1;
	}
	return 0;
}

// mc_jpeg_generate hands libvips the rows it asks for once they are
// decoded.
static int mc_jpeg_generate(VipsRegion *out, void *seq, void *a, void *b, gboolean *stop) {
	mc_jpeg *j = (mc_jpeg *) a;
	VipsRect *r = &out->valid;
	if (mc_jpeg_wait(j, r->top + r->height))
		return -1;
	size_t n = (size_t) r->width * j->bands;
	for (int y = 0; y < r->height; y++)
		memcpy(VIPS_REGION_ADDR(out, r->left, r->top + y),
			j->pix + (size_t) (r->top + y) * j->stride + (size_t) r->left * j->bands, n);
	return 0;
}

// mc_yuv fills a WebPPicture's YUV planes from RGB rows as libvips
// computes them, so that only the encoding itself is left once the last
// row is in. Rows go through WebPPictureImportRGB two (or more, an even
// number) at a time: it converts each pair of rows on its own (4:2:0
// chroma from 2 × 2 blocks, no dithering), so the planes are the ones one
// import of the whole picture gives.
typedef struct {
	WebPPicture *pic;
	int width;
	uint8_t *carry; // one row held back for an even row count
	int carried;    // its row number, -1 when none
	int done;       // rows converted
} mc_yuv;

static int mc_yuv_put(mc_yuv *y, const uint8_t *rows, int n, size_t stride) {
	if (n == 0)
		return 0;
	WebPPicture part;
	if (!WebPPictureInit(&part)) {
		vips_error("metaclaw", "libwebp version mismatch");
		return -1;
	}
	part.width = y->width;
	part.height = n;
	if (!WebPPictureImportRGB(&part, rows, (int) stride)) {
		WebPPictureFree(&part);
		vips_error("metaclaw", "libwebp could not take the picture (out of memory?)");
		return -1;
	}
	WebPPicture *pic = y->pic;
	for (int r = 0; r < n; r++)
		memcpy(pic->y + (size_t) (y->done + r) * pic->y_stride, part.y + (size_t) r * part.y_stride, y->width);
	int uvw = (y->width + 1) >> 1, uv0 = y->done >> 1;
	for (int r = 0; r < (n + 1) >> 1; r++) {
		memcpy(pic->u + (size_t) (uv0 + r) * pic->uv_stride, part.u + (size_t) r * part.uv_stride, uvw);
		memcpy(pic->v + (size_t) (uv0 + r) * pic->uv_stride, part.v + (size_t) r * part.uv_stride, uvw);
	}
	WebPPictureFree(&part);
	y->done += n;
	return 0;
}

static int mc_yuv_write(VipsRegion *region, VipsRect *area, void *a) {
	mc_yuv *y = a;
	size_t stride = (size_t) y->width * 3;
	int top = area->top, n = area->height;
	const uint8_t *p = (const uint8_t *) VIPS_REGION_ADDR(region, 0, top);
	size_t rstride = VIPS_REGION_LSKIP(region);
	if (rstride != stride) { // cannot happen: sink_disc hands out full-width rows
		vips_error("metaclaw", "webp: rows of %zu bytes, want %zu", rstride, stride);
		return -1;
	}
	if (y->carried >= 0) {
		// Complete the held-back row's pair with this area's first row.
		uint8_t *pair = g_try_malloc(2 * stride);
		if (!pair) {
			vips_error("metaclaw", "out of memory");
			return -1;
		}
		memcpy(pair, y->carry, stride);
		memcpy(pair + stride, p, stride);
		int rc = mc_yuv_put(y, pair, 2, stride);
		g_free(pair);
		if (rc)
			return -1;
		y->carried = -1;
		p += stride;
		top++;
		n--;
	}
	int even = n & ~1;
	if (mc_yuv_put(y, p, even, stride))
		return -1;
	if (n & 1) {
		if (top + n == y->pic->height) // the picture's last, odd row
			return mc_yuv_put(y, p + (size_t) even * stride, 1, stride);
		memcpy(y->carry, p + (size_t) even * stride, stride);
		y->carried = top + even;
	}
	return 0;
}

// mc_webp_encode writes in as a lossy WebP the way libvips' webpsave does
// (the default preset at Q, method 4, alpha at full quality, no metadata)
// but with libwebp's multi-threaded encoding on, which libvips 8.14 does
// not turn on: the output is the same, the encode ~25% faster on 2 cores.
// With by_rows, an RGB image is converted to YUV row by row as it is
// computed (while the JPEG is still decoding); otherwise, and for other
// images, once complete. The result is g_free()d by the caller.
static int mc_webp_encode(VipsImage *in, int q, int by_rows, void **out, size_t *len) {
	VipsImage *rgb = NULL;
	if (vips_colourspace(in, &rgb, VIPS_INTERPRETATION_sRGB, NULL))
		return -1;
	int w = rgb->Xsize, h = rgb->Ysize, bands = rgb->Bands;
	WebPConfig config;
	WebPPicture pic;
	WebPMemoryWriter writer;
	if (!WebPConfigPreset(&config, WEBP_PRESET_DEFAULT, q) || !WebPPictureInit(&pic)) {
		g_object_unref(rgb);
		vips_error("metaclaw", "libwebp version mismatch");
		return -1;
	}
	config.method = 4;
	config.alpha_quality = 100;
	config.thread_level = 1;
	pic.width = w;
	pic.height = h;
	int ok;
	if (by_rows && bands == 3 && rgb->BandFmt == VIPS_FORMAT_UCHAR) {
		pic.use_argb = 0;
		pic.colorspace = WEBP_YUV420;
		mc_yuv y = { &pic, w, NULL, -1, 0 };
		ok = WebPPictureAlloc(&pic) && (y.carry = g_try_malloc((size_t) w * 3)) != NULL;
		if (ok && vips_sink_disc(rgb, mc_yuv_write, &y)) {
			g_free(y.carry);
			g_object_unref(rgb);
			WebPPictureFree(&pic);
			return -1;
		}
		g_free(y.carry);
		ok = ok && y.done == h;
		g_object_unref(rgb);
	} else {
		size_t n;
		void *mem = vips_image_write_to_memory(rgb, &n);
		g_object_unref(rgb);
		if (!mem) {
			WebPPictureFree(&pic);
			return -1;
		}
		ok = bands == 4 ? WebPPictureImportRGBA(&pic, mem, w * 4) : WebPPictureImportRGB(&pic, mem, w * 3);
		g_free(mem);
	}
	if (!ok) {
		WebPPictureFree(&pic);
		vips_error("metaclaw", "libwebp could not take the picture (out of memory?)");
		return -1;
	}
	WebPMemoryWriterInit(&writer);
	pic.writer = WebPMemoryWrite;
	pic.custom_ptr = &writer;
	ok = WebPEncode(&config, &pic);
	int code = pic.error_code;
	WebPPictureFree(&pic);
	if (!ok) {
		WebPMemoryWriterClear(&writer);
		vips_error("metaclaw", "libwebp failed to encode (error %d)", code);
		return -1;
	}
	*out = g_memdup2(writer.mem, writer.size);
	*len = writer.size;
	WebPMemoryWriterClear(&writer);
	return 0;
}

// mc_jpeg_encode resizes the decoding image to rw × rh (lanczos3), applies
// an EXIF orientation, crops cw × ch at (cl, ct) when cw > 0 (display
// coordinates, as libvips' thumbnail crops) and encodes it: format 0 JPEG,
// 1 WebP, 2 PNG. hs and vs are the scales (rw / width, rh / height);
// webp_by_rows is mc_webp_encode's by_rows. The result is g_free()d by the
// caller.
static int mc_jpeg_encode(mc_jpeg *j, int rw, int rh, double hs, double vs, int cl, int ct, int cw, int ch, int orientation,
	int format, int q, int optimize, int keep_icc, int webp_by_rows, void **out, size_t *len) {
	VipsImage *base = NULL;
	VipsImage *t[4] = { NULL, NULL, NULL, NULL };
	int rc = -1;
	// Smaller on both sides by up to 3× (after shrink-on-load, the usual
	// case): reduced straight from the decoded rows. Further reductions
	// take vips_resize, which box-shrinks before its lanczos3 and so needs
	// no filter hundreds of taps wide.
	int reduce = rw <= j->width && rh <= j->height && (rw < j->width || rh < j->height) &&
		rw * 3 >= j->width && rh * 3 >= j->height;
	if (reduce) {
		if (mc_reduce_image(&base, j->pix, j->stride, j->width, j->height, j->bands, rw, rh, mc_jpeg_wait, j))
			goto done;
	} else {
		base = vips_image_new();
		vips_image_init_fields(base, j->width, j->height, j->bands, VIPS_FORMAT_UCHAR, VIPS_CODING_NONE,
			j->bands == 1 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB, 1.0, 1.0);
		if (vips_image_pipelinev(base, VIPS_DEMAND_STYLE_THINSTRIP, NULL) ||
			vips_image_generate(base, NULL, mc_jpeg_generate, NULL, j, NULL))
			goto done;
	}
	if (keep_icc && j->icc)
		vips_image_set_blob_copy(base, VIPS_META_ICC_NAME, j->icc, j->icc_len);
	VipsImage *cur = base;
	if (!reduce && (hs != 1.0 || vs != 1.0)) {
		if (vips_resize(cur, &t[0], hs, "vscale", vs, "kernel", VIPS_KERNEL_LANCZOS3, NULL))
			goto done;
		cur = t[0];
	}
	if (orientation > 1) {
		if (vips_copy(cur, &t[1], NULL))
			goto done;
		vips_image_set_int(t[1], VIPS_META_ORIENTATION, orientation);
		if (vips_autorot(t[1], &t[2], NULL))
			goto done;
		cur = t[2];
	}
	if (cw > 0) {
		if (vips_extract_area(cur, &t[3], cl, ct, cw, ch, NULL))
			goto done;
		cur = t[3];
	}
	switch (format) {
	case 0:
		rc = vips_jpegsave_buffer(cur, out, len, "Q", q, "optimize_coding", optimize, "strip", !(keep_icc && j->icc), NULL);
		break;
	case 1:
		if (keep_icc && j->icc) // libvips writes the ICC chunk (and EXIF, removed later)
			rc = vips_webpsave_buffer(cur, out, len, "Q", q, NULL);
		else
			rc = mc_webp_encode(cur, q, webp_by_rows, out, len);
		break;
	default:
		rc = vips_pngsave_buffer(cur, out, len, "strip", !(keep_icc && j->icc), NULL);
	}
done:
	for (int i = 3; i >= 0; i--)
		if (t[i])
			g_object_unref(t[i]);
	if (base)
		g_object_unref(base);
	return rc;
}

// mc_jpeg_free releases j; no image may still read from it.
static void mc_jpeg_free(mc_jpeg *j) {
	if (j->created)
		jpeg_destroy_decompress(&j->d);
	free(j->icc);
	g_free(j->pix);
	g_free(j->scratch);
	g_mutex_clear(&j->lock);
	g_cond_clear(&j->cond);
	g_free(j);
}

static char *mc_vips_error(void) {
	char *msg = vips_error_buffer_copy();
	vips_error_clear();
	return msg;
}
*/
import "C"

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// maxStreamBytes bounds the decoded (shrunk) image the streaming path
// holds: 48 MB, a 16-megapixel RGB image. Larger ones take libvips'
// sequential path, which holds a few rows at a time.
const maxStreamBytes = 48 << 20

// webpByRows has WebP pictures converted to YUV as their rows are
// computed rather than once complete; the bytes written are the same
// (tests compare the two).
var webpByRows = true

// jpegThreads caps the threads that decode one JPEG's entropy-coded data,
// and jpegMinChunk is the least data (bytes) worth a thread of its own:
// below twice that, libjpeg decodes the file on one thread as before
// (starting a thread and resynchronising cost more than they save).
// Tests lower jpegMinChunk to run the parallel decoder on small files.
// With one CPU there is nothing to gain: jpegThreads 0 leaves the file to
// libjpeg.
var (
	jpegThreads  = parallelThreads(runtime.NumCPU())
	jpegMinChunk = 128 << 10
)

func parallelThreads(cpus int) int {
	if cpus < 2 {
		return 0
	}
	return 2
}

// streamGeometry is what the streaming path does to the decoded image.
type streamGeometry struct {
	w, h   int // the box, in display orientation (0: unbounded)
	cover  bool
	size   vips.Size
	denom  int // libjpeg scale: 1, 2, 4 or 8
	orient int // EXIF orientation to apply at the end
}

// resizeJPEGStream resizes and encodes a JPEG with its decode overlapping
// the rest: the scan is decoded into memory (reading the whole body from
// memory, which libvips' 4 KB source does not allow) while libvips resizes
// (lanczos3) and encodes the rows already there on its worker threads. For
// a 12-megapixel photo to 800 px the decode is two thirds of the work, and
// its Huffman decoding one thread's work in libjpeg: where the layout and
// scale allow, jpegpar.c decodes it on two threads instead (the pixels are
// libjpeg-turbo's), otherwise libjpeg does on one. ok is false when the file is not for this path (CMYK,
// 12-bit, an output format or metadata it does not write, a decoded image
// above maxStreamBytes); the caller then takes the libvips path.
func resizeJPEGStream(ctx context.Context, src *source, g streamGeometry, enc encoding, limit int64) (out *encoded, ok bool, err error) {
	if enc.meta == metaAll || !writable(enc.format) || len(src.data) == 0 {
		return nil, false, nil
	}
	j := C.mc_jpeg_new()
	var pin runtime.Pinner // libjpeg reads the body from C while we wait
	pin.Pin(&src.data[0])
	decoding := false
	done := make(chan struct{})
	defer func() {
		if decoding {
			C.mc_jpeg_cancel(j)
			<-done
		}
		C.mc_jpeg_free(j)
		pin.Unpin()
	}()
	switch C.mc_jpeg_open(j, (*C.uchar)(unsafe.Pointer(&src.data[0])), C.size_t(len(src.data)), C.int(g.denom), maxStreamBytes) {
	case 1:
		return nil, false, nil
	case -1:
		return nil, true, apierr.New(apierr.FileReadFailed, "cannot decode the JPEG image %q: %s; the file is corrupt or truncated", src.file.Name, C.GoString(&j.why[0]))
	}
	// The fit is worked out as displayed; the scales are then applied to
	// the stored (unturned) image and the crop after turning it.
	iw, ih := int(j.width), int(j.height)
	if rotated(g.orient) {
		iw, ih = ih, iw
	}
	geo := fitGeometry(iw, ih, g.w, g.h, g.cover, g.size)
	hs, vs := geo.hs, geo.vs
	if rotated(g.orient) {
		hs, vs = vs, hs
	}
	if err := checkSides(enc.format, geo.outW(), geo.outH()); err != nil {
		return nil, true, err
	}
	go func() {
		C.mc_jpeg_decode(j, C.int(jpegThreads), C.size_t(jpegMinChunk))
		close(done)
	}()
	decoding = true
	stop := context.AfterFunc(ctx, func() { C.mc_jpeg_cancel(j) })
	defer stop()

	q := enc.quality
	if q <= 0 {
		q = defaultQuality
	}
	format := C.int(2)
	switch enc.format {
	case formatJPEG:
		format = 0
	case formatWebP:
		format = 1
	}
	optimize := int64(geo.outW())*int64(geo.outH()) <= maxOptimizedJPEGPixels
	var buf unsafe.Pointer
	var n C.size_t
	rw, rh := geo.rw, geo.rh // as stored
	if rotated(g.orient) {
		rw, rh = rh, rw
	}
	rc := C.mc_jpeg_encode(j, C.int(rw), C.int(rh), C.double(hs), C.double(vs), C.int(geo.crop.left), C.int(geo.crop.top), C.int(geo.crop.width), C.int(geo.crop.height),
		C.int(g.orient), format, C.int(q), cbool(optimize), cbool(enc.meta == metaProfile), cbool(webpByRows), &buf, &n)
	// No more rows are needed: a crop may have left the last ones
	// undecoded, a failed pipeline all of them. (When the decoder has
	// finished, this changes nothing.)
	C.mc_jpeg_cancel(j)
	<-done
	decoding = false
	if rc != 0 {
		msg := C.mc_vips_error()
		reason := strings.TrimSpace(C.GoString(msg))
		C.free(unsafe.Pointer(msg))
		if err := ctx.Err(); err != nil {
			return nil, true, apierr.From(err)
		}
		if j.state == -1 {
			reason = C.GoString(&j.why[0])
		}
		return nil, true, apierr.New(apierr.FileReadFailed, "cannot decode the JPEG image %q: %s; the file is corrupt or truncated", src.file.Name, shortReason(reason))
	}
	defer C.g_free(C.gpointer(buf))
	if err := pastDeadline(ctx); err != nil {
		return nil, true, err
	}
	if j.state == -1 { // the rows used came, but the file turned out damaged
		return nil, true, apierr.New(apierr.FileReadFailed, "cannot decode the JPEG image %q: %s; the file is corrupt or truncated", src.file.Name, C.GoString(&j.why[0]))
	}
	if int64(n) > limit {
		return nil, true, apierr.New(apierr.TooLarge, "the %s output would be bigger than the %s per-file limit; make it smaller (fewer pixels, jpeg or webp, lower quality)",
			strings.ToUpper(enc.format), humanBytes(limit))
	}
	data := C.GoBytes(buf, C.int(n))
	if enc.format == formatWebP {
		data = webpWithoutMetadata(data, enc.meta == metaProfile)
	}
	return &encoded{data: data, width: geo.outW(), height: geo.outH(), format: enc.format}, true, nil
}

// decodeJPEG decodes all of a JPEG at 1/denom scale into memory as the
// streaming path does, on up to threads threads with chunks of at least
// minChunk bytes; parallel says whether jpegpar.c decoded the scan rather
// than libjpeg (0), on one thread (1: the threads never fell into step)
// or two (2). Tests compare the two decoders through it. ok is false
// when the streaming path would not take the file.
func decodeJPEG(data []byte, denom, threads, minChunk int) (pix []byte, w, h, bands, parallel int, ok bool, err error) {
	if len(data) == 0 {
		return nil, 0, 0, 0, 0, false, nil
	}
	j := C.mc_jpeg_new()
	defer C.mc_jpeg_free(j)
	var pin runtime.Pinner
	pin.Pin(&data[0])
	defer pin.Unpin()
	switch C.mc_jpeg_open(j, (*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)), C.int(denom), maxStreamBytes) {
	case 1:
		return nil, 0, 0, 0, 0, false, nil
	case -1:
		return nil, 0, 0, 0, 0, true, errors.New(C.GoString(&j.why[0]))
	}
	C.mc_jpeg_decode(j, C.int(threads), C.size_t(minChunk))
	if j.state != 1 {
		return nil, 0, 0, 0, 0, true, errors.New(C.GoString(&j.why[0]))
	}
	w, h, bands = int(j.width), int(j.height), int(j.bands)
	return C.GoBytes(unsafe.Pointer(j.pix), C.int(w*h*bands)), w, h, bands, int(j.parallel), true, nil
}

// pastDeadline is TIMEOUT (or CANCELLED) once ctx is done or its deadline
// has passed. The work can finish after the deadline before ctx says so:
// on a busy machine the timer that cancels ctx may run late; the call is
// still over its time and writes nothing.
func pastDeadline(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return apierr.From(err)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return apierr.From(context.DeadlineExceeded)
	}
	return nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// shortReason is the first line of a libvips error, without the operation
// prefixes it stacks up.
func shortReason(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "the data does not parse as JPEG"
	}
	return s
}
