/* Hot row kernels of deskpilot's imaging core, in C so they can carry an AVX2 variant.
 *
 * Every kernel has a portable scalar version and, on x86 with GCC/Clang, an AVX2 version
 * compiled with __attribute__((target("avx2"))) (the rest of the module stays baseline
 * x86-64); dp_simd_available() says at run time whether the CPU can run it, and the
 * Cython caller picks one. Both versions do the same integer arithmetic, so their results
 * are identical (the tests run both and the numpy reference and compare bytes).
 *
 * Fixed point of the area-average resample (see deskpilot/imaging/_weights.py):
 *   weights: int16, 14 bits, the taps of one destination pixel sum to 1 << 14;
 *   vertical:   v = (sum_t w_t * src_t + 64) >> 7        (7 fractional bits, <= 32640)
 *   horizontal: out = (sum_t w_t * v_t + (1 << 20)) >> 21
 * so both passes fit pmaddwd (int16 x int16 pairs summed into int32).
 *
 * The vertical pass of the BGRA kernel writes "pair layout": pixels 2p and 2p+1 share one
 * group of 8 int16, channel-interleaved (B0 B1 G0 G1 R0 R1 A0 A1), so the horizontal
 * pass multiplies two neighbouring taps of all four channels with one pmaddwd.
 * Horizontal taps are therefore aligned to even source pixels (pair_starts) and padded
 * to a uniform number of pairs with zero weights.
 */
#ifndef DESKPILOT_IMAGING_SIMD_H
#define DESKPILOT_IMAGING_SIMD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define DP_X86_SIMD 1
#include <immintrin.h>
#define DP_AVX2 __attribute__((target("avx2")))
#else
#define DP_X86_SIMD 0
#endif

static int dp_simd_available(void) {
#if DP_X86_SIMD
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? 1 : 0;
#else
    return 0;
#endif
}

/* ---- vertical pass: taps rows of BGRA -> pair layout ------------------------------------ */

static inline void dp_vertical_pixel(const uint8_t *const *rows, const int16_t *w,
                                     ptrdiff_t taps, ptrdiff_t i, int16_t *pairs) {
    for (int c = 0; c < 4; c++) {
        int32_t acc = 0;
        for (ptrdiff_t t = 0; t < taps; t++) acc += (int32_t)w[t] * rows[t][4 * i + c];
        pairs[8 * (i >> 1) + 2 * c + (i & 1)] = (int16_t)((acc + 64) >> 7);
    }
}

static void dp_vertical_pairs_scalar(const uint8_t *const *rows, const int16_t *w,
                                     ptrdiff_t taps, ptrdiff_t width, int16_t *pairs) {
    for (ptrdiff_t i = 0; i < width; i++) dp_vertical_pixel(rows, w, taps, i, pairs);
}

#if DP_X86_SIMD
/* taps must be even (the caller pads with a zero weight and a valid row). */
DP_AVX2 static void dp_vertical_pairs_avx2(const uint8_t *const *rows, const int16_t *w,
                                           ptrdiff_t taps, ptrdiff_t width, int16_t *pairs) {
    const __m256i zero = _mm256_setzero_si256();
    const __m256i round = _mm256_set1_epi32(64);
    /* (B0 G0 R0 A0 B1 G1 R1 A1) -> (B0 B1 G0 G1 R0 R1 A0 A1) within each 128-bit lane */
    const __m256i to_pairs = _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,
                                              0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
    ptrdiff_t x = 0;
    for (; x + 8 <= width; x += 8) {
        __m256i acc0 = zero, acc1 = zero, acc2 = zero, acc3 = zero;
        for (ptrdiff_t t = 0; t < taps; t += 2) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(rows[t] + 4 * x));
            const __m256i b = _mm256_loadu_si256((const __m256i *)(rows[t + 1] + 4 * x));
            const __m256i wv = _mm256_set1_epi32((int32_t)(((uint32_t)(uint16_t)w[t + 1] << 16) |
                                                           (uint16_t)w[t]));
            const __m256i lo = _mm256_unpacklo_epi8(a, b); /* a0 b0 a1 b1 ... per lane */
            const __m256i hi = _mm256_unpackhi_epi8(a, b);
            acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), wv));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), wv));
            acc2 = _mm256_add_epi32(acc2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), wv));
            acc3 = _mm256_add_epi32(acc3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), wv));
        }
        acc0 = _mm256_srai_epi32(_mm256_add_epi32(acc0, round), 7);
        acc1 = _mm256_srai_epi32(_mm256_add_epi32(acc1, round), 7);
        acc2 = _mm256_srai_epi32(_mm256_add_epi32(acc2, round), 7);
        acc3 = _mm256_srai_epi32(_mm256_add_epi32(acc3, round), 7);
        /* lane 0 holds pixels x..x+3, lane 1 pixels x+4..x+7 */
        __m256i p01 = _mm256_shuffle_epi8(_mm256_packs_epi32(acc0, acc1), to_pairs);
        __m256i p23 = _mm256_shuffle_epi8(_mm256_packs_epi32(acc2, acc3), to_pairs);
        int16_t *dst = pairs + 4 * x;
        _mm256_storeu_si256((__m256i *)dst, _mm256_permute2x128_si256(p01, p23, 0x20));
        _mm256_storeu_si256((__m256i *)(dst + 16), _mm256_permute2x128_si256(p01, p23, 0x31));
    }
    for (; x < width; x++) dp_vertical_pixel(rows, w, taps, x, pairs);
}
#endif

