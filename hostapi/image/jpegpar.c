// A baseline JPEG scan decoded on two threads (see jpegpar.h).
//
// Huffman-coded data has no block boundaries a second thread could start
// from, but a decoder started at an arbitrary bit soon falls into step with
// the true codewords (Klein & Wiseman, "Parallel Huffman decoding with
// applications to JPEG files", 2003). So: thread 0 decodes from the start;
// thread 1 starts at the middle of the data as if a block began there and
// records, for every block it decodes, its bit position, its place in the
// MCU and its coefficients (DC as the coded difference). When thread 0,
// decoding on past the middle, starts a block at a position and MCU place
// thread 1 recorded, everything thread 1 decoded from there on is what
// thread 0 would decode (decoding is deterministic from that state): it
// stops, and thread 1's blocks get their DC values by a running sum from
// thread 0's predictors. With restart markers the data splits exactly at
// an interval instead. Pixels come from the same scaled IDCT and colour
// conversion arithmetic as libjpeg-turbo's, so they are bit for bit those
// of jpeg_read_scanlines at the same scale.
//
// Anything unusual — a layout or scale handled here only by upsampling, a
// bad Huffman code, data that runs into a marker or the end of the file,
// restart markers out of sequence — and the caller decodes with libjpeg,
// which then reports or tolerates it as it always has.

#include <glib.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "jpegpar.h"

#define JP_FB 10      // lookahead bits of the one-step tables
#define JP_PAD 1024   // zero bytes after the data: a block reads < 300 past its start
#define JP_MAXB 10    // blocks per MCU (libjpeg's D_MAX_BLOCKS_IN_MCU)
#define JP_MAX_COEF_BYTES ((size_t) 160 << 20) // address space; about half is used
// Thread 0 also turns its blocks into pixels as it goes; thread 1 only
// stores them. Splitting the data a little before the middle has them
// meet at about the same time.
#define JP_SPLIT 47

// Zig-zag to natural order, with 16 extra entries as libjpeg has: a run
// past the end of a corrupt block lands on coefficient 63.
static const uint8_t jp_zz[80] = {
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
	63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
};

typedef struct {
	uint16_t fast[1 << JP_FB];   // (length << 8) | symbol; 0: a longer code
	int16_t fast_ac[1 << JP_FB]; // (value << 8) | (run << 4) | bits used; 0: none
	int32_t maxcode[17];         // largest code of each length, -1: none
	int32_t valoff[17];
	uint8_t vals[256];
} jp_huff;

typedef struct {
	int ss;         // IDCT output side: 1, 2 or 4
	int bh, bv;     // blocks per MCU across and down
	int w;          // plane width: MCUs per row × bh × ss
	int rows;       // plane rows per MCU row: bv × ss
	int16_t q[64];  // dequantisation, natural order
} jp_comp;

typedef struct {
	uint8_t *buf; // unstuffed data, JP_PAD zero bytes after
	size_t len, buf_size;
	size_t *rst; // with restarts: where each interval starts in buf
	long nrst;
	long ri;
	int ncomp, nb;
	int bcomp[JP_MAXB]; // component (index into comp) of each block of an MCU
	const jp_huff *dc[JP_MAXB], *ac[JP_MAXB];
	jp_huff huff[8];
	int scomp[4]; // components in scan order
	jp_comp comp[3];
	long mcux, mcuy, total_mcus, total_blocks;
	int out_w, out_h, bands, rows_per_mcu;
	uint8_t *out;
	size_t stride;
	int cr_r[256], cb_b[256];
	int64_t cr_g[256], cb_g[256];
	uint8_t limit[1024]; // libjpeg's post-IDCT range limit, indexed & 1023
} jp_plan;

typedef struct {
	const uint8_t *base, *p;
	uint64_t acc;
	int n;
} jp_bits;

static inline uint64_t jp_load(const uint8_t *p) {
	uint64_t w;
	memcpy(&w, p, 8);
	return __builtin_bswap64(w);
}

// jp_refill leaves 56 to 63 bits in acc (Giesen's branchless refill).
static inline void jp_refill(jp_bits *b) {
	b->acc |= jp_load(b->p) >> b->n;
	b->p += (63 - b->n) >> 3;
	b->n |= 56;
}

static inline uint64_t jp_pos(const jp_bits *b) {
	return (uint64_t) (b->p - b->base) * 8 - (uint64_t) b->n;
}

static inline void jp_seek(jp_bits *b, uint64_t pos) {
	b->p = b->base + pos / 8;
	b->acc = 0;
	b->n = 0;
	jp_refill(b);
	b->acc <<= pos % 8;
	b->n -= (int) (pos % 8);
}

static inline int jp_extend(int v, int s) {
	return v < (1 << (s - 1)) ? v - (1 << s) + 1 : v;
}

static inline int jp_get(jp_bits *b, int s) {
	int v = (int) (b->acc >> (64 - s));
	b->acc <<= s;
	b->n -= s;
	return jp_extend(v, s);
}

// jp_sym decodes one Huffman symbol (acc holds >= 16 bits): the symbol, or
// -1 for a bad code.
static inline int jp_sym(jp_bits *b, const jp_huff *h) {
	unsigned e = h->fast[b->acc >> (64 - JP_FB)];
	if (e) {
		int l = e >> 8;
		b->acc <<= l;
		b->n -= l;
		return e & 255;
	}
	for (int l = JP_FB + 1; l <= 16; l++) {
		int32_t code = (int32_t) (b->acc >> (64 - l));
		if (code <= h->maxcode[l]) {
			int32_t i = h->valoff[l] + code;
			if (i < 0 || i > 255)
				return -1;
			b->acc <<= l;
			b->n -= l;
			return h->vals[i];
		}
	}
	return -1;
}

