"""Server profiles (``--server``): what each OpenAI-compatible server wants in a request.

The servers deskpilot runs against differ in small ways that decide whether a request is
accepted at all:

============ ====================== ============= =======================================
profile      token limit field      temperature   notes
============ ====================== ============= =======================================
lmstudio     ``max_tokens``         sent          Qwen3-VL mostly; "No models loaded" 400
llamacpp     ``max_tokens``         sent          tools need ``--jinja``, images ``--mmproj``
ollama       ``max_tokens``         sent          the OpenAI API reads only ``max_tokens``;
                                                  its context defaults to 4096 tokens on
                                                  GPUs under 23 GiB: an endpoint ending in
                                                  ``/api/chat`` uses the native API, where
                                                  ``model.num_ctx`` lifts it (:mod:`._ollama`)
vllm         ``max_tokens``         sent          ``--limit-mm-per-prompt``: images per request
openai       ``max_completion_tokens`` not for     o-series and gpt-5 reject ``max_tokens``
                                    o*/gpt-5      and any temperature but 1
generic      ``max_tokens``         sent          anything else
============ ====================== ============= =======================================

``auto`` (the default) picks a profile from the endpoint (host, port, path) and then
*learns* from the server's own answers: a 400 that names ``max_completion_tokens``, one
that refuses the temperature, and vLLM's "At most N image(s) may be provided" change what
the next request carries (:meth:`ServerProfile.learn`) and the same turn is sent again,
once per lesson. The image limit is applied to history pruning
(``keep_last_screenshots``), so every later request fits too.

Error classification (permanent errors, rate-limit waits) is the client's
(:func:`deskpilot.agent.client._chat.classify_http_error`): it reads the error bodies and
headers every one of these servers sends, whatever the profile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from deskpilot.agent.client._chat import max_images_from_error

if TYPE_CHECKING:
    from deskpilot._errors import ModelHTTPError
    from deskpilot.agent.client._history import History

__all__ = ["PROFILES", "SERVER_CHOICES", "ServerProfile", "detect_profile"]

PROFILES = ("lmstudio", "llamacpp", "ollama", "vllm", "openai", "generic")
SERVER_CHOICES = ("auto", *PROFILES[:-1])

# OpenAI reasoning models: o1, o3, o4-mini, gpt-5, gpt-5-mini, ... (not gpt-4o).
_REASONING_MODEL = re.compile(r"^(?:o\d|gpt-5)", re.IGNORECASE)
_PORTS = {1234: "lmstudio", 11434: "ollama", 8080: "llamacpp", 8000: "vllm"}


def detect_profile(
    endpoint: str, *, owned_by: str | None = None, server_header: str | None = None
) -> str:
    """The profile an endpoint most likely is (``generic`` when nothing says).

    ``owned_by`` (of ``/v1/models``) and the ``Server`` header, when known (``deskpilot
    doctor`` reads them), win over the URL: llama.cpp says ``owned_by: "llamacpp"``,
    vLLM ``"vllm"``, Ollama ``"library"``, LM Studio ``"organization_owner"``, OpenAI
    ``"system"`` / ``"openai"``."""
    owner = (owned_by or "").lower()
    server = (server_header or "").lower()
    if owner == "llamacpp" or "llama.cpp" in server:
        return "llamacpp"
    if owner == "vllm":
        return "vllm"
    if owner in ("library", "ollama"):
        return "ollama"
    if owner == "organization_owner":
        return "lmstudio"
    parts = urlsplit(endpoint)
    host = (parts.hostname or "").lower()
    if (
        host.endswith("openai.com")
        or host.endswith("openai.azure.com")
        or owner in ("openai", "system")
    ):
        return "openai"
    if parts.path.rstrip("/").endswith("/api/chat"):
        return "ollama"
    if parts.port in _PORTS:
        return _PORTS[parts.port]
    return "generic"


@dataclass(slots=True)
class ServerProfile:
    """What the requests of one run carry for its server; mutable: it learns."""

    name: str
    model: str
    #: ``max_tokens`` or ``max_completion_tokens``.
    token_field: str = "max_tokens"
    send_temperature: bool = True
    #: Images the server takes per request (None: no known limit).
    max_images: int | None = None
    #: What was learned from the server's answers, for the run record.
    learned: list[str] = field(default_factory=list)

    @classmethod
    def for_run(cls, server: str, endpoint: str, model: str) -> ServerProfile:
        name = detect_profile(endpoint) if server == "auto" else server
        if name not in PROFILES:
            raise ValueError(
                f"unknown server profile {server!r}; known: auto, {', '.join(PROFILES[:-1])}"
            )
        profile = cls(name, model)
        if name == "openai":
            profile.token_field = "max_completion_tokens"
            profile.send_temperature = not _REASONING_MODEL.match(model)
        return profile

    def request_args(self, *, temperature: float | None, max_tokens: int | None) -> dict[str, Any]:
        """Keyword arguments for :meth:`History.build_request` (temperature, max_tokens, extra)."""
        extra: dict[str, Any] = {}
        if max_tokens is not None and self.token_field != "max_tokens":
            extra[self.token_field] = max_tokens
            max_tokens = None
        return {
            "temperature": temperature if self.send_temperature else None,
            "max_tokens": max_tokens,
            "extra": extra or None,
        }

    def learn(self, error: ModelHTTPError, history: History | None = None) -> str | None:
        """Adapt to a 400 that says what the server wants; returns the lesson (None: none).

        Each lesson is learned once: the same error a second time is a real failure."""
        if error.status != 400:
            return None
        message = str(error.details.get("server_message") or error)
        lower = message.lower()
        lesson: str | None = None
        if "max_completion_tokens" in lower and self.token_field != "max_completion_tokens":
            # OpenAI: "Unsupported parameter: 'max_tokens' is not supported with this model.
            # Use 'max_completion_tokens' instead."
            self.token_field = "max_completion_tokens"
            lesson = "token limit sent as max_completion_tokens"
        elif (
            "temperature" in lower
            and ("unsupported" in lower or "does not support" in lower)
            and self.send_temperature
        ):
            # OpenAI: "Unsupported value: 'temperature' does not support 0.6 with this
            # model. Only the default (1) value is supported."
            self.send_temperature = False
            lesson = "temperature not sent (the model only takes its default)"
        else:
            limit = max_images_from_error(message)
            # Only when the refused request had more images than the limit: pruning to it
            # then makes the request acceptable (otherwise the error stands).
            if limit is not None and history is not None and history.stats().images_live > limit:
                # vLLM --limit-mm-per-prompt: prune the history to the server's limit.
                self.max_images = limit
                history.keep_last_screenshots = limit
                history.prune_chunk = 1
                lesson = f"at most {limit} image(s) per request: history keeps the last {limit}"
        if lesson is not None:
            self.learned.append(lesson)
        return lesson

    def apply(self, history: History) -> None:
        """Apply what is known (an image limit learned on an earlier turn) to a history."""
        if self.max_images is not None and (
            history.keep_last_screenshots is None or history.keep_last_screenshots > self.max_images
        ):
            history.keep_last_screenshots = self.max_images
            history.prune_chunk = 1

    def describe(self) -> dict[str, Any]:
        return {
            "profile": self.name,
            "token_field": self.token_field,
            "temperature": self.send_temperature,
            "max_images": self.max_images,
            "learned": list(self.learned),
        }