/* ---- horizontal pass: pair layout -> RGB ------------------------------------------------ */

/* pair_weights: (width, npairs, 2) int16; pair_starts: first pair of each output pixel. */
static inline void dp_horizontal_pixel(const int16_t *pairs, const int32_t *pair_starts,
                                       const int16_t *pair_weights, ptrdiff_t npairs,
                                       ptrdiff_t x, uint8_t *rgb) {
    int32_t acc[4] = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
    const int16_t *p = pairs + 8 * (ptrdiff_t)pair_starts[x];
    const int16_t *wx = pair_weights + 2 * npairs * x;
    for (ptrdiff_t q = 0; q < npairs; q++, p += 8) {
        for (int c = 0; c < 4; c++)
            acc[c] += (int32_t)wx[2 * q] * p[2 * c] + (int32_t)wx[2 * q + 1] * p[2 * c + 1];
    }
    rgb[0] = (uint8_t)(acc[2] >> 21);
    rgb[1] = (uint8_t)(acc[1] >> 21);
    rgb[2] = (uint8_t)(acc[0] >> 21);
}

static void dp_horizontal_rgb_scalar(const int16_t *pairs, const int32_t *pair_starts,
                                     const int16_t *pair_weights, ptrdiff_t npairs,
                                     ptrdiff_t width, uint8_t *out) {
    for (ptrdiff_t x = 0; x < width; x++)
        dp_horizontal_pixel(pairs, pair_starts, pair_weights, npairs, x, out + 3 * x);
}

#if DP_X86_SIMD
DP_AVX2 static inline __m256i dp_two_pixels(const int16_t *pairs, const int32_t *pair_starts,
                                            const int16_t *wide, ptrdiff_t npairs, ptrdiff_t x) {
    /* lane 0: output pixel x (even), lane 1: pixel x + 1; 4 int32 channels (B, G, R, A).
       wide: the (x/2, q) weight vectors, [w(x) x4 | w(x+1) x4] (AxisWeights.pair_weights_wide) */
    __m256i acc = _mm256_set1_epi32(1 << 20);
    const int16_t *p0 = pairs + 8 * (ptrdiff_t)pair_starts[x];
    const int16_t *p1 = pairs + 8 * (ptrdiff_t)pair_starts[x + 1];
    const int16_t *w = wide + 16 * npairs * (x >> 1);
    for (ptrdiff_t q = 0; q < npairs; q++) {
        const __m256i v = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p0 + 8 * q))),
            _mm_loadu_si128((const __m128i *)(p1 + 8 * q)), 1);
        const __m256i wv = _mm256_loadu_si256((const __m256i *)(w + 16 * q));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(v, wv));
    }
    return _mm256_srai_epi32(acc, 21);
}

