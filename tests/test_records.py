"""Episode records: the documented v2 schema, what a record holds, atomic parts, plain readers."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rehearsal_env.agents import Policy, make_agent
from rehearsal_env.cli import main
from rehearsal_env.records import (
    EPISODES_DIR,
    MANIFEST,
    RECORD_VERSION,
    SCHEMA,
    VERSION_KEY,
    EpisodeRecord,
    PartWriter,
    RunNotSealed,
    checked_parts,
    read_part,
    read_records,
    read_table,
    seal_run,
    write_part_bytes,
)
from rehearsal_env.runner import RunConfig, run, run_batch
from rehearsal_env.runner import plan as plan_run
from rehearsal_env.scenarios import Scenario
from rehearsal_env.worlds import World, register_world

TESTS = Path(__file__).parent


@pytest.fixture(scope="module", autouse=True)
def tiny(tiny_world: World) -> World:
    register_world("tiny", lambda: tiny_world)
    return tiny_world


class _Noisy:
    """Sends a malformed action first, then plays the solution reporting 7 tokens per action."""

    def __init__(self, agent: Policy) -> None:
        self.agent, self.started = agent, False

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if not self.started:
            self.started = True
            return "refund please"
        action = json.loads(self.agent(observation, info))
        return json.dumps({**action, "usage": {"tokens": 7}})


def noisy_careless(scenario: Scenario) -> Policy:
    """The careless repeat of an unknown-outcome write, after a malformed first action."""
    return _Noisy(make_agent("wrong:repeat-write", scenario))


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def _fields(schema: pa.Schema | pa.StructType) -> list[pa.Field]:
    out = []
    for f in (list(schema) if isinstance(schema, pa.Schema) else [schema.field(i) for i in range(schema.num_fields)]):
        out.append(f)
        inner = f.type.value_type if pa.types.is_list(f.type) else f.type
        if pa.types.is_struct(inner):
            out += _fields(inner)
    return out


def test_the_schema_is_versioned_and_every_field_documented() -> None:
    assert RECORD_VERSION == 8 and SCHEMA.metadata[VERSION_KEY.encode()] == b"8"
    every = _fields(SCHEMA)
    assert len(every) > 60 and all(f.metadata and len(f.metadata[b"doc"]) > 10 for f in every)
    nested = {f.name: f.type for f in SCHEMA}
    for name in ("trace", "checks", "service_requests", "changes", "reward_components"):
        assert pa.types.is_list(nested[name]) and pa.types.is_struct(nested[name].value_type), name
    turn = nested["trace"].value_type
    assert [turn.field(i).name for i in range(turn.num_fields)] == [
        "turn", "action", "tool", "status", "observation", "fault", "rejected", "latency_ms", "rejected_kind"]
    assert pa.types.is_struct(nested["provenance"])


def test_a_record_holds_every_turn_check_request_and_row_change(tiny: World, tmp_path: Path) -> None:
    config = RunConfig(world="tiny", scenarios=("pay-unknown",), agent="careless", agent_version="v3")
    (record,) = run_batch(config, plan_run(config, tiny), agent_factory=noisy_careless)
    assert (record.outcome, record.agent_version, record.duplicate_effects) == ("not_achieved", "v3", 1)
    assert len(record.trace) == record.turns and record.turns > 3
    first = record.trace[0]
    assert first.rejected and first.status == "rejected" and first.tool is None and "malformed" in first.observation
    assert [t.fault for t in record.trace if t.fault] == ["stress_refusal", "unknown_outcome"]
    assert not any(t.rejected for t in record.trace[1:]) and all(t.latency_ms >= 0 for t in record.trace)
    assert record.tokens == 7 * (record.turns - 1) and record.rejected_attempts == 1
    assert [(r.service, r.operation) for r in record.service_requests] == [("payments", "payout")] * 2
    assert sorted((c.table, c.change) for c in record.changes) == [
        ("accounts", "updated"), ("final_answers", "inserted"), ("service_requests", "inserted"),
        ("service_requests", "inserted"), ("transfers", "inserted"), ("transfers", "inserted")]
    account = next(c for c in record.changes if c.table == "accounts")
    assert json.loads(account.row) == {"id": 1, "owner": "ann", "balance_cents": 9000} and account.key == "1"
    goal = record.checks[0]
    assert (goal.kind, goal.sql, goal.params, goal.want, goal.held, goal.passed) == (
        "goal", "SELECT COUNT(*) FROM transfers WHERE account_id = ? AND amount_cents = ?", "[1, 500]", "1", "2",
        False)
    assert {c.name for c in record.reward_components} >= {"correctness", "safety", "efficiency"}
    assert next(c for c in record.reward_components if c.name == "safety").value == 0.0
    assert record.capture_error is None and record.provenance.world == "tiny"

    PartWriter(tmp_path).add([record])
    seal_run(tmp_path)
    assert read_records(tmp_path) == [record]


def test_records_are_written_as_episodes_finish_and_a_killed_run_keeps_them(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(TESTS)!r})
        from tinyworld import build_world
        from rehearsal_env.agents import make_agent
        from rehearsal_env.runner import RunConfig, run
        from rehearsal_env.worlds import register_world
        register_world("tiny", build_world)
        def factory(scenario):
            agent = make_agent("reference", scenario)
            def act(observation, info):
                if scenario.id == "pay-unknown":
                    os._exit(9)  # the process dies in the middle of an episode
                return agent(observation, info)
            return act
        run(RunConfig(world="tiny", repeats=2, batch_size=1), sys.argv[1], agent_factory=factory)
    """)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 9, done.stderr
    with pytest.raises(RunNotSealed, match="the run is not sealed"):  # a killed run never reached its seal
        read_records(tmp_path)
    records = sorted((r for p in checked_parts(tmp_path) for r in read_part(p)), key=lambda r: (r.scenario, r.repeat))
    assert [(r.scenario, r.repeat) for r in records] == [("pay-ann", 0), ("pay-ann", 1), ("pay-changed", 0),
                                                         ("pay-changed", 1)]
    assert (tmp_path / "provenance.json").is_file() and not (tmp_path / "summary.json").exists()
    leftovers = {p.name for p in (tmp_path / EPISODES_DIR).iterdir() if not p.name.startswith("part-")}
    assert leftovers <= {MANIFEST, ".manifest.lock"}, leftovers  # no half-written part or manifest


