"""Agent configuration: seed defaults, precedence flag > env > file > default, clear errors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from deskpilot.agent._config import (
    AgentConfig,
    LoopSettings,
    load_config,
    parse_set_option,
    register_section,
    registered_sections,
    setting,
    settings_table,
    toolset_for_model,
)
from deskpilot.errors import ConfigError


def cfg(flags=None, env=None, path=None) -> AgentConfig:
    return load_config(flags=flags, env=env or {}, path=path, search_default=False)


def test_defaults_are_the_seeds() -> None:
    c = cfg()
    assert c.model.endpoint == "http://localhost:1234/v1/chat/completions"
    assert c.model.model == "qwen3-vl-8b-instruct"
    assert (c.model.timeout, c.model.temperature, c.model.max_tokens) == (240.0, 0.6, 2048)
    assert (c.screen.image_width, c.screen.image_height) == (1536, 864)
    assert (c.history.keep_last_screenshots, c.history.keep_last_thinks) == (2, 2)
    assert c.agent.max_steps == 10
    assert (c.run.dump_prefix, c.run.dump_start, c.run.dump_dir) == ("screen_", 1, "")
    assert c.agent.toolset == "seed000" and c.agent.mode == "single"
    assert all(src == "default" for src in c.sources.values())


def test_seed001_tool_set_brings_seed001_defaults(tmp_path: Path) -> None:
    # seed 001 ran at 1344x756 with temperature 0.2; anything the user set still wins
    cfg = load_config(flags={"agent.toolset": "seed001"}, env={}, search_default=False)
    assert (cfg.screen.image_width, cfg.screen.image_height, cfg.model.temperature) == (1344, 756, 0.2)
    assert cfg.sources["screen.image_width"] == "toolset seed001"
    cfg = load_config(flags={"agent.toolset": "seed001", "model.temperature": 0.7},
                      env={"AGENT_IMAGE_W": "1536", "AGENT_IMAGE_H": "864"}, search_default=False)
    assert (cfg.screen.image_width, cfg.screen.image_height, cfg.model.temperature) == (1536, 864, 0.7)
    toml = tmp_path / "deskpilot.toml"
    toml.write_text('[agent]\ntoolset = "seed001"\n[screen]\nimage_width = 1280\nimage_height = 720\n')
    cfg = load_config(env={}, path=toml)
    assert (cfg.screen.image_width, cfg.screen.image_height, cfg.model.temperature) == (1280, 720, 0.2)
    cfg = load_config(flags={"agent.toolset": "seed000"}, env={}, search_default=False)
    assert (cfg.screen.image_width, cfg.screen.image_height, cfg.model.temperature) == (1536, 864, 0.6)


def test_seed_environment_variables() -> None:
    env = {
        "LMSTUDIO_ENDPOINT": "http://box:8080/v1/chat/completions",
        "LMSTUDIO_MODEL": "qwen3-vl-4b-instruct",
        "LMSTUDIO_TIMEOUT": "30",
        "LMSTUDIO_TEMPERATURE": "0.2",
        "LMSTUDIO_MAX_TOKENS": "512",
        "AGENT_IMAGE_W": "1344",
        "AGENT_IMAGE_H": "756",
        "AGENT_DUMP_DIR": "dumps",
        "AGENT_DUMP_PREFIX": "shot_",
        "AGENT_DUMP_START": "7",
        "AGENT_KEEP_LAST_SCREENSHOTS": "3",
        "AGENT_KEEP_LAST_THINKS": "0",
        "AGENT_MAX_STEPS": "25",
        "AGENT_STEP_DELAY": "0.4",
    }
    c = cfg(env=env)
    assert c.model.endpoint.startswith("http://box:8080")
    assert c.model.model == "qwen3-vl-4b-instruct"
    assert c.model.timeout == 30.0 and c.model.temperature == 0.2 and c.model.max_tokens == 512
    assert (c.screen.image_width, c.screen.image_height) == (1344, 756)
    assert (c.run.dump_dir, c.run.dump_prefix, c.run.dump_start) == ("dumps", "shot_", 7)
    assert (c.history.keep_last_screenshots, c.history.keep_last_thinks) == (3, 0)
    assert c.agent.max_steps == 25 and c.agent.effective_step_delay == 0.4
    assert c.sources["model.timeout"] == "environment variable LMSTUDIO_TIMEOUT"


def test_precedence_flag_env_file_default(tmp_path: Path) -> None:
    f = tmp_path / "dp.toml"
    f.write_text('[model]\nmodel = "from-file"\ntemperature = 0.1\nmax_tokens = 100\n[agent]\nmax_steps = 4\n')
    env = {"LMSTUDIO_MODEL": "from-env", "LMSTUDIO_TEMPERATURE": "0.3"}
    c = cfg(flags={"model.model": "from-flag", "agent.max_steps": None}, env=env, path=f)
    assert c.model.model == "from-flag"  # flag beats env and file
    assert c.model.temperature == 0.3  # env beats file
    assert c.model.max_tokens == 100  # file beats default
    assert c.agent.max_steps == 4  # a flag given as None is "not given"
    assert c.model.timeout == 240.0
    assert c.sources["model.model"] == "flag model.model"
    assert "dp.toml" in c.sources["model.max_tokens"]
    assert c.file == f


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"LMSTUDIO_TIMEOUT": "soon"}, "LMSTUDIO_TIMEOUT"),
        ({"LMSTUDIO_TIMEOUT": "-1"}, "minimum"),
        ({"AGENT_MAX_STEPS": "2.5"}, "AGENT_MAX_STEPS"),
        ({"AGENT_IMAGE_W": "8"}, "AGENT_IMAGE_W"),
        ({"LMSTUDIO_TEMPERATURE": "nan"}, "LMSTUDIO_TEMPERATURE"),
        ({"LMSTUDIO_STREAM": "maybe"}, "boolean"),
        ({"AGENT_SETTLE": "adaptiv"}, "did you mean 'adaptive'"),
        ({"AGENT_KEEP_LAST_SCREENSHOTS": "0"}, "AGENT_KEEP_LAST_SCREENSHOTS"),
    ],
)
def test_invalid_values_name_the_variable(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        cfg(env=env)
    assert needle in str(info.value)
    assert isinstance(info.value, ValueError)


def test_booleans_and_numbers_from_text() -> None:
    c = cfg(env={"LMSTUDIO_STREAM": "yes", "AGENT_DRY_RUN": "0", "AGENT_ONE_TOOL_CALL": "off"})
    assert c.model.stream is True and c.agent.dry_run is False and c.agent.one_tool_call is False


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        cfg(path=tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[model\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        cfg(path=bad)
    typo = tmp_path / "typo.toml"
    typo.write_text("[model]\nmodle = 'x'\n")
    with pytest.raises(ConfigError, match="did you mean 'model'"):
        cfg(path=typo)
    section = tmp_path / "section.toml"
    section.write_text("[modle]\nmodel = 'x'\n")
    with pytest.raises(ConfigError, match="unknown setting 'modle'"):
        cfg(path=section)
    wrong_type = tmp_path / "type.toml"
    wrong_type.write_text("[agent]\nmax_steps = 'many'\n")
    with pytest.raises(ConfigError, match=r"\[agent\] max_steps"):
        cfg(path=wrong_type)


def test_unknown_flag_and_set_option() -> None:
    with pytest.raises(ConfigError, match="unknown setting"):
        cfg(flags={"model.nope": 1})
    assert parse_set_option("history.keep_last_screenshots=3") == ("history.keep_last_screenshots", "3")
    with pytest.raises(ConfigError, match=r"section\.key=value"):
        parse_set_option("keep=3")


def test_settle_bounds_checked_together() -> None:
    with pytest.raises(ConfigError, match="settle_max"):
        cfg(env={"AGENT_SETTLE_MIN": "2", "AGENT_SETTLE_MAX": "1"})


def test_step_delay_follows_settle_mode() -> None:
    assert cfg().agent.effective_step_delay == 0.0
    assert cfg(flags={"agent.settle": "fixed"}).agent.effective_step_delay == 0.4
    assert cfg(flags={"agent.settle": "fixed", "agent.step_delay": 0.1}).agent.effective_step_delay == 0.1
    assert LoopSettings(step_delay=0.0, settle="fixed").effective_step_delay == 0.0


def test_default_file_in_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "deskpilot.toml").write_text('[model]\nmodel = "cwd-model"\n')
    monkeypatch.chdir(tmp_path)
    assert load_config(env={}).model.model == "cwd-model"
    assert load_config(env={}, search_default=False).model.model == "qwen3-vl-8b-instruct"


def test_secrets_masked_in_records() -> None:
    c = cfg(env={"OPENAI_API_KEY": "sk-secret"})
    assert c.model.api_key == "sk-secret"
    assert c.as_dict()["model"]["api_key"] == "***"


@dataclass(frozen=True, slots=True)
class _ExampleSettings:
    review_interval: int = setting(5, env="EXAMPLE_REVIEW_INTERVAL", minimum=1)
    variant: str = setting("003", env="EXAMPLE_VARIANT", choices=("002", "003"))


def test_modes_register_their_own_sections(tmp_path: Path) -> None:
    register_section("example", _ExampleSettings)
    try:
        f = tmp_path / "dp.toml"
        f.write_text("[example]\nreview_interval = 7\n")
        c = cfg(env={"EXAMPLE_VARIANT": "002"}, path=f)
        assert c.section(_ExampleSettings) == _ExampleSettings(7, "002")
        assert c.section(LoopSettings) is c.agent
        assert c.as_dict()["example"] == {"review_interval": 7, "variant": "002"}
        with pytest.raises(ConfigError, match="EXAMPLE_VARIANT"):
            cfg(env={"EXAMPLE_VARIANT": "004"})
        assert any(row[0] == "example.review_interval" for row in settings_table())
        with pytest.raises(ValueError, match="already registered"):
            register_section("example", LoopSettings)
    finally:
        from deskpilot.agent import _config

        _config._SECTIONS.pop("example", None)
    assert "example" not in registered_sections()


def test_only_credentials_are_masked_in_run_json() -> None:
    from deskpilot.agent._config import _is_secret_setting

    for name in ("api_key", "panel_token", "token", "password", "client_secret"):
        assert _is_secret_setting(name), name
    for name in ("max_tokens", "planner_max_tokens", "deny_keys", "hotkeys", "keep_last_thinks"):
        assert not _is_secret_setting(name), name


def test_tool_sets_have_user_facing_names_and_keep_the_seed_ids() -> None:
    from deskpilot.agent.tools._core import toolset, toolset_label

    cfg = load_config(flags={"agent.toolset": "pointer"}, env={}, search_default=False)
    # the run records keep the seed id; the seed's own defaults come with it
    assert cfg.agent.toolset == "seed001" and cfg.screen.image_width == 1344
    assert load_config(env={"AGENT_TOOLSET": "element"}, search_default=False).agent.toolset == "seed000"
    assert load_config(flags={"agent.toolset": "seed001"}, env={}, search_default=False).agent.toolset == "seed001"
    with pytest.raises(ConfigError) as info:
        load_config(flags={"agent.toolset": "pointr"}, env={}, search_default=False)
    assert "element (seed000), pointer (seed001), extended" in str(info.value) and "'pointer'" in str(info.value)
    assert [toolset_label(n) for n in ("seed000", "pointer", "extended")] == [
        "element (seed000)", "pointer (seed001)", "extended"]
    assert toolset("pointer").names[:2] == ["take_screenshot", "move_mouse"]


def test_step_delay_is_unset_by_default_and_the_old_minus_1_means_unset() -> None:
    assert cfg().agent.step_delay is None and cfg().as_dict()["agent"]["step_delay"] is None
    assert cfg(flags={"agent.step_delay": -1.0}).agent.step_delay is None  # an older run.json's value
    assert cfg(env={"AGENT_STEP_DELAY": "-1"}).agent.step_delay is None
    assert cfg(env={"AGENT_STEP_DELAY": "none"}).agent.step_delay is None
    assert cfg(env={"AGENT_STEP_DELAY": ""}).agent.step_delay is None
    assert cfg(env={"AGENT_STEP_DELAY": "0"}).agent.step_delay == 0.0
    with pytest.raises(ConfigError, match="below the minimum"):
        cfg(flags={"agent.step_delay": -0.5})


def test_max_seconds_and_num_ctx_are_unset_by_default_and_the_old_0_means_unset() -> None:
    c = cfg()
    assert c.agent.max_seconds is None and c.model.num_ctx is None
    assert c.as_dict()["agent"]["max_seconds"] is None and c.as_dict()["model"]["num_ctx"] is None
    # An older run.json, config file or environment said "unset" with 0.
    old = cfg(flags={"agent.max_seconds": 0.0, "model.num_ctx": 0})
    assert old.agent.max_seconds is None and old.model.num_ctx is None
    env = cfg(env={"AGENT_MAX_SECONDS": "0", "OLLAMA_NUM_CTX": "0"})
    assert env.agent.max_seconds is None and env.model.num_ctx is None
    assert cfg(env={"AGENT_MAX_SECONDS": "none", "OLLAMA_NUM_CTX": ""}).model.num_ctx is None
    given = cfg(env={"AGENT_MAX_SECONDS": "90", "OLLAMA_NUM_CTX": "32768"})
    assert (given.agent.max_seconds, given.model.num_ctx) == (90.0, 32768)
    with pytest.raises(ConfigError, match="below the minimum"):
        cfg(flags={"agent.max_seconds": -1.0})


@dataclass(frozen=True, slots=True)
class _LegacySettings:
    limit: int | None = setting(None, env="LEGACY_LIMIT", minimum=1, legacy_unset=(0,))
    flag: bool = setting(False, env="LEGACY_FLAG")


def test_legacy_unset_maps_only_the_listed_numbers_of_an_optional_setting() -> None:
    register_section("legacy", _LegacySettings)
    try:
        assert cfg(env={"LEGACY_LIMIT": "0"}).section(_LegacySettings).limit is None
        assert cfg(env={"LEGACY_LIMIT": "3"}).section(_LegacySettings).limit == 3
        assert cfg(env={"LEGACY_FLAG": "0"}).section(_LegacySettings).flag is False  # a bool is never "unset"
        with pytest.raises(ConfigError, match="below the minimum"):
            cfg(env={"LEGACY_LIMIT": "-1"})
    finally:
        from deskpilot.agent import _config

        _config._SECTIONS.pop("legacy", None)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # UI-TARS-1.5 and later: LM Studio, vLLM / Hugging Face, Ollama (hf.co GGUF) spellings
        ("ui-tars-1.5-7b", "uitars"),
        ("bytedance/ui-tars-1.5-7b", "uitars"),
        ("ByteDance-Seed/UI-TARS-1.5-7B", "uitars"),
        ("hf.co/mradermacher/UI-TARS-1.5-7B-GGUF:Q4_K_M", "uitars"),
        ("ui_tars_1.5_7b", "uitars"),
        ("UI-TARS-2", "uitars"),
        # UI-TARS 1.0 (the releases name no version; the number before "B" is the size)
        ("UI-TARS-7B-DPO", "uitars-1.0"),
        ("bytedance-research/UI-TARS-72B-SFT", "uitars-1.0"),
        ("ui-tars-2b-sft", "uitars-1.0"),
        ("ui-tars:7b", "uitars-1.0"),
        ("ui-tars-1.0-7b", "uitars-1.0"),
        # Qwen3-VL
        ("qwen3-vl-8b-instruct", "qwen"),
        ("qwen/qwen3-vl-4b", "qwen"),
        ("Qwen/Qwen3-VL-8B-Instruct", "qwen"),
        ("qwen3-vl:8b", "qwen"),
        ("qwen3-vl-235b-a22b-thinking", "qwen"),
        # anything else keeps the default tool set
        ("gpt-4o", "seed000"),
        ("qwen3-8b", "seed000"),
        ("Qwen/Qwen2-VL-7B-Instruct", "seed000"),
        # Qwen2.5-VL speaks absolute pixels of its resized image, not the qwen tool set's grid
        ("qwen2.5vl:7b", "seed000"),
        ("Qwen/Qwen2.5-VL-7B-Instruct-AWQ", "seed000"),
        ("qwen2_5_vl_7b", "seed000"),
        ("llava:13b", "seed000"),
        ("", "seed000"),
    ],
)
def test_toolset_auto_reads_the_model_id(model: str, expected: str) -> None:
    assert toolset_for_model(model) == expected
    cfg = load_config(flags={"agent.toolset": "auto", "model.model": model}, env={}, search_default=False)
    assert cfg.agent.toolset == expected
    assert "auto" in cfg.sources["agent.toolset"] and expected in cfg.sources["agent.toolset"]


def test_toolset_auto_from_the_environment_and_the_default_unchanged() -> None:
    cfg = load_config(env={"AGENT_TOOLSET": "auto", "LMSTUDIO_MODEL": "ui-tars-7b-dpo"}, search_default=False)
    assert cfg.agent.toolset == "uitars-1.0"
    # Not the default: the default model (qwen3-vl-8b-instruct) would otherwise switch to qwen.
    default = load_config(env={}, search_default=False)
    assert default.agent.toolset == "seed000" and default.sources["agent.toolset"] == "default"
