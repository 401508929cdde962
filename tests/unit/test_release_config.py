"""The release workflow cannot run here; this checks that it and [tool.cibuildwheel] parse and
name the intended targets: CPython 3.10-3.13 wheels for manylinux (x86_64 and aarch64
runners), Windows AMD64 built with MSVC, macOS x86_64 and arm64, each smoke-tested, and
the sdist. Build selectors are matched the way cibuildwheel matches them (fnmatch over
space-separated patterns against identifiers such as ``cp313-manylinux_x86_64``)."""

from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
SUPPORTED = ("cp310", "cp311", "cp312", "cp313")


@pytest.fixture(scope="module")
def workflow() -> dict[Any, Any]:
    data = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def selected(config: dict[str, Any], identifier: str) -> bool:
    def matches(patterns: str) -> bool:
        return any(fnmatch.fnmatch(identifier, p) for p in patterns.split())

    return matches(config.get("build", "*")) and not matches(config.get("skip", ""))


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if str(s.get("uses", "")).split("@")[0] == action]


def test_cibuildwheel_builds_exactly_the_supported_cpythons(pyproject: dict[str, Any]) -> None:
    config = pyproject["tool"]["cibuildwheel"]
    # the oldest built version is the oldest one pyproject promises to support
    minimum = re.fullmatch(r">=\s*3\.(\d+)", pyproject["project"]["requires-python"])
    assert minimum is not None and SUPPORTED[0] == f"cp3{minimum.group(1)}"
    wanted = [
        f"{py}-{platform}"
        for py in SUPPORTED
        for platform in (
            "manylinux_x86_64",
            "manylinux_aarch64",
            "win_amd64",
            "macosx_x86_64",
            "macosx_arm64",
        )
    ]
    assert [i for i in wanted if not selected(config, i)] == []
    unwanted = [
        "cp39-manylinux_x86_64",  # below requires-python
        "cp314-manylinux_x86_64",  # not yet tested against
        "cp313t-manylinux_x86_64",  # free-threaded: the core is not audited for it
        "pp310-manylinux_x86_64",
        "cp312-musllinux_x86_64",
        "cp312-manylinux_i686",
        "cp312-win32",
    ]
    assert [i for i in unwanted if selected(config, i)] == []


def test_cibuildwheel_arches_per_platform(pyproject: dict[str, Any]) -> None:
    config = pyproject["tool"]["cibuildwheel"]
    assert config["linux"]["archs"] == ["auto64"]  # x86_64 or aarch64: the runner's own
    assert config["linux"]["manylinux-x86_64-image"].startswith("manylinux")
    assert set(config["macos"]["archs"]) == {"x86_64", "arm64"}
    assert config["windows"]["archs"] == ["AMD64"]
    # MSVC is cibuildwheel's compiler on Windows unless something points elsewhere
    windows_env = {**config.get("environment", {}), **config["windows"].get("environment", {})}
    assert not {"CC", "CXX", "LDSHARED"} & set(windows_env)


def test_every_wheel_is_smoke_tested_and_must_be_native(pyproject: dict[str, Any]) -> None:
    config = pyproject["tool"]["cibuildwheel"]
    assert config["environment"]["DESKPILOT_REQUIRE_NATIVE"] == "1"
    command = config["test-command"]
    script = re.fullmatch(r"python \{project\}/(\S+\.py)", command)
    assert script is not None, command
    smoke = ROOT / script.group(1)
    assert smoke.is_file()
    source = smoke.read_text()
    assert "DESKPILOT_PURE" in source and "encode_png" in source and "prepare" in source
    for platform in ("linux", "macos", "windows"):  # no platform overrides it away
        assert "test-command" not in config.get(platform, {})
        assert "test-skip" not in config.get(platform, {})
    assert "test-skip" not in config


def test_workflow_runs_cibuildwheel_on_every_os(workflow: dict[Any, Any]) -> None:
    jobs = workflow["jobs"]
    wheels = jobs["wheels"]
    runners = wheels["strategy"]["matrix"]["os"]
    assert wheels["runs-on"] == "${{ matrix.os }}"
    assert any(r.startswith("ubuntu") and "arm" not in r for r in runners)
    assert any(r.startswith("ubuntu") and "arm" in r for r in runners)
    assert any(r.startswith("windows") for r in runners)
    assert any(r.startswith("macos") for r in runners)
    (step,) = steps_using(wheels, "pypa/cibuildwheel")
    assert re.fullmatch(r"v\d+\.\d+\.\d+", step["uses"].split("@")[1])  # pinned, not a branch
    output = step["with"]["output-dir"]
    (upload,) = steps_using(wheels, "actions/upload-artifact")
    assert upload["with"]["path"].startswith(output)


def test_workflow_builds_the_sdist_and_publishes_only_tags(workflow: dict[Any, Any]) -> None:
    # YAML 1.1 reads the bare key `on` as True
    triggers: dict[str, Any] = workflow["on"] if "on" in workflow else workflow[True]
    assert triggers["push"]["tags"] == ["v*"]
    jobs = workflow["jobs"]
    assert any("--sdist" in str(s.get("run", "")) for s in jobs["sdist"]["steps"])
    publish = jobs["publish"]
    assert set(publish["needs"]) == {"sdist", "wheels"}
    assert "refs/tags/v" in publish["if"]
    assert publish["permissions"] == {"id-token": "write"}
    assert steps_using(publish, "pypa/gh-action-pypi-publish")


def test_ci_windows_job_requires_the_compiled_core() -> None:
    # its editable MSVC build would otherwise fall back to a pure package and the
    # native-vs-reference tests would skip instead of failing
    ci = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    assert ci["jobs"]["windows"]["env"]["DESKPILOT_REQUIRE_NATIVE"] == "1"


def test_the_prompt_files_ship_in_the_wheel_and_the_sdist(pyproject: dict[str, Any]) -> None:
    # Every mode's prompts are package data (deskpilot/agent/prompts/*.txt). The wheel takes
    # what [tool.setuptools.package-data] names (scripts/build_win_wheel.py repacks that wheel,
    # and the Windows tier copies all of src/deskpilot); the sdist takes MANIFEST.in as well.
    package = ROOT / "src" / "deskpilot"
    prompts = sorted(p.relative_to(package).as_posix() for p in (package / "agent" / "prompts").glob("*.txt"))
    assert prompts
    patterns = pyproject["tool"]["setuptools"]["package-data"]["deskpilot"]
    for path in prompts:
        assert any(fnmatch.fnmatch(path, pattern) for pattern in patterns), path
    manifest = (ROOT / "MANIFEST.in").read_text().splitlines()
    assert "recursive-include src/deskpilot/agent/prompts *.txt" in manifest