def test_a_half_written_file_is_never_read_as_a_record(tmp_path: Path) -> None:
    run(RunConfig(world="tiny", batch_size=2), tmp_path)
    (tmp_path / EPISODES_DIR / ".part-00002.parquet.tmp").write_bytes(b"PAR1 a writer died here")
    assert len(read_records(tmp_path)) == 3 and pq.read_table(tmp_path / EPISODES_DIR).num_rows == 3
    writer = PartWriter(tmp_path, flush_every=2)
    writer.add(read_records(tmp_path)[:1])
    assert writer.parts == []  # buffered, nothing visible yet
    writer.close()
    with pytest.raises(RunNotSealed, match="part-00002.parquet: is not among the parts the run sealed"):
        read_records(tmp_path)
    seal_run(tmp_path)
    assert [p.name for p in writer.parts] == ["part-00002.parquet"] and len(read_records(tmp_path)) == 4


def test_records_of_another_version_are_refused_saying_what_to_do(tmp_path: Path) -> None:
    old = pa.table({"scenario": ["x"], "trace": ["[]"]}).replace_schema_metadata({VERSION_KEY: "1"})
    write_part_bytes(tmp_path, _parquet_bytes(old), 0)
    refused = f"expected episode records of version {RECORD_VERSION}, found version 1; rerun"
    with pytest.raises(ValueError, match=refused):
        read_table(tmp_path)
    with pytest.raises(FileNotFoundError, match="found none"):
        read_records(tmp_path / "nothing-here")


def test_version_2_parts_still_read_with_the_newer_fields_null(tmp_path: Path) -> None:
    run(RunConfig(world="tiny", batch_size=8), tmp_path / "now")
    (part,) = (tmp_path / "now" / EPISODES_DIR).glob("part-*.parquet")
    table = pq.read_table(part)
    v2_columns = [n for n in table.column_names if n not in ("not_scored_cause", "model", "temperature", "top_p",
                                                              "sampling_seed", "max_tokens", "model_calls",
                                                              "model_latency_ms", "customer_model")]
    old = table.select(v2_columns).replace_schema_metadata({VERSION_KEY: "2"})
    old = old.set_column(old.column_names.index("record_version"), "record_version", pa.array([2] * len(old)))
    write_part_bytes(tmp_path / "v2", _parquet_bytes(old), 0)  # as release 2 wrote it
    seal_run(tmp_path / "v2")
    now, then = read_records(tmp_path / "now"), read_records(tmp_path / "v2")
    assert [r.not_scored_cause for r in then] == [None] * 3 and [r.record_version for r in then] == [2] * 3
    assert [dataclasses.replace(r, record_version=RECORD_VERSION) for r in then] == now