DP_AVX2 static void dp_horizontal_rgb_avx2(const int16_t *pairs, const int32_t *pair_starts,
                                           const int16_t *pair_weights, const int16_t *wide,
                                           ptrdiff_t npairs, ptrdiff_t width, uint8_t *out) {
    const __m128i to_rgb = _mm_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
    ptrdiff_t x = 0;
    for (; x + 4 <= width; x += 4) {
        const __m256i v01 = dp_two_pixels(pairs, pair_starts, wide, npairs, x);
        const __m256i v23 = dp_two_pixels(pairs, pair_starts, wide, npairs, x + 2);
        /* per lane: [x, x+2] then [x+1, x+3] as int16, then bytes */
        const __m256i words = _mm256_packs_epi32(v01, v23);
        const __m256i bytes = _mm256_packus_epi16(words, words);
        const __m128i lo = _mm256_castsi256_si128(bytes);      /* px x, x+2 */
        const __m128i hi = _mm256_extracti128_si256(bytes, 1); /* px x+1, x+3 */
        const __m128i bgra = _mm_unpacklo_epi32(lo, hi);       /* px x, x+1, x+2, x+3 */
        const __m128i rgb = _mm_shuffle_epi8(bgra, to_rgb);
        uint8_t *dst = out + 3 * x;
        _mm_storel_epi64((__m128i *)dst, rgb);
        const uint32_t last = (uint32_t)_mm_extract_epi32(rgb, 2);
        memcpy(dst + 8, &last, 4);
    }
    for (; x < width; x++)
        dp_horizontal_pixel(pairs, pair_starts, pair_weights, npairs, x, out + 3 * x);
}
#endif

/* ---- BGRA -> RGB row ------------------------------------------------------------------------ */

static void dp_bgra_to_rgb_scalar(const uint8_t *src, uint8_t *dst, ptrdiff_t width) {
    for (ptrdiff_t x = 0; x < width; x++, src += 4, dst += 3) {
        dst[0] = src[2];
        dst[1] = src[1];
        dst[2] = src[0];
    }
}

#if DP_X86_SIMD
DP_AVX2 static void dp_bgra_to_rgb_avx2(const uint8_t *src, uint8_t *dst, ptrdiff_t width) {
    const __m256i to_rgb = _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1,
                                            2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
    const __m256i compact = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
    ptrdiff_t x = 0;
    for (; x + 8 <= width; x += 8, src += 32, dst += 24) {
        __m256i v = _mm256_loadu_si256((const __m256i *)src);
        v = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, to_rgb), compact);
        _mm_storeu_si128((__m128i *)dst, _mm256_castsi256_si128(v));
        _mm_storel_epi64((__m128i *)(dst + 16), _mm256_extracti128_si256(v, 1));
    }
    dp_bgra_to_rgb_scalar(src, dst, width - x);
}
#endif

/* ---- PNG filters ---------------------------------------------------------------------------- */
/* Rows are walked from byte bpp on, where a = row[i - bpp] and c = up[i - bpp] exist; the
   first bpp bytes (a = c = 0) are done by the scalar code. up is a zero row for row 0. */

static inline uint8_t dp_paeth(int a, int b, int c) {
    int pa = b - c, pb = a - c, pc = (b - c) + (a - c);
    pa = pa < 0 ? -pa : pa;
    pb = pb < 0 ? -pb : pb;
    pc = pc < 0 ? -pc : pc;
    if (pa <= pb && pa <= pc) return (uint8_t)a;
    return (uint8_t)(pb <= pc ? b : c);
}

static inline uint32_t dp_cost(uint8_t v) { return v < 128 ? v : 256u - v; }

static inline void dp_filter_costs_bytes(const uint8_t *row, const uint8_t *up, ptrdiff_t from,
                                         ptrdiff_t to, ptrdiff_t bpp, uint64_t costs[5]) {
    for (ptrdiff_t i = from; i < to; i++) {
        const int x = row[i], b = up[i];
        const int a = i >= bpp ? row[i - bpp] : 0, c = i >= bpp ? up[i - bpp] : 0;
        costs[0] += dp_cost((uint8_t)x);
        costs[1] += dp_cost((uint8_t)(x - a));
        costs[2] += dp_cost((uint8_t)(x - b));
        costs[3] += dp_cost((uint8_t)(x - ((a + b) >> 1)));
        costs[4] += dp_cost((uint8_t)(x - dp_paeth(a, b, c)));
    }
}

static void dp_filter_costs_scalar(const uint8_t *row, const uint8_t *up, ptrdiff_t n,
                                   ptrdiff_t bpp, uint64_t costs[5]) {
    dp_filter_costs_bytes(row, up, 0, n, bpp, costs);
}

