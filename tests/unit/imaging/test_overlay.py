"""Annotation overlays (seed 004): pixels at known coordinates, both backends, bit for bit.

Every pixel test runs against the compiled kernels and the numpy reference (``kernels``
fixture); ``test_backends_agree_*`` draw the same plans with both and demand identical
frames.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from dataclasses import replace
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deskpilot._errors import ImagingError
from deskpilot.imaging import _overlay as ov
from deskpilot.imaging import _overlay_reference as ref
from deskpilot.imaging._backend import ANNOTATE_MODULE, load, require_native
from deskpilot.imaging._overlay import ActionMark, Annotator, BoxMark, OverlayStyle

U8 = npt.NDArray[np.uint8]

try:
    NATIVE: ModuleType | None = importlib.import_module("deskpilot._native.annotate")
except ModuleNotFoundError:  # a pure-Python checkout: the native half of each test skips
    NATIVE = None

HYPOTHESIS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(params=["native", "reference"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "native" and NATIVE is None:
        pytest.skip("compiled annotation core not built (python setup.py build_ext --inplace)")
    return str(request.param)


@pytest.fixture()
def kernels(backend: str) -> ov.Primitives:
    """The kernels behind the wrappers' checks (the kernels themselves trust their input)."""
    return ov.Primitives(backend)  # type: ignore[arg-type]


def _readonly(frame: U8) -> U8:
    frame.setflags(write=False)
    return frame


def blend(src: int, dst: int, a: int) -> int:
    return (src * a + dst * (255 - a) + 127) // 255


def black(w: int, h: int) -> U8:
    return np.zeros((h, w, 3), dtype=np.uint8)


HEAT_ONLY = OverlayStyle(labels_enabled=False, markers_enabled=False, bbox_enabled=False)
SOLID_STOPS = ((0.0, (255, 0, 0, 255)), (1.0, (255, 0, 0, 255)))


# -- module surface ------------------------------------------------------------------------


def test_native_core_carries_the_package_version() -> None:
    if NATIVE is None:
        pytest.skip("compiled annotation core not built")
    from deskpilot._version import __version__

    assert __version__ == NATIVE.CORE_VERSION
    expected = "reference" if os.environ.get("DESKPILOT_PURE") else "native"
    assert expected == ov.OVERLAY_BACKEND


def test_stale_native_core_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    if NATIVE is None:
        pytest.skip("compiled annotation core not built")
    monkeypatch.delenv("DESKPILOT_PURE", raising=False)
    monkeypatch.setattr(NATIVE, "CORE_VERSION", "0.0.0-stale")
    with pytest.raises(ImportError, match="stale"):
        load(ANNOTATE_MODULE)
    with pytest.raises(ImagingError, match="stale"):  # asked for by name: never a fallback
        require_native(ANNOTATE_MODULE)


