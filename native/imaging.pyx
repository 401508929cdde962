# Pixel kernels of deskpilot.imaging: area-average resample + swizzle, cursor compositing,
# PNG row filtering, frame digest and change bounds.
#
# The public wrappers (src/deskpilot/imaging/_api.py) validate every argument before a
# kernel runs: uint8 arrays, non-empty, pixel stride == channel count, channel stride 1
# (the row stride may be anything, even negative), regions already clipped, outputs
# C-contiguous and of the right shape. So the kernels only walk raw row pointers, with
# the GIL released. Each kernel does exactly the integer arithmetic of its numpy
# counterpart in deskpilot/imaging/_reference.py; the tests require identical bytes.
#
# Build directives (boundscheck, wraparound, cdivision) come from setup.py so that
# DESKPILOT_DEBUG_BUILD=1 turns the checks back on.

from libc.stdint cimport int16_t, int32_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset

import os

cdef extern from "imaging_simd.h" nogil:
    int dp_simd_available()
    int dp_use_simd
    void dp_vertical_pairs(
        const uint8_t** rows, const int16_t* w, Py_ssize_t taps, Py_ssize_t width, int16_t* pairs
    )
    void dp_horizontal_rgb(
        const int16_t* pairs, const int32_t* pair_starts, const int16_t* pair_weights,
        const int16_t* wide, Py_ssize_t npairs, Py_ssize_t width, uint8_t* out,
    )
    void dp_bgra_to_rgb(const uint8_t* src, uint8_t* dst, Py_ssize_t width)
    void dp_filter_costs(
        const uint8_t* row, const uint8_t* up, Py_ssize_t n, Py_ssize_t bpp, uint64_t* costs
    )
    void dp_filter_row(
        int mode, const uint8_t* row, const uint8_t* up, uint8_t* out, Py_ssize_t n, Py_ssize_t bpp
    )

cdef extern from *:
    """
    #ifndef DESKPILOT_CORE_VERSION
    #define DESKPILOT_CORE_VERSION "unknown"
    #endif
    #include <stdint.h>
    #include <string.h>
    /* Little-endian loads/stores whatever the host order (the digest is defined on
       little-endian words; x86 and ARM compile these to one plain load/store). */
    static inline uint64_t dp_load_le64(const uint8_t *p) {
        uint64_t v; memcpy(&v, p, 8);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        v = __builtin_bswap64(v);
    #endif
        return v;
    }
    static inline uint32_t dp_load_le32(const uint8_t *p) {
        uint32_t v; memcpy(&v, p, 4);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        v = __builtin_bswap32(v);
    #endif
        return v;
    }
    static inline void dp_store_le32(uint8_t *p, uint32_t v) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        v = __builtin_bswap32(v);
    #endif
        memcpy(p, &v, 4);
    }
    static inline int dp_ctz64(uint64_t v) {
    #if defined(_MSC_VER)
        unsigned long i; _BitScanForward64(&i, v); return (int)i;
    #else
        return __builtin_ctzll(v);
    #endif
    }
    static inline int dp_clz64(uint64_t v) {
    #if defined(_MSC_VER)
        unsigned long i; _BitScanReverse64(&i, v); return 63 - (int)i;
    #else
        return __builtin_clzll(v);
    #endif
    }
    """
    const char* DESKPILOT_CORE_VERSION
    uint64_t dp_load_le64(const uint8_t* p) nogil
    uint32_t dp_load_le32(const uint8_t* p) nogil
    void dp_store_le32(uint8_t* p, uint32_t v) nogil
    int dp_ctz64(uint64_t v) nogil
    int dp_clz64(uint64_t v) nogil

#: The package version this module was compiled for (setup.py passes it as a C macro);
#: deskpilot.imaging refuses a build whose version differs from the package.
CORE_VERSION = (<bytes>DESKPILOT_CORE_VERSION).decode("ascii")

#: Whether this CPU can run the AVX2 row kernels (x86 with GCC/Clang builds only).
SIMD_AVAILABLE = bool(dp_simd_available())
dp_use_simd = SIMD_AVAILABLE and os.environ.get("DESKPILOT_NO_SIMD", "").strip() in ("", "0")


