"""World version ids: equal content, equal id; any change to a part, a new id."""

from __future__ import annotations

import dataclasses
import json
from datetime import date
from pathlib import Path

import pytest

from rehearsal_env.checks import Check
from rehearsal_env.cli import main
from rehearsal_env.scenarios import Scenario
from rehearsal_env.tools import ToolKind
from rehearsal_env.versions import content_hashes, load_manifest, version_id_of, world_version
from rehearsal_env.worlds import World, load_world


@pytest.fixture(scope="module", params=["shop", "analytics"])
def shop(request: pytest.FixtureRequest) -> World:
    """Each built-in world in turn (named ``shop`` for the first)."""
    return load_world(request.param)


def test_id_is_stable_for_equal_content(shop: World) -> None:
    vid = world_version(shop)
    assert vid.startswith("wv_") and len(vid) == 3 + 16
    assert world_version(dataclasses.replace(shop)) == vid
    assert world_version(dataclasses.replace(shop, description=shop.description)) == vid


def _one_scenario_changed(shop: World) -> World:
    def generate(world: World) -> list[Scenario]:
        first, *rest = shop.generate_scenarios(world)
        extra = Check("and one more check", "SELECT COUNT(*) FROM refunds", "ge", 0)
        return [dataclasses.replace(first, goal_checks=(*first.goal_checks, extra)), *rest]

    return dataclasses.replace(shop, generate_scenarios=generate)


def _one_tool_changed(shop: World) -> World:
    first, *rest = shop.tools
    schema = {**first.parameters, "description": "changed"}
    return dataclasses.replace(shop, tools=(dataclasses.replace(first, parameters=schema), *rest))


def _tool_kind_changed(shop: World) -> World:
    first, *rest = shop.tools
    kind: ToolKind = "write" if first.kind == "read" else "read"
    return dataclasses.replace(shop, tools=(dataclasses.replace(first, kind=kind), *rest))


def _schema_changed(shop: World) -> World:
    table = shop.tables[0]  # a new index: the DDL changes, the rows keep their shape
    indexed = dataclasses.replace(table, indexes=(*table.indexes, (table.columns[1].name,)))
    return dataclasses.replace(shop, tables=(indexed, *shop.tables[1:]))


@pytest.mark.parametrize("change", [
    pytest.param(_one_scenario_changed, id="scenario"),
    pytest.param(lambda w: dataclasses.replace(w, generate_scenarios=lambda x: w.generate_scenarios(x)[1:]),
                 id="scenario-removed"),
    pytest.param(_one_tool_changed, id="tool-schema"),
    pytest.param(_tool_kind_changed, id="tool-kind"),
    pytest.param(lambda w: dataclasses.replace(w, tools=w.tools[:-1]), id="tool-removed"),
    pytest.param(_schema_changed, id="schema"),
    pytest.param(lambda w: dataclasses.replace(w, seed=w.seed + 1), id="seed"),
    pytest.param(lambda w: dataclasses.replace(w, data_anchor=date(2026, 3, 3)), id="data-anchor"),
    pytest.param(lambda w: dataclasses.replace(w, roles=w.roles[:1]), id="roles"),
    pytest.param(lambda w: dataclasses.replace(w, policies=w.policies[1:]), id="policies"),
])
def test_id_changes_with_any_part(shop: World, change) -> None:  # type: ignore[no-untyped-def]
    assert world_version(change(shop)) != world_version(shop)


def test_id_covers_reward_profiles(shop: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REHEARSAL_PROFILES_DIR", str(tmp_path))
    empty = world_version(shop)
    (tmp_path / "benchmark.toml").write_text('name = "benchmark"\n')
    with_profile = world_version(shop)
    (tmp_path / "benchmark.toml").write_text('name = "benchmark"\nstep_penalty = 0.01\n')
    assert len({empty, with_profile, world_version(shop)}) == 3


def test_world_build_and_page_from_the_command_line(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    shop = load_world("shop")
    vid = world_version(shop)
    assert main(["world", "build", "shop", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"world shop {vid}: published at {tmp_path / 'shop' / vid}")
    n = len(shop.scenarios())
    assert f"{n} scenarios validated, {n} in the version, 0 kept out" in out
    assert "network  n/a  not applicable: embedded database, no application network" in out
    manifest = load_manifest(shop, root=tmp_path)
    assert manifest.version.id == vid and manifest.in_use == tuple(s.id for s in shop.scenarios())
    content = json.loads((tmp_path / "shop" / vid / "content.json").read_text())
    assert version_id_of(content_hashes(content)) == vid  # anyone can re-hash the published content
    html, md = tmp_path / "shop.html", tmp_path / "shop.md"
    assert main(["world", "show", "shop", "--versions", str(tmp_path), "--html", str(html),
                 "--markdown", str(md)]) == 0
    page = md.read_text()
    for heading in ("## Validation", "## Kept out", "## Withdrawn", "## Reset and isolation", "## Content"):
        assert heading in page
    assert f"| {shop.scenarios()[0].id} | {shop.scenarios()[0].split} |" in page
    assert "Prompt for a model agent, role support_agent: system message" in page and "tokens with the opening" in page
    assert "<h2>Reset and isolation</h2>" in html.read_text() and vid in html.read_text()


def test_world_show_page_needs_a_published_version(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["world", "show", "shop", "--versions", str(tmp_path), "--markdown", "-"]) == 2
    assert "run `rehearsal world build shop` first" in capsys.readouterr().err
