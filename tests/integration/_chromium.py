"""Headless Chromium for page tests that must also see what the page *said*.

Builds on the shared CDP client (:class:`deskpilot.testing._chromium.Chromium`, pipe
transport, read-only here) and adds what the report tests need:

* DevTools events are kept (``Runtime.consoleAPICalled``, ``Runtime.exceptionThrown``,
  ``Log.entryAdded``, ``Network.requestWillBeSent``), with the domains enabled *before*
  navigation so nothing logged during load is missed;
* :meth:`EventChromium.console_errors` and :meth:`EventChromium.requested_urls`.

The shared client wires its pipes to fds 3 and 4 with ``dup2``; when ``os.pipe()``
itself returns fd 3 (a process with few open files), ``dup2(3, 3)`` keeps the
close-on-exec flag and Chromium starts without its pipe. The constructor holds the low
fds while the client starts, so the pipes get higher numbers.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from deskpilot.testing._chromium import BrowserError, Chromium, find_chromium

__all__ = ["BrowserError", "EventChromium", "find_chromium"]


class EventChromium(Chromium):
    def __init__(self, **kwargs: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self._events_lock = threading.Lock()
        held: list[int] = []
        while True:
            fd = os.open(os.devnull, os.O_RDONLY)
            if fd > 4:
                os.close(fd)
                break
            held.append(fd)
        try:
            super().__init__(**kwargs)
        finally:
            for fd in held:
                os.close(fd)

    def _event(self, message: dict[str, Any]) -> None:
        with self._events_lock:
            self.events.append(message)

    def open(self, url: str) -> str:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = str(self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self.call("Page.navigate", {"url": url}, session=session)
        return session

    def _session_events(self, session: str, *methods: str) -> list[dict[str, Any]]:
        with self._events_lock:
            return [e for e in self.events if e.get("sessionId") == session and e.get("method") in methods]

    def console_errors(self, session: str) -> list[str]:
        """Console errors/warnings, uncaught exceptions and browser log errors of a page."""
        out: list[str] = []
        for event in self._session_events(session, "Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded"):
            params = event.get("params") or {}
            if event["method"] == "Runtime.consoleAPICalled":
                if params.get("type") in ("error", "warning", "assert"):
                    args = [a.get("value", a.get("description")) for a in params.get("args") or []]
                    out.append(f"console.{params.get('type')}: {args}")
            elif event["method"] == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails") or {}
                out.append(f"exception: {details.get('text')} {(details.get('exception') or {}).get('description', '')}")
            else:
                entry = params.get("entry") or {}
                if entry.get("level") in ("error", "warning"):
                    out.append(f"log {entry.get('source')}/{entry.get('level')}: {entry.get('text')} {entry.get('url', '')}")
        return out

    def requested_urls(self, session: str) -> list[str]:
        return [str((e.get("params") or {}).get("request", {}).get("url")) for e in self._session_events(session, "Network.requestWillBeSent")]