static inline void dp_filter_bytes(int mode, const uint8_t *row, const uint8_t *up, uint8_t *out,
                                   ptrdiff_t from, ptrdiff_t to, ptrdiff_t bpp) {
    for (ptrdiff_t i = from; i < to; i++) {
        const int x = row[i], b = up[i];
        const int a = i >= bpp ? row[i - bpp] : 0, c = i >= bpp ? up[i - bpp] : 0;
        int pred;
        switch (mode) {
            case 1: pred = a; break;
            case 2: pred = b; break;
            case 3: pred = (a + b) >> 1; break;
            case 4: pred = dp_paeth(a, b, c); break;
            default: pred = 0; break;
        }
        out[i] = (uint8_t)(x - pred);
    }
}

static void dp_filter_row_scalar(int mode, const uint8_t *row, const uint8_t *up, uint8_t *out,
                                 ptrdiff_t n, ptrdiff_t bpp) {
    if (mode == 0) {
        memcpy(out, row, (size_t)n);
        return;
    }
    dp_filter_bytes(mode, row, up, out, 0, n, bpp);
}

#if DP_X86_SIMD
/* Residuals of all four predicting filters for 32 bytes at i (i >= bpp). */
typedef struct {
    __m256i sub, up, avg, paeth;
} dp_residuals;

DP_AVX2 static inline __m256i dp_paeth_pred16(__m256i a, __m256i b, __m256i c) {
    const __m256i bc = _mm256_sub_epi16(b, c), ac = _mm256_sub_epi16(a, c);
    const __m256i pa = _mm256_abs_epi16(bc), pb = _mm256_abs_epi16(ac);
    const __m256i pc = _mm256_abs_epi16(_mm256_add_epi16(bc, ac));
    const __m256i not_a = _mm256_or_si256(_mm256_cmpgt_epi16(pa, pb), _mm256_cmpgt_epi16(pa, pc));
    const __m256i b_or_c = _mm256_blendv_epi8(b, c, _mm256_cmpgt_epi16(pb, pc));
    return _mm256_blendv_epi8(a, b_or_c, not_a);
}

DP_AVX2 static inline __m256i dp_paeth_pred(__m256i a, __m256i b, __m256i c) {
    const __m256i zero = _mm256_setzero_si256();
    const __m256i lo = dp_paeth_pred16(_mm256_unpacklo_epi8(a, zero), _mm256_unpacklo_epi8(b, zero),
                                       _mm256_unpacklo_epi8(c, zero));
    const __m256i hi = dp_paeth_pred16(_mm256_unpackhi_epi8(a, zero), _mm256_unpackhi_epi8(b, zero),
                                       _mm256_unpackhi_epi8(c, zero));
    return _mm256_packus_epi16(lo, hi);
}

DP_AVX2 static inline __m256i dp_avg_floor(__m256i a, __m256i b) {
    /* avg_epu8 rounds up; subtract the carry of odd sums */
    const __m256i odd = _mm256_and_si256(_mm256_xor_si256(a, b), _mm256_set1_epi8(1));
    return _mm256_sub_epi8(_mm256_avg_epu8(a, b), odd);
}

DP_AVX2 static inline __m256i dp_cost_sum(__m256i r) {
    /* |r| as a signed byte = min(r, -r) unsigned; psadbw sums 8-byte groups into 4 u64 */
    const __m256i zero = _mm256_setzero_si256();
    return _mm256_sad_epu8(_mm256_min_epu8(r, _mm256_sub_epi8(zero, r)), zero);
}

DP_AVX2 static inline uint64_t dp_hsum64(__m256i v) {
    const __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    return (uint64_t)_mm_cvtsi128_si64(s) + (uint64_t)_mm_extract_epi64(s, 1);
}