def simd_enabled():
    """True when the AVX2 row kernels are in use (DESKPILOT_NO_SIMD=1 turns them off)."""
    return bool(dp_use_simd)


def set_simd(bint enabled):
    """Use the AVX2 kernels (if the CPU has them) or the scalar ones; returns the old setting.

    Both compute identical bytes; the tests run each.
    """
    global dp_use_simd
    previous = bool(dp_use_simd)
    dp_use_simd = SIMD_AVAILABLE and enabled
    return previous

# Same numbering as _reference.py / _api.py.
cdef enum:
    KIND_PREMULTIPLIED = 0
    KIND_STRAIGHT = 1
    KIND_MASKED = 2
    KIND_MONO = 3

cdef enum:
    FILTER_NONE = 0
    FILTER_SUB = 1
    FILTER_UP = 2
    FILTER_AVG = 3
    FILTER_PAETH = 4
    FILTER_ADAPTIVE = 5

cdef uint64_t DIGEST_INDEX_KEY = 0x9E3779B97F4A7C15ULL
cdef uint64_t DIGEST_MULTIPLIER = 0xD6E8FEB86659FD93ULL
cdef uint64_t DIGEST_MULTIPLIER_2 = 0xFF51AFD7ED558CCDULL


cdef struct Image:
    # A validated (H, W, C) uint8 image: row pointer = data + y * stride.
    uint8_t* data
    Py_ssize_t stride
    Py_ssize_t height
    Py_ssize_t width
    Py_ssize_t channels


cdef inline Image _image(const uint8_t[:, :, :] view) noexcept:
    cdef Image img
    img.data = <uint8_t*>&view[0, 0, 0]
    img.stride = view.strides[0]
    img.height = view.shape[0]
    img.width = view.shape[1]
    img.channels = view.shape[2]
    return img


cdef inline uint8_t* _row(Image* img, Py_ssize_t y) noexcept nogil:
    return img.data + y * img.stride


# -- area-average resample --------------------------------------------------------------------
#
# Fixed point shared with _reference.py: 14-bit weights; vertical pass
# v = (sum_t wy * src + 64) >> 7, horizontal pass out = (sum_t wx * v + 2**20) >> 21.
# The BGRA -> RGB case (prepare) runs the row kernels of imaging_simd.h through the pair
# layout; other channel layouts take the plain loops below (same integers).


cdef void _resample_generic(
    Image* src, uint8_t* out, Py_ssize_t out_h, Py_ssize_t out_w, Py_ssize_t cout,
    const Py_ssize_t* cmap,
    const int32_t* xs, const int32_t* xc, const int16_t* xw, Py_ssize_t x_taps,
    const int32_t* ys, const int32_t* yc, const int16_t* yw, Py_ssize_t y_taps,
    int32_t* fixed,
) noexcept nogil:
    cdef Py_ssize_t cin = src.channels, n = src.width * src.channels
    cdef Py_ssize_t j, k, t, x, c
    cdef const uint8_t* row
    cdef int32_t w, acc
    cdef const int32_t* p
    for j in range(out_h):
        row = _row(src, ys[j])
        w = yw[j * y_taps]
        for k in range(n):
            fixed[k] = w * row[k]
        for t in range(1, yc[j]):
            row = _row(src, ys[j] + t)
            w = yw[j * y_taps + t]
            for k in range(n):
                fixed[k] += w * row[k]
        for k in range(n):
            fixed[k] = (fixed[k] + 64) >> 7
        for x in range(out_w):
            for c in range(cout):
                p = fixed + cin * xs[x] + cmap[c]
                acc = 1 << 20
                for t in range(xc[x]):
                    acc += xw[x * x_taps + t] * p[t * cin]
                out[c] = <uint8_t>(acc >> 21)
            out += cout


