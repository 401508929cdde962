"""Win32 scalar types with their Windows sizes on every OS.

``ctypes.wintypes`` cannot be used for structure layouts off Windows: it maps ``LONG``
and ``DWORD`` to ``c_long``/``c_ulong``, which are 8 bytes on 64-bit Linux but 4 bytes on
Windows (LLP64). Declaring every type with an explicit width here makes the structures
in :mod:`deskpilot._win32._structs` have their Windows layout everywhere, so their sizes
and field offsets can be tested on any machine.

Pointer-sized types (handles, ``ULONG_PTR``, ``LPARAM``) follow the running Python: 8 bytes
on Win64 (and 64-bit Linux, where the layout tests run), 4 bytes on 32-bit Windows.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = [
    "BOOL",
    "BYTE",
    "DPI_AWARENESS_CONTEXT",
    "DWORD",
    "HBITMAP",
    "HCURSOR",
    "HDC",
    "HGDIOBJ",
    "HICON",
    "HMONITOR",
    "HRESULT",
    "HWND",
    "INT",
    "LONG",
    "LPARAM",
    "LPVOID",
    "PROCESS_HANDLE",
    "UINT",
    "ULONG_PTR",
    "WCHAR16",
    "WINFUNCTYPE",
    "WORD",
    "WPARAM",
    "utf16_buffer",
    "utf16_text",
]

# Fixed-width integers (Windows is LLP64: int and long are both 32 bits).
BOOL = ctypes.c_int32
BYTE = ctypes.c_uint8
WORD = ctypes.c_uint16
DWORD = ctypes.c_uint32
INT = ctypes.c_int32
UINT = ctypes.c_uint32
LONG = ctypes.c_int32
# HRESULT is a signed 32-bit value; failures are negative (high bit set).
HRESULT = ctypes.c_int32
# A UTF-16 code unit. ctypes.c_wchar is 4 bytes on Linux, so WCHAR arrays are declared
# as arrays of 16-bit integers and decoded explicitly.
WCHAR16 = ctypes.c_uint16

# Pointer-sized integers.
ULONG_PTR = ctypes.c_size_t
WPARAM = ctypes.c_size_t
LPARAM = ctypes.c_ssize_t

# Handles and untyped pointers. Plain c_void_p (not subclasses) so that ctypes converts
# return values to int / None (NULL) instead of wrapping them in objects.
LPVOID = ctypes.c_void_p
HBITMAP = ctypes.c_void_p
HCURSOR = ctypes.c_void_p
HDC = ctypes.c_void_p
HGDIOBJ = ctypes.c_void_p
HICON = ctypes.c_void_p
HMONITOR = ctypes.c_void_p
HWND = ctypes.c_void_p
PROCESS_HANDLE = ctypes.c_void_p
DPI_AWARENESS_CONTEXT = ctypes.c_void_p

# Callbacks use stdcall on 32-bit Windows; on x64 (and off Windows, where only fakes call
# them) there is a single calling convention and CFUNCTYPE is the same thing.
if sys.platform == "win32":
    WINFUNCTYPE = ctypes.WINFUNCTYPE
else:
    WINFUNCTYPE = ctypes.CFUNCTYPE


def utf16_buffer(chars: int) -> ctypes.Array[ctypes.c_uint16]:
    """A zeroed buffer of ``chars`` UTF-16 code units (for ...W string out-parameters)."""
    return (WCHAR16 * max(1, chars))()


def utf16_text(buf: ctypes.Array[ctypes.c_uint16], length: int) -> str:
    """The first ``length`` code units of ``buf`` as a str (surrogate pairs joined)."""
    length = max(0, min(length, len(buf)))
    return bytes(buf)[: 2 * length].decode("utf-16-le", errors="replace")