// jp_block decodes one block into blk (zeroed, natural order); blk[0] gets
// the DC difference. 0, or -1 for a bad code.
static inline int jp_block(jp_bits *b, const jp_huff *dc, const jp_huff *ac, int16_t *blk) {
	jp_refill(b);
	int s = jp_sym(b, dc);
	if (s < 0)
		return -1;
	blk[0] = (int16_t) (s ? jp_get(b, s) : 0);
	for (int k = 1; k < 64;) {
		jp_refill(b);
		int fac = ac->fast_ac[b->acc >> (64 - JP_FB)];
		if (fac) {
			int l = fac & 15;
			k += (fac >> 4) & 15;
			b->acc <<= l;
			b->n -= l;
			blk[jp_zz[k]] = (int16_t) (fac >> 8);
			k++;
			continue;
		}
		int rs = jp_sym(b, ac);
		if (rs < 0)
			return -1;
		int r = rs >> 4;
		s = rs & 15;
		if (s) {
			k += r;
			blk[jp_zz[k]] = (int16_t) jp_get(b, s);
			k++;
		} else {
			if (r != 15)
				break;
			k += 16;
		}
	}
	return 0;
}

// jp_build makes a decoding table, checking it as libjpeg's
// jpeg_make_d_derived_tbl does. 0, or -1 when libjpeg would refuse it.
static int jp_build(jp_huff *h, const JHUFF_TBL *t, int isdc) {
	memset(h, 0, sizeof *h);
	uint8_t size[257];
	int32_t code[257];
	int n = 0;
	for (int l = 1; l <= 16; l++) {
		if (n + t->bits[l] > 256)
			return -1;
		for (int i = 0; i < t->bits[l]; i++)
			size[n++] = (uint8_t) l;
	}
	size[n] = 0;
	int32_t c = 0;
	int si = size[0], p = 0;
	while (size[p]) {
		while (size[p] == si)
			code[p++] = c++;
		if (c >= ((int32_t) 1 << si))
			return -1;
		c <<= 1;
		si++;
	}
	p = 0;
	for (int l = 1; l <= 16; l++) {
		if (t->bits[l]) {
			h->valoff[l] = p - code[p];
			p += t->bits[l];
			h->maxcode[l] = code[p - 1];
		} else {
			h->maxcode[l] = -1;
		}
	}
	for (int i = 0; i < n; i++) {
		h->vals[i] = t->huffval[i];
		if (isdc && t->huffval[i] > 15)
			return -1;
	}
	for (int i = 0; i < n; i++) {
		int l = size[i];
		if (l > JP_FB)
			continue;
		int first = code[i] << (JP_FB - l), cnt = 1 << (JP_FB - l);
		for (int j = 0; j < cnt; j++)
			h->fast[first + j] = (uint16_t) ((l << 8) | t->huffval[i]);
	}
	if (isdc)
		return 0;
	for (int i = 0; i < (1 << JP_FB); i++) {
		unsigned e = h->fast[i];
		if (!e)
			continue;
		int l = e >> 8, rs = e & 255, r = rs >> 4, s = rs & 15;
		if (!s || l + s > JP_FB)
			continue;
		int raw = (i >> (JP_FB - l - s)) & ((1 << s) - 1);
		int v = jp_extend(raw, s);
		if (v < -128 || v > 127)
			continue;
		h->fast_ac[i] = (int16_t) (v * 256 + (r << 4) + l + s);
	}
	return 0;
}

// ---- libjpeg-turbo's scaled IDCTs (jidctred.c), same arithmetic ----

#define JP_CONST_BITS 13
#define JP_PASS1_BITS 2
#define JP_DESCALE(x, n) (((x) + ((int64_t) 1 << ((n) - 1))) >> (n))
#define JP_LSHIFT(a, b) ((int64_t) ((uint64_t) (int64_t) (a) << (b)))
#define JP_DQ(c, q) ((int) (c) * (int) (q))

static void jp_idct_1x1(const int16_t *in, const int16_t *q, uint8_t *out, int ostride, const uint8_t *lim) {
	(void) ostride;
	int dc = JP_DQ(in[0], q[0]);
	dc = (int) JP_DESCALE((int64_t) dc, 3);
	out[0] = lim[dc & 1023];
}

#if defined(__SSE2__)
// Pass 1 of the scaled IDCTs on all eight columns at once, in 32-bit
// lanes (dequantised in 16 bits, as libjpeg-turbo's own SIMD does). For
// coefficients any encoder writes — dequantised values within 16 bits —
// this is exactly the arithmetic of the scalar pass (whose zero-column
// shortcut gives the same values as the full formula). On coefficients
// beyond that, from a hostile file, the pixels are still computed
// deterministically, just not as jidctred.c's 64-bit arithmetic would.

static inline __m128i jp_dqrow(const int16_t *in, const int16_t *q, int r) {
	return _mm_mullo_epi16(_mm_loadu_si128((const __m128i *) (in + 8 * r)), _mm_loadu_si128((const __m128i *) (q + 8 * r)));
}

static inline __m128i jp_madd(__m128i pairs, int16_t a, int16_t b) {
	return _mm_madd_epi16(pairs, _mm_set_epi16(b, a, b, a, b, a, b, a));
}

// jp_pass1_2x2 fills ws[0..7] and ws[8..15] as jp_idct_2x2's pass 1 does.
static inline void jp_pass1_2x2(const int16_t *in, const int16_t *q, int *ws) {
	__m128i d0 = jp_dqrow(in, q, 0), d1 = jp_dqrow(in, q, 1), d3 = jp_dqrow(in, q, 3);
	__m128i d5 = jp_dqrow(in, q, 5), d7 = jp_dqrow(in, q, 7);
	const __m128i round = _mm_set1_epi32(1 << 12);
	for (int h = 0; h < 2; h++) {
		__m128i p75 = h ? _mm_unpackhi_epi16(d7, d5) : _mm_unpacklo_epi16(d7, d5);
		__m128i p31 = h ? _mm_unpackhi_epi16(d3, d1) : _mm_unpacklo_epi16(d3, d1);
		__m128i x0 = h ? _mm_unpackhi_epi16(d0, d0) : _mm_unpacklo_epi16(d0, d0);
		__m128i tmp10 = _mm_slli_epi32(_mm_srai_epi32(x0, 16), 15);
		__m128i tmp0 = _mm_add_epi32(jp_madd(p75, -5906, 6967), jp_madd(p31, -10426, 29692));
		tmp10 = _mm_add_epi32(tmp10, round);
		_mm_storeu_si128((__m128i *) (ws + 4 * h), _mm_srai_epi32(_mm_add_epi32(tmp10, tmp0), 13));
		_mm_storeu_si128((__m128i *) (ws + 8 + 4 * h), _mm_srai_epi32(_mm_sub_epi32(tmp10, tmp0), 13));
	}
}

