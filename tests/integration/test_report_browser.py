"""The run report in a real headless Chromium (CDP over a pipe, see _chromium.py).

For the golden runs of every mode and for a crashed run directory: the page loads from
a file:// URL without console errors or network requests, shows one section per turn,
every screenshot decodes, the action marks sit where the recorded click was, and a
screenshot of the page is taken and is not blank.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from _chromium import EventChromium, find_chromium

from deskpilot.replay import load_recording
from deskpilot.report import write_report

pytestmark = pytest.mark.browser

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
RUNS = sorted(p.name for p in GOLDEN.iterdir() if (p / "turns.jsonl").is_file())


@pytest.fixture(scope="module")
def browser() -> Iterator[EventChromium]:
    if find_chromium() is None:
        pytest.fail("Chromium is not installed: run ./dev setup (apt-get install chromium)")
    chrome = EventChromium(width=1280, height=900)
    try:
        chrome.call("Browser.getVersion")
        yield chrome
    finally:
        chrome.close()


def load(browser: EventChromium, page: Path) -> str:
    session = browser.open(page.resolve().as_uri())
    browser.wait_for(session, "document.body && document.body.dataset.ready === '1'")
    # Screenshots load lazily (a long report would decode every image up front); load them all
    # here, as scrolling through the page would, to check every one decodes.
    browser.evaluate(session, "Array.from(document.images).forEach(i => { i.loading = 'eager'; }), true")
    # Every image decoded (embedded ones may still be decoding right after the script ran).
    browser.wait_for(
        session,
        "Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)",
        timeout=10,
    )
    return session


def page_facts(browser: EventChromium, session: str) -> dict[str, Any]:
    return browser.evaluate(
        session,
        """(() => ({
            turns: document.querySelectorAll('section.turn').length,
            numbers: Array.from(document.querySelectorAll('section.turn')).map(s => Number(s.dataset.turn)),
            datasetTurns: document.body.dataset.turns,
            images: document.images.length,
            broken: Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).length,
            marks: document.querySelectorAll('svg.marks .mark').length,
            partial: !!document.getElementById('partial'),
            title: document.title,
        }))()""",
    )


def not_blank(pixels: np.ndarray[Any, Any]) -> None:
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert float(pixels.std()) > 20, "the page screenshot is (nearly) uniform"
    colours = {tuple(int(c) for c in px) for px in pixels[::7, ::7].reshape(-1, 3)}
    assert len(colours) > 50, f"only {len(colours)} colours in the page screenshot"


@pytest.mark.parametrize("name", RUNS)
def test_golden_report_loads_without_errors_and_shows_every_turn(browser: EventChromium, tmp_path: Path, name: str) -> None:
    page = write_report(GOLDEN / name, tmp_path / f"{name}.html")
    session = load(browser, page)
    facts = page_facts(browser, session)
    turns = sorted(int(r["turn"]) for r in load_recording(GOLDEN / name).turns())
    assert facts["numbers"] == turns and facts["datasetTurns"] == str(len(turns))
    assert facts["broken"] == 0 and facts["images"] >= 1
    assert facts["marks"] >= 1  # every golden run acts somewhere on a screenshot
    assert facts["partial"] is False
    assert browser.console_errors(session) == []
    # Self-contained: nothing but the file itself (and data: URLs) was requested.
    urls = browser.requested_urls(session)
    assert urls and all(u.startswith(("file:", "data:")) for u in urls), urls
    assert [u for u in urls if u.startswith("file:")] == [page.resolve().as_uri()]
    not_blank(browser.screenshot(session))


def test_click_mark_is_drawn_where_the_recorded_click_was(browser: EventChromium, tmp_path: Path) -> None:
    page = write_report(GOLDEN / "single_seed000", tmp_path / "r.html")
    session = load(browser, page)
    record = next(r for r in load_recording(GOLDEN / "single_seed000").turns() if r["turn"] == 1)
    x, y = record["action"]["x"], record["action"]["y"]  # physical pixels
    (pw, ph), (iw, ih) = record["mapping"]["physical_size"], record["mapping"]["image_size"]
    browser.evaluate(session, "document.getElementById('turn-1').scrollIntoView({block: 'start'})")
    geo = browser.evaluate(
        session,
        """(() => {
            const fig = document.querySelector('#turn-1 figure.shot');
            const img = fig.querySelector('img').getBoundingClientRect();
            const c = fig.querySelector('circle.mark-click').getBoundingClientRect();
            return {ix: img.x, iy: img.y, iw: img.width, ih: img.height,
                    cx: c.x + c.width / 2, cy: c.y + c.height / 2};
        })()""",
    )
    # The circle's centre, back in image pixels, is the recorded physical click mapped
    # through the recorded mapping (pixel centre convention of deskpilot.geometry).
    expect_x = (x + 0.5) * iw / pw
    expect_y = (y + 0.5) * ih / ph
    got_x = (geo["cx"] - geo["ix"]) * iw / geo["iw"]
    got_y = (geo["cy"] - geo["iy"]) * ih / geo["ih"]
    assert abs(got_x - expect_x) < 0.75 and abs(got_y - expect_y) < 0.75, (got_x, got_y, expect_x, expect_y)
    # And it is really painted there: the red crosshair is on the page's pixels.
    pixels = browser.screenshot(session).astype(int)
    cx, cy = round(geo["cx"]), round(geo["cy"])
    window = pixels[cy - 3 : cy + 4, cx - 3 : cx + 4].reshape(-1, 3)
    red = (window[:, 0] > 180) & (window[:, 1] < 110) & (window[:, 2] < 110)
    assert red.any(), window.tolist()
    # Turning the marks off hides them (the page's script works).
    browser.evaluate(session, "document.getElementById('toggle-marks').click()")
    assert browser.evaluate(session, "getComputedStyle(document.querySelector('svg.marks')).display") == "none"
    assert browser.console_errors(session) == []


def test_linked_report_loads_its_images_relative_to_the_page(browser: EventChromium, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "stateless_flat"
    shutil.copytree(GOLDEN / "stateless_flat", run)
    page = write_report(run, tmp_path / "reports" / "stateless.html", embed=False)
    assert "data:image/png" not in page.read_text(encoding="utf-8")
    session = load(browser, page)
    facts = page_facts(browser, session)
    assert facts["broken"] == 0 and facts["images"] >= 3
    files = [u for u in browser.requested_urls(session) if u.startswith("file:") and u.endswith(".png")]
    assert files and all("/runs/stateless_flat/" in u for u in files)
    assert browser.console_errors(session) == []


def test_crashed_run_directory_is_reported_as_partial(browser: EventChromium, tmp_path: Path) -> None:
    run = tmp_path / "crashed"
    shutil.copytree(GOLDEN / "single_seed000", run)
    lines = (run / "turns.jsonl").read_bytes().splitlines(keepends=True)
    (run / "turns.jsonl").write_bytes(b"".join(lines[:4]) + lines[4][: len(lines[4]) // 2])  # torn mid-line
    (run / "summary.json").unlink()
    (run / "screen_0003.png").unlink()
    page = write_report(run, tmp_path / "crashed.html")
    session = browser.open(page.resolve().as_uri())
    browser.wait_for(session, "document.body && document.body.dataset.ready === '1'")
    facts = page_facts(browser, session)
    assert facts["partial"] is True and facts["numbers"] == [0, 1, 2, 3]
    text = browser.evaluate(session, "document.getElementById('partial').innerText")
    assert "summary.json is missing" in text and "screen_0003.png is missing" in text and "last line" in text
    assert browser.console_errors(session) == []
    not_blank(browser.screenshot(session))


def test_screenshots_load_lazily_as_the_page_scrolls(browser: EventChromium, tmp_path: Path) -> None:
    page = write_report(GOLDEN / "single_extended_stream", tmp_path / "report.html")
    session = browser.open(page.resolve().as_uri())
    browser.wait_for(session, "document.body && document.body.dataset.ready === '1'")
    first = "(() => { const i = document.querySelector('section.turn img'); return i.complete && i.naturalWidth > 0; })()"
    browser.wait_for(session, first, timeout=10)
    last = "document.querySelectorAll('section.turn figure.shot img')[document.querySelectorAll('section.turn figure.shot img').length - 1]"
    assert browser.evaluate(session, "document.querySelectorAll('img[loading=lazy]').length === document.images.length")
    assert browser.evaluate(session, f"{last}.naturalWidth") == 0  # far below the fold: not loaded yet
    browser.evaluate(session, f"{last}.scrollIntoView(), true")
    browser.wait_for(session, f"{last}.complete && {last}.naturalWidth > 0", timeout=10)


CJK = "世界你好日本語한국어"


def test_cjk_text_renders_with_real_glyphs(browser: EventChromium, tmp_path: Path) -> None:
    """CJK in a task renders in a CJK font, not as empty boxes: distinct ideographs get
    distinct glyphs of full width (tofu boxes are all the same picture)."""
    run = tmp_path / "run"
    shutil.copytree(GOLDEN / "single_seed000", run)
    info = orjson.loads((run / "run.json").read_bytes())
    info["task"] = CJK
    (run / "run.json").write_bytes(orjson.dumps(info))
    session = load(browser, write_report(run, tmp_path / "report.html"))
    facts = browser.evaluate(
        session,
        """(() => {
            const h1 = document.querySelector('h1');
            const font = getComputedStyle(h1).font;
            const canvas = document.createElement('canvas');
            canvas.width = 64; canvas.height = 64;
            const ctx = canvas.getContext('2d', {willReadFrequently: true});
            ctx.font = font.replace(/\\d+px/, '40px');
            const glyph = ch => {
                ctx.clearRect(0, 0, 64, 64); ctx.fillStyle = '#000'; ctx.fillText(ch, 4, 48);
                return Array.from(ctx.getImageData(0, 0, 64, 64).data.filter((_, k) => k % 4 === 3)).join(',');
            };
            const range = document.createRange(); range.selectNodeContents(h1);
            return {
                text: h1.textContent,
                width: ctx.measureText('世').width, latin: ctx.measureText('a').width,
                distinct: new Set(Array.from('世界你好日本語한국어').map(glyph)).size,
            };
        })()""",
    )
    assert facts["text"] == CJK
    # 10 different characters, 10 different pictures (missing-glyph boxes would all be alike)
    assert facts["distinct"] == len(CJK), facts
    # ideographs are full width (1 em at 40 px), wider than a Latin letter
    assert 36 <= facts["width"] <= 44 and facts["width"] > facts["latin"], facts
