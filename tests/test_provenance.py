"""Provenance: the blob `rehearsal health` returns, runs write and records carry; comparability; the frozen clock."""

from __future__ import annotations

import dataclasses
import json
from datetime import date
from pathlib import Path

import pytest

from rehearsal_env.checks import Check
from rehearsal_env.cli import main
from rehearsal_env.clock import CLI, ENV, RUN_CONFIG, WORLD_ANCHOR, frozen_world
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.provenance import (
    FIELDS,
    REPORTED,
    binary_sha256,
    catalog_problems,
    comparable,
    differing_fields,
    lookup,
    provenance_from_dict,
    provenance_of,
)
from rehearsal_env.records import read_records
from rehearsal_env.runner import RunConfig, run
from rehearsal_env.schema import col
from rehearsal_env.worlds import World, register_world


@pytest.fixture(scope="module", autouse=True)
def tiny(tiny_world: World) -> World:
    register_world("tiny", lambda: tiny_world)
    return tiny_world


def health(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code = main(["health", *args])
    blob = json.loads(capsys.readouterr().out)
    assert code == 0
    return blob


def test_health_returns_every_contract_field_and_runs_write_and_stamp_the_same_blob(
        tiny: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blob = health(capsys, "--world", "tiny")
    for name in (*FIELDS, *REPORTED):
        assert lookup(blob, name) is not None, name
    assert blob["world_version"].startswith("wv_") and len(blob["build"]["binary_sha256"]) == 64
    assert blob["reward_profile"] == "outcome" and blob["capabilities"]["freeze_time_source"] == WORLD_ANCHOR
    assert blob["dataset"]["data_anchor"] == tiny.data_anchor.isoformat()
    assert blob["capabilities"]["catalog_match"] is True and blob["suite"]["scenarios"] == 3

    run(RunConfig(world="tiny"), tmp_path)
    assert json.loads((tmp_path / "provenance.json").read_text()) == blob
    records = read_records(tmp_path)
    assert len(records) == 3 and all(r.provenance.to_dict() == blob for r in records)
    assert all(r.world_version == blob["world_version"] for r in records)


def test_health_under_a_profile_names_its_reward_contract(capsys: pytest.CaptureFixture[str]) -> None:
    from rehearsal_env.rewards import load_profile

    blob = health(capsys, "--world", "tiny", "--profile", "rl")
    assert (blob["reward_profile"], blob["reward_version"]) == ("rl", load_profile("rl").reward_version)
    assert main(["health", "--world", "tiny", "--profile", "nope"]) == 2
    assert "known profiles" in capsys.readouterr().err


def _fewer_scenarios(world: World) -> World:
    every = world.generate_scenarios
    return dataclasses.replace(world, name="tiny-less", generate_scenarios=lambda w: list(every(w))[:2])


def _more_schema(world: World) -> World:
    table = world.tables[0]
    wider = dataclasses.replace(table, columns=(*table.columns, col("nickname", null=True)))
    own = tuple(t for t in world.tables if t.name not in ("service_requests", "final_answers"))
    rows = world.generate_rows

    def wider_rows(seed: int, anchor: date) -> dict:
        out = dict(rows(seed, anchor))
        out[table.name] = [(*r, None) for r in out[table.name]]
        return out

    return dataclasses.replace(world, name="tiny-wide", tables=(wider, *own[1:]), generate_rows=wider_rows)


def test_runs_on_other_profiles_suites_or_world_versions_are_not_comparable(tiny: World, tmp_path: Path) -> None:
    register_world("tiny-less", lambda: _fewer_scenarios(tiny))
    register_world("tiny-wide", lambda: _more_schema(tiny))
    blobs = {}
    for name, config in {"base": RunConfig(world="tiny"), "rl": RunConfig(world="tiny", reward_profile="rl"),
                         "suite": RunConfig(world="tiny-less"), "schema": RunConfig(world="tiny-wide"),
                         "again": RunConfig(world="tiny", seed=5)}.items():
        run(config, tmp_path / name)
        blobs[name] = json.loads((tmp_path / name / "provenance.json").read_text())
    base = blobs["base"]
    assert comparable(base, blobs["again"]).comparable
    profile = comparable(base, blobs["rl"])
    assert not profile.comparable and profile.differs == ("reward_version", "reward_profile")
    suite = comparable(base, blobs["suite"])
    assert not suite.comparable and set(suite.differs) == {"world_version", "capabilities.suite_fingerprint"}
    schema = comparable(base, blobs["schema"])
    assert not schema.comparable and {"world_version", "dataset.catalog_hash"} <= set(schema.differs)
    assert "dataset.catalog_hash: " in schema.explain(base, blobs["schema"])
    assert differing_fields(base, blobs["schema"]) == list(schema.differs)


def test_the_build_is_reported_but_does_not_decide(tiny: World) -> None:
    a = provenance_of(tiny).to_dict()
    b = json.loads(json.dumps(a))
    b["build"]["binary_sha256"] = "0" * 64
    verdict = comparable(a, b)
    assert verdict.comparable and verdict.notes == ("build.binary_sha256",)
    assert binary_sha256() == a["build"]["binary_sha256"]


def test_who_pinned_the_clock_does_not_matter_whether_anybody_did_does(tiny: World) -> None:
    by_cli = provenance_of(tiny, None, CLI).to_dict()
    by_python = provenance_of(tiny, None, RUN_CONFIG).to_dict()
    nobody = provenance_of(tiny, None, None).to_dict()
    assert comparable(by_cli, by_python).comparable
    assert comparable(by_cli, nobody).differs == ("capabilities.freeze_time_source",)


def test_a_different_day_is_a_different_dataset(tiny: World) -> None:
    moved = provenance_of(frozen_world(tiny, "2026-02-01"), None, RUN_CONFIG).to_dict()
    differs = differing_fields(provenance_of(tiny).to_dict(), moved)
    assert {"dataset.data_anchor", "world_version"} <= set(differs)
    assert moved["dataset"]["data_anchor"] == "2026-02-01"


def test_catalog_match_is_false_when_the_suite_reads_what_the_catalog_lacks(tiny: World) -> None:
    every = tiny.generate_scenarios

    def broken(w: World) -> list:
        first, *rest = every(w)
        bad = (Check("reads a table the world lacks", "SELECT COUNT(*) FROM refunds", "eq", 0),
               Check("reads a column the world lacks", "SELECT COUNT(*) FROM accounts WHERE colour = 'red'", "eq", 0))
        return [dataclasses.replace(first, hard_rules=(*first.hard_rules, *bad), scope=("ledger",)), *rest]

    world = dataclasses.replace(tiny, name="tiny-broken", generate_scenarios=broken)
    problems = catalog_problems(world)
    assert len(problems) == 3
    assert "'pay-ann'" in problems[0] and "no such table: refunds" in problems[0]
    assert "no such column: colour" in problems[1] and "scope table 'ledger'" in problems[2]
    blob = provenance_of(world)
    assert blob.capabilities.catalog_match is False and blob.capabilities.catalog_problems == problems
    assert provenance_of(tiny).capabilities.catalog_match is True


def test_the_blob_round_trips_and_a_foreign_blob_is_refused(tiny: World) -> None:
    blob = provenance_of(tiny)
    assert provenance_from_dict(json.loads(json.dumps(blob.to_dict()))) == blob
    foreign = blob.to_dict()
    del foreign["world_version"]
    with pytest.raises(ValueError, match=r"missing \['world_version'\]"):
        provenance_from_dict(foreign)


def test_freeze_time_pins_now_and_the_day_the_data_is_seeded_for(tiny: World, tmp_path: Path) -> None:
    env = RehearsalEnv("pay-ann", tiny, freeze_time="2026-02-01", stress=False)
    assert env.world.now == "2026-02-01T12:00:00" and env.freeze_time_source == ENV
    env.reset()
    env.step('{"tool": "pay_out", "args": {"account_id": 1, "amount_cents": 500}}')
    assert env.db.query("SELECT created_at FROM transfers") == [("2026-02-01T12:00:00",)]
    assert env.provenance().dataset.data_anchor == "2026-02-01"
    plain = RehearsalEnv("pay-ann", tiny)
    assert plain.world is tiny and plain.freeze_time_source == WORLD_ANCHOR
    assert plain.provenance().dataset.data_anchor == tiny.data_anchor.isoformat()

    run(RunConfig(world="tiny", scenarios=("pay-ann",), freeze_time="2026-02-01"), tmp_path)
    (record,) = read_records(tmp_path)
    assert record.provenance.capabilities.freeze_time_source == RUN_CONFIG
    assert record.provenance.dataset.data_anchor == "2026-02-01"
    assert any('"created_at": "2026-02-01T12:00:00"' in c.row for c in record.changes if c.table == "transfers")


def test_freeze_time_on_the_command_line_and_bad_days(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--world", "tiny", "--scenario", "pay-ann", "--freeze-time", "2026-02-03",
                 "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    blob = json.loads((tmp_path / "provenance.json").read_text())
    assert blob["capabilities"]["freeze_time_source"] == CLI and blob["dataset"]["data_anchor"] == "2026-02-03"
    assert health(capsys, "--world", "tiny", "--freeze-time", "2026-02-03")["dataset"] == blob["dataset"]
    assert main(["health", "--world", "tiny", "--freeze-time", "3 Feb"]) == 2
    assert "expected a day as YYYY-MM-DD" in capsys.readouterr().err


def test_freezing_shop_moves_the_seeded_rows_with_the_day() -> None:
    from rehearsal_env.worlds import load_world

    shop = load_world("shop")
    moved = frozen_world(shop, "2027-01-15")
    placed = sorted(row[3] for row in moved.seed_rows()["orders"])
    assert "2026-12-01" < placed[-1] < "2027-01-16" and moved.now == "2027-01-15T12:00:00"
    assert max(row[3] for row in shop.seed_rows()["orders"]) < "2026-03-03"
    assert frozen_world(shop, "2027-01-15") is moved and frozen_world(shop, None) is shop
