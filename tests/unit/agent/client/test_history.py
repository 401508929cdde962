"""History: message layout, pruning, and request bytes identical to a full serialization."""

from __future__ import annotations

import base64
import hashlib
import itertools

import orjson
import pytest

from deskpilot.agent.client._history import History, png_data_url

TOOLS = [
    {"type": "function", "function": {"name": "click_element", "description": "Click.",
                                      "parameters": {"type": "object", "properties": {"label": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "press_key", "parameters": {"type": "object", "properties": {}}}},
]


def png(n: int) -> bytes:
    # Distinct fake image payloads; History does not decode them.
    return b"\x89PNG\r\n\x1a\n" + bytes([n % 256]) * (100 + n)


def assistant(i: int, think: bool = True) -> dict:
    content = f"<think>reasoning {i}</think>step {i}" if think else f"step {i}"
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": f"c{i}", "type": "function",
                            "function": {"name": "press_key", "arguments": '{"key": "enter"}'}}]}


def play(history: History, turns: int, think: bool = True) -> list[bytes]:
    bodies = []
    for i in range(turns):
        history.add_observation(png(i), text=f"screen {i}")
        bodies.append(history.build_request(model="m", temperature=0.6, max_tokens=64))
        history.add_assistant(assistant(i, think))
        history.add_tool_result(f"c{i}", {"ok": True, "i": i}, name="press_key")
    return bodies


def full(history: History, **kwargs) -> bytes:
    return orjson.dumps(history.request_dict(**kwargs))


def test_seed_layout_tool_message_separate_from_observation():
    h = History("system prompt", tools=TOOLS)
    h.add_task("open the menu")
    h.add_observation(png(1), text="after observe_screen")
    h.add_assistant(assistant(1))
    h.add_tool_result("c1", {"ok": True, "changed": False}, name="press_key")
    roles = [m["role"] for m in h.messages]
    assert roles == ["system", "user", "user", "assistant", "tool"]
    tool = h.messages[-1]
    assert tool == {"role": "tool", "tool_call_id": "c1", "name": "press_key",
                    "content": '{"ok":true,"changed":false}'}
    obs = h.messages[2]["content"]
    assert obs[0] == {"type": "text", "text": "after observe_screen"}
    assert obs[1]["type"] == "image_url"
    assert obs[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png(1)).decode()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_spliced_bytes_equal_full_serialization_every_turn(stream, chunk):
    h = History("sys ✓ \"quoted\" \\ back", tools=TOOLS, prune_chunk=chunk)
    h.add_task("tâche: ouvrir le menu\n")
    for i in range(7):
        h.add_observation(png(i), text=f"screen {i}")
        for kwargs in (
            {"model": "m", "temperature": 0.6, "max_tokens": 2048, "stream": stream},
            {"model": "m", "tools": [], "stream": stream},
            {"model": "m", "tool_choice": "required", "extra": {"top_p": 0.9, "temperature": 0.1}},
            {"model": "m", "tools": TOOLS[:1], "tool_choice": {"type": "function",
                                                                 "function": {"name": "click_element"}}},
        ):
            assert h.build_request(**kwargs) == full(h, **kwargs)
        h.add_assistant(assistant(i))
        h.add_tool_result(f"c{i}", {"ok": True})


def test_data_url_inputs_and_odd_urls_serialize_exactly():
    h = History()
    h.add_observation(png_data_url(png(3)))
    h.add_observation("data:image/png;base64," + base64.b64encode(png(4)).decode())
    h.add_observation('https://example.invalid/a"b\\c\x01.png')
    assert h.build_request(model="m") == full(h, model="m")


def test_keeps_last_n_screenshots_with_placeholders():
    h = History(keep_last_screenshots=2)
    play(h, 5)
    image_parts = [p for m in h.messages if isinstance(m["content"], list) for p in m["content"]
                   if p["type"] == "image_url"]
    assert len(image_parts) == 2
    texts = [p["text"] for m in h.messages if isinstance(m["content"], list) for p in m["content"]
             if p["type"] == "text"]
    assert "[screenshot omitted: turn 1]" in texts
    assert "[screenshot omitted: turn 3]" in texts
    assert "[screenshot omitted: turn 4]" not in texts
    stats = h.stats()
    assert stats.images_live == 2 and stats.images_pruned == 3


def test_keeps_last_n_thinks():
    h = History(keep_last_thinks=2)
    play(h, 5)
    contents = [m["content"] for m in h.messages if m["role"] == "assistant"]
    assert contents[:3] == ["step 0", "step 1", "step 2"]
    assert contents[3:] == ["<think>reasoning 3</think>step 3", "<think>reasoning 4</think>step 4"]
    assert h.stats().thinks_pruned == 3