// jp_pass1_4x4 fills ws (4 rows of 8) as jp_idct_4x4's pass 1 does.
static inline void jp_pass1_4x4(const int16_t *in, const int16_t *q, int *ws) {
	__m128i d0 = jp_dqrow(in, q, 0), d1 = jp_dqrow(in, q, 1), d2 = jp_dqrow(in, q, 2), d3 = jp_dqrow(in, q, 3);
	__m128i d5 = jp_dqrow(in, q, 5), d6 = jp_dqrow(in, q, 6), d7 = jp_dqrow(in, q, 7);
	const __m128i round = _mm_set1_epi32(1 << 11);
	for (int h = 0; h < 2; h++) {
		__m128i p26 = h ? _mm_unpackhi_epi16(d2, d6) : _mm_unpacklo_epi16(d2, d6);
		__m128i p75 = h ? _mm_unpackhi_epi16(d7, d5) : _mm_unpacklo_epi16(d7, d5);
		__m128i p31 = h ? _mm_unpackhi_epi16(d3, d1) : _mm_unpacklo_epi16(d3, d1);
		__m128i x0 = h ? _mm_unpackhi_epi16(d0, d0) : _mm_unpacklo_epi16(d0, d0);
		__m128i tmp0 = _mm_add_epi32(_mm_slli_epi32(_mm_srai_epi32(x0, 16), 14), round);
		__m128i tmp2 = jp_madd(p26, 15137, -6270);
		__m128i tmp10 = _mm_add_epi32(tmp0, tmp2), tmp12 = _mm_sub_epi32(tmp0, tmp2);
		__m128i o0 = _mm_add_epi32(jp_madd(p75, -1730, 11893), jp_madd(p31, -17799, 8697));
		__m128i o2 = _mm_add_epi32(jp_madd(p75, -4176, -4926), jp_madd(p31, 7373, 20995));
		_mm_storeu_si128((__m128i *) (ws + 4 * h), _mm_srai_epi32(_mm_add_epi32(tmp10, o2), 12));
		_mm_storeu_si128((__m128i *) (ws + 24 + 4 * h), _mm_srai_epi32(_mm_sub_epi32(tmp10, o2), 12));
		_mm_storeu_si128((__m128i *) (ws + 8 + 4 * h), _mm_srai_epi32(_mm_add_epi32(tmp12, o0), 12));
		_mm_storeu_si128((__m128i *) (ws + 16 + 4 * h), _mm_srai_epi32(_mm_sub_epi32(tmp12, o0), 12));
	}
}
#endif

static void jp_idct_2x2(const int16_t *in, const int16_t *q, uint8_t *out, int ostride, const uint8_t *lim) {
	int ws[16];
#if defined(__SSE2__)
	jp_pass1_2x2(in, q, ws);
#else
	for (int c = 0; c < 8; c++) {
		if (c == 2 || c == 4 || c == 6)
			continue;
		const int16_t *ip = in + c;
		const int16_t *qp = q + c;
		if (ip[8] == 0 && ip[24] == 0 && ip[40] == 0 && ip[56] == 0) {
			int dc = (int) JP_LSHIFT(JP_DQ(ip[0], qp[0]), JP_PASS1_BITS);
			ws[c] = dc;
			ws[8 + c] = dc;
			continue;
		}
		int64_t tmp10 = JP_LSHIFT((int64_t) JP_DQ(ip[0], qp[0]), JP_CONST_BITS + 2);
		int64_t tmp0 = (int64_t) JP_DQ(ip[56], qp[56]) * -5906;
		tmp0 += (int64_t) JP_DQ(ip[40], qp[40]) * 6967;
		tmp0 += (int64_t) JP_DQ(ip[24], qp[24]) * -10426;
		tmp0 += (int64_t) JP_DQ(ip[8], qp[8]) * 29692;
		ws[c] = (int) JP_DESCALE(tmp10 + tmp0, JP_CONST_BITS - JP_PASS1_BITS + 2);
		ws[8 + c] = (int) JP_DESCALE(tmp10 - tmp0, JP_CONST_BITS - JP_PASS1_BITS + 2);
	}
#endif
	for (int r = 0; r < 2; r++) {
		const int *w = ws + 8 * r;
		uint8_t *o = out + (size_t) r * ostride;
		if (w[1] == 0 && w[3] == 0 && w[5] == 0 && w[7] == 0) {
			uint8_t v = lim[(int) JP_DESCALE((int64_t) w[0], JP_PASS1_BITS + 3) & 1023];
			o[0] = v;
			o[1] = v;
			continue;
		}
		int64_t tmp10 = JP_LSHIFT((int64_t) w[0], JP_CONST_BITS + 2);
		int64_t tmp0 = (int64_t) w[7] * -5906 + (int64_t) w[5] * 6967 + (int64_t) w[3] * -10426 + (int64_t) w[1] * 29692;
		o[0] = lim[(int) JP_DESCALE(tmp10 + tmp0, JP_CONST_BITS + JP_PASS1_BITS + 3 + 2) & 1023];
		o[1] = lim[(int) JP_DESCALE(tmp10 - tmp0, JP_CONST_BITS + JP_PASS1_BITS + 3 + 2) & 1023];
	}
}