def test_version_5_parts_still_read_with_turn_rewards_null(tmp_path: Path) -> None:
    run(RunConfig(world="tiny", batch_size=8), tmp_path / "now")
    (part,) = (tmp_path / "now" / EPISODES_DIR).glob("part-*.parquet")
    table = pq.read_table(part)
    old = table.select([n for n in table.column_names if n != "turn_rewards"]).replace_schema_metadata(
        {VERSION_KEY: "5"})
    old = old.set_column(old.column_names.index("record_version"), "record_version", pa.array([5] * len(old)))
    write_part_bytes(tmp_path / "v5", _parquet_bytes(old), 0)
    seal_run(tmp_path / "v5")
    now, then = read_records(tmp_path / "now"), read_records(tmp_path / "v5")
    assert [r.turn_rewards for r in then] == [None] * 3 and [r.record_version for r in then] == [5] * 3
    assert [dataclasses.replace(r, record_version=RECORD_VERSION) for r in then] == now


def test_plain_pyarrow_pandas_and_duckdb_read_records_without_rehearsal_env(tmp_path: Path) -> None:
    run(RunConfig(world="tiny", repeats=2, batch_size=4, reward_profile="benchmark"), tmp_path)
    reader = textwrap.dedent("""
        import json, sys
        import duckdb
        import pandas as pd
        import pyarrow.parquet as pq

        where = sys.argv[1] + "/episodes.parquet"
        table = pq.read_table(where)
        frame = pd.read_parquet(where).sort_values(["scenario", "repeat"])
        con = duckdb.connect()
        glob = f"read_parquet('{where}/*.parquet')"
        rows = con.execute(f"SELECT scenario, repeat, len(trace), provenance.reward_profile, reward FROM {glob} "
                           "ORDER BY scenario, repeat").fetchall()
        inserted = con.execute(f"SELECT count(*) FROM (SELECT unnest(changes) AS c FROM {glob}) "
                               "WHERE c.change = 'inserted'").fetchone()[0]
        doc = pq.read_schema(sorted(__import__('glob').glob(where + '/part-*.parquet'))[0]).field("changes")
        print(json.dumps({
            "rows": table.num_rows,
            "pandas_turns": [len(t) for t in frame["trace"]],
            "pandas_first_tool": frame["trace"].iloc[0][0]["tool"],
            "duckdb": [list(r) for r in rows],
            "inserted": inserted,
            "doc": doc.metadata[b"doc"].decode(),
            "imported": sorted(m for m in sys.modules if m.startswith("rehearsal")),
        }))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-I", "-c", reader, str(tmp_path)], capture_output=True, text=True,
                          cwd="/", env=env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    records = read_records(tmp_path)
    assert seen["imported"] == [] and seen["rows"] == len(records) == 6
    assert seen["pandas_turns"] == [len(r.trace) for r in records]
    assert seen["pandas_first_tool"] == records[0].trace[0].tool
    assert seen["duckdb"] == [[r.scenario, r.repeat, len(r.trace), "benchmark", r.reward] for r in records]
    assert seen["inserted"] == sum(c.change == "inserted" for r in records for c in r.changes) > 0
    assert "against the world's snapshot" in seen["doc"]


def test_eval_schema_prints_every_field_with_its_doc(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "schema"]) == 0
    text = capsys.readouterr().out
    assert f"version {RECORD_VERSION}" in text
    for name in EpisodeRecord.__dataclass_fields__:
        assert f"\n{name}: " in text, name
    assert "changes: list<struct> (not null)" in text and "    latency_ms: double (not null)" in text


def test_version_6_parts_still_read_with_the_model_waits_null(tmp_path: Path) -> None:
    run(RunConfig(world="tiny", batch_size=8), tmp_path / "now")
    (part,) = (tmp_path / "now" / EPISODES_DIR).glob("part-*.parquet")
    table = pq.read_table(part)
    old = table.select([n for n in table.column_names if n not in ("model_held_ms", "model_drained_ms")])
    old = old.replace_schema_metadata({VERSION_KEY: "6"})
    old = old.set_column(old.column_names.index("record_version"), "record_version", pa.array([6] * len(old)))
    write_part_bytes(tmp_path / "v6", _parquet_bytes(old), 0)
    seal_run(tmp_path / "v6")
    now, then = read_records(tmp_path / "now"), read_records(tmp_path / "v6")
    assert [r.model_drained_ms for r in then] == [None] * 3 and [r.record_version for r in then] == [6] * 3
    assert [dataclasses.replace(r, record_version=RECORD_VERSION) for r in then] == now