def resample(
    const uint8_t[:, :, :] src,
    uint8_t[:, :, ::1] out,
    const Py_ssize_t[::1] channel_map,
    xw,
    yw,
):
    """Area-average src (H, W, Cin) into out (h, w, Cout); out[..., c] reads channel_map[c].

    xw / yw: the AxisWeights of each axis (deskpilot.imaging._weights).
    """
    cdef Image s = _image(src)
    cdef Py_ssize_t out_h = out.shape[0], out_w = out.shape[1], cout = out.shape[2]
    cdef const int32_t[::1] x_starts = xw.starts
    cdef const int32_t[::1] x_counts = xw.counts
    cdef const int16_t[:, ::1] x_weights = xw.weights
    cdef const int32_t[::1] x_pair_starts = xw.pair_starts
    cdef const int16_t[:, :, ::1] x_pair_weights = xw.pair_weights
    cdef const int16_t[:, :, ::1] x_wide = xw.pair_weights_wide
    cdef const int32_t[::1] y_starts = yw.starts
    cdef const int32_t[::1] y_counts = yw.counts
    cdef const int16_t[:, ::1] y_weights = yw.weights
    if (
        x_starts.shape[0] != out_w or y_starts.shape[0] != out_h
        or xw.src != s.width or yw.src != s.height
    ):
        raise ValueError("resample: weights do not match the image sizes")
    cdef uint8_t* dst = &out[0, 0, 0]
    cdef const Py_ssize_t* cmap = &channel_map[0]
    cdef Py_ssize_t x_taps = x_weights.shape[1], y_taps = y_weights.shape[1]
    cdef Py_ssize_t x_pairs = x_pair_weights.shape[1]
    cdef const int32_t* ys = &y_starts[0]
    cdef const int32_t* yc = &y_counts[0]
    cdef const int16_t* yw_ = &y_weights[0, 0]
    cdef bint bgra_to_rgb = (
        s.channels == 4 and cout == 3 and cmap[0] == 2 and cmap[1] == 1 and cmap[2] == 0
    )
    cdef Py_ssize_t j, t, taps
    cdef int16_t* pairs
    cdef const uint8_t** rows
    cdef int32_t* fixed
    if not bgra_to_rgb:
        fixed = <int32_t*>malloc(s.width * s.channels * sizeof(int32_t))
        if fixed == NULL:
            raise MemoryError()
        with nogil:
            _resample_generic(
                &s, dst, out_h, out_w, cout, cmap,
                &x_starts[0], &x_counts[0], &x_weights[0, 0], x_taps,
                ys, yc, yw_, y_taps, fixed,
            )
        free(fixed)
        return
    # zeroed: the phantom pixel of an odd width and the padding pairs must read as 0
    pairs = <int16_t*>calloc(((s.width + 1) // 2 + x_pairs) * 8, sizeof(int16_t))
    rows = <const uint8_t**>malloc(y_taps * sizeof(uint8_t*))
    if pairs == NULL or rows == NULL:
        free(pairs)
        free(rows)
        raise MemoryError()
    with nogil:
        for j in range(out_h):
            # this row's taps, rounded up to the even count the SIMD pass takes; the
            # padding tap has weight 0 but still needs a readable row
            taps = yc[j] + (yc[j] & 1)
            for t in range(taps):
                rows[t] = _row(&s, ys[j] + (t if t < yc[j] else yc[j] - 1))
            dp_vertical_pairs(rows, yw_ + j * y_taps, taps, s.width, pairs)
            dp_horizontal_rgb(
                pairs, &x_pair_starts[0], &x_pair_weights[0, 0, 0], &x_wide[0, 0, 0], x_pairs,
                out_w, dst + j * out_w * 3,
            )
    free(pairs)
    free(rows)


# -- same-size swizzle ------------------------------------------------------------------------


def swizzle(const uint8_t[:, :, :] src, uint8_t[:, :, ::1] out, const Py_ssize_t[::1] channel_map):
    """Same-size copy with channels reordered: out[..., c] = src[..., channel_map[c]]."""
    cdef Image s = _image(src)
    cdef Py_ssize_t cout = out.shape[2]
    cdef uint8_t* dst = &out[0, 0, 0]
    cdef const Py_ssize_t* cmap = &channel_map[0]
    cdef Py_ssize_t y, x, c, n = s.width * cout
    cdef const uint8_t* row
    cdef uint8_t* o
    cdef bint bgra_to_rgb = (
        s.channels == 4 and cout == 3 and cmap[0] == 2 and cmap[1] == 1 and cmap[2] == 0
    )
    cdef bint identity = s.channels == cout
    for c in range(cout):
        identity = identity and cmap[c] == c
    with nogil:
        for y in range(s.height):
            row = _row(&s, y)
            o = dst + y * n
            if bgra_to_rgb:
                dp_bgra_to_rgb(row, o, s.width)
            elif identity:
                memcpy(o, row, n)
            else:
                for x in range(s.width):
                    for c in range(cout):
                        o[c] = row[cmap[c]]
                    o += cout
                    row += s.channels


# -- cursor compositing -----------------------------------------------------------------------


cdef inline uint32_t _div255(uint32_t v) noexcept nogil:
    # round(v / 255) for 0 <= v <= 255 * 255
    v += 128
    return (v + (v >> 8)) >> 8


def composite(uint8_t[:, :, :] frame, const uint8_t[:, :, :] cursor, int kind):
    """Draw cursor over the same-size (already clipped) frame view, in place."""
    cdef Image f = _image(frame)
    cdef Image cur = _image(cursor)
    cdef Py_ssize_t y, x, c
    cdef uint8_t* d
    cdef const uint8_t* s
    cdef uint32_t a, inv, v, and_mask, xor_mask
    with nogil:
        for y in range(f.height):
            d = _row(&f, y)
            s = _row(&cur, y)
            for x in range(f.width):
                if kind == KIND_MONO:
                    and_mask = 0xFF if s[0] != 0 else 0
                    xor_mask = 0xFF if s[1] != 0 else 0
                    for c in range(3):
                        d[c] = <uint8_t>((d[c] & and_mask) ^ xor_mask)
                elif kind == KIND_MASKED:
                    if s[3] != 0:
                        for c in range(3):
                            d[c] = d[c] ^ s[c]
                    else:
                        for c in range(3):
                            d[c] = s[c]
                else:
                    a = s[3]
                    inv = 255 - a
                    for c in range(3):
                        if kind == KIND_PREMULTIPLIED:
                            v = s[c] + _div255(d[c] * inv)
                            d[c] = <uint8_t>(v if v < 255 else 255)
                        else:
                            d[c] = <uint8_t>_div255(s[c] * a + d[c] * inv)
                    d[3] = <uint8_t>(a + _div255(d[3] * inv))
                d += 4
                s += cur.channels


# -- PNG row filters --------------------------------------------------------------------------


def png_filter(const uint8_t[:, :, :] img, int mode, uint8_t[:, ::1] out):
    """Write filter byte + filtered scanline per row into out (H, 1 + W*C).

    Adaptive mode picks per row the filter with the smallest sum of residuals read as
    signed bytes (libpng's heuristic); ties go to the lower filter number.
    """
    cdef Image s = _image(img)
    cdef Py_ssize_t n = s.width * s.channels, bpp = s.channels, y
    if out.shape[0] != s.height or out.shape[1] != n + 1:
        raise ValueError("png_filter: out has the wrong shape")
    cdef uint8_t* dst = &out[0, 0]
    cdef Py_ssize_t out_stride = out.shape[1]
    cdef uint8_t* zeros = <uint8_t*>calloc(n, 1)
    cdef const uint8_t* row
    cdef const uint8_t* up
    cdef uint64_t costs[5]
    cdef int chosen, f
    if zeros == NULL:
        raise MemoryError()
    with nogil:
        for y in range(s.height):
            row = _row(&s, y)
            up = _row(&s, y - 1) if y > 0 else zeros
            chosen = mode
            if mode == FILTER_ADAPTIVE:
                memset(costs, 0, sizeof(costs))
                dp_filter_costs(row, up, n, bpp, costs)
                chosen = FILTER_NONE
                for f in range(1, 5):
                    if costs[f] < costs[chosen]:
                        chosen = f
            dst[0] = <uint8_t>chosen
            dp_filter_row(chosen, row, up, dst + 1, n, bpp)
            dst += out_stride
    free(zeros)


# -- frame digest -----------------------------------------------------------------------------


cdef inline uint64_t _mix_word(uint64_t word, uint64_t key) noexcept nogil:
    cdef uint64_t m = (word ^ key) * DIGEST_MULTIPLIER
    m ^= m >> 32
    m *= DIGEST_MULTIPLIER_2
    return m ^ (m >> 29)


cdef inline uint64_t _mix64(uint64_t z) noexcept nogil:
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


def digest(const uint8_t[:, :, :] img):
    """64-bit digest of the pixels and the shape (definition in _reference.py)."""
    cdef Image s = _image(img)
    cdef Py_ssize_t n = s.width * s.channels, full = n // 8, tail = n % 8, y, j
    cdef uint64_t total = 0, key = 0, word
    cdef const uint8_t* row
    cdef uint8_t last[8]
    with nogil:
        for y in range(s.height):
            row = _row(&s, y)
            for j in range(full):
                total += _mix_word(dp_load_le64(row + 8 * j), key)
                key += DIGEST_INDEX_KEY
            if tail:
                memset(last, 0, 8)
                memcpy(last, row + 8 * full, tail)
                total += _mix_word(dp_load_le64(last), key)
                key += DIGEST_INDEX_KEY
    cdef uint64_t shape = (
        (<uint64_t>s.height << 40) ^ (<uint64_t>s.width << 8) ^ <uint64_t>s.channels
    )
    return _mix64(total ^ _mix64(shape))


# -- change bounds ----------------------------------------------------------------------------


cdef Py_ssize_t _first_difference(
    const uint8_t* a, const uint8_t* b, Py_ssize_t start, Py_ssize_t stop
) noexcept nogil:
    # Index of the first differing byte in [start, stop), or stop; 8 bytes per step.
    cdef Py_ssize_t i = start
    cdef uint64_t x
    while i + 8 <= stop:
        x = dp_load_le64(a + i) ^ dp_load_le64(b + i)
        if x:
            return i + (dp_ctz64(x) >> 3)
        i += 8
    while i < stop:
        if a[i] != b[i]:
            return i
        i += 1
    return stop


cdef Py_ssize_t _last_difference(
    const uint8_t* a, const uint8_t* b, Py_ssize_t start, Py_ssize_t stop
) noexcept nogil:
    # Index of the last differing byte in [start, stop), or start - 1.
    cdef Py_ssize_t i = stop
    cdef uint64_t x
    while i - 8 >= start:
        x = dp_load_le64(a + i - 8) ^ dp_load_le64(b + i - 8)
        if x:
            return i - 1 - (dp_clz64(x) >> 3)
        i -= 8
    while i > start:
        i -= 1
        if a[i] != b[i]:
            return i
    return start - 1


def change_bounds(const uint8_t[:, :, :] a, const uint8_t[:, :, :] b):
    """Bounding box (x, y, w, h) of the pixels where two same-shape images differ, or None."""
    cdef Image sa = _image(a)
    cdef Image sb = _image(b)
    cdef Py_ssize_t c = sa.channels, n = sa.width * sa.channels
    cdef Py_ssize_t top = 0, bottom = -1, y, left = 0, right = -1, i
    with nogil:
        while top < sa.height and memcmp(_row(&sa, top), _row(&sb, top), n) == 0:
            top += 1
        if top < sa.height:
            bottom = sa.height - 1
            while memcmp(_row(&sa, bottom), _row(&sb, bottom), n) == 0:
                bottom -= 1
            # Left edge: each row only needs scanning up to the best left edge so far;
            # right edge: only down to the best right edge so far.
            left = sa.width
            right = -1
            for y in range(top, bottom + 1):
                i = _first_difference(_row(&sa, y), _row(&sb, y), 0, left * c)
                if i < left * c:
                    left = i // c
                i = _last_difference(_row(&sa, y), _row(&sb, y), (right + 1) * c, n)
                if i >= (right + 1) * c:
                    right = i // c
    if top == sa.height:
        return None
    return (left, top, right - left + 1, bottom - top + 1)
