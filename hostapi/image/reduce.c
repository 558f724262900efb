// A lanczos3 reduction of 8-bit rows, done in one pass per output row:
// the rows it needs are combined vertically into one row of 16-bit
// samples, which is then reduced horizontally. libvips 8.14 takes two
// passes for this (reducev, then reduceh with a scalar inner loop) and,
// for a 1000 × 750 image to 800 × 600, three times the CPU; the weights
// here are exact for each output pixel rather than taken from a table of
// 65 sub-pixel positions. See reduce.h.

#pragma GCC optimize("O3")

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vips/vips.h>

#include "reduce.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// Weights are fixed point with 14 fraction bits; the vertical pass keeps 4
// bits of fraction in its 16-bit samples (so a lobe's overshoot survives
// to the horizontal pass); the horizontal pass rounds to 8 bits.
#define WBITS 14
#define VFRAC 4
#define VSHIFT (WBITS - VFRAC)
#define HSHIFT (WBITS + VFRAC)

// taps is one axis's filter: for output i, weights w[i*n .. i*n+n) apply
// to input samples first[i] .. first[i]+n-1.
typedef struct {
	int n;
	int *first;
	int16_t *w;
} taps;

static double lanczos3(double x) {
	if (x == 0)
		return 1;
	if (x <= -3 || x >= 3)
		return 0;
	double px = M_PI * x;
	return 3 * sin(px) * sin(px / 3) / (px * px);
}

static void taps_free(taps *t) {
	g_free(t->first);
	g_free(t->w);
}

// taps_make builds the filter reducing in samples to out (out <= in),
// centres aligned, edges extended by copying the edge sample. pad rounds
// the tap count up (the horizontal pass reads 8 at a time). Every first
// index stays within [0, in), and first + n may pass in only by the
// zero-weighted padding.
static int taps_make(taps *t, int in, int out, int pad) {
	double scale = (double) in / out;
	double support = 3 * scale;
	// Weights are non-zero strictly inside (centre - support, centre +
	// support): at most ceil(2 support) samples.
	int n = (int) ceil(2 * support);
	n = (n + pad - 1) / pad * pad;
	t->n = n;
	t->first = g_try_new0(int, out);
	t->w = g_try_new0(int16_t, (size_t) out * n);
	double *f = g_try_new(double, n);
	if (!t->first || !t->w || !f) {
		g_free(f);
		taps_free(t);
		return -1;
	}
	for (int o = 0; o < out; o++) {
		double centre = (o + 0.5) * scale - 0.5;
		int lo = (int) floor(centre - support) + 1;
		// The window moved inside the image; weights of samples beyond
		// an edge land on the edge sample.
		int start = lo < 0 ? 0 : lo;
		if (start > in - 1)
			start = in - 1;
		memset(f, 0, sizeof(double) * n);
		double sum = 0;
		for (int k = 0; k < n; k++) {
			double v = lanczos3((lo + k - centre) / scale);
			if (v == 0)
				continue;
			int at = lo + k;
			at = at < 0 ? 0 : at >= in ? in - 1 : at;
			if (at - start < 0 || at - start >= n)
				continue; // cannot happen: the window spans fewer than n samples
			f[at - start] += v;
			sum += v;
		}
		// Quantise to weights summing to exactly 1 << WBITS: a flat area
		// stays flat. The rounding error goes to the largest weight.
		int16_t *w = t->w + (size_t) o * n;
		int total = 0, big = 0;
		for (int k = 0; k < n; k++) {
			w[k] = (int16_t) lrint(f[k] / sum * (1 << WBITS));
			total += w[k];
			if (w[k] > w[big])
				big = k;
		}
		w[big] += (1 << WBITS) - total;
		t->first[o] = start;
	}
	g_free(f);
	return 0;
}

struct mc_reduce {
	const uint8_t *pix;
	size_t stride;
	int in_w, in_h, out_w, bands;
	taps h, v;
	mc_reduce_wait wait;
	void *ctx;
};

// seq is one libvips thread's scratch: the vertical sums of one row and
// that row split into planes of 16-bit samples, padded for 8-wide reads.
// seq is one libvips thread's scratch: one vertically combined row, and
// that row split into planes of 16-bit samples, padded for 8-wide reads.
typedef struct {
	int16_t *row;
	int16_t *planes;
	size_t plane; // samples per plane
} seq;

