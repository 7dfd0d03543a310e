"""Agent profiles: TOML files, versions by content, references, built-in profiles, the CLI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rehearsal_env.agents import (
    AgentProfile,
    ProfileStore,
    Sampling,
    builtin_profile,
    load_profile_file,
    parse_profile,
    resolve_agent,
)
from rehearsal_env.agents.testing import ModelServer
from rehearsal_env.cli import main
from rehearsal_env.records import read_records

PROFILE = """\
name = "support-bot"
model = "scripted"
instructions = "Check the order before any refund."
max_model_calls = 30

[sampling]
temperature = 0.2
top_p = 0.9
seed = 7
max_tokens = 256
"""


def test_parse_reads_every_field() -> None:
    p = parse_profile(PROFILE)
    assert p == AgentProfile(name="support-bot", agent="openai", model="scripted",
                             instructions="Check the order before any refund.", max_model_calls=30,
                             sampling=Sampling(temperature=0.2, top_p=0.9, seed=7, max_tokens=256))
    assert parse_profile(p.to_toml()) == p  # written and read back exactly


@pytest.mark.parametrize(("text", "message"), [
    ('name = "x"\nmodel = "m"\ncolour = "red"\n', "unknown key"),
    ('name = "x"\nmodel = "m"\nmax_model_calls = 0\n', "max_model_calls to be a positive integer"),
    ('name = "x"\n', "needs model"),
    ('name = "x"\nmodel = "m"\n[sampling]\ntemperature = 3\n', r"temperature in \[0, 2\]"),
    ('name = "x"\nmodel = "m"\n[sampling]\nmax_tokens = "many"\n', "max_tokens to be an integer"),
    ('name = "x"\nagent = "gpt"\nmodel = "m"\n', "agent to be one of"),
    ('name = "x"\nagent = "reference"\nmodel = "m"\n', "has no model"),
    ("name = ", "not valid TOML"),
])
def test_bad_profiles_say_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_profile(text)


def test_a_changed_profile_under_the_same_name_is_the_next_version(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path)
    first, created = store.register(parse_profile(PROFILE))
    assert (first.version, created) == (1, True) and first.label == "v1"
    again, created = store.register(parse_profile(PROFILE))
    assert (again.version, created) == (1, False)  # same content: the same version
    changed = parse_profile(PROFILE.replace("Check the order", "Always check the order"))
    second, created = store.register(changed)
    assert (second.version, created) == (2, True)
    assert store.get("support-bot") == second
    assert store.get("support-bot@v1") == first
    assert (tmp_path / "support-bot" / "v1.toml").read_text() == first.to_toml()  # never rewritten
    with pytest.raises(KeyError, match="versions v1..v2, not v3"):
        store.get("support-bot@v3")
    with pytest.raises(KeyError, match="registered: support-bot"):
        store.get("nope")


def test_agent_references(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path)
    stored, _ = store.register(parse_profile(PROFILE))
    assert resolve_agent("support-bot@v1", store) == stored
    assert resolve_agent("reference", store) == builtin_profile("reference")
    assert builtin_profile("wrong:repeat-write").label.startswith("builtin-")
    ad_hoc = resolve_agent("openai:gpt-x", store)
    assert ad_hoc.model == "gpt-x" and ad_hoc.version is None and ad_hoc.label.startswith("unregistered-")
    with pytest.raises(ValueError, match="not registered"):
        store.register(builtin_profile("reference"))


def test_cli_add_list_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REHEARSAL_AGENT_PROFILES", str(tmp_path / "profiles"))
    path = tmp_path / "bot.toml"
    path.write_text(PROFILE)
    assert main(["profile", "add", str(path)]) == 0
    assert "registered support-bot@v1" in capsys.readouterr().out
    path.write_text(PROFILE.replace("0.2", "0.3"))
    assert main(["profile", "add", str(path)]) == 0
    assert "registered support-bot@v2" in capsys.readouterr().out
    assert main(["profile", "list"]) == 0
    listing = capsys.readouterr().out
    assert "support-bot" in listing and "v2" in listing and "reference" in listing  # built-ins listed too
    assert main(["profile", "show", "support-bot@v1"]) == 0
    assert load_profile_file(path).sampling.temperature == 0.3
    assert "temperature = 0.2" in capsys.readouterr().out
    assert main(["profile", "show", "nope"]) == 2


def test_a_run_records_the_profile_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REHEARSAL_AGENT_PROFILES", str(tmp_path / "profiles"))
    path = tmp_path / "bot.toml"
    path.write_text(PROFILE)
    assert main(["profile", "add", str(path)]) == 0
    path.write_text(PROFILE.replace("Check the order", "Always check the order"))
    assert main(["profile", "add", str(path)]) == 0
    with ModelServer(world="shop") as server:
        for ref, version in (("support-bot", "v2"), ("support-bot@v1", "v1")):
            out = tmp_path / version
            assert main(["run", "--world", "shop", "--agent", ref, "--base-url", server.base_url,
                         "--scenario", "refund-item-0001", "--out", str(out), "--quiet"]) == 0, capsys.readouterr()
            [record] = read_records(out)
            assert (record.agent, record.agent_version, record.outcome) == ("support-bot", version, "verified")
            assert (record.temperature, record.top_p, record.sampling_seed, record.max_tokens) == (0.2, 0.9, 7, 256)
    first = [r for r in server.requests if "Always check the order" in r["messages"][0]["content"]]
    assert first and first[0]["temperature"] == 0.2  # v2's instructions and sampling reached the model


def test_a_bad_profile_file_names_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bot.toml"
    path.write_text('name = "bot"\nmodel = "m"\n\n[sampling]\nseed = 1\ntemperature = 9\n\n[provider]\nstream = 2\n')
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:6: expected sampling.temperature in \[0, 2\]"):
        load_profile_file(path)
    path.write_text('name = "bot"\nmodel = "m"\n[provider]\nstream = 2\n')
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:4: expected provider.stream to be true or false"):
        load_profile_file(path)
