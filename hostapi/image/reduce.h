#ifndef METACLAW_REDUCE_H
#define METACLAW_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <vips/vips.h>

// mc_reduce_wait blocks until rows [0, rows) of the source are ready and
// returns 0, or sets a libvips error and returns -1 when they never will be.
typedef int (*mc_reduce_wait)(void *ctx, int rows);

// mc_reduce_image makes *out, in_w × in_h 8-bit pixels of bands samples
// (rows stride bytes apart at pix) reduced to out_w × out_h (no side
// larger than the source's) with lanczos3. Its pixels are computed as
// libvips asks for them, each strip once its source rows are ready (wait);
// pix must stay valid while *out is in use. Returns 0, or -1 with a
// libvips error.
int mc_reduce_image(VipsImage **out, const uint8_t *pix, size_t stride, int in_w, int in_h, int bands,
	int out_w, int out_h, mc_reduce_wait wait, void *ctx);

#endif
