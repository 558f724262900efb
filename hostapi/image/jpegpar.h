#ifndef METACLAW_JPEGPAR_H
#define METACLAW_JPEGPAR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

// mc_jpar_publish tells the consumer that rows [0, rows) of the output are
// final.
typedef void (*mc_jpar_publish)(void *ctx, int rows);

// mc_jpar_decode decodes the scan of a baseline JPEG whose header d has
// read (jpeg_read_header, then jpeg_calc_output_dimensions) into pix
// (output_height rows, stride bytes apart, RGB or grey as d's output
// colour space says), the entropy-coded data on two threads, with the
// pixels libjpeg-turbo's own scaled decode gives. Rows are published in
// order as they are done.
//
// Returns 1 when every row is decoded and published (thread 0 did it all:
// it never fell into step with thread 1), 2 when thread 1's blocks were
// used; 0 when this decoder does not handle the file (layout, scale, size,
// a damaged or unusual scan), so the caller decodes it with libjpeg — the
// rows published by then are the ones libjpeg gives, and need not be
// written again; -2 when *cancel was set. min_chunk is the smallest
// entropy-coded chunk worth a thread of its own (smaller scans: 0).
// threads: 0, return 0 (use libjpeg); 1, decode on this thread alone; 2
// or more, on two.
int mc_jpar_decode(j_decompress_ptr d, uint8_t *pix, size_t stride, int threads, size_t min_chunk,
	mc_jpar_publish publish, void *ctx, const volatile int *cancel);

#endif