static void jp_idct_4x4(const int16_t *in, const int16_t *q, uint8_t *out, int ostride, const uint8_t *lim) {
	int ws[32];
#if defined(__SSE2__)
	jp_pass1_4x4(in, q, ws);
#else
	for (int c = 0; c < 8; c++) {
		if (c == 4)
			continue;
		const int16_t *ip = in + c;
		const int16_t *qp = q + c;
		int *w = ws + c;
		if (ip[8] == 0 && ip[16] == 0 && ip[24] == 0 && ip[40] == 0 && ip[48] == 0 && ip[56] == 0) {
			int dc = (int) JP_LSHIFT(JP_DQ(ip[0], qp[0]), JP_PASS1_BITS);
			w[0] = w[8] = w[16] = w[24] = dc;
			continue;
		}
		int64_t tmp0 = JP_LSHIFT((int64_t) JP_DQ(ip[0], qp[0]), JP_CONST_BITS + 1);
		int64_t z2 = JP_DQ(ip[16], qp[16]), z3 = JP_DQ(ip[48], qp[48]);
		int64_t tmp2 = z2 * 15137 + z3 * -6270;
		int64_t tmp10 = tmp0 + tmp2, tmp12 = tmp0 - tmp2;
		int64_t z1 = JP_DQ(ip[56], qp[56]);
		z2 = JP_DQ(ip[40], qp[40]);
		z3 = JP_DQ(ip[24], qp[24]);
		int64_t z4 = JP_DQ(ip[8], qp[8]);
		tmp0 = z1 * -1730 + z2 * 11893 + z3 * -17799 + z4 * 8697;
		tmp2 = z1 * -4176 + z2 * -4926 + z3 * 7373 + z4 * 20995;
		w[0] = (int) JP_DESCALE(tmp10 + tmp2, JP_CONST_BITS - JP_PASS1_BITS + 1);
		w[24] = (int) JP_DESCALE(tmp10 - tmp2, JP_CONST_BITS - JP_PASS1_BITS + 1);
		w[8] = (int) JP_DESCALE(tmp12 + tmp0, JP_CONST_BITS - JP_PASS1_BITS + 1);
		w[16] = (int) JP_DESCALE(tmp12 - tmp0, JP_CONST_BITS - JP_PASS1_BITS + 1);
	}
#endif
	for (int r = 0; r < 4; r++) {
		const int *w = ws + 8 * r;
		uint8_t *o = out + (size_t) r * ostride;
		if (w[1] == 0 && w[2] == 0 && w[3] == 0 && w[5] == 0 && w[6] == 0 && w[7] == 0) {
			uint8_t v = lim[(int) JP_DESCALE((int64_t) w[0], JP_PASS1_BITS + 3) & 1023];
			o[0] = o[1] = o[2] = o[3] = v;
			continue;
		}
		int64_t tmp0 = JP_LSHIFT((int64_t) w[0], JP_CONST_BITS + 1);
		int64_t tmp2 = (int64_t) w[2] * 15137 + (int64_t) w[6] * -6270;
		int64_t tmp10 = tmp0 + tmp2, tmp12 = tmp0 - tmp2;
		int64_t z1 = w[7], z2 = w[5], z3 = w[3], z4 = w[1];
		tmp0 = z1 * -1730 + z2 * 11893 + z3 * -17799 + z4 * 8697;
		tmp2 = z1 * -4176 + z2 * -4926 + z3 * 7373 + z4 * 20995;
		o[0] = lim[(int) JP_DESCALE(tmp10 + tmp2, JP_CONST_BITS + JP_PASS1_BITS + 3 + 1) & 1023];
		o[3] = lim[(int) JP_DESCALE(tmp10 - tmp2, JP_CONST_BITS + JP_PASS1_BITS + 3 + 1) & 1023];
		o[1] = lim[(int) JP_DESCALE(tmp12 + tmp0, JP_CONST_BITS + JP_PASS1_BITS + 3 + 1) & 1023];
		o[2] = lim[(int) JP_DESCALE(tmp12 - tmp0, JP_CONST_BITS + JP_PASS1_BITS + 3 + 1) & 1023];
	}
}

static inline uint8_t jp_clamp(int v) {
	return v < 0 ? 0 : v > 255 ? 255 : (uint8_t) v;
}

// jp_render turns MCU row r (its mcux × nb blocks at blocks) into output
// rows, using planes (one per component) as scratch. The blocks' DC values
// are absolute, or when dc is not NULL, are dc[0], dc[1], ... (written
// into the blocks here).
static void jp_render(const jp_plan *p, long r, int16_t *blocks, const int16_t *dc, uint8_t **planes) {
	for (long mx = 0; mx < p->mcux; mx++) {
		int16_t *blk = blocks + (size_t) mx * p->nb * 64;
		if (dc)
			for (int i = 0; i < p->nb; i++)
				blk[64 * i] = dc[mx * p->nb + i];
		for (int i = 0; i < p->ncomp; i++) {
			int c = p->scomp[i];
			const jp_comp *cp = &p->comp[c];
			for (int by = 0; by < cp->bv; by++)
				for (int bx = 0; bx < cp->bh; bx++, blk += 64) {
					uint8_t *o = planes[c] + (size_t) (by * cp->ss) * cp->w + (size_t) (mx * cp->bh + bx) * cp->ss;
					switch (cp->ss) {
					case 1:
						jp_idct_1x1(blk, cp->q, o, cp->w, p->limit);
						break;
					case 2:
						jp_idct_2x2(blk, cp->q, o, cp->w, p->limit);
						break;
					default:
						jp_idct_4x4(blk, cp->q, o, cp->w, p->limit);
					}
				}
		}
	}
	long y0 = r * p->rows_per_mcu;
	int n = p->rows_per_mcu;
	if (y0 + n > p->out_h)
		n = (int) (p->out_h - y0);
	for (int y = 0; y < n; y++) {
		uint8_t *o = p->out + (size_t) (y0 + y) * p->stride;
		const uint8_t *py = planes[0] + (size_t) y * p->comp[0].w;
		if (p->bands == 1) {
			memcpy(o, py, p->out_w);
			continue;
		}
		const uint8_t *pb = planes[1] + (size_t) y * p->comp[1].w;
		const uint8_t *pr = planes[2] + (size_t) y * p->comp[2].w;
		for (int x = 0; x < p->out_w; x++, o += 3) {
			int yy = py[x], cb = pb[x], cr = pr[x];
			o[0] = jp_clamp(yy + p->cr_r[cr]);
			o[1] = jp_clamp(yy + (int) ((p->cb_g[cb] + p->cr_g[cr]) >> 16));
			o[2] = jp_clamp(yy + p->cb_b[cb]);
		}
	}
}

