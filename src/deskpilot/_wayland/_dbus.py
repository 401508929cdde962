"""The session bus, through jeepney (pure Python; the ``wayland`` extra).

One :class:`SessionBus` is one D-Bus connection with a receiver thread (jeepney's
``DBusRouter``): method calls block the calling thread until their reply, signals go to
the queues of :meth:`SessionBus.subscribe`. Mutter ties a screencast or remote-desktop
session to the connection that created it, so the connection lives as long as the session.

jeepney is imported when a bus is opened, never at import time: the capture library's
base install does not have it (``pip install "deskpilot[wayland]"`` does).
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any

from deskpilot._errors import PlatformError

__all__ = ["DBusCallError", "SessionBus", "session_bus_address", "variant"]

#: Seconds a method call waits for its reply before it fails.
CALL_TIMEOUT = 10.0


class DBusCallError(PlatformError):
    """A D-Bus method call answered with an error (its name is in ``details["error"]``)."""


def session_bus_address() -> str | None:
    """``$DBUS_SESSION_BUS_ADDRESS``, or the systemd user bus socket when it exists."""
    address = os.environ.get("DBUS_SESSION_BUS_ADDRESS", "").strip()
    if address:
        return address
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.exists(os.path.join(runtime, "bus")):
        return f"unix:path={os.path.join(runtime, 'bus')}"
    return None


def variant(signature: str, value: Any) -> tuple[str, Any]:
    """A D-Bus variant as jeepney writes one: ``(signature, value)``."""
    return (signature, value)


class SessionBus:
    """One connection to the session bus (or to ``address``), shared by several threads.

    ``enable_fds``: accept Unix file descriptors (Mutter's clipboard hands one out).
    Raises :class:`PlatformError` when there is no session bus or it refuses the connection,
    :class:`ImportError` (``name == "jeepney"``) when jeepney is not installed.
    """

    def __init__(self, address: str | None = None, *, enable_fds: bool = False) -> None:
        from jeepney.io.threading import DBusRouter, open_dbus_connection  # type: ignore[import-untyped]

        bus = address or session_bus_address()
        if not bus:
            raise PlatformError("no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is not set", call="dbus")
        try:
            self._conn = open_dbus_connection(bus, enable_fds=enable_fds)
        except (OSError, ValueError, TimeoutError) as exc:
            raise PlatformError(f"cannot connect to the D-Bus session bus {bus}: {exc}", call="dbus") from exc
        self._router = DBusRouter(self._conn)
        self._lock = threading.Lock()
        self._closed = False
        self.address = bus

    @property
    def unique_name(self) -> str:
        return str(self._conn.unique_name)

    def call(
        self,
        destination: str,
        path: str,
        interface: str,
        method: str,
        signature: str | None = None,
        body: tuple[Any, ...] = (),
        *,
        timeout: float = CALL_TIMEOUT,
    ) -> tuple[Any, ...]:
        """Call a method and return its reply's body; raises :class:`DBusCallError`."""
        from jeepney import DBusAddress, MessageType, new_method_call  # type: ignore[import-untyped]

        message = new_method_call(DBusAddress(path, destination, interface), method, signature, body)
        try:
            reply = self._router.send_and_get_reply(message, timeout=timeout)
        except TimeoutError as exc:
            raise DBusCallError(f"{interface}.{method} got no reply within {timeout:g} s",
                                call=f"{interface}.{method}") from exc
        except Exception as exc:  # jeepney's RouterClosed: the bus went away
            raise DBusCallError(f"{interface}.{method} failed: {exc}", call=f"{interface}.{method}") from exc
        if reply.header.message_type == MessageType.error:
            name = reply.header.fields.get(_error_name_field(), "")
            text = reply.body[0] if reply.body else ""
            raise DBusCallError(f"{interface}.{method}: {name}: {text}", call=f"{interface}.{method}",
                                error=str(name))
        return tuple(reply.body)

    def get_property(self, destination: str, path: str, interface: str, name: str) -> Any:
        """A property's value (the variant unwrapped)."""
        (value,) = self.call(destination, path, "org.freedesktop.DBus.Properties", "Get", "ss",
                             (interface, name))
        return value[1]

    def name_has_owner(self, name: str) -> bool:
        (owned,) = self.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "NameHasOwner", "s", (name,))
        return bool(owned)

    def subscribe(self, *, interface: str, member: str, path: str | None = None) -> queue.Queue[Any]:
        """A queue that receives the body of every matching signal from now on."""
        from jeepney import MatchRule  # type: ignore[import-untyped]

        rule = MatchRule(type="signal", interface=interface, member=member, path=path)
        received: queue.Queue[Any] = queue.Queue()
        bodies: queue.Queue[Any] = _BodyQueue(received)
        # The filter handle stays registered for the connection's life (closed with it).
        self._router.filter(rule, queue=bodies)
        self.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch", "s",
                  (rule.serialise(),))
        return received

    def close(self) -> None:
        """Close the connection (Mutter ends the sessions it created). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._router.close()
        self._conn.close()


class _BodyQueue(queue.Queue[Any]):
    """Puts only the message body into the wrapped queue (jeepney puts whole messages)."""

    def __init__(self, target: queue.Queue[Any]) -> None:
        super().__init__()
        self._target = target

    def put_nowait(self, item: Any) -> None:
        self._target.put_nowait(tuple(item.body))


def _error_name_field() -> Any:
    from jeepney.low_level import HeaderFields  # type: ignore[import-untyped]

    return HeaderFields.error_name