DP_AVX2 static void dp_filter_costs_avx2(const uint8_t *row, const uint8_t *up, ptrdiff_t n,
                                         ptrdiff_t bpp, uint64_t costs[5]) {
    ptrdiff_t i = bpp < n ? bpp : n;
    dp_filter_costs_bytes(row, up, 0, i, bpp, costs);
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0;
    for (; i + 32 <= n; i += 32) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(row + i));
        const __m256i a = _mm256_loadu_si256((const __m256i *)(row + i - bpp));
        const __m256i b = _mm256_loadu_si256((const __m256i *)(up + i));
        const __m256i c = _mm256_loadu_si256((const __m256i *)(up + i - bpp));
        c0 = _mm256_add_epi64(c0, dp_cost_sum(x));
        c1 = _mm256_add_epi64(c1, dp_cost_sum(_mm256_sub_epi8(x, a)));
        c2 = _mm256_add_epi64(c2, dp_cost_sum(_mm256_sub_epi8(x, b)));
        c3 = _mm256_add_epi64(c3, dp_cost_sum(_mm256_sub_epi8(x, dp_avg_floor(a, b))));
        c4 = _mm256_add_epi64(c4, dp_cost_sum(_mm256_sub_epi8(x, dp_paeth_pred(a, b, c))));
    }
    costs[0] += dp_hsum64(c0);
    costs[1] += dp_hsum64(c1);
    costs[2] += dp_hsum64(c2);
    costs[3] += dp_hsum64(c3);
    costs[4] += dp_hsum64(c4);
    dp_filter_costs_bytes(row, up, i, n, bpp, costs);
}

DP_AVX2 static void dp_filter_row_avx2(int mode, const uint8_t *row, const uint8_t *up,
                                       uint8_t *out, ptrdiff_t n, ptrdiff_t bpp) {
    if (mode == 0) {
        memcpy(out, row, (size_t)n);
        return;
    }
    ptrdiff_t i = bpp < n ? bpp : n;
    dp_filter_bytes(mode, row, up, out, 0, i, bpp);
    for (; i + 32 <= n; i += 32) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(row + i));
        const __m256i a = _mm256_loadu_si256((const __m256i *)(row + i - bpp));
        const __m256i b = _mm256_loadu_si256((const __m256i *)(up + i));
        __m256i pred;
        if (mode == 1) {
            pred = a;
        } else if (mode == 2) {
            pred = b;
        } else if (mode == 3) {
            pred = dp_avg_floor(a, b);
        } else {
            pred = dp_paeth_pred(a, b, _mm256_loadu_si256((const __m256i *)(up + i - bpp)));
        }
        _mm256_storeu_si256((__m256i *)(out + i), _mm256_sub_epi8(x, pred));
    }
    dp_filter_bytes(mode, row, up, out, i, n, bpp);
}
#endif

/* ---- dispatch ------------------------------------------------------------------------------- */

static int dp_use_simd = 0;

static void dp_vertical_pairs(const uint8_t *const *rows, const int16_t *w, ptrdiff_t taps,
                              ptrdiff_t width, int16_t *pairs) {
#if DP_X86_SIMD
    if (dp_use_simd) {
        dp_vertical_pairs_avx2(rows, w, taps, width, pairs);
        return;
    }
#endif
    dp_vertical_pairs_scalar(rows, w, taps, width, pairs);
}

static void dp_horizontal_rgb(const int16_t *pairs, const int32_t *pair_starts,
                              const int16_t *pair_weights, const int16_t *wide, ptrdiff_t npairs,
                              ptrdiff_t width, uint8_t *out) {
#if DP_X86_SIMD
    if (dp_use_simd) {
        dp_horizontal_rgb_avx2(pairs, pair_starts, pair_weights, wide, npairs, width, out);
        return;
    }
#endif
    dp_horizontal_rgb_scalar(pairs, pair_starts, pair_weights, npairs, width, out);
}

static void dp_bgra_to_rgb(const uint8_t *src, uint8_t *dst, ptrdiff_t width) {
#if DP_X86_SIMD
    if (dp_use_simd) {
        dp_bgra_to_rgb_avx2(src, dst, width);
        return;
    }
#endif
    dp_bgra_to_rgb_scalar(src, dst, width);
}

static void dp_filter_costs(const uint8_t *row, const uint8_t *up, ptrdiff_t n, ptrdiff_t bpp,
                            uint64_t costs[5]) {
#if DP_X86_SIMD
    if (dp_use_simd) {
        dp_filter_costs_avx2(row, up, n, bpp, costs);
        return;
    }
#endif
    dp_filter_costs_scalar(row, up, n, bpp, costs);
}

static void dp_filter_row(int mode, const uint8_t *row, const uint8_t *up, uint8_t *out,
                          ptrdiff_t n, ptrdiff_t bpp) {
#if DP_X86_SIMD
    if (dp_use_simd) {
        dp_filter_row_avx2(mode, row, up, out, n, bpp);
        return;
    }
#endif
    dp_filter_row_scalar(mode, row, up, out, n, bpp);
}

#endif /* DESKPILOT_IMAGING_SIMD_H */