// jp_rows is the number of output rows in the first n MCU rows.
static inline int jp_rows(const jp_plan *p, long n) {
	long rows = n * p->rows_per_mcu;
	return (int) (rows < p->out_h ? rows : p->out_h);
}

static uint8_t *jp_planes(const jp_plan *p, uint8_t **planes) {
	size_t n = 0;
	for (int c = 0; c < p->ncomp; c++)
		n += (size_t) p->comp[c].w * p->comp[c].rows;
	uint8_t *mem = g_try_malloc(n);
	if (!mem)
		return NULL;
	n = 0;
	for (int c = 0; c < p->ncomp; c++) {
		planes[c] = mem + n;
		n += (size_t) p->comp[c].w * p->comp[c].rows;
	}
	return mem;
}

// The store for thread 1's blocks is tens of megabytes for a photo, the
// unstuffed data megabytes; fresh from the system each time, faulting
// their pages in costs more than a tenth of the decode. Two such buffers
// are kept for the next decode (a store is never more than
// JP_MAX_COEF_BYTES).
static GMutex jp_cache_lock;
static void *jp_cache[2]; // the store and the unstuffed data
static size_t jp_cache_size[2];

static void *jp_take(size_t n) {
	g_mutex_lock(&jp_cache_lock);
	int best = -1;
	for (int i = 0; i < 2; i++)
		if (jp_cache[i] && jp_cache_size[i] >= n && (best < 0 || jp_cache_size[i] < jp_cache_size[best]))
			best = i;
	void *m = NULL;
	if (best >= 0) {
		m = jp_cache[best];
		jp_cache[best] = NULL;
	}
	g_mutex_unlock(&jp_cache_lock);
	return m ? m : g_try_malloc(n);
}

// jp_give keeps m (n bytes) for a later jp_take in place of an empty or
// smaller one, and frees what it does not keep.
static void jp_give(void *m, size_t n) {
	if (!m)
		return;
	g_mutex_lock(&jp_cache_lock);
	int slot = !jp_cache[0] ? 0 : !jp_cache[1] ? 1 : jp_cache_size[0] < jp_cache_size[1] ? 0 : 1;
	if (!jp_cache[slot] || jp_cache_size[slot] < n) {
		void *old = jp_cache[slot];
		jp_cache[slot] = m;
		jp_cache_size[slot] = n;
		m = old;
	}
	g_mutex_unlock(&jp_cache_lock);
	g_free(m);
}

// jp_unstuff copies the entropy-coded data (0xFF00 → 0xFF) into p->buf,
// noting where each restart interval starts. 0, or -1 when the data is not
// a clean scan followed by a marker (truncated, restarts out of sequence).
static int jp_unstuff(jp_plan *p, const uint8_t *d, size_t n) {
	p->buf_size = n + JP_PAD;
	p->buf = jp_take(p->buf_size);
	if (!p->buf)
		return -1;
	long intervals = p->ri ? (p->total_mcus + p->ri - 1) / p->ri : 1;
	long cap = 0;
	size_t i = 0, o = 0;
	int ended = 0;
	if (p->ri) {
		cap = intervals < 1024 ? intervals : 1024;
		p->rst = g_try_malloc(sizeof(size_t) * cap);
		if (!p->rst)
			return -1;
		p->rst[p->nrst++] = 0;
	}
	while (i < n) {
		const uint8_t *f = memchr(d + i, 0xFF, n - i);
		size_t run = f ? (size_t) (f - (d + i)) : n - i;
		memcpy(p->buf + o, d + i, run);
		o += run;
		i += run;
		if (!f)
			break;
		size_t j = i + 1;
		while (j < n && d[j] == 0xFF)
			j++;
		if (j >= n)
			break;
		uint8_t m = d[j];
		if (m == 0) {
			p->buf[o++] = 0xFF;
			i = j + 1;
			continue;
		}
		if (p->ri && m >= 0xD0 && m <= 0xD7 && p->nrst < intervals) {
			if (m - 0xD0 != (int) ((p->nrst - 1) & 7))
				return -1;
			if (p->nrst == cap) {
				cap = cap * 2 < intervals ? cap * 2 : intervals;
				size_t *r = g_try_realloc(p->rst, sizeof(size_t) * cap);
				if (!r)
					return -1;
				p->rst = r;
			}
			p->rst[p->nrst++] = o;
			i = j + 1;
			continue;
		}
		ended = 1;
		break;
	}
	if (!ended || (p->ri && p->nrst != intervals))
		return -1;
	p->len = o;
	memset(p->buf + o, 0, JP_PAD);
	return 0;
}

// ---- thread 1 ----

typedef struct {
	const jp_plan *p;
	uint64_t start;  // bit position it starts at
	long first_mcu;  // with restarts: the MCU that starts there (-1: speculative)
	int16_t (*coef)[64];
	int16_t *dc; // each block's DC difference; after the sync, its value
	uint64_t *pos;
	uint8_t *bidx; // block's place in its MCU; 0x80: a new run after a bad code
	long cap;
	long count; // blocks complete (atomic)
	int failed; // with restarts: the data is damaged
	int stop;   // atomic: thread 0 needs no more
	int done;   // atomic: thread 1 has stopped
	GThread *thread;
} jp_spec;

