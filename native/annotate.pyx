# Annotation kernels for the stateless mode (seed 004): the overlays that tell the model
# what it did last turn, burned into the RGB frame it receives next.
#
# Every kernel draws a batch of one primitive onto an RGB HxWx3 uint8 frame *in place*,
# with the GIL released, clipped at every edge, each covered pixel blended exactly once
# per primitive ("source over", integer rounding shared with the numpy reference in
# deskpilot.imaging._overlay_reference, which mirrors these loops operation for operation
# so the two backends agree bit for bit).
#
# Blending of one channel: out = (src * a + dst * (255 - a) + 127) // 255, a in 0..255.
#
# Radial gradients use a lookup table indexed by the *squared* relative distance
# (t^2 = d^2 / r^2, quantized to the table size), so no square root runs per pixel.
#
# Contract (the same as native/imaging.pyx): the kernels trust their arguments. The wrappers
# in deskpilot.imaging._overlay check them first and raise ImagingError with the details: a
# writable frame with packed RGB pixels (rows may be strided), C-contiguous tables of the
# documented width and dtype with finite values, colours 0..255, alpha_q 0..256, a gradient
# table of 2..65536 entries, a (95, rows) font, cell_width 1..8.

from libc.math cimport ceil, floor, sqrt
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport free, malloc

cdef extern from *:
    """
    #ifndef DESKPILOT_CORE_VERSION
    #define DESKPILOT_CORE_VERSION "unknown"
    #endif
    """
    const char* DESKPILOT_CORE_VERSION

#: The package version this module was compiled for (setup.py passes it as a C macro);
#: deskpilot.imaging._backend refuses a build whose version differs from the package.
CORE_VERSION = (<bytes>DESKPILOT_CORE_VERSION).decode("ascii")

#: Glyphs of the built-in font cover ASCII 32..126; anything else is drawn as '?'.
FIRST_GLYPH = 32
LAST_GLYPH = 126


cdef struct Canvas:
    uint8_t* data
    Py_ssize_t stride
    Py_ssize_t width
    Py_ssize_t height


# A colour ready to blend: (r * a + 127, g * a + 127, b * a + 127, 255 - a), so one channel
# is (pre + dst * inv) / 255 -- the same integers as the formula above, fewer multiplies.
cdef struct Pre:
    uint32_t r
    uint32_t g
    uint32_t b
    uint32_t inv


cdef inline Pre _pre(int r, int g, int b, int a) noexcept nogil:
    cdef Pre q
    q.r = <uint32_t>(r * a + 127)
    q.g = <uint32_t>(g * a + 127)
    q.b = <uint32_t>(b * a + 127)
    q.inv = <uint32_t>(255 - a)
    return q


