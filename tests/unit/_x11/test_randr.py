"""The RandR declarations (libXrandr) that tell which X server this is: their LP64 layout,
checked against offsetof() of Xrandr.h 1.5.2 as compiled by gcc on x86-64."""

from __future__ import annotations

import ctypes
import struct
import sys

import pytest

from deskpilot._x11 import CFUNCTIONS, LIBRARIES
from deskpilot._x11._lib import XRRModeInfo, XRROutputInfo, XRRScreenResources

pytestmark = pytest.mark.skipif(struct.calcsize("P") != 8 or sys.platform == "win32", reason="LP64 layout")


def offsets(structure: type[ctypes.Structure]) -> dict[str, int]:
    return {name: getattr(structure, name).offset for name, *_ in structure._fields_}


def test_output_info_has_the_lp64_layout() -> None:
    assert offsets(XRROutputInfo) == {
        "timestamp": 0, "crtc": 8, "name": 16, "nameLen": 24, "mm_width": 32, "mm_height": 40,
        "connection": 48, "subpixel_order": 50, "ncrtc": 52, "crtcs": 56, "nclone": 64, "clones": 72,
        "nmode": 80, "npreferred": 84, "modes": 88,
    }
    assert ctypes.sizeof(XRROutputInfo) == 96


def test_screen_resources_and_mode_info_have_the_lp64_layout() -> None:
    assert offsets(XRRScreenResources) == {
        "timestamp": 0, "configTimestamp": 8, "ncrtc": 16, "crtcs": 24, "noutput": 32, "outputs": 40,
        "nmode": 48, "modes": 56,
    }
    assert ctypes.sizeof(XRRScreenResources) == 64
    mode = offsets(XRRModeInfo)
    assert (mode["id"], mode["dotClock"], mode["vTotal"], mode["name"], mode["nameLength"], mode["modeFlags"]) == (
        0, 16, 48, 56, 64, 72)
    assert ctypes.sizeof(XRRModeInfo) == 80


def test_the_randr_calls_come_from_libxrandr() -> None:
    randr = {name for name, (lib, _, _) in CFUNCTIONS.items() if lib == "Xrandr"}
    assert randr == {"XRRFreeOutputInfo", "XRRFreeScreenResources", "XRRGetOutputInfo",
                     "XRRGetScreenResourcesCurrent", "XRRQueryExtension"}
    assert LIBRARIES["Xrandr"][1][0] == "libXrandr.so.2"