def test_keep_zero_thinks_strips_every_think():
    h = History(keep_last_thinks=0)
    h.add_assistant({"role": "assistant", "content": "<think>x</think>Done."})
    assert h.messages[-1]["content"] == "Done."


def test_chunked_pruning_prunes_k_at_a_time():
    h = History(keep_last_screenshots=2, prune_chunk=3)
    live = []
    for i in range(9):
        h.add_observation(png(i))
        live.append(h.stats().images_live)
    # grows to keep + chunk - 1 = 4, then drops back to 2
    assert live == [1, 2, 3, 4, 2, 3, 4, 2, 3]


def test_max_images_caps_every_request_whatever_the_chunk():
    """The seeds' AGENT_KEEP_LAST_SCREENSHOTS=N: at most N images in any request.

    Source: the seeds (/work/shared/seeds 000-004, ``AGENT_KEEP_LAST_SCREENSHOTS``) keep the
    last N screenshots in every request; a vLLM served with ``--limit-mm-per-prompt image=1``
    rejects a request with two. The chunked pruning alone holds up to keep + chunk - 1.
    """
    chunked = History(keep_last_screenshots=1, prune_chunk=3)
    capped = History(keep_last_screenshots=1, prune_chunk=3, max_images=1)
    live_chunked, live_capped = [], []
    for i in range(7):
        chunked.add_observation(png(i))
        capped.add_observation(png(i))
        live_chunked.append(chunked.stats().images_live)
        live_capped.append(capped.stats().images_live)
    assert max(live_chunked) == 3
    assert live_capped == [1] * 7
    # The cap also bounds a history that keeps every image otherwise.
    keep_all = History(keep_last_screenshots=None, max_images=2)
    for i in range(5):
        keep_all.add_observation(png(i))
        assert keep_all.stats().images_live <= 2
    with pytest.raises(ValueError, match="max_images"):
        History(max_images=0)


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def test_chunked_pruning_keeps_more_requests_as_pure_extensions():
    def extensions(chunk: int) -> int:
        bodies = play(History(keep_last_screenshots=2, keep_last_thinks=2, prune_chunk=chunk), 12)
        count = 0
        for prev, cur in itertools.pairwise(bodies):
            # messages array of prev (without its closing) is a prefix of cur
            cut = prev.index(b'],"temperature"')
            count += cur.startswith(prev[:cut])
        return count

    one, two, four = extensions(1), extensions(2), extensions(4)
    assert one < two < four


def test_snapshot_replaces_images_by_digest():
    h = History()
    h.add_observation(png(7))
    snap = h.snapshot()
    url = snap[0]["content"][1]["image_url"]["url"]
    payload = base64.b64encode(png(7))
    assert url == f"data:image/png;base64,<sha256:{hashlib.sha256(payload).hexdigest()} len:{len(payload)}>"
    # the live message is untouched
    assert h.messages[0]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")


def test_bad_inputs_are_rejected_clearly():
    with pytest.raises(ValueError, match="keep_last_screenshots"):
        History(keep_last_screenshots=0)
    with pytest.raises(ValueError, match="prune_chunk"):
        History(prune_chunk=0)
    h = History()
    with pytest.raises(ValueError, match="empty image"):
        h.add_observation(b"")
    with pytest.raises(TypeError, match="image must be"):
        h.add_observation(123)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="role"):
        h.add_message({"role": "robot", "content": "x"})
    with pytest.raises(ValueError, match="role"):
        h.add_assistant({"role": "user", "content": "x"})


def test_clear_keeps_system_and_assistant_none_content_becomes_empty():
    h = History("sys")
    h.add_user("task")
    h.add_assistant({"role": "assistant", "content": None, "tool_calls": []})
    assert h.messages[-1]["content"] == ""
    assert h.last_assistant is h.messages[-1]
    h.clear()
    assert h.messages == [{"role": "system", "content": "sys"}]


def test_image_and_think_pruning_happen_in_the_same_turn():
    # With prune_chunk=2 every second request must extend the previous one byte for byte;
    # if image and think pruning drifted apart, nearly every request would change early on.
    h = History(keep_last_screenshots=2, keep_last_thinks=2, prune_chunk=2)
    bodies = play(h, 13)
    changed_turns = []
    for turn, (prev, cur) in enumerate(itertools.pairwise(bodies), start=1):
        if not cur.startswith(prev[: prev.index(b'],"temperature"')]):
            changed_turns.append(turn)
    # request k carries k+1 screenshots: at 4 (> 2 kept + 2 - 1) both kinds drop back to 2
    assert changed_turns == [3, 5, 7, 9, 11]