static void *seq_start(VipsImage *out, void *a, void *b) {
	struct mc_reduce *r = a;
	seq *s = g_new0(seq, 1);
	s->plane = (size_t) r->in_w + r->h.n;
	s->row = g_try_new(int16_t, (size_t) r->in_w * r->bands);
	s->planes = g_try_new0(int16_t, s->plane * r->bands);
	if (!s->row || !s->planes) {
		g_free(s->row);
		g_free(s->planes);
		g_free(s);
		vips_error("metaclaw", "out of memory");
		return NULL;
	}
	return s;
}

static int seq_stop(void *p, void *a, void *b) {
	seq *s = p;
	g_free(s->row);
	g_free(s->planes);
	g_free(s);
	return 0;
}

// vrow is input row k of output row y's window, edges extended.
static inline const uint8_t *vrow(const struct mc_reduce *r, int y, int k) {
	int row = r->v.first[y] + k;
	if (row > r->in_h - 1)
		row = r->in_h - 1;
	return r->pix + (size_t) row * r->stride;
}

// vpass combines the input rows of output row y into s->planes.
static void vpass(const struct mc_reduce *r, seq *s, int y) {
	const int n = r->in_w * r->bands;
	const int taps = r->v.n;
	const int16_t *w = r->v.w + (size_t) y * taps;
	int16_t *restrict out = s->row;
	int i = 0;
#if defined(__SSE2__)
	// 16 samples at a time, two rows at a time: the samples of both rows,
	// interleaved as 16-bit pairs, meet their two weights in one pmaddwd.
	const __m128i zero = _mm_setzero_si128();
	const __m128i round = _mm_set1_epi32(1 << (VSHIFT - 1));
	for (; i + 16 <= n; i += 16) {
		__m128i a0 = round, a1 = round, a2 = round, a3 = round;
		for (int k = 0; k < taps; k += 2) {
			int more = k + 1 < taps;
			__m128i c = _mm_set1_epi32((int32_t) ((uint32_t) (uint16_t) w[k] | (uint32_t) (uint16_t) (more ? w[k + 1] : 0) << 16));
			__m128i p = _mm_loadu_si128((const __m128i *) (vrow(r, y, k) + i));
			__m128i q = more ? _mm_loadu_si128((const __m128i *) (vrow(r, y, k + 1) + i)) : zero;
			__m128i pl = _mm_unpacklo_epi8(p, zero), ph = _mm_unpackhi_epi8(p, zero);
			__m128i ql = _mm_unpacklo_epi8(q, zero), qh = _mm_unpackhi_epi8(q, zero);
			a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi16(pl, ql), c));
			a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi16(pl, ql), c));
			a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi16(ph, qh), c));
			a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi16(ph, qh), c));
		}
		_mm_storeu_si128((__m128i *) (out + i), _mm_packs_epi32(_mm_srai_epi32(a0, VSHIFT), _mm_srai_epi32(a1, VSHIFT)));
		_mm_storeu_si128((__m128i *) (out + i + 8), _mm_packs_epi32(_mm_srai_epi32(a2, VSHIFT), _mm_srai_epi32(a3, VSHIFT)));
	}
#endif
	for (; i < n; i++) {
		int32_t acc = 1 << (VSHIFT - 1);
		for (int k = 0; k < taps; k++)
			acc += w[k] * vrow(r, y, k)[i];
		out[i] = (int16_t) (acc >> VSHIFT);
	}
	int16_t *restrict d0 = s->planes;
	switch (r->bands) {
	case 1:
		memcpy(d0, out, sizeof(int16_t) * n);
		break;
	case 3: {
		int16_t *restrict d1 = d0 + s->plane, *restrict d2 = d1 + s->plane;
		for (int x = 0; x < r->in_w; x++) {
			d0[x] = out[3 * x];
			d1[x] = out[3 * x + 1];
			d2[x] = out[3 * x + 2];
		}
		break;
	}
	default:
		for (int x = 0; x < r->in_w; x++)
			for (int b = 0; b < r->bands; b++)
				d0[b * s->plane + x] = out[x * r->bands + b];
	}
}

