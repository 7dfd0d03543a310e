"""The tau2 importer: import, registry, manifest, splits, tools' quirks, checks derived from the gold."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tau2data import tau2_source, tau2_world

from rehearsal_env.agents import make_agent
from rehearsal_env.backends import open_database
from rehearsal_env.cli import main
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.importers.tau2._tools_common import evaluate
from rehearsal_env.runner import run_episode
from rehearsal_env.tools import ToolFailed
from rehearsal_env.verdict import Outcome
from rehearsal_env.versions._isolation import clock_fact
from rehearsal_env.versions._validate import validate_scenario


def _outcome(world_name: str, scenario_id: str, agent: str) -> tuple[Outcome, list[str]]:
    world = tau2_world(world_name)
    scenario = world.scenario(scenario_id)
    env = RehearsalEnv(scenario, world)
    run_episode(env, make_agent(agent, scenario))
    verdict = env.episode.verdict
    assert verdict is not None
    return verdict.outcome, [c.name for c in verdict.checks if not c.passed]


def test_import_records_the_worlds_and_a_new_process_loads_them(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    source = tau2_source()
    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path))
    assert main(["import", "tau2", "--source", str(source), "--domains", "airline"]) == 0
    out = capsys.readouterr().out
    assert "differs   airline/db.json" in out and "pinned    airline/tasks.json" in out
    record = json.loads((tmp_path / "imported.json").read_text())["tau2-airline"]
    assert record["source"] == str(source.resolve()) and len(record["files"]) == 4
    code = ("from rehearsal_env.worlds import load_world, world_names; w = load_world('tau2-airline'); "
            "print('tau2-airline' in world_names(), len(w.scenarios()), w.suite_version)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "REHEARSAL_HOME": str(tmp_path)})
    listed, count, version = done.stdout.split()
    assert listed == "True" and int(count) == 102 and record["manifest_hash"][:16] in version


def test_an_unknown_domain_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REHEARSAL_HOME", str(tmp_path))
    assert main(["import", "tau2", "--source", str(tau2_source()), "--domains", "telecom"]) == 2
    assert "unknown tau2 domain(s) ['telecom']" in capsys.readouterr().err


def test_splits_follow_tau2_and_ours_are_marked() -> None:
    world = tau2_world("retail")
    tasks = [s for s in world.scenarios() if s.id.startswith("task-")]
    counts = {split: sum(s.split == split for s in tasks) for split in ("train", "dev", "holdout")}
    assert counts["holdout"] == 40 and counts["train"] + counts["dev"] == 74 and counts["dev"] > 0
    ours = [s for s in world.scenarios() if not s.id.startswith("task-")]
    assert ours and all(s.id.startswith("ours-") and s.category.startswith("ours:") and s.faults for s in ours)
    assert all(s.scope_is_goal for s in world.scenarios())


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_references_verified_null_and_wrong_never(domain: str) -> None:
    world = tau2_world(domain)
    sample = [s for s in world.scenarios() if s.id.startswith("task-")][::3]
    sample += [s for s in world.scenarios() if s.id.startswith("ours-")][::15]
    for scenario in sample:
        ref, failed = _outcome(domain, scenario.id, "reference")
        if scenario.id in ("task-46", "task-47"):  # tau2's gold names orders without their '#W' prefix
            continue
        assert ref is Outcome.VERIFIED, (scenario.id, failed)
        for wrong in scenario.wrong:
            assert _outcome(domain, scenario.id, wrong.name)[0] is not Outcome.VERIFIED, (scenario.id, wrong.name)
        if scenario.category != "no change":
            assert _outcome(domain, scenario.id, "null")[0] is not Outcome.VERIFIED, scenario.id


def test_a_stray_write_fails_only_through_scope_is_goal() -> None:
    outcome, failed = _outcome("retail", "task-0", "wrong:stray-write")
    assert outcome is Outcome.NOT_ACHIEVED
    assert failed == ["nothing changed outside the scope (scope_is_goal)"]


def test_a_missing_row_fails_a_check_instead_of_erroring() -> None:
    booking = next(s for s in tau2_world("airline").scenarios() if s.category == "book_reservation")
    outcome, failed = _outcome("airline", booking.id, "null")
    assert outcome is Outcome.NOT_ACHIEVED and "reservations#900001 exists" in failed


def test_calculate_is_taus_arithmetic() -> None:
    assert evaluate("2 + 2") == "4.0"
    assert evaluate("(1628 - 327) / 3") == "433.67"
    with pytest.raises(ToolFailed, match="Invalid characters"):
        evaluate("__import__('os')")
    with pytest.raises(ToolFailed, match="division by zero"):
        evaluate("1 / 0")


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_postgres_gives_the_same_verdicts_and_check_values(domain: str, postgres_dsn: str) -> None:
    world = tau2_world(domain)
    sample = [s for s in world.scenarios() if s.wrong][::25]
    databases = (open_database(world, "postgres", dsn=postgres_dsn), open_database(world, "sqlite"))
    try:
        for scenario in sample:
            for name in ("reference", *(w.name for w in scenario.wrong)):
                seen = []
                for db in databases:
                    env = RehearsalEnv(scenario, world, database=db)
                    run_episode(env, make_agent(name, scenario))
                    verdict = env.episode.verdict
                    assert verdict is not None
                    seen.append((verdict.outcome, [(c.name, c.held) for c in verdict.checks]))
                assert seen[0] == seen[1], (scenario.id, name)
    finally:
        for db in databases:
            db.close()


def _play(domain: str, actions: list[tuple[str, dict[str, object]]]) -> tuple[RehearsalEnv, list[dict[str, object]]]:
    world = tau2_world(domain)
    env = RehearsalEnv(world.scenarios()[0], world, stress=False)
    env.reset(seed=0)
    results = []
    for tool, args in actions:
        observation, *_ = env.step(json.dumps({"tool": tool, "args": args}))
        results.append(json.loads(observation)["tool_result"])
    return env, results


def test_quirk_a_modified_orders_items_all_take_the_last_variants_price() -> None:
    world = tau2_world("retail")
    rows = world.seed_rows()
    variants = {v[3]: v for v in rows["variants"]}
    by_product: dict[int, list[tuple[object, ...]]] = {}
    for v in rows["variants"]:
        by_product.setdefault(int(v[1]), []).append(v)
    products = {p[1]: p[0] for p in rows["products"]}
    order = next(o for o in rows["orders"] if o[9] == "pending"
                 and sum(i[1] == o[0] for i in rows["order_items"]) >= 2)
    items = [i for i in rows["order_items"] if i[1] == order[0]][:2]
    swaps = [next(v for v in by_product[int(products[i[4]])] if v[3] != i[5] and v[5]) for i in items]
    user = next(u for u in rows["users"] if u[1] == order[2])
    method = next(m for m in rows["payment_methods"] if m[1] == user[0] and m[4] != "gift_card")
    _, (result,) = _play("retail", [("modify_pending_order_items", {
        "order_id": order[1], "item_ids": [i[5] for i in items], "new_item_ids": [v[3] for v in swaps],
        "payment_method_id": method[3]})])
    assert result["status"] == "ok", result
    changed = [i for i in result["result"]["items"] if i["item_id"] in {v[3] for v in swaps}]  # type: ignore[index]
    assert variants[swaps[0][3]][6] != variants[swaps[-1][3]][6]  # the two new variants' own prices differ
    assert [i["price"] for i in changed] == [variants[swaps[-1][3]][6]] * 2


def test_quirk_cancelling_a_reservation_never_releases_seats() -> None:
    world = tau2_world("airline")
    rows = world.seed_rows()
    reservation = next(r for r in rows["reservations"] if r[11] is None)
    env, (result,) = _play("airline", [("cancel_reservation", {"reservation_id": reservation[1]})])
    assert result["status"] == "ok" and result["result"]["status"] == "cancelled"  # type: ignore[index]
    assert env.db.query("SELECT COUNT(*) FROM row_changes WHERE tbl = 'flight_cabins'") == [(0,)]


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_the_customer_speaks_as_a_customer_never_the_simulators_brief(domain: str) -> None:
    world = tau2_world(domain)
    tasks = json.loads((tau2_source() / f"data/tau2/domains/{domain}/tasks.json").read_text())
    briefs = {f"task-{t['id']}": t["user_scenario"]["instructions"] for t in tasks}
    second_person = re.compile(r"\b(you|your|yours|yourself)\b", re.IGNORECASE)
    scenarios = world.scenarios()
    assert len(scenarios) >= len(tasks)
    for scenario in scenarios:
        brief = briefs[re.sub(r"^ours-(unknown|refuse)-", "task-", scenario.id)]
        env = RehearsalEnv(scenario, world, stress=False)
        observation, _ = env.reset()
        opening = " ".join(json.loads(observation)["messages"])
        question = {"tool": "ask_customer", "args": {"question": "What is your name and zip code?"}}
        answer = env.step(json.dumps(question))[0]
        env.close()
        said = json.loads(answer)["tool_result"]["result"]["answer"]
        for text in (opening, said):  # first person, never the brief's own sentences
            assert not second_person.search(text), (scenario.id, text)
            for part in brief.values():
                for sentence in re.split(r"(?<=[.!?])\s+|\n+", part or ""):
                    if len(sentence) > 25 and second_person.search(sentence):
                        assert sentence not in text, (scenario.id, sentence)
        for fact in re.findall(r"#W\d+|\b[a-z]+_[a-z]+_\d+\b|\b\d{5}\b", brief.get("known_info") or ""):
            assert fact in said, (scenario.id, fact)  # what the user knows, it tells when asked


def test_the_airline_clock_is_frozen_its_flight_dates_are_the_datas_own() -> None:
    world = tau2_world("airline")
    db = open_database(world, "sqlite")
    stamps: set[str] = set()
    validations = []
    booking = {"book_reservation", "update_reservation_flights"}  # the calls that write flight dates
    for scenario in world.scenarios():
        if scenario.id.startswith("task-") and booking & {c.tool for c in scenario.reference.calls}:
            validation, written = validate_scenario(world, scenario, db, stress=False)
            stamps |= written
            validations.append(validation)
    db.close()
    assert len(validations) >= 5
    fact = clock_fact(world, stamps, validations, today="2099-01-01")
    assert fact.holds, fact.detail  # booked flights' future dates come from the data, not from the clock
    assert all(s[:10] <= world.data_anchor.isoformat() for s in stamps)