def test_pruning_is_applied_lazily_but_visible_in_every_view():
    h = History(keep_last_screenshots=1, keep_last_thinks=1)
    h.add_observation(png(1))
    h.add_observation(png(2))
    assert h.stats().images_live == 1
    assert sum(isinstance(m["content"], list) and m["content"][1]["type"] == "image_url" for m in h.messages) == 1


# -- prefill accounting ------------------------------------------------------------------


def _turns(history: History, turns: int, *, size: tuple[int, int] | None = (1536, 864)) -> list:
    """One request per turn (observation, request, answer, tool result); the prefills."""
    out = []
    for i in range(turns):
        history.add_observation(png(i), text=f"screen {i}", size=size)
        history.build_request(model="m")
        out.append(history.last_prefill)
        history.add_assistant(assistant(i))
        history.add_tool_result(f"c{i}", {"ok": True, "i": i}, name="press_key")
    return out


def test_image_token_rule_is_qwens_32px_per_token_and_unknown_elsewhere() -> None:
    from deskpilot.agent.client._history import image_token_rule

    rule = image_token_rule("qwen3-vl-8b-instruct")
    assert rule is not None and rule(1536, 864) == 48 * 27 == 1296 and rule(1344, 756) == 42 * 24
    assert image_token_rule("Qwen/Qwen3-VL-30B-A3B") is not None
    assert image_token_rule("gpt-4o") is None and image_token_rule("llava-1.6") is None


def test_prefill_of_the_first_request_is_everything_then_only_what_changed() -> None:
    from deskpilot.agent.client._history import image_token_rule

    h = History("system prompt", tools=TOOLS, keep_last_screenshots=None, keep_last_thinks=None)
    h.image_tokens = image_token_rule("qwen3-vl")
    h.add_task("do it")
    first, second, third = _turns(h, 3)
    assert first.reused_messages == 0 and first.images == 1 and first.image_tokens == 1296
    # Nothing pruned: each request extends the last, only the new messages are prefilled.
    assert (second.messages, second.reused_messages, second.images, second.image_tokens) == (6, 3, 1, 1296)
    assert third.reused_messages == second.messages and third.images_in_context == 3
    assert 0 < third.text_tokens < first.text_tokens  # the system prompt and tools are not redone
    assert third.tokens == third.image_tokens + third.text_tokens


@pytest.mark.parametrize(
    ("chunk", "pattern"),
    [
        # keep 2: chunk 1 edits an early image every turn (2 images redone); chunk K
        # edits once every K turns (2 redone), extending the prompt in between (1 redone):
        # (K + 1) / K image prefills per turn.
        (1, [2, 2, 2, 2, 2, 2]),
        (2, [1, 2, 1, 2, 1, 2]),
        (3, [2, 1, 1, 2, 1, 1]),
    ],
)
def test_prune_chunk_sets_the_images_prefilled_per_turn(chunk: int, pattern: list[int]) -> None:
    h = History("sys", tools=TOOLS, keep_last_screenshots=2, keep_last_thinks=2, prune_chunk=chunk)
    prefills = _turns(h, 10)
    assert [p.images for p in prefills[4:]] == pattern
    assert max(p.images_in_context for p in prefills) == 2 + chunk - 1  # the bound: keep + chunk - 1


def test_changed_tools_share_nothing_and_unknown_rules_count_images_only() -> None:
    h = History("sys", tools=TOOLS)
    _turns(h, 2)
    h.set_tools(TOOLS[:1])  # rendered into the system prompt by chat templates
    h.add_observation(png(9), text="screen 9", size=(1536, 864))
    h.build_request(model="m")
    p = h.last_prefill
    assert p is not None and p.reused_messages == 0 and p.images == p.images_in_context
    assert p.image_tokens is None and p.tokens is None  # no rule set: images are counted, not tokens


def test_prefill_reads_the_image_size_from_the_png_header() -> None:
    import numpy as np

    from deskpilot import imaging
    from deskpilot.agent.client._history import image_token_rule

    h = History("sys")
    h.image_tokens = image_token_rule("qwen3-vl")
    h.add_observation(imaging.encode_png(np.zeros((96, 128, 3), np.uint8)))
    h.build_request(model="m")
    assert h.last_prefill is not None and h.last_prefill.image_tokens == 4 * 3
    h.add_observation(png(1))  # not a real PNG: size unknown, so the tokens are unknown
    h.build_request(model="m")
    assert h.last_prefill is not None and h.last_prefill.images == 1 and h.last_prefill.image_tokens is None
