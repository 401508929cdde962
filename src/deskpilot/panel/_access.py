"""Who may talk to the panel: its own page on its own address, and nobody else.

The panel's API drives this desktop (``POST /inject`` runs actions), so every request
passes :class:`AccessGuard` (an ASGI middleware in front of every route) before any
handler sees it:

1. ``Host`` must name the panel (**421** otherwise): ``127.0.0.1:PORT``, ``localhost:PORT``,
   ``[::1]:PORT``, the bound address, and the names in ``PANEL_ALLOWED_HOSTS``. A DNS
   rebinding attack points the attacker's own domain at 127.0.0.1, so its requests carry
   that domain in ``Host`` and stop here. A panel bound to every interface (``0.0.0.0``)
   also accepts any address literal and this machine's name: rebinding always carries a
   name, never a literal.
2. A request from another site is refused (**403**): an ``Origin`` header that is not
   the panel's own origin (``http://`` + the ``Host`` it was sent to), or Chromium's
   ``Sec-Fetch-Site: cross-site``/``same-site`` (an ``<img>`` or ``<script>`` of another
   page, which sends no ``Origin``). Following a link to the page itself stays possible
   (a top-level navigation), it only shows the page.
3. With a token (required when bound beyond loopback, optional on it) every request
   carries it (**401** otherwise): ``Authorization: Bearer TOKEN``, ``?token=TOKEN``, or
   the cookie ``deskpilot_panel_PORT`` (HttpOnly, SameSite=Strict) that a ``?token=``
   request sets, so the page opened as ``/?token=...`` works with its own fetches. The
   page's ``?token=`` answer is a 303 to the same path without it, so the token leaves
   the address bar and the history.
4. ``POST`` bodies must be ``application/json`` (**415**): the forms and ``text/plain``
   bodies a foreign page can send without a CORS preflight are refused, and a declared
   ``Content-Length`` over the route's limit is refused before the body is read (**413**;
   the handlers also count the bytes of a streamed body).

Every answer gets ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``,
``X-Frame-Options: DENY`` and a ``Content-Security-Policy`` that keeps the page to its
own origin and out of frames (no clickjacking of the Inject button). No CORS headers are
ever sent.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deskpilot._errors import ConfigError

__all__ = [
    "MIN_TOKEN_LENGTH",
    "AccessGuard",
    "PanelAccess",
    "is_loopback",
    "resolve_token",
]

#: Shortest token accepted from the configuration (a generated one has 43 characters).
MIN_TOKEN_LENGTH = 16
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~-]+")  # URL-safe: it travels in ?token=
_HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?")
_CSP = (
    "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", _CSP.encode()),
]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the panel on this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: The ``panel_token`` value that turns the token off (also ``--no-panel-token``).
TOKEN_OFF = "off"


def resolve_token(setting: str) -> tuple[str | None, bool]:
    """``(token, generated)`` from the ``panel_token`` setting: ``"generate"`` (the
    default) or empty = a fresh random token for this run, ``"off"`` = none (only by that
    explicit choice: the panel's API drives this desktop), anything else = that token."""
    value = setting.strip()
    if value.lower() == TOKEN_OFF:
        return None, False
    if not value or value.lower() == "generate":
        return secrets.token_urlsafe(32), True
    if len(value) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"stateless.panel_token (PANEL_TOKEN) must have at least {MIN_TOKEN_LENGTH} "
            'characters, or be "generate" for a random one ("off": none)',
            where="stateless.panel_token",
        )
    if not _TOKEN_CHARS.fullmatch(value):
        raise ConfigError(
            "stateless.panel_token (PANEL_TOKEN) may only hold letters, digits and ._~-",
            where="stateless.panel_token",
        )
    return value, False


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``"name:port"`` / ``"[v6]:port"`` / ``"name"`` -> (lower-case host, port); None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        inner, bracket, rest = value[1:].partition("]")
        if not bracket:
            return None
        host = f"[{inner}]"
    else:
        host, _, rest = value.partition(":")
        rest = ":" + rest if _ else ""
    if rest:
        if not rest.startswith(":") or not rest[1:].isdigit():
            return None
        return host, int(rest[1:])
    return host, None


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _host_form(host: str) -> str:
    """How a ``Host`` header spells a bind address (IPv6 in brackets), lower case."""
    address = _literal(host)
    if address is not None and address.version == 6:
        return f"[{address.compressed}]"
    return host.lower()


