"""The RECORD declarations the kill switch's motion recorder uses: LP64 layouts of record.h."""

from __future__ import annotations

import ctypes

from deskpilot._x11._lib import CFUNCTIONS, XRecordInterceptData, XRecordRange


def test_record_range_has_the_lp64_layout() -> None:
    assert ctypes.sizeof(XRecordRange) == 32
    assert XRecordRange.device_events.offset == 18
    assert XRecordRange.client_started.offset == 24


def test_intercept_data_has_the_lp64_layout() -> None:
    assert ctypes.sizeof(XRecordInterceptData) == 48
    assert XRecordInterceptData.category.offset == 24
    assert XRecordInterceptData.data.offset == 32
    assert XRecordInterceptData.data_len.offset == 40


def test_record_functions_come_from_libxtst() -> None:
    names = [n for n in CFUNCTIONS if n.startswith("XRecord")]
    assert len(names) == 8 and {CFUNCTIONS[n][0] for n in names} == {"Xtst"}