def test_pure_env_forces_the_reference() -> None:
    code = "from deskpilot.imaging import _overlay as o; print(o.OVERLAY_BACKEND)"
    env = {**os.environ, "DESKPILOT_PURE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "reference"


def test_public_names_exist_and_are_sorted() -> None:
    def key(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)

    assert list(ov.__all__) == sorted(ov.__all__, key=key)
    for name in ov.__all__:
        assert hasattr(ov, name)


# -- colours and gradients -----------------------------------------------------------------


def test_gradient_table_interpolates_premultiplied_and_is_indexed_by_t_squared() -> None:
    stops = ((0.0, (255, 0, 0, 255)), (1.0, (255, 0, 0, 0)))
    lut = ov.gradient_table(stops, 101)
    assert lut.shape == (101, 4) and not lut.flags.writeable
    # A stop fading to transparent keeps its hue (premultiplied interpolation).
    assert (lut[:-1, 0] == 255).all() and (lut[:, 1:3] == 0).all()
    # Index i is t^2 = i / 100: alpha at t = 0.5 (i = 25) is half.
    assert lut[0, 3] == 255 and lut[100, 3] == 0
    assert lut[25, 3] == 128
    # Before the first / after the last stop the end colours hold.
    lut2 = ov.gradient_table(((0.5, (0, 0, 255, 200)),), 11)
    assert (lut2 == [0, 0, 255, 200]).all()


# -- the style -----------------------------------------------------------------------------


def test_auto_ui_scale_follows_the_frame() -> None:
    style = OverlayStyle()
    assert style.ui_scale(1536, 864) == 2
    assert style.ui_scale(640, 360) == 1
    assert OverlayStyle(label_scale=3).ui_scale(100, 100) == 3


# -- kernels: pixels at known coordinates ---------------------------------------------------


def test_heat_spot_pixels(kernels: ov.Primitives) -> None:
    frame = black(40, 30)
    lut = ov.gradient_table(((0.0, (200, 100, 0, 255)), (1.0, (200, 100, 0, 0))), 1024)
    kernels.heat_spots(frame, [[20.0, 10.0, 8.0, 256.0]], lut)
    # Pixel (19, 9) has its centre 0.5 px from (20, 10) on each axis: d^2 = 0.5.
    idx = int(0.5 * 1023 / 64 + 0.5)
    a = int(lut[idx, 3])
    assert frame[9, 19].tolist() == [blend(200, 0, a), blend(100, 0, a), 0]
    # d = 7.5 (inside) is faint; d >= 8 untouched.
    assert 0 < frame[10, 27, 0] < 40
    assert frame[10, 28].tolist() == [0, 0, 0]
    assert frame[2, 20].sum() > 0 and frame[1, 20].sum() == 0
    # Symmetric around the centre.
    assert (frame[:, :20] == frame[:, 20:][:, ::-1]).all()


def test_heat_spot_alpha_scale_halves_opacity(kernels: ov.Primitives) -> None:
    full, half = black(20, 20), black(20, 20)
    lut = ov.gradient_table(SOLID_STOPS)
    kernels.heat_spots(full, [[10.0, 10.0, 5.0, 256.0]], lut)
    kernels.heat_spots(half, [[10.0, 10.0, 5.0, 128.0]], lut)
    assert full[10, 10, 0] == 255 and half[10, 10, 0] == blend(255, 0, 128)


def test_heat_spot_clipped_at_every_edge(kernels: ov.Primitives) -> None:
    lut = ov.gradient_table(SOLID_STOPS)
    for cx, cy in [
        (-3.0, 5.0),
        (5.0, -3.0),
        (23.0, 5.0),
        (5.0, 13.0),
        (-100.0, -100.0),
        (1e9, 5.0),
    ]:
        frame = black(20, 10)
        kernels.heat_spots(frame, [[cx, cy, 5.0, 256.0]], lut)
        expect = np.zeros((10, 20), dtype=bool)
        ys, xs = np.mgrid[0:10, 0:20]
        expect[((xs + 0.5 - cx) ** 2 + (ys + 0.5 - cy) ** 2) < 25.0] = True
        assert ((frame[..., 0] == 255) == expect).all()


def test_box_heat_fills_exactly_the_box(kernels: ov.Primitives) -> None:
    frame = black(30, 20)
    lut = ov.gradient_table(((0.0, (0, 0, 255, 100)), (1.0, (0, 0, 255, 200))))
    kernels.box_heat(frame, [[5, 4, 15, 10, 256]], lut)
    inside = frame[4:10, 5:15, 2]
    assert (inside > 0).all()
    assert frame[..., 2].astype(bool).sum() == 60
    # Centre fainter than the corner (stops go 100 -> 200 alpha).
    assert inside[3, 5] < inside[0, 0]
    # Clipped boxes draw only their visible part.
    clipped = black(30, 20)
    kernels.box_heat(clipped, [[-5, -5, 3, 3, 256], [28, 18, 40, 40, 256]], lut)
    assert clipped[..., 2].astype(bool).sum() == 9 + 4


def test_rect_border_lies_inside(kernels: ov.Primitives) -> None:
    frame = black(20, 20)
    kernels.rects(frame, [[2, 3, 12, 13, 2, 255, 255, 255, 255]])
    mask = frame[..., 0] == 255
    assert mask.sum() == 10 * 10 - 6 * 6
    assert mask[3, 2] and mask[12, 11] and mask[4, 3] and not mask[5, 4] and not mask[2, 2]
    filled = black(5, 5)
    kernels.rects(filled, [[-2, -2, 2, 9, 0, 10, 20, 30, 255]])
    assert (filled[:, :2] == [10, 20, 30]).all() and (filled[:, 2:] == 0).all()


def test_rings_and_discs(kernels: ov.Primitives) -> None:
    frame = black(21, 21)
    kernels.rings(
        frame, [[10.5, 10.5, 4.0, 6.0, 0, 255, 0, 255], [10.5, 10.5, 0.0, 1.0, 0, 0, 255, 255]]
    )
    assert frame[10, 10].tolist() == [0, 0, 255]  # the disc
    assert frame[10, 15].tolist() == [0, 255, 0]  # d = 5: on the ring
    assert frame[10, 12].tolist() == [0, 0, 0]  # d = 2: the hole
    assert frame[10, 17].tolist() == [0, 0, 0]  # d = 7: outside


def test_thick_line_covers_pixels_within_half_width(kernels: ov.Primitives) -> None:
    frame = black(30, 20)
    kernels.lines(frame, [[2.0, 10.0, 27.0, 10.0, 4.0, 255, 255, 255, 255]])
    col = frame[:, 15, 0] == 255
    assert col.nonzero()[0].tolist() == [8, 9, 10, 11]
    # Round caps reach half the width beyond the end points.
    assert frame[10, 0, 0] == 255 and frame[10, 29, 0] == 0
    diag = black(30, 30)
    kernels.lines(diag, [[0.0, 0.0, 30.0, 30.0, 2.0, 255, 0, 0, 255]])
    assert all(diag[i, i, 0] == 255 for i in range(30))
    assert diag[0, 10, 0] == 0
    dot = black(10, 10)
    kernels.lines(dot, [[5.0, 5.0, 5.0, 5.0, 3.0, 255, 0, 0, 255]])
    assert dot[4, 4, 0] == 255 and dot[..., 0].astype(bool).sum() == 4


def test_text_draws_the_font_bitmap(kernels: ov.Primitives) -> None:
    frame = black(40, 20)
    kernels.text(frame, [[3, 2, 0, 2, 1, 255, 255, 255, 255]], b"1A", ov.FONT, 6)
    for i, ch in enumerate("1A"):
        rows = ov.FONT[ord(ch) - 32]
        expect = ((rows[:, None] >> np.arange(5, -1, -1)) & 1).astype(bool)
        got = frame[2:12, 3 + 6 * i : 9 + 6 * i, 0] == 255
        assert (got == expect).all(), ch
    assert frame[..., 0].astype(bool).sum() == sum(
        int(bin(int(v)).count("1")) for ch in "1A" for v in ov.FONT[ord(ch) - 32]
    )
    # Scale 2: every glyph pixel is a 2x2 block; non-ASCII draws as '?'.
    big = black(40, 30)
    kernels.text(big, [[0, 0, 0, 1, 2, 255, 255, 255, 255]], "é".encode()[:1], ov.FONT, 6)
    q = ((ov.FONT[ord("?") - 32][:, None] >> np.arange(5, -1, -1)) & 1).astype(bool)
    assert ((big[:20, :12, 0] == 255) == np.kron(q, np.ones((2, 2), dtype=bool))).all()


def test_kernels_reject_bad_frames(kernels: ov.Primitives) -> None:
    lut = ov.gradient_table(SOLID_STOPS)
    readonly = black(4, 4)
    readonly.setflags(write=False)
    bad: list[Any] = [readonly, np.zeros((4, 4, 4), np.uint8), np.zeros((4, 4, 3), np.float32)]
    for frame in [*bad, [[0]]]:
        with pytest.raises(ImagingError):
            kernels.heat_spots(frame, [[1.0, 1.0, 1.0, 256.0]], lut)
    with pytest.raises(ImagingError, match="packed RGB"):
        kernels.rects(np.zeros((4, 3, 4), np.uint8)[:, :, :3], [[0, 0, 1, 1, 0, 1, 1, 1, 1]])
    with pytest.raises(ImagingError, match="shape"):
        kernels.heat_spots(black(4, 4), [[1.0, 2.0]], lut)
    with pytest.raises(ImagingError, match="non-finite"):
        kernels.heat_spots(black(4, 4), [[np.nan, 2.0, 1.0, 1.0]], lut)
    with pytest.raises(ImagingError, match="gradient"):
        kernels.heat_spots(black(4, 4), [[1.0, 2.0, 1.0, 1.0]], np.zeros((1, 4), np.uint8))
    with pytest.raises(ImagingError, match=r"0\.\.255"):
        kernels.rings(black(4, 4), [[1.0, 1.0, 0.0, 1.0, 300, 0, 0, 255]])


def test_kernels_reject_bad_tables(kernels: ov.Primitives) -> None:
    """What the kernels trust (they check nothing) is checked before them, on both backends."""
    lut = ov.gradient_table(SOLID_STOPS)
    with pytest.raises(ImagingError, match=r"alpha_q must be 0\.\.256"):
        kernels.heat_spots(black(4, 4), [[1.0, 1.0, 1.0, 1e300]], lut)
    with pytest.raises(ImagingError, match=r"alpha_q must be 0\.\.256"):
        kernels.box_heat(black(4, 4), [[0, 0, 2, 2, -1]], lut)
    with pytest.raises(ImagingError, match="gradient"):
        kernels.box_heat(black(4, 4), [[0, 0, 2, 2, 256]], np.zeros((65537, 4), np.uint8))
    with pytest.raises(ImagingError, match="not a table of numbers"):
        kernels.rects(black(4, 4), [["a"] * 9])
    with pytest.raises(ImagingError, match=r"rects colours must be 0\.\.255"):
        kernels.rects(black(4, 4), [[0, 0, 1, 1, 0, 1, 1, 1, 256]])
    with pytest.raises(ImagingError, match="lines has a non-finite"):
        kernels.lines(black(4, 4), [[0, 0, np.inf, 1, 1, 1, 1, 1, 1]])
    run = [[0, 0, 0, 1, 1, 255, 255, 255, 255]]
    with pytest.raises(ImagingError, match=r"font must have shape \(95, rows\)"):
        kernels.text(black(8, 12), run, b"A", ov.FONT[:94], 6)
    with pytest.raises(ImagingError, match=r"cell_width must be 1\.\.8"):
        kernels.text(black(8, 12), run, b"A", ov.FONT, 9)
    with pytest.raises(ImagingError, match="codes must be bytes"):
        kernels.text(black(8, 12), run, "A", ov.FONT, 6)  # type: ignore[arg-type]
    # Runs outside ``codes`` are not an error: like pixels off the frame, they draw nothing.
    frame = black(8, 12)
    kernels.text(frame, [[0, 0, 1, 5, 1, 255, 255, 255, 255]], b"A", ov.FONT, 6)
    assert not frame.any()


def test_draw_plan_checks_the_plan_before_any_kernel(backend: str) -> None:
    plan = ov.plan_overlay(40, 30, [ActionMark("click", 500, 500)], [BoxMark(0, 0, 900, 900)])
    bad = replace(plan, spots=np.array([[np.nan, 1.0, 1.0, 256.0]]))
    frame = black(40, 30)
    with pytest.raises(ImagingError, match="spots has a non-finite"):
        ov.draw_plan(frame, bad, backend=backend)  # type: ignore[arg-type]
    assert not frame.any()  # not even the box heat drawn before the spots
    with pytest.raises(ImagingError, match="read-only"):
        ov.draw_plan(_readonly(black(40, 30)), plan, backend=backend)  # type: ignore[arg-type]


def test_strided_frame_view_draws_like_a_copy(backend: str) -> None:
    big = np.random.default_rng(3).integers(0, 256, (50, 60, 3), dtype=np.uint8)
    view = big[10:40, 5:45]
    copy = view.copy()
    plan = ov.plan_overlay(
        40, 30, [ActionMark("drag", 100, 100, 900, 800)], [BoxMark(0, 0, 500, 500, "x")]
    )
    for frame in (view, copy):
        ov.draw_plan(frame, plan, backend=backend)  # type: ignore[arg-type]
    assert (view == copy).all()
    assert (
        big[:10] == np.random.default_rng(3).integers(0, 256, (50, 60, 3), dtype=np.uint8)[:10]
    ).all()


# -- the plan: what goes where ---------------------------------------------------------------


def test_click_heat_centre_at_normalized_position(backend: str) -> None:
    frame = black(200, 100)
    style = OverlayStyle(
        labels_enabled=False, markers_enabled=False, heat_stops=SOLID_STOPS, heat_radius_scale=0.05
    )
    ov.annotate(frame, [ActionMark("click", 250, 500)], style=style, backend=backend)  # type: ignore[arg-type]
    red = frame[..., 0] == 255
    ys, xs = red.nonzero()
    # Centre (50, 50) in pixels, radius 0.05 * 200 = 10.
    assert xs.min() == 40 and xs.max() == 59 and ys.min() == 40 and ys.max() == 59
    assert not red[50, 61] and red[50, 58]


def test_keyboard_actions_get_no_heat_but_a_legend(backend: str) -> None:
    frame = black(400, 200)
    style = OverlayStyle(markers_enabled=False)
    plan = ov.plan_overlay(
        400,
        200,
        [ActionMark("type", detail="héllo\nworld"), ActionMark("key", detail="ctrl+s")],
        style=style,
    )
    assert len(plan.spots) == 0
    assert plan.labels == ("2 key ctrl+s", '1 type "h?llo world"')
    ov.draw_plan(frame, plan, backend=backend)  # type: ignore[arg-type]
    # The legend sits bottom-left, stacked upwards in action order.
    ys, xs = (frame.sum(axis=2) > 0).nonzero()
    assert xs.min() < 5 and ys.max() >= 190 and ys.min() > 100


def test_trail_fades_and_shrinks_older_turns() -> None:
    style = OverlayStyle(trail_turns=4, trail_shrink=0.5, heat_radius_scale=0.1)
    prev = [
        [ActionMark("click", 100, 100)],
        [ActionMark("drag", 200, 500, 600, 500)],
        [ActionMark("click", 900, 900)],
    ]
    plan = ov.plan_overlay(1000, 1000, [ActionMark("move", 500, 500)], style=style, previous=prev)
    spots = plan.spots.tolist()
    # Oldest first: ages 3, 2 (two drag ends), 1, 0; alpha 64, 128, 192, 256.
    assert [s[3] for s in spots] == [64.0, 128.0, 128.0, 192.0, 256.0]
    assert [s[2] for s in spots] == [12.5, 25.0, 25.0, 50.0, 100.0]
    # Drag ends pulled halfway**2 toward their midpoint (400, 500): 200 -> 350, 600 -> 450.
    assert spots[1][:2] == [350.0, 500.0] and spots[2][:2] == [450.0, 500.0]
    # trail_turns = 1: one-turn heat only.
    one = ov.plan_overlay(
        1000, 1000, [ActionMark("move", 500, 500)], style=OverlayStyle(trail_turns=1), previous=prev
    )
    assert len(one.spots) == 1 and one.spots[0, 3] == 256.0
    # Only the last trail_turns - 1 previous turns count.
    two = ov.plan_overlay(1000, 1000, [], style=OverlayStyle(trail_turns=2), previous=prev)
    assert two.spots[:, :2].tolist() == [[900.0, 900.0]]


def test_annotator_keeps_the_trail_across_turns(backend: str) -> None:
    annotator = Annotator(OverlayStyle(trail_turns=3), backend=backend)  # type: ignore[arg-type]
    frames = []
    for x in (100, 500, 900):
        frame = black(300, 100)
        annotator.annotate(frame, [ActionMark("click", x, 500)])
        frames.append(frame)
    assert len(annotator.previous) == 2
    last = frames[-1]
    # The first click (age 2) is still visible but fainter than the current one.
    assert 0 < last[50, 30, 0] < last[50, 270, 0]
    annotator.clear()
    assert annotator.previous == ()


def test_boxes_get_fill_border_and_label(backend: str) -> None:
    frame = black(400, 200)
    ov.annotate(frame, [], [BoxMark(100, 100, 500, 600, "search")], backend=backend)  # type: ignore[arg-type]
    st = OverlayStyle()
    plan = ov.plan_overlay(400, 200, [], [BoxMark(100, 100, 500, 600, "search")])
    fill = black(400, 200)
    ref.box_heat(fill, plan.box_heat, plan.box_lut)
    # Border (inside the box) at x = 40..41, y = 20..119 over the fill carries the border colour.
    under = fill[60, 40].tolist()
    assert frame[60, 40].tolist() == [
        blend(c, u, st.bbox_border[3]) for c, u in zip(st.bbox_border[:3], under, strict=True)
    ]
    assert frame[60, 39].tolist() == [0, 0, 0]
    # Inside: blue tint; the label "b1 search" sits in the top-left corner.
    assert frame[100, 120, 2] > frame[100, 120, 0]
    assert plan.labels == ("b1 search",)
    assert plan.label_rects[0, :2].tolist() == [42, 22]


def test_labels_stay_inside_the_frame() -> None:
    plan = ov.plan_overlay(
        300, 200, [ActionMark("click", 1000, 1000), ActionMark("drag", 0, 0, 990, 5)]
    )
    for x0, y0, x1, y1 in plan.label_rects[:, :4].tolist():
        assert 0 <= x0 < x1 <= 300 and 0 <= y0 < y1 <= 200
    assert plan.labels[0] == "1 click 1000,1000"
    assert plan.labels[1] == "2 drag 0,0>990,5"


def test_draw_plan_checks_the_frame_size() -> None:
    plan = ov.plan_overlay(20, 10, [ActionMark("click", 1, 1)])
    with pytest.raises(ImagingError, match="20x10"):
        ov.draw_plan(black(10, 20), plan)
    with pytest.raises(ImagingError):
        ov.plan_overlay(0, 10)


# -- the two backends agree ------------------------------------------------------------------

coord = st.integers(min_value=-50, max_value=1050).map(lambda v: max(0, min(1000, v)))
kinds = st.sampled_from(
    ["move", "click", "right_click", "double_click", "scroll", "drag", "type", "key"]
)


@st.composite
def action_marks(draw: st.DrawFn) -> ActionMark:
    kind = draw(kinds)
    if kind in ("type", "key"):
        return ActionMark(kind, detail=draw(st.text(max_size=60)))
    if kind == "drag":
        return ActionMark(kind, draw(coord), draw(coord), draw(coord), draw(coord))
    return ActionMark(kind, draw(coord), draw(coord), detail=draw(st.sampled_from(["", "down 3"])))


@st.composite
def box_marks(draw: st.DrawFn) -> BoxMark:
    x1, x2 = sorted((draw(coord), draw(coord)))
    y1, y2 = sorted((draw(coord), draw(coord)))
    return BoxMark(x1, y1, x2, y2, draw(st.text(max_size=20)))


@given(
    w=st.integers(1, 160),
    h=st.integers(1, 120),
    actions=st.lists(action_marks(), max_size=8),
    boxes=st.lists(box_marks(), max_size=4),
    previous=st.lists(st.lists(action_marks(), max_size=4), max_size=5),
    trail=st.integers(1, 6),
    shrink=st.floats(0.1, 1.0),
    scale=st.integers(0, 3),
    seed=st.integers(0, 2**32 - 1),
)
@HYPOTHESIS
def test_backends_agree_on_random_turns(
    w: int,
    h: int,
    actions: list[ActionMark],
    boxes: list[BoxMark],
    previous: list[list[ActionMark]],
    trail: int,
    shrink: float,
    scale: int,
    seed: int,
) -> None:
    if NATIVE is None:
        pytest.skip("compiled annotation core not built")
    style = OverlayStyle(
        trail_turns=trail, trail_shrink=shrink, label_scale=scale, heat_radius_scale=0.08
    )
    plan = ov.plan_overlay(w, h, actions, boxes, style=style, previous=previous)
    base = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    native, reference = base.copy(), base.copy()
    ov.draw_plan(native, plan, backend="native")
    ov.draw_plan(reference, plan, backend="reference")
    assert (native == reference).all()


@given(
    spots=st.lists(
        st.tuples(
            st.floats(-30, 130),
            st.floats(-30, 130),
            st.floats(0.0, 80.0),
            st.integers(0, 256).map(float),
        ),
        max_size=6,
    ),
    lines=st.lists(
        st.tuples(
            st.floats(-50, 150),
            st.floats(-50, 150),
            st.floats(-50, 150),
            st.floats(-50, 150),
            st.floats(0, 12),
            st.just(255.0),
            st.just(128.0),
            st.just(0.0),
            st.integers(0, 255).map(float),
        ),
        max_size=4,
    ),
)
@HYPOTHESIS
def test_backends_agree_on_raw_primitives(
    spots: list[tuple[float, ...]], lines: list[tuple[float, ...]]
) -> None:
    if NATIVE is None:
        pytest.skip("compiled annotation core not built")
    lut = ov.gradient_table(OverlayStyle().heat_stops)
    base = np.random.default_rng(len(spots)).integers(0, 256, (97, 101, 3), dtype=np.uint8)
    a, b = base.copy(), base.copy()
    for k, frame in ((ov.Primitives("native"), a), (ov.Primitives("reference"), b)):
        k.heat_spots(frame, np.array(spots, dtype=np.float64).reshape(-1, 4), lut)
        k.lines(frame, np.array(lines, dtype=np.float64).reshape(-1, 9))
    assert (a == b).all()


def test_realistic_turn_on_a_screenshot_agrees_and_marks_the_frame() -> None:
    if NATIVE is None:
        pytest.skip("compiled annotation core not built")
    rng = np.random.default_rng(7)
    base = rng.integers(0, 256, (864, 1536, 3), dtype=np.uint8)
    acts = [
        ActionMark("click", 500, 300),
        ActionMark("drag", 100, 100, 400, 700),
        ActionMark("type", detail="hello"),
        ActionMark("double_click", 990, 990),
        ActionMark("scroll", 0, 0, detail="down 3"),
    ]
    prev = [
        [ActionMark("click", 480, 320)],
        [ActionMark("drag", 600, 100, 900, 200)],
        [ActionMark("right_click", 200, 600)],
    ]
    boxes = [BoxMark(100, 100, 300, 250, "search"), BoxMark(600, 500, 1000, 1000)]
    plan = ov.plan_overlay(1536, 864, acts, boxes, previous=prev)
    a, b = base.copy(), base.copy()
    ov.draw_plan(a, plan, backend="native")
    ov.draw_plan(b, plan, backend="reference")
    assert (a == b).all()
    assert (a != base).any(axis=2).sum() > 100_000


def test_annotate_is_public_where_readme_says() -> None:
    """README names `deskpilot.imaging.annotate` among the kernels: it is exported there."""
    from deskpilot import imaging

    assert {"annotate", "Annotator", "ActionMark", "BoxMark", "OverlayStyle"} <= set(
        imaging.__all__
    )
    frame = np.full((90, 160, 3), 40, np.uint8)
    out = imaging.annotate(
        frame.copy(),
        [imaging.ActionMark("click", 500, 500)],
        [imaging.BoxMark(100, 100, 400, 400, "b")],
    )
    expected = ov.annotate(
        frame.copy(), [ActionMark("click", 500, 500)], [BoxMark(100, 100, 400, 400, "b")]
    )
    assert np.array_equal(out, expected) and not np.array_equal(out, frame)