class PanelAccess:
    """The rules for one served panel (``host``/``port`` as bound)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        token: str | None = None,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.port = port
        self.token = token
        self.loopback = is_loopback(host)
        if not self.loopback and not token:
            raise ConfigError(
                f"the panel would listen on {host}, beyond this machine, without a token: its API "
                'drives this desktop. Set PANEL_TOKEN / [stateless] panel_token (or "generate") '
                "or keep PANEL_HOST on 127.0.0.1",
                host=host,
            )
        address = _literal(host)
        #: Bound to every interface: any address literal may be how a client reached it.
        self.any_address = address is not None and address.is_unspecified
        names = {"127.0.0.1", "localhost", "[::1]"}
        if not self.any_address:
            names.add(_host_form(host))
        else:
            for name in (socket.gethostname(), socket.getfqdn()):
                if name and _HOST_NAME.fullmatch(name.lower()):
                    names.add(name.lower())
        self.names = frozenset(names)
        extra: set[tuple[str, int | None]] = set()
        for item in allowed_hosts:
            item = item.strip()
            if not item:
                continue
            parsed = _split_host(item)
            if parsed is None or not (
                _HOST_NAME.fullmatch(parsed[0]) or _literal(parsed[0]) is not None
            ):
                raise ConfigError(
                    f"allowed host {item!r} is not a host name or address (name or name:port)",
                    where="stateless.panel_allowed_hosts",
                )
            extra.add(parsed)
        self.extra = frozenset(extra)
        self.cookie_name = f"deskpilot_panel_{port}"

    def host_allowed(self, value: str | None) -> bool:
        """Whether a ``Host`` header names this panel."""
        if not value:
            return False
        parsed = _split_host(value)
        if parsed is None:
            return False
        host, port = parsed
        if port is None:
            port = 80  # browsers leave the default port out
        if (host, port) in self.extra or ((host, None) in self.extra and port == self.port):
            return True
        if port != self.port:
            return False
        if host in self.names:
            return True
        return self.any_address and _literal(host) is not None

    def token_valid(self, candidate: str | None) -> bool:
        if self.token is None:
            return True
        if not candidate:
            return False
        return hmac.compare_digest(candidate.encode(), self.token.encode())


def _json_error(
    status: int, message: str, headers: Iterable[tuple[bytes, bytes]] = ()
) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    body = orjson.dumps({"ok": False, "error": message})
    return status, body, [(b"content-type", b"application/json"), *headers]


def _cookies(header: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in (header or "").split(";"):
        name, eq, value = part.strip().partition("=")
        if eq and name not in out:
            out[name] = value
    return out


class AccessGuard:
    """ASGI middleware applying :class:`PanelAccess` to every request (see the module doc).

    ``body_limits`` maps a path to its POST body limit; other paths get ``default_limit``.
    """

    def __init__(
        self,
        app: ASGIApp,
        access: PanelAccess,
        *,
        body_limits: Mapping[str, int],
        default_limit: int = 64 << 10,
    ) -> None:
        self.app = app
        self.access = access
        self.body_limits = dict(body_limits)
        self.default_limit = default_limit

    def _check(
        self, scope: Scope, headers: Mapping[str, str]
    ) -> tuple[tuple[int, bytes, list[tuple[bytes, bytes]]] | None, bool]:
        """``(refusal or None, token came from the query)``."""
        access = self.access
        host = headers.get("host")
        if not access.host_allowed(host):
            return _json_error(421, f"this panel does not answer for host {host!r}"), False
        origin = headers.get("origin")
        if origin is not None and origin.lower() != f"http://{(host or '').lower()}":
            return _json_error(
                403, f"requests from origin {origin!r} are refused (not this panel's page)"
            ), False
        site = headers.get("sec-fetch-site", "").lower()
        if site in ("cross-site", "same-site"):
            navigation = (
                scope["method"] == "GET"
                and headers.get("sec-fetch-mode", "").lower() == "navigate"
                and headers.get("sec-fetch-dest", "").lower() == "document"
            )
            if not navigation:
                return _json_error(
                    403, f"{site} requests are refused (not this panel's page)"
                ), False
        from_query = False
        if access.token is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            authorization = headers.get("authorization", "")
            scheme, _, credential = authorization.partition(" ")
            by_header = scheme.lower() == "bearer" and access.token_valid(credential.strip())
            by_cookie = access.token_valid(_cookies(headers.get("cookie")).get(access.cookie_name))
            if by_header or by_cookie:
                pass
            elif access.token_valid(query.get("token")):
                from_query = True
            else:
                return _json_error(
                    401,
                    "this panel needs its token: open the URL printed at start (…/?token=…) "
                    "or send Authorization: Bearer <token>",
                    [(b"www-authenticate", b'Bearer realm="deskpilot panel"')],
                ), False
        if scope["method"] == "POST":
            content_type = headers.get("content-type", "").split(";")[0].strip().lower()
            if content_type != "application/json":
                shown = content_type or "no content type"
                return _json_error(415, f"send the body as application/json, not {shown}"), False
            limit = self.body_limits.get(scope["path"], self.default_limit)
            declared = headers.get("content-length", "").strip()
            if declared.isdigit() and int(declared) > limit:
                return _json_error(
                    413, f"body of {declared} bytes is over the limit of {limit}"
                ), False
        return None, from_query

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":  # no websocket routes: refuse without a handshake
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            if name not in headers:  # the first of repeated headers counts
                headers[name] = raw_value.decode("latin-1")
        refusal, from_query = self._check(scope, headers)
        extra = list(_SECURITY_HEADERS)
        if refusal is not None:
            status, body, refusal_headers = refusal
            await _respond(send, status, body, [*refusal_headers, *extra])
            return
        if from_query:
            token = self.access.token
            assert token is not None
            extra.append(
                (
                    b"set-cookie",
                    f"{self.access.cookie_name}={token}; Path=/; HttpOnly; SameSite=Strict".encode(),
                )
            )
            if scope["method"] == "GET" and scope["path"] == "/":
                # The token leaves the address bar (and the history) at once.
                await _respond(
                    send, 303, b"", [(b"location", b"/"), (b"content-length", b"0"), *extra]
                )
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _respond(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    names = {name for name, _ in headers}
    if b"content-length" not in names:
        headers = [*headers, (b"content-length", str(len(body)).encode())]
    headers.append((b"cache-control", b"no-store"))
    start: dict[str, Any] = {"type": "http.response.start", "status": status, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": body})