// hpass reduces one plane to the output columns [left, left + width),
// written to q onwards, bands bytes apart.
static void hpass(const struct mc_reduce *r, const int16_t *plane, int left, int width, uint8_t *q, int bands) {
	const int n = r->h.n;
	int x = left;
	const int end = left + width;
#if defined(__SSE2__)
	// Four outputs at a time: four pmaddwd sums, added across by a 4 × 4
	// transpose, rounded and packed together.
	const __m128i round = _mm_set1_epi32(1 << (HSHIFT - 1));
	for (; x + 4 <= end; x += 4) {
		__m128i s[4];
		for (int o = 0; o < 4; o++) {
			const int16_t *p = plane + r->h.first[x + o];
			const int16_t *w = r->h.w + (size_t) (x + o) * n;
			__m128i acc = _mm_madd_epi16(_mm_loadu_si128((const __m128i *) p), _mm_loadu_si128((const __m128i *) w));
			for (int k = 8; k < n; k += 8)
				acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_loadu_si128((const __m128i *) (p + k)), _mm_loadu_si128((const __m128i *) (w + k))));
			s[o] = acc;
		}
		__m128i t0 = _mm_unpacklo_epi32(s[0], s[1]), t1 = _mm_unpackhi_epi32(s[0], s[1]);
		__m128i t2 = _mm_unpacklo_epi32(s[2], s[3]), t3 = _mm_unpackhi_epi32(s[2], s[3]);
		__m128i sum = _mm_add_epi32(_mm_add_epi32(_mm_unpacklo_epi64(t0, t2), _mm_unpackhi_epi64(t0, t2)),
			_mm_add_epi32(_mm_unpacklo_epi64(t1, t3), _mm_unpackhi_epi64(t1, t3)));
		sum = _mm_srai_epi32(_mm_add_epi32(sum, round), HSHIFT);
		__m128i px = _mm_packus_epi16(_mm_packs_epi32(sum, sum), sum);
		uint32_t four = (uint32_t) _mm_cvtsi128_si32(px);
		q[0] = (uint8_t) four;
		q[bands] = (uint8_t) (four >> 8);
		q[2 * bands] = (uint8_t) (four >> 16);
		q[3 * bands] = (uint8_t) (four >> 24);
		q += 4 * bands;
	}
#endif
	for (; x < end; x++) {
		const int16_t *p = plane + r->h.first[x];
		const int16_t *w = r->h.w + (size_t) x * n;
		int acc = 0;
		for (int k = 0; k < n; k++)
			acc += p[k] * w[k];
		int v = (acc + (1 << (HSHIFT - 1))) >> HSHIFT;
		*q = (uint8_t) (v < 0 ? 0 : v > 255 ? 255 : v);
		q += bands;
	}
}

static int reduce_gen(VipsRegion *out, void *p, void *a, void *b, gboolean *stop) {
	struct mc_reduce *r = a;
	seq *s = p;
	VipsRect *rect = &out->valid;
	int last = rect->top + rect->height - 1;
	int need = r->v.first[last] + r->v.n;
	if (need > r->in_h)
		need = r->in_h;
	if (r->wait(r->ctx, need))
		return -1;
	for (int y = rect->top; y <= last; y++) {
		vpass(r, s, y);
		uint8_t *q = (uint8_t *) VIPS_REGION_ADDR(out, rect->left, y);
		for (int b = 0; b < r->bands; b++)
			hpass(r, s->planes + b * s->plane, rect->left, rect->width, q + b, r->bands);
	}
	return 0;
}

static void reduce_free(VipsImage *image, struct mc_reduce *r) {
	taps_free(&r->h);
	taps_free(&r->v);
	g_free(r);
}

int mc_reduce_image(VipsImage **out, const uint8_t *pix, size_t stride, int in_w, int in_h, int bands,
	int out_w, int out_h, mc_reduce_wait wait, void *ctx) {
	if (out_w < 1 || out_h < 1 || out_w > in_w || out_h > in_h || bands < 1 || bands > 4) {
		vips_error("metaclaw", "reduce: %d × %d cannot be reduced to %d × %d", in_w, in_h, out_w, out_h);
		return -1;
	}
	struct mc_reduce *r = g_new0(struct mc_reduce, 1);
	r->pix = pix;
	r->stride = stride;
	r->in_w = in_w;
	r->in_h = in_h;
	r->out_w = out_w;
	r->bands = bands;
	r->wait = wait;
	r->ctx = ctx;
	if (taps_make(&r->h, in_w, out_w, 8) || taps_make(&r->v, in_h, out_h, 1)) {
		taps_free(&r->h);
		taps_free(&r->v);
		g_free(r);
		vips_error("metaclaw", "out of memory");
		return -1;
	}
	VipsImage *im = vips_image_new();
	g_signal_connect(im, "close", G_CALLBACK(reduce_free), r);
	vips_image_init_fields(im, out_w, out_h, bands, VIPS_FORMAT_UCHAR, VIPS_CODING_NONE,
		bands < 3 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB, 1.0, 1.0);
	if (vips_image_pipelinev(im, VIPS_DEMAND_STYLE_THINSTRIP, NULL) ||
		vips_image_generate(im, seq_start, reduce_gen, seq_stop, r, NULL)) {
		g_object_unref(im);
		return -1;
	}
	*out = im;
	return 0;
}
