"""SendInputBackend: the INPUT arrays it sends, decoded, against a recorded user32 fake."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from win32_fakes import Decoded, FakeDesktop

import deskpilot.input._sendinput as sendinput_module
from deskpilot._errors import ConfigError, InputError
from deskpilot._win32 import _constants as c
from deskpilot.input._keys import KeySpec, resolve_key
from deskpilot.input._sendinput import SendInputBackend, normalize_absolute

MOVE = (
    c.MOUSEEVENTF_MOVE
    | c.MOUSEEVENTF_ABSOLUTE
    | c.MOUSEEVENTF_VIRTUALDESK
    | c.MOUSEEVENTF_MOVE_NOCOALESCE
)
UNICODE_DOWN, UNICODE_UP = c.KEYEVENTF_UNICODE, c.KEYEVENTF_UNICODE | c.KEYEVENTF_KEYUP


class _Screen:
    """Only the shape matters to SendInput: the virtual desktop's size."""

    def __init__(self, width: int, height: int) -> None:
        self.shape = (height, width, 4)


def make_desktop(
    width: int = 3200, height: int = 1200, origin: tuple[int, int] = (-1280, -120), **kw: Any
) -> FakeDesktop:
    desktop = FakeDesktop(screen=_Screen(width, height), origin=origin, **kw)  # type: ignore[arg-type]
    desktop.user32.impls["SetProcessDpiAwarenessContext"] = lambda context: 1
    return desktop


def make_backend(desktop: FakeDesktop, **kwargs: Any) -> SendInputBackend:
    libraries = desktop.libraries()
    kwargs.setdefault("dpi_awareness", False)
    return SendInputBackend(user32=libraries["user32"], shcore=libraries["shcore"], **kwargs)


@pytest.fixture
def desktop() -> FakeDesktop:
    return make_desktop()


def only_event(desktop: FakeDesktop) -> Decoded:
    (batch,) = desktop.inputs
    (event,) = batch
    return event


def typed(events: list[Decoded]) -> str:
    """What an application would receive from these keyboard events."""
    units: list[int] = []
    text = ""
    for down, up in zip(events[::2], events[1::2], strict=True):
        assert down.type == up.type == c.INPUT_KEYBOARD
        assert (down.vk, down.scan) == (up.vk, up.scan), "each down is followed by its own up"
        assert up.flags == down.flags | c.KEYEVENTF_KEYUP and not down.flags & c.KEYEVENTF_KEYUP
        if down.flags & c.KEYEVENTF_UNICODE:
            assert down.vk == 0
            units.append(down.scan)
            continue
        text += b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le")
        units = []
        text += {c.VK_RETURN: "\n", c.VK_TAB: "\t"}[down.vk]
    return text + b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le")


# -- coordinates ------------------------------------------------------------------------------


@given(size=st.integers(1, 32767), data=st.data())
def test_normalized_coordinate_lands_on_the_pixel(size: int, data: st.DataObject) -> None:
    origin = data.draw(st.integers(-10000, 10000))
    pixel = origin + data.draw(st.integers(0, size - 1))
    n = normalize_absolute(pixel, origin, size)
    assert 1 <= n <= 65535
    # Windows truncates ...
    assert origin + n * size // 65536 == pixel
    # ... and would still land on the pixel if it rounded to nearest instead.
    assert origin + (n * size + 32768) // 65536 == pixel


@given(size=st.integers(32768, 65535), data=st.data())
def test_truncation_lands_on_the_pixel_up_to_the_normalized_range(
    size: int, data: st.DataObject
) -> None:
    pixel = data.draw(st.integers(0, size - 1))
    assert normalize_absolute(pixel, 0, size) * size // 65536 == pixel


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1080, 1920, 2560, 3840, 5120, 7680])
def test_every_pixel_of_common_sizes(size: int) -> None:
    for offset in range(size):
        n = normalize_absolute(offset - 50, -50, size)
        assert -50 + n * size // 65536 == offset - 50