static gpointer jp_spec_run(gpointer arg) {
	jp_spec *s = arg;
	const jp_plan *p = s->p;
	jp_bits b = { p->buf, p->buf, 0, 0 };
	jp_seek(&b, s->start);
	uint64_t end = (uint64_t) p->len * 8;
	int bi = 0;
	uint8_t run = 0x80;
	long m = s->first_mcu, count = 0;
	while (count < s->cap) {
		if ((count & 255) == 0 && __atomic_load_n(&s->stop, __ATOMIC_RELAXED))
			break;
		if (s->first_mcu >= 0 && bi == 0 && m > s->first_mcu && m % p->ri == 0) {
			uint64_t next = (uint64_t) p->rst[m / p->ri] * 8;
			if (jp_pos(&b) > next) {
				s->failed = 1;
				break;
			}
			jp_seek(&b, next);
		}
		uint64_t at = jp_pos(&b);
		if (at >= end) {
			if (s->first_mcu >= 0)
				s->failed = 1;
			break;
		}
		int16_t *blk = s->coef[count];
		memset(blk, 0, 64 * sizeof(int16_t));
		if (jp_block(&b, p->dc[bi], p->ac[bi], blk) < 0 || jp_pos(&b) > end) {
			if (s->first_mcu >= 0 || jp_pos(&b) > end) {
				s->failed = s->first_mcu >= 0;
				break;
			}
			jp_seek(&b, jp_pos(&b) + 1);
			bi = 0;
			run = 0x80;
			continue;
		}
		s->pos[count] = at;
		s->dc[count] = blk[0];
		s->bidx[count] = (uint8_t) (bi | run);
		run = 0;
		count++;
		__atomic_store_n(&s->count, count, __ATOMIC_RELEASE);
		if (++bi == p->nb) {
			bi = 0;
			m++;
		}
	}
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

// ---- phase B helper: renders MCU rows [r0, r1) from thread 1's blocks ----

typedef struct {
	const jp_plan *p;
	int16_t *blocks;   // MCU row r0's first block
	const int16_t *dc; // its DC value
	long r0, r1;
	const volatile int *cancel;
	int ok;
} jp_band;

static gpointer jp_band_run(gpointer arg) {
	jp_band *t = arg;
	uint8_t *planes[3];
	uint8_t *mem = jp_planes(t->p, planes);
	if (!mem)
		return NULL;
	size_t row = (size_t) t->p->mcux * t->p->nb * 64;
	for (long r = t->r0; r < t->r1; r++) {
		if (__atomic_load_n(t->cancel, __ATOMIC_RELAXED))
			break;
		jp_render(t->p, r, t->blocks + (size_t) (r - t->r0) * row, t->dc + (size_t) (r - t->r0) * t->p->mcux * t->p->nb, planes);
	}
	t->ok = 1;
	g_free(mem);
	return NULL;
}

// jp_setup fills the plan from libjpeg's header: 0, or -1 when not handled.
static int jp_setup(jp_plan *p, j_decompress_ptr d) {
	if (d->progressive_mode || d->arith_code || d->data_precision != 8 || d->comps_in_scan != d->num_components ||
		d->Ss != 0 || d->Se != 63 || d->Ah != 0 || d->Al != 0)
		return -1;
	if (d->num_components == 1) {
		if (d->jpeg_color_space != JCS_GRAYSCALE || d->out_color_space != JCS_GRAYSCALE)
			return -1;
	} else if (d->num_components == 3) {
		if (d->jpeg_color_space != JCS_YCbCr || d->out_color_space != JCS_RGB || d->output_components != 3)
			return -1;
	} else {
		return -1;
	}
	p->ncomp = d->num_components;
	p->bands = p->ncomp;
	p->out_w = (int) d->output_width;
	p->out_h = (int) d->output_height;
	p->ri = d->restart_interval;
	int mh = d->max_h_samp_factor, mv = d->max_v_samp_factor, ms = d->min_DCT_scaled_size;
	if (p->out_w < 1 || p->out_h < 1 || mh < 1 || mh > 2 || mv < 1 || mv > 2)
		return -1;
	if (p->ncomp == 1) {
		p->mcux = (d->image_width + 7) / 8;
		p->mcuy = (d->image_height + 7) / 8;
	} else {
		p->mcux = (d->image_width + 8 * mh - 1) / (8 * mh);
		p->mcuy = (d->image_height + 8 * mv - 1) / (8 * mv);
	}
	p->total_mcus = p->mcux * p->mcuy;
	int nb = 0;
	for (int i = 0; i < p->ncomp; i++) {
		jpeg_component_info *ci = d->cur_comp_info[i];
		int c = ci->component_index;
		if (c < 0 || c >= p->ncomp || &d->comp_info[c] != ci)
			return -1;
		for (int k = 0; k < i; k++)
			if (p->scomp[k] == c)
				return -1;
		p->scomp[i] = c;
		jp_comp *cp = &p->comp[c];
		int h = ci->h_samp_factor, v = ci->v_samp_factor, ss = ci->DCT_scaled_size;
		if (h < 1 || h > 2 || v < 1 || v > 2 || (ss != 1 && ss != 2 && ss != 4))
			return -1;
		if (p->ncomp == 1) {
			cp->bh = cp->bv = 1;
			if (ss != ms)
				return -1;
			p->rows_per_mcu = ss;
		} else {
			// Every component at the output's size straight from its IDCT:
			// what libjpeg does without upsampling.
			if (h * ss != mh * ms || v * ss != mv * ms)
				return -1;
			cp->bh = h;
			cp->bv = v;
			p->rows_per_mcu = mv * ms;
		}
		cp->ss = ss;
		cp->w = (int) (p->mcux * cp->bh * ss);
		cp->rows = cp->bv * ss;
		if (cp->w < p->out_w || p->mcuy * cp->rows < p->out_h)
			return -1;
		int qn = ci->quant_tbl_no, dn = ci->dc_tbl_no, an = ci->ac_tbl_no;
		if (qn < 0 || qn >= NUM_QUANT_TBLS || dn < 0 || dn >= NUM_HUFF_TBLS || an < 0 || an >= NUM_HUFF_TBLS)
			return -1;
		JQUANT_TBL *qt = d->quant_tbl_ptrs[qn];
		if (!qt || !d->dc_huff_tbl_ptrs[dn] || !d->ac_huff_tbl_ptrs[an])
			return -1;
		for (int k = 0; k < 64; k++) {
			if (qt->quantval[k] > 32767)
				return -1;
			cp->q[k] = (int16_t) qt->quantval[k];
		}
		if (jp_build(&p->huff[dn], d->dc_huff_tbl_ptrs[dn], 1) || jp_build(&p->huff[4 + an], d->ac_huff_tbl_ptrs[an], 0))
			return -1;
		for (int k = 0; k < cp->bh * cp->bv; k++) {
			if (nb == JP_MAXB)
				return -1;
			p->bcomp[nb] = c;
			p->dc[nb] = &p->huff[dn];
			p->ac[nb] = &p->huff[4 + an];
			nb++;
		}
	}
	p->nb = nb;
	p->total_blocks = p->total_mcus * nb;
	// A table that was built for one component and then rebuilt for
	// another with the other kind (DC vs AC) cannot happen: DC tables live
	// in huff[0..3], AC in huff[4..7].
	for (int i = 0; i < 1024; i++) {
		int x = i < 512 ? i : i - 1024; // the index as the signed value libjpeg masks
		p->limit[i] = i < 128 ? (uint8_t) (i + 128) : i < 512 ? 255 : i < 896 ? 0 : (uint8_t) (x + 128);
	}
	for (int i = 0; i < 256; i++) {
		int64_t x = i - 128;
		p->cr_r[i] = (int) ((91881 * x + 32768) >> 16);
		p->cb_b[i] = (int) ((116130 * x + 32768) >> 16);
		p->cr_g[i] = -46802 * x;
		p->cb_g[i] = -22554 * x + 32768;
	}
	return 0;
}

// jp_dc adds a DC difference to a predictor as libjpeg does: -1 where
// libjpeg stops with "bad DCT coefficient".
static inline int jp_dc(int *pred, int diff) {
	if ((*pred >= 0 && diff > INT_MAX - *pred) || (*pred < 0 && diff < INT_MIN - *pred))
		return -1;
	*pred += diff;
	return 0;
}

static void jp_stop(jp_spec *s) {
	if (s->thread) {
		__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
		g_thread_join(s->thread);
		s->thread = NULL;
	}
}

int mc_jpar_decode(j_decompress_ptr d, uint8_t *pix, size_t stride, int threads, size_t min_chunk,
	mc_jpar_publish publish, void *ctx, const volatile int *cancel) {
	jp_plan *p = g_try_malloc0(sizeof *p);
	if (!p)
		return 0;
	jp_spec s;
	memset(&s, 0, sizeof s);
	int16_t *rowbuf = NULL;
	uint8_t *planes[3], *pmem = NULL;
	int rc = 0;
	uint8_t *store = NULL;
	size_t store_size = 0;
	if (threads < 1 || jp_setup(p, d) || !d->src || (threads > 1 && d->src->bytes_in_buffer < 2 * (min_chunk ? min_chunk : 1)))
		goto out;
	p->out = pix;
	p->stride = stride;
	if (jp_unstuff(p, d->src->next_input_byte, d->src->bytes_in_buffer))
		goto out;
	size_t rowblocks = (size_t) p->mcux * p->nb;
	rowbuf = g_try_malloc(rowblocks * 64 * sizeof(int16_t));
	pmem = jp_planes(p, planes);
	if (!rowbuf || !pmem)
		goto out;

	// Where thread 1 starts: the middle of the data, or the restart
	// interval starting nearest it.
	long split_mcu = -1;
	if (threads < 2)
		goto decode;
	s.p = p;
	s.first_mcu = -1;
	s.start = (uint64_t) (p->len * JP_SPLIT / 100) * 8;
	if (p->ri) {
		long best = 0;
		size_t want = s.start / 8;
		for (long k = 1; k < p->nrst; k++) {
			size_t dk = p->rst[k] > want ? p->rst[k] - want : want - p->rst[k];
			size_t db = p->rst[best] > want ? p->rst[best] - want : want - p->rst[best];
			if (best == 0 || dk < db)
				best = k;
		}
		if (best == 0)
			goto out; // one interval: nothing to split
		split_mcu = best * p->ri;
		s.first_mcu = split_mcu;
		s.start = (uint64_t) p->rst[best] * 8;
		s.cap = p->total_blocks - split_mcu * p->nb;
	} else {
		// Room for every block and the false starts before thread 1
		// falls into step: only the part it fills is ever touched.
		s.cap = p->total_blocks + 4096;
	}
	if (p->len - s.start / 8 < min_chunk || s.start / 8 < min_chunk || (size_t) s.cap * 139 > JP_MAX_COEF_BYTES)
		goto out;
	store_size = (size_t) s.cap * (64 * sizeof(int16_t) + sizeof(uint64_t) + sizeof(int16_t) + 1);
	store = jp_take(store_size);
	if (!store)
		goto out;
	s.coef = (int16_t (*)[64]) store;
	s.pos = (uint64_t *) (store + (size_t) s.cap * 64 * sizeof(int16_t));
	s.dc = (int16_t *) (s.pos + s.cap);
	s.bidx = (uint8_t *) (s.dc + s.cap);
	s.thread = g_thread_try_new("jpeg-decode", jp_spec_run, &s, NULL);
	if (!s.thread)
		goto out;

	// Thread 0: decode from the start, rendering each MCU row, until it
	// meets thread 1 or the end.
decode:;
	jp_bits b = { p->buf, p->buf, 0, 0 };
	jp_seek(&b, 0);
	uint64_t end = (uint64_t) p->len * 8;
	int pred[3] = { 0, 0, 0 };
	long cur = 0, sync = -1, m = 0;
	int bi = 0, t1_done = 0;
	long r = 0, mx = 0;
	for (r = 0; r < p->mcuy; r++) {
		if (__atomic_load_n(cancel, __ATOMIC_RELAXED)) {
			rc = -2;
			goto out;
		}
		for (mx = 0; mx < p->mcux; mx++, m++) {
			if (p->ri && m > 0 && m % p->ri == 0) {
				uint64_t next = (uint64_t) p->rst[m / p->ri] * 8;
				if (jp_pos(&b) > next)
					goto out;
				if (m == split_mcu) {
					bi = 0;
					sync = 0;
					goto synced;
				}
				jp_seek(&b, next);
				pred[0] = pred[1] = pred[2] = 0;
			}
			int16_t *blk = rowbuf + (size_t) mx * p->nb * 64;
			for (bi = 0; bi < p->nb; bi++, blk += 64) {
				uint64_t at = jp_pos(&b);
				if (at > end)
					goto out;
				if (s.thread && split_mcu < 0 && at >= s.start && !t1_done) {
					// Wait for thread 1 to get past this block (it is
					// usually far ahead; on a small scan it may not have
					// started), then see whether it decoded it.
					long cnt;
					for (;;) {
						cnt = __atomic_load_n(&s.count, __ATOMIC_ACQUIRE);
						if (cnt > 0 && s.pos[cnt - 1] >= at)
							break;
						if (__atomic_load_n(&s.done, __ATOMIC_ACQUIRE)) {
							cnt = __atomic_load_n(&s.count, __ATOMIC_ACQUIRE);
							t1_done = cnt == 0 || s.pos[cnt - 1] < at;
							break;
						}
						g_thread_yield();
					}
					while (cur < cnt && s.pos[cur] < at)
						cur++;
					if (cur < cnt && s.pos[cur] == at && (s.bidx[cur] & 0x7f) == bi) {
						sync = cur;
						goto synced;
					}
				}
				memset(blk, 0, 64 * sizeof(int16_t));
				if (jp_block(&b, p->dc[bi], p->ac[bi], blk) || jp_dc(&pred[p->bcomp[bi]], blk[0]))
					goto out;
				blk[0] = (int16_t) pred[p->bcomp[bi]];
			}
		}
		jp_render(p, r, rowbuf, NULL, planes);
		publish(ctx, jp_rows(p, r + 1));
	}
	// Thread 0 decoded it all itself.
	jp_stop(&s);
	if (jp_pos(&b) > end)
		goto out;
	publish(ctx, p->out_h);
	rc = 1;
	goto out;

synced:
	// Thread 1's blocks from entry sync on are the rest of the scan.
	g_thread_join(s.thread);
	s.thread = NULL;
	{
		long done = m * p->nb + bi, need = p->total_blocks - done;
		if (s.failed || s.count < sync + need)
			goto out;
		long mm = m;
		int k = bi;
		for (long e = sync; e < sync + need; e++) {
			if ((e > sync && (s.bidx[e] & 0x80)) || (s.bidx[e] & 0x7f) != k)
				goto out;
			if (p->ri && k == 0 && mm % p->ri == 0)
				pred[0] = pred[1] = pred[2] = 0;
			int c = p->bcomp[k];
			if (jp_dc(&pred[c], s.dc[e]))
				goto out;
			s.dc[e] = (int16_t) pred[c];
			if (++k == p->nb) {
				k = 0;
				mm++;
			}
		}
		// The rest of MCU row r, then the rows after it in two bands.
		long inrow = mx * p->nb + bi;
		memcpy(rowbuf + (size_t) inrow * 64, s.coef[sync], (rowblocks - inrow) * 64 * sizeof(int16_t));
		for (size_t i = inrow; i < rowblocks; i++)
			rowbuf[i * 64] = s.dc[sync + (long) (i - inrow)];
		jp_render(p, r, rowbuf, NULL, planes);
		publish(ctx, jp_rows(p, r + 1));
		long e1 = sync + (long) (rowblocks - inrow); // MCU row r + 1's first block
		int16_t *first = s.coef[e1];
		const int16_t *firstdc = s.dc + e1;
		long mid = r + 1 + (p->mcuy - r - 1) / 2;
		jp_band band = { p, first + (size_t) (mid - r - 1) * rowblocks * 64, firstdc + (size_t) (mid - r - 1) * rowblocks, mid, p->mcuy, cancel, 0 };
		GThread *helper = mid < p->mcuy ? g_thread_try_new("jpeg-idct", jp_band_run, &band, NULL) : NULL;
		long until = helper ? mid : p->mcuy;
		for (long rr = r + 1; rr < until; rr++) {
			if (__atomic_load_n(cancel, __ATOMIC_RELAXED))
				break;
			jp_render(p, rr, first + (size_t) (rr - r - 1) * rowblocks * 64, firstdc + (size_t) (rr - r - 1) * rowblocks, planes);
			publish(ctx, jp_rows(p, rr + 1));
		}
		if (helper) {
			g_thread_join(helper);
			if (!band.ok && !__atomic_load_n(cancel, __ATOMIC_RELAXED)) {
				// The helper could not get scratch memory: render its band here.
				band.ok = 1;
				for (long rr = mid; rr < p->mcuy; rr++)
					jp_render(p, rr, first + (size_t) (rr - r - 1) * rowblocks * 64, firstdc + (size_t) (rr - r - 1) * rowblocks, planes);
			}
		}
		if (__atomic_load_n(cancel, __ATOMIC_RELAXED)) {
			rc = -2;
			goto out;
		}
		publish(ctx, p->out_h);
		rc = 2;
	}
out:
	jp_stop(&s);
	jp_give(store, store_size);
	g_free(rowbuf);
	g_free(pmem);
	jp_give(p->buf, p->buf_size);
	g_free(p->rst);
	g_free(p);
	return rc;
}