cdef inline void _blend(uint8_t* p, const Pre* q) noexcept nogil:
    p[0] = <uint8_t>((q.r + p[0] * q.inv) // 255)
    p[1] = <uint8_t>((q.g + p[1] * q.inv) // 255)
    p[2] = <uint8_t>((q.b + p[2] * q.inv) // 255)


# Gradient entries in 16 bits: every term of the blend fits (r*a + dst*(255-a) + 127 <= 65152),
# which lets the compiler run the per-channel blend of a whole row in SIMD lanes.
cdef struct Pre16:
    uint16_t r
    uint16_t g
    uint16_t b
    uint16_t inv


cdef inline void _premultiply(const uint8_t* lut, Py_ssize_t size, int aq, Pre16* out) noexcept nogil:
    # Gradient entries with the alpha scaled by aq / 256; entry [size] is transparent, the
    # target of pixels outside a disc (blending it leaves the pixel unchanged).
    cdef Py_ssize_t i
    cdef int a
    for i in range(size + 1):
        a = (lut[i * 4 + 3] * aq + 128) >> 8 if i < size else 0
        out[i].r = <uint16_t>((lut[i * 4] if i < size else 0) * a + 127)
        out[i].g = <uint16_t>((lut[i * 4 + 1] if i < size else 0) * a + 127)
        out[i].b = <uint16_t>((lut[i * 4 + 2] if i < size else 0) * a + 127)
        out[i].inv = <uint16_t>(255 - a)


cdef struct Scratch:
    int32_t* index  # gradient entry per pixel of the span
    uint16_t* pre   # per byte of the span: the premultiplied source (+127)
    uint16_t* inv   # per byte of the span: 255 - alpha


cdef int _scratch(Scratch* s, Py_ssize_t width) noexcept nogil:
    # Every pointer is set (or NULL) before anything can fail: _free_scratch frees them all.
    s.index = <int32_t*>malloc((width + 4) * sizeof(int32_t))
    s.pre = <uint16_t*>malloc(3 * (width + 4) * sizeof(uint16_t))
    s.inv = <uint16_t*>malloc(3 * (width + 4) * sizeof(uint16_t))
    return 0 if s.index != NULL and s.pre != NULL and s.inv != NULL else -1


cdef void _free_scratch(Scratch* s) noexcept nogil:
    free(s.index)
    free(s.pre)
    free(s.inv)


cdef void _blend_span(uint8_t* p, const Pre16* table, Scratch* s, Py_ssize_t n) noexcept nogil:
    """Blend ``n`` pixels at ``p`` with the gradient entries ``s.index[0..n)``."""
    cdef Py_ssize_t i
    cdef const Pre16* e
    cdef uint16_t* pre = s.pre
    cdef uint16_t* inv = s.inv
    for i in range(n):  # gather (scalar)
        e = &table[s.index[i]]
        pre[3 * i] = e.r
        pre[3 * i + 1] = e.g
        pre[3 * i + 2] = e.b
        inv[3 * i] = e.inv
        inv[3 * i + 1] = e.inv
        inv[3 * i + 2] = e.inv
    for i in range(3 * n):  # blend (vectorized: 16-bit lanes, division by 255 as mulhi)
        p[i] = <uint8_t>(<uint16_t>(pre[i] + p[i] * inv[i]) // 255)


cdef inline Py_ssize_t _clamp_index(double v, Py_ssize_t hi) noexcept nogil:
    # Clamp in floating point before the cast: casting an out-of-range double is undefined.
    if v < 0.0:
        return 0
    if v > <double>hi:
        return hi
    return <Py_ssize_t>v


cdef Canvas _canvas(uint8_t[:, :, :] view) noexcept:
    cdef Canvas c
    c.width = view.shape[1]
    c.height = view.shape[0]
    c.stride = view.strides[0]
    c.data = &view[0, 0, 0] if c.width > 0 and c.height > 0 else NULL
    return c


# ---------------------------------------------------------------------------- heat spots

cdef int _heat_spots(Canvas* c, const double* spots, Py_ssize_t n,
                     const uint8_t* lut, Py_ssize_t lut_size) noexcept nogil:
    cdef Py_ssize_t i, x, y, x_lo, x_hi, y_lo, y_hi, span
    cdef double cx, cy, r, r2, k, dx, dy, dy2, d2, half
    cdef int aq, last_aq = -1
    cdef int32_t outside = <int32_t>lut_size
    cdef int32_t* index
    # Per row: gradient indices first (a loop the compiler vectorizes), then the blend of
    # the span (gather, then 16-bit SIMD lanes).
    cdef Scratch scratch
    cdef int failed = _scratch(&scratch, c.width)
    cdef Pre16* table = <Pre16*>malloc((lut_size + 1) * sizeof(Pre16))
    if table == NULL or failed:
        free(table)
        _free_scratch(&scratch)
        return -1
    index = scratch.index
    for i in range(n):
        cx = spots[i * 4]
        cy = spots[i * 4 + 1]
        r = spots[i * 4 + 2]
        aq = <int>spots[i * 4 + 3]
        # Below a millionth of a pixel a spot covers nothing worth drawing, and r^2 could
        # underflow (k would be infinite).
        if not (r >= 1e-6) or aq <= 0:
            continue
        if cy + r < 0.0 or cy - r > <double>c.height or cx + r < 0.0 or cx - r > <double>c.width:
            continue
        if aq != last_aq:
            _premultiply(lut, lut_size, aq, table)
            last_aq = aq
        r2 = r * r
        k = (lut_size - 1) / r2
        # One pixel of slack on every side: the exact d2 < r2 test decides membership.
        y_lo = _clamp_index(floor(cy - r - 0.5) - 1.0, c.height - 1)
        y_hi = _clamp_index(ceil(cy + r - 0.5) + 1.0, c.height - 1)
        for y in range(y_lo, y_hi + 1):
            dy = (y + 0.5) - cy
            dy2 = dy * dy
            if dy2 >= r2:
                continue
            half = sqrt(r2 - dy2)
            if cx + half < -1.0 or cx - half > <double>c.width + 1.0:
                continue
            x_lo = _clamp_index(floor(cx - half - 0.5) - 1.0, c.width - 1)
            x_hi = _clamp_index(ceil(cx + half - 0.5) + 1.0, c.width - 1)
            span = x_hi - x_lo + 1
            for x in range(span):
                dx = (x + x_lo + 0.5) - cx
                d2 = dx * dx + dy2
                index[x] = <int32_t>(d2 * k + 0.5) if d2 < r2 else outside
            _blend_span(c.data + y * c.stride + x_lo * 3, table, &scratch, span)
    free(table)
    _free_scratch(&scratch)
    return 0


def heat_spots(uint8_t[:, :, :] frame, const double[:, ::1] spots, const uint8_t[:, ::1] lut):
    """Blend radial gradients centred at ``spots`` rows ``(cx, cy, radius, alpha_q)``.

    Pixel centres ``(x + 0.5, y + 0.5)`` strictly inside the radius take the gradient
    colour of ``lut[round(d^2 / r^2 * (L - 1))]``; its alpha is scaled by ``alpha_q / 256``
    (``alpha_q`` 0..256, the trail fade). Spots are drawn in order (later on top).
    """
    cdef Canvas c = _canvas(frame)
    cdef int rc
    if c.data == NULL or spots.shape[0] == 0:
        return
    with nogil:
        rc = _heat_spots(&c, &spots[0, 0], spots.shape[0], &lut[0, 0], lut.shape[0])
    if rc:
        raise MemoryError()


# ------------------------------------------------------------------------------ box heat

cdef int _box_heat(Canvas* c, const int32_t* boxes, Py_ssize_t n,
                   const uint8_t* lut, Py_ssize_t lut_size) noexcept nogil:
    cdef Py_ssize_t i, x, y, x0, y0, x1, y1, idx
    cdef double cx, cy, w, h, r2, k, dx, dy2, d2
    cdef int aq, last_aq = -1
    cdef int32_t* index
    cdef Scratch scratch
    cdef int failed = _scratch(&scratch, c.width)
    cdef Pre16* table = <Pre16*>malloc((lut_size + 1) * sizeof(Pre16))
    if table == NULL or failed:
        free(table)
        _free_scratch(&scratch)
        return -1
    index = scratch.index
    for i in range(n):
        aq = boxes[i * 5 + 4]
        w = <double>(boxes[i * 5 + 2] - boxes[i * 5])
        h = <double>(boxes[i * 5 + 3] - boxes[i * 5 + 1])
        if w <= 0.0 or h <= 0.0 or aq <= 0:
            continue
        if aq != last_aq:
            _premultiply(lut, lut_size, aq, table)
            last_aq = aq
        cx = boxes[i * 5] + 0.5 * w
        cy = boxes[i * 5 + 1] + 0.5 * h
        # The gradient reaches t = 1 at the corners: radius = half the diagonal.
        r2 = 0.25 * (w * w + h * h)
        k = (lut_size - 1) / r2
        x0 = max(<Py_ssize_t>boxes[i * 5], 0)
        y0 = max(<Py_ssize_t>boxes[i * 5 + 1], 0)
        x1 = min(<Py_ssize_t>boxes[i * 5 + 2], c.width)
        y1 = min(<Py_ssize_t>boxes[i * 5 + 3], c.height)
        if x1 <= x0:
            continue
        for y in range(y0, y1):
            dy2 = (y + 0.5) - cy
            dy2 = dy2 * dy2
            for x in range(x1 - x0):
                dx = (x + x0 + 0.5) - cx
                d2 = dx * dx + dy2
                idx = <Py_ssize_t>(d2 * k + 0.5)
                index[x] = <int32_t>(idx if idx < lut_size - 1 else lut_size - 1)
            _blend_span(c.data + y * c.stride + x0 * 3, table, &scratch, x1 - x0)
    free(table)
    _free_scratch(&scratch)
    return 0


def box_heat(uint8_t[:, :, :] frame, const int32_t[:, ::1] boxes, const uint8_t[:, ::1] lut):
    """Fill boxes ``(x0, y0, x1, y1, alpha_q)`` (pixels, end exclusive) with a radial gradient.

    The gradient is centred in the box and reaches the table's end at the corners.
    """
    cdef Canvas c = _canvas(frame)
    cdef int rc
    if c.data == NULL or boxes.shape[0] == 0:
        return
    with nogil:
        rc = _box_heat(&c, &boxes[0, 0], boxes.shape[0], &lut[0, 0], lut.shape[0])
    if rc:
        raise MemoryError()


# --------------------------------------------------------------------------------- rects

cdef void _rects(Canvas* c, const int32_t* rects, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i, x, y, x0, y0, x1, y1, bw, ix0, iy0, ix1, iy1
    cdef const int32_t* q
    cdef uint8_t* row
    cdef Pre col
    for i in range(n):
        q = rects + i * 9
        if q[8] <= 0:
            continue
        col = _pre(q[5], q[6], q[7], q[8])
        bw = q[4]
        # The border lies inside the rectangle, so a box touching the frame edge keeps it.
        ix0, iy0, ix1, iy1 = q[0] + bw, q[1] + bw, q[2] - bw, q[3] - bw
        x0 = max(<Py_ssize_t>q[0], 0)
        y0 = max(<Py_ssize_t>q[1], 0)
        x1 = min(<Py_ssize_t>q[2], c.width)
        y1 = min(<Py_ssize_t>q[3], c.height)
        for y in range(y0, y1):
            row = c.data + y * c.stride
            # A border wider than half the box fills it: each pixel is blended once.
            if bw <= 0 or y < iy0 or y >= iy1 or ix0 >= ix1:
                for x in range(x0, x1):
                    _blend(row + x * 3, &col)
            else:
                for x in range(x0, min(x1, ix0)):
                    _blend(row + x * 3, &col)
                for x in range(max(x0, ix1), x1):
                    _blend(row + x * 3, &col)


def rects(uint8_t[:, :, :] frame, const int32_t[:, ::1] rects):
    """Draw rectangles ``(x0, y0, x1, y1, border, r, g, b, a)`` (pixels, end exclusive).

    ``border <= 0`` fills the rectangle; otherwise a border of that width is drawn inside it.
    """
    cdef Canvas c = _canvas(frame)
    if c.data == NULL or rects.shape[0] == 0:
        return
    with nogil:
        _rects(&c, &rects[0, 0], rects.shape[0])


# --------------------------------------------------------------------------------- rings

cdef void _rings(Canvas* c, const double* rings, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i, x, y, x_lo, x_hi, y_lo, y_hi
    cdef double cx, cy, ri2, ro, ro2, dx, dy2, d2
    cdef int a
    cdef uint8_t* row
    cdef Pre col
    for i in range(n):
        cx = rings[i * 8]
        cy = rings[i * 8 + 1]
        ri2 = rings[i * 8 + 2] * rings[i * 8 + 2]
        ro = rings[i * 8 + 3]
        ro2 = ro * ro
        a = <int>rings[i * 8 + 7]
        if not (ro > 0.0) or a <= 0:
            continue
        col = _pre(<int>rings[i * 8 + 4], <int>rings[i * 8 + 5], <int>rings[i * 8 + 6], a)
        if cy + ro < -1.0 or cy - ro > c.height + 1.0 or cx + ro < -1.0 or cx - ro > c.width + 1.0:
            continue
        y_lo = _clamp_index(floor(cy - ro - 0.5) - 1.0, c.height - 1)
        y_hi = _clamp_index(ceil(cy + ro - 0.5) + 1.0, c.height - 1)
        x_lo = _clamp_index(floor(cx - ro - 0.5) - 1.0, c.width - 1)
        x_hi = _clamp_index(ceil(cx + ro - 0.5) + 1.0, c.width - 1)
        for y in range(y_lo, y_hi + 1):
            dy2 = (y + 0.5) - cy
            dy2 = dy2 * dy2
            row = c.data + y * c.stride
            for x in range(x_lo, x_hi + 1):
                dx = (x + 0.5) - cx
                d2 = dx * dx + dy2
                if d2 < ro2 and d2 >= ri2:
                    _blend(row + x * 3, &col)


def rings(uint8_t[:, :, :] frame, const double[:, ::1] rings):
    """Draw rings ``(cx, cy, r_inner, r_outer, r, g, b, a)``: pixels with r_in <= d < r_out.

    ``r_inner = 0`` draws a filled disc.
    """
    cdef Canvas c = _canvas(frame)
    if c.data == NULL or rings.shape[0] == 0:
        return
    with nogil:
        _rings(&c, &rings[0, 0], rings.shape[0])


# --------------------------------------------------------------------------------- lines

cdef void _lines(Canvas* c, const double* lines, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i, x, y, x_lo, x_hi, y_lo, y_hi
    cdef double x0, y0, x1, y1, hw, hw2, ddx, ddy, len2, py, px, t, qx, qy, ex, ey
    cdef double ta, tb, tmp, xa, xb
    cdef int a
    cdef uint8_t* row
    cdef Pre col
    for i in range(n):
        x0 = lines[i * 9]
        y0 = lines[i * 9 + 1]
        x1 = lines[i * 9 + 2]
        y1 = lines[i * 9 + 3]
        hw = 0.5 * lines[i * 9 + 4]
        a = <int>lines[i * 9 + 8]
        if not (hw > 0.0) or a <= 0:
            continue
        col = _pre(<int>lines[i * 9 + 5], <int>lines[i * 9 + 6], <int>lines[i * 9 + 7], a)
        hw2 = hw * hw
        ddx = x1 - x0
        ddy = y1 - y0
        len2 = ddx * ddx + ddy * ddy
        if min(y0, y1) - hw > c.height + 1.0 or max(y0, y1) + hw < -1.0:
            continue
        y_lo = _clamp_index(floor(min(y0, y1) - hw - 0.5) - 1.0, c.height - 1)
        y_hi = _clamp_index(ceil(max(y0, y1) + hw - 0.5) + 1.0, c.height - 1)
        for y in range(y_lo, y_hi + 1):
            py = y + 0.5
            # Candidate span: x of segment points whose y lies within hw of this row, +-hw.
            if ddy == 0.0:
                if (py - y0) * (py - y0) > hw2 + 1.0:
                    continue
                ta, tb = 0.0, 1.0
            else:
                ta = (py - hw - 1.0 - y0) / ddy
                tb = (py + hw + 1.0 - y0) / ddy
                if ta > tb:
                    tmp = ta
                    ta = tb
                    tb = tmp
                if tb < 0.0 or ta > 1.0:
                    continue
                ta = max(ta, 0.0)
                tb = min(tb, 1.0)
            xa = x0 + ta * ddx
            xb = x0 + tb * ddx
            if xa > xb:
                tmp = xa
                xa = xb
                xb = tmp
            if xb + hw < -1.0 or xa - hw > c.width + 1.0:
                continue
            x_lo = _clamp_index(floor(xa - hw - 0.5) - 1.0, c.width - 1)
            x_hi = _clamp_index(ceil(xb + hw - 0.5) + 1.0, c.width - 1)
            row = c.data + y * c.stride
            for x in range(x_lo, x_hi + 1):
                px = x + 0.5
                if len2 > 0.0:
                    t = ((px - x0) * ddx + (py - y0) * ddy) / len2
                    if t < 0.0:
                        t = 0.0
                    elif t > 1.0:
                        t = 1.0
                else:
                    t = 0.0
                qx = x0 + t * ddx
                qy = y0 + t * ddy
                ex = px - qx
                ey = py - qy
                if ex * ex + ey * ey <= hw2:
                    _blend(row + x * 3, &col)


def lines(uint8_t[:, :, :] frame, const double[:, ::1] lines):
    """Draw thick segments ``(x0, y0, x1, y1, width, r, g, b, a)`` with round caps.

    A pixel is covered when its centre lies within ``width / 2`` of the segment.
    """
    cdef Canvas c = _canvas(frame)
    if c.data == NULL or lines.shape[0] == 0:
        return
    with nogil:
        _lines(&c, &lines[0, 0], lines.shape[0])


# ---------------------------------------------------------------------------------- text

cdef void _text(Canvas* c, const int32_t* runs, Py_ssize_t n, const uint8_t* codes,
                Py_ssize_t n_codes, const uint8_t* font, Py_ssize_t glyph_rows,
                Py_ssize_t cell_width) noexcept nogil:
    cdef Py_ssize_t i, j, gx, gy, sx, sy, x, y, ox, oy, s, start, length, code
    cdef const int32_t* q
    cdef const uint8_t* glyph
    cdef uint8_t bits
    cdef uint8_t* row
    cdef Pre col
    for i in range(n):
        q = runs + i * 9
        s = q[4]
        start = q[2]
        length = q[3]
        if s <= 0 or q[8] <= 0 or start < 0 or length <= 0 or start + length > n_codes:
            continue
        col = _pre(q[5], q[6], q[7], q[8])
        for j in range(length):
            code = codes[start + j]
            if code < 32 or code > 126:
                code = 63  # '?'
            glyph = font + (code - 32) * glyph_rows
            ox = q[0] + j * cell_width * s
            if ox >= c.width or ox + cell_width * s <= 0:
                continue
            for gy in range(glyph_rows):
                bits = glyph[gy]
                if bits == 0:
                    continue
                oy = q[1] + gy * s
                for gx in range(cell_width):
                    # Bit (cell_width - 1) is the leftmost column.
                    if not (bits >> (cell_width - 1 - gx)) & 1:
                        continue
                    for sy in range(s):
                        y = oy + sy
                        if y < 0 or y >= c.height:
                            continue
                        row = c.data + y * c.stride
                        for sx in range(s):
                            x = ox + gx * s + sx
                            if 0 <= x < c.width:
                                _blend(row + x * 3, &col)


def text(uint8_t[:, :, :] frame, const int32_t[:, ::1] runs, const uint8_t[::1] codes,
         const uint8_t[:, ::1] font, Py_ssize_t cell_width):
    """Draw text runs ``(x, y, start, length, scale, r, g, b, a)`` with a bitmap font.

    ``codes`` is the byte string of all runs (ASCII; other bytes draw as '?'), ``font``
    a ``(95, rows)`` uint8 table of glyph rows for ASCII 32..126 whose bit
    ``cell_width - 1`` is the leftmost column; each glyph pixel becomes a
    ``scale x scale`` block with its top-left at ``(x, y)`` plus the glyph offset.
    """
    cdef Canvas c = _canvas(frame)
    if c.data == NULL or runs.shape[0] == 0 or codes.shape[0] == 0:
        return
    with nogil:
        _text(&c, &runs[0, 0], runs.shape[0], &codes[0], codes.shape[0], &font[0, 0],
              font.shape[1], cell_width)