def test_naive_formula_would_miss() -> None:
    # The common p * 65535 // size lands one pixel short on 1920 px; ours does not.
    misses = [p for p in range(1920) if (p * 65535 // 1920) * 1920 // 65536 != p]
    assert misses, "the baseline formula is expected to be wrong somewhere"
    assert all(normalize_absolute(p, 0, 1920) * 1920 // 65536 == p for p in misses)


def test_normalize_rejects_empty_desktop() -> None:
    with pytest.raises(InputError):
        normalize_absolute(0, 0, 0)


def test_move_sequence_and_exact_landing(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop)
    backend.move(-1000, -100)  # on a monitor left of and above the primary one
    assert desktop.names() == ["GetSystemMetrics"] * 4 + ["SendInput"]
    assert [call.args[0] for call in desktop.calls("GetSystemMetrics")] == [76, 77, 78, 79]
    event = only_event(desktop)
    assert event.type == c.INPUT_MOUSE and event.flags == MOVE
    assert (event.dx, event.dy) == (
        normalize_absolute(-1000, -1280, 3200),
        normalize_absolute(-100, -120, 1200),
    )
    assert desktop.cursor_pos == (-1000, -100)
    assert backend.position() == (-1000, -100)
    assert desktop.calls("SendInput")[0].args[2] == 40  # cbSize = sizeof(INPUT) on Win64


@pytest.mark.parametrize(
    ("x", "y"), [(-1280, -120), (1919, 1079), (0, 0), (1919, -1), (-1, 0), (2, 3)]
)
def test_moves_land_exactly_on_physical_pixels(x: int, y: int) -> None:
    desktop = make_desktop()
    make_backend(desktop).move(x, y)
    assert desktop.cursor_pos == (x, y)


def test_move_is_clamped_into_the_virtual_desktop(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop)
    backend.move(10**6, -(10**6))
    assert desktop.cursor_pos == (-1280 + 3199, -120)


def test_empty_desktop_is_an_error() -> None:
    desktop = make_desktop(width=0)
    with pytest.raises(InputError, match="empty virtual desktop"):
        make_backend(desktop).move(0, 0)


# -- buttons and wheel ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("button", "down", "flag"),
    [
        ("left", True, c.MOUSEEVENTF_LEFTDOWN),
        ("left", False, c.MOUSEEVENTF_LEFTUP),
        ("right", True, c.MOUSEEVENTF_RIGHTDOWN),
        ("right", False, c.MOUSEEVENTF_RIGHTUP),
        ("middle", True, c.MOUSEEVENTF_MIDDLEDOWN),
        ("middle", False, c.MOUSEEVENTF_MIDDLEUP),
    ],
)
def test_buttons(button: Any, down: bool, flag: int) -> None:
    desktop = make_desktop()
    make_backend(desktop).button(button, down)
    assert desktop.names() == ["GetSystemMetrics", "SendInput"]
    assert desktop.calls("GetSystemMetrics")[0].args == (c.SM_SWAPBUTTON,)
    event = only_event(desktop)
    assert (event.type, event.flags, event.dx, event.dy, event.mouse_data) == (
        c.INPUT_MOUSE,
        flag,
        0,
        0,
        0,
    )


@pytest.mark.parametrize(
    ("button", "flag"),
    [
        ("left", c.MOUSEEVENTF_RIGHTDOWN),
        ("right", c.MOUSEEVENTF_LEFTDOWN),
        ("middle", c.MOUSEEVENTF_MIDDLEDOWN),
    ],
)
def test_swapped_buttons_click_the_primary_button(button: Any, flag: int) -> None:
    desktop = make_desktop(swap_buttons=True)
    make_backend(desktop).button(button, True)
    assert only_event(desktop).flags == flag


def test_unknown_button(desktop: FakeDesktop) -> None:
    with pytest.raises(InputError, match="unknown mouse button 'x1'"):
        make_backend(desktop).button("x1", True)  # type: ignore[arg-type]
    assert desktop.inputs == []


def test_wheel_notches_and_signs(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop)
    backend.wheel(3, 0)  # down
    backend.wheel(-2, 0)  # up
    backend.wheel(0, 2)  # right
    backend.wheel(1, -1)  # down and left in one batch
    backend.wheel(0, 0)
    batches = [[(e.flags, e.mouse_data) for e in batch] for batch in desktop.inputs]
    assert batches == [
        [(c.MOUSEEVENTF_WHEEL, -120)] * 3,
        [(c.MOUSEEVENTF_WHEEL, 120)] * 2,
        [(c.MOUSEEVENTF_HWHEEL, 120)] * 2,
        [(c.MOUSEEVENTF_WHEEL, -120), (c.MOUSEEVENTF_HWHEEL, -120)],
    ]
    assert desktop.names().count("SendInput") == 4  # nothing sent for (0, 0)


# -- keys and text ------------------------------------------------------------------------------


def test_key_down_up_with_scan_code(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop)
    key = KeySpec(name="a", vk=0x41, extended=False, keysym=0x61)
    backend.key(key, True)
    backend.key(key, False)
    assert desktop.names() == ["MapVirtualKeyW", "SendInput"] * 2
    assert desktop.calls("MapVirtualKeyW")[0].args == (0x41, c.MAPVK_VK_TO_VSC)
    down, up = (batch[0] for batch in desktop.inputs)
    scan = (0x41 * 7) & 0x7F  # the fake's scan-code table
    assert (down.type, down.vk, down.scan, down.flags) == (c.INPUT_KEYBOARD, 0x41, scan, 0)
    assert (up.vk, up.scan, up.flags) == (0x41, scan, c.KEYEVENTF_KEYUP)


@pytest.mark.parametrize("name", ["rctrl", "ralt", "left", "pagedown", "delete", "insert", "home"])
def test_extended_keys_from_the_vocabulary(name: str) -> None:
    key = resolve_key(name)
    assert key.extended and key.vk is not None
    desktop = make_desktop()
    backend = make_backend(desktop)
    backend.key(key, True)
    backend.key(key, False)
    down, up = (batch[0] for batch in desktop.inputs)
    assert (down.vk, down.flags) == (key.vk, c.KEYEVENTF_EXTENDEDKEY)
    assert (up.vk, up.flags) == (key.vk, c.KEYEVENTF_EXTENDEDKEY | c.KEYEVENTF_KEYUP)


def test_key_without_windows_code(desktop: FakeDesktop) -> None:
    with pytest.raises(InputError, match="does not exist on Windows"):
        make_backend(desktop).key(
            KeySpec(name="hyper", vk=None, extended=False, keysym=0xFFED), True
        )
    assert desktop.inputs == []


def test_type_unicode_text_with_surrogate_pairs(desktop: FakeDesktop) -> None:
    text = "Grüße, 世界 ✓ 𝄞"
    make_backend(desktop).type_text(text)
    (batch,) = desktop.inputs  # one SendInput call for a short text
    assert typed(batch) == text
    units = [e.scan for e in batch[::2]]
    assert units[-2:] == [0xD834, 0xDD1E]  # U+1D11E as its surrogate pair, high first
    assert len(batch) == 2 * len(text.encode("utf-16-le")) // 2
    assert all(e.flags in (UNICODE_DOWN, UNICODE_UP) for e in batch)


def test_newlines_and_tabs_are_keys(desktop: FakeDesktop) -> None:
    make_backend(desktop).type_text("a\r\nb\nc\rd\te")
    (batch,) = desktop.inputs
    assert typed(batch) == "a\nb\nc\nd\te"
    enter = [e for e in batch if e.vk == c.VK_RETURN]
    assert len(enter) == 6 and enter[0].scan == 0x1C  # three Enter presses, with the scan code
    assert [e.scan for e in batch if e.vk == c.VK_TAB] == [0x0F, 0x0F]


def test_long_text_is_chunked_without_splitting_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(sendinput_module.time, "sleep", sleeps.append)
    desktop = make_desktop()
    backend = make_backend(desktop, chunk_units=4, chunk_pause=0.01)
    text = "abc𝄞defg😀h"
    backend.type_text(text)
    units_per_batch = [len(batch) // 2 for batch in desktop.inputs]
    assert units_per_batch == [3, 4, 4, 1]  # "abc" | "𝄞de" | "fg😀" | "h"
    assert "".join(typed(batch) for batch in desktop.inputs) == text
    assert sleeps == [0.01] * 3  # between batches, not after the last


def test_empty_text_sends_nothing(desktop: FakeDesktop) -> None:
    make_backend(desktop).type_text("")
    assert desktop.log == []


@pytest.mark.parametrize("text", ["x" * 1000, "世界" * 300, "𝄞" * 257])
def test_long_texts_arrive_exactly(text: str) -> None:
    desktop = make_desktop()
    make_backend(desktop, chunk_pause=0).type_text(text)
    assert "".join(typed(batch) for batch in desktop.inputs) == text
    assert all(len(batch) // 2 <= 128 for batch in desktop.inputs)


# -- delivery, sync, lifecycle --------------------------------------------------------------------


def test_blocked_input_is_reported_as_uipi() -> None:
    desktop = make_desktop(sendinput_result=0)
    with pytest.raises(
        InputError, match="blocked by UIPI: the target window runs elevated"
    ) as info:
        make_backend(desktop).type_text("hi")
    assert info.value.details["function"] == "SendInput"
    assert info.value.details["last_error"] == c.ERROR_ACCESS_DENIED


def test_partially_inserted_batch_is_an_error() -> None:
    desktop = make_desktop(sendinput_result=1)
    with pytest.raises(InputError, match="injected 1 of 4 events"):
        make_backend(desktop).type_text("hi")


def test_sync_waits_for_the_pointer(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop, sync_timeout=0.05)
    backend.sync()  # nothing moved yet: returns at once
    assert desktop.log == []
    backend.move(5, 6)
    del desktop.log[:]
    backend.sync()
    assert desktop.names() == ["GetCursorPos"]  # already there
    desktop.cursor_pos = (0, 0)  # something else holds the pointer: give up at the timeout
    backend.sync()
    assert len(desktop.calls("GetCursorPos")) > 2


def test_dpi_awareness_first(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop, dpi_awareness=True)
    assert backend.dpi is not None and backend.dpi.per_monitor
    backend.move(1, 1)
    assert desktop.names()[0] == "SetProcessDpiAwarenessContext"


def test_close_is_idempotent_and_final(desktop: FakeDesktop) -> None:
    backend = make_backend(desktop)
    backend.close()
    backend.close()
    for action in (
        lambda: backend.move(0, 0),
        lambda: backend.type_text("x"),
        backend.position,
        backend.sync,
    ):
        with pytest.raises(InputError, match="closed"):
            action()
    assert desktop.log == []


def test_bad_options(desktop: FakeDesktop) -> None:
    with pytest.raises(ConfigError):
        make_backend(desktop, chunk_units=1)
    with pytest.raises(ConfigError):
        make_backend(desktop, chunk_pause=-1)
