"""Talking to the model server: the chat client and everything between it and a mode.

:class:`ChatClient` sends OpenAI-compatible chat requests (retries, timeouts, the server's
profile: LM Studio, llama.cpp, Ollama, vLLM, OpenAI) and returns a :class:`Completion`;
streams are read by :mod:`._sse`. :mod:`._toolcalls` turns a reply into
:class:`ToolCall`\\ s whatever language the model wrote them in (OpenAI ``tool_calls``,
Qwen's ``<tool_call>`` XML, JSON in the content). :class:`History` is the conversation:
it prunes old images and thoughts and keeps the encoded bytes of the unchanged prefix so
a request is spliced, not re-serialized.
"""

from deskpilot.agent.client._chat import ChatClient, Completion
from deskpilot.agent.client._history import History, png_data_url
from deskpilot.agent.client._servers import ServerProfile, detect_profile
from deskpilot.agent.client._toolcalls import ToolCall, extract_think, strip_think

__all__ = [
    "ChatClient",
    "Completion",
    "History",
    "ServerProfile",
    "ToolCall",
    "detect_profile",
    "extract_think",
    "png_data_url",
    "strip_think",
]
