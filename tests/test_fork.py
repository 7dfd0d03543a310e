"""Forks and checkpoints continue exactly as the uninterrupted episode (issue 23).

The property: over every world (shop, analytics, tau2 where its data is, a folder world) on SQLite and
PostgreSQL, with the stress layer on and scenarios with faults and changes of request, an episode played by
a random mixture of scripted agents (the reference, the wrong solutions) and adversarial actions
(malformed, unknown tools, random arguments, retries of made-up operations, early endings) is cut at
random turns; there it is forked and checkpointed. The fork's continuation, the restored checkpoint's
continuation (in this process and in a fresh interpreter), and the parent's own continuation, each with the
same actions, equal the uninterrupted episode: observations, database digest, outside-service ledger,
verdict and trace.

The database is compared by its touched rows at every cut (exact: every write is logged) and by the full
digest of every row at the first cut of each episode.

Size: ``REHEARSAL_FORK_EPISODES`` episodes per world and backend (default 1) with up to
``REHEARSAL_FORK_CUTS`` cut points each (default 3); ``REHEARSAL_FORK_EPISODES=40 REHEARSAL_FORK_CUTS=12``
gives thousands of cut points. The count checked is printed.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from forkcheck import outcome, world_of

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.agents import make_agent
from rehearsal_env.env import CheckpointError, read_header

EPISODES = int(os.environ.get("REHEARSAL_FORK_EPISODES", "1"))
CUTS = int(os.environ.get("REHEARSAL_FORK_CUTS", "3"))
NOTES = Path(__file__).parent / "worlds" / "notes"
WORLDS = ["builtin:shop", "builtin:analytics", "tau2:retail", f"folder:{NOTES}"]
CHECKED: dict[str, int] = {}


def _adversarial(rng: random.Random, env: RehearsalEnv) -> str:
    """One hostile or careless action: malformed text, unknown or foreign tools, random arguments."""
    tools = list(env.tools.values())
    pick = rng.randrange(9)
    if pick == 0:
        return rng.choice(["not json", "", "[]", '{"tool": 5}', '{"tool": "finish", "args": []}', "{" * 300,
                           '{"tool": "x" ' + "y" * 5000 + "}"])
    if pick == 1:
        return json.dumps({"tool": rng.choice(["drop_tables", "issue_refund_all", "get_ordr"]), "args": {}})
    if pick == 2:
        return json.dumps({"tool": "retry_operation", "args": {"operation_id": f"op-{rng.randrange(1, 9):04d}"}})
    if pick == 3:
        return json.dumps({"tool": "ask_customer", "args": {"question": rng.choice(
            ["What is your order number?", "email?", "anything else?", "which item"])}})
    if pick == 4:
        return json.dumps({"tool": "finish", "args": {"message": "done"}}) if rng.random() < 0.3 else "null"
    tool = rng.choice(tools)
    args: dict[str, Any] = {}
    for name, schema in tool.parameters.get("properties", {}).items():
        kind = schema.get("type")
        if kind == "integer":
            args[name] = rng.choice([rng.randrange(0, 4000), -1, 1, 2, 10 ** 12])
        elif kind == "number":
            args[name] = rng.choice([0.5, 10.0, -3.0, 1e9])
        elif kind == "boolean":
            args[name] = rng.random() < 0.5
        elif kind == "array":
            args[name] = [rng.randrange(0, 50) for _ in range(rng.randrange(3))]
        else:
            args[name] = rng.choice(["SELECT COUNT(*) FROM orders", "x' OR 1=1 --", "refund", "a@b.c", "",
                                     "SELECT * FROM customers LIMIT 3", "DELETE FROM orders", "2026-01-01"])
    if rng.random() < 0.2 and args:
        args.pop(rng.choice(list(args)))
    return json.dumps({"tool": tool.name, "args": args})


def _play(env: RehearsalEnv, rng: random.Random, seed: int) -> list[str]:
    """Play one episode with a seeded mixture policy; return its actions."""
    scenario = env.scenario
    names = ["reference", *(w.name for w in scenario.wrong)]
    agents = {n: make_agent(n, scenario) for n in names}
    careful = rng.random()
    obs, info = env.reset(seed=seed)
    actions: list[str] = []
    while True:
        roll = rng.random()
        if roll < careful:
            name = "reference" if rng.random() < 0.7 else rng.choice(names)
            action = agents[name](obs, info)
        else:
            action = _adversarial(rng, env)
        actions.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return actions


def _scenarios(world: Any, rng: random.Random) -> list[Any]:
    pool = list(world.scenarios())
    eventful = [s for s in pool if s.faults or s.change]
    return [rng.choice(eventful if eventful and rng.random() < 0.7 else pool) for _ in range(EPISODES)]


def _options(backend: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    return {"dsn": request.getfixturevalue("postgres_dsn")} if backend == "postgres" else {}


def _check_world(spec: str, backend: str, request: pytest.FixtureRequest) -> list[tuple[bytes, list[str], dict]]:
    """The property on one world and backend; returns (checkpoint, rest of the actions, expected outcome)
    triples for the subprocess test."""
    world = world_of(spec)
    options = _options(backend, request)
    rng = random.Random(f"{spec}/{backend}/{EPISODES}/{CUTS}")
    saved: list[tuple[bytes, list[str], dict]] = []
    for i, scenario in enumerate(_scenarios(world, rng)):
        seed = rng.randrange(1000)
        play = RehearsalEnv(scenario, world, backend=backend, **options)
        actions = _play(play, rng, seed)
        play.reset(seed=seed)  # the same actions again, uninterrupted
        expected_all = outcome(play, actions)
        cheap = {**expected_all, "digest": None}
        play.close()
        cuts = sorted(rng.sample(range(len(actions)), min(CUTS, len(actions))))
        parent = RehearsalEnv(scenario, world, backend=backend, **options)
        parent.reset(seed=seed)
        done = 0
        for number, cut in enumerate(cuts):
            for action in actions[done:cut]:
                parent.step(action)
            done = cut
            rest = actions[cut:]
            full = number == 0
            expected = {**(expected_all if full else cheap), "observations": expected_all["observations"][cut:]}
            fork = parent.fork()
            data = parent.checkpoint()
            assert read_header(data)["turn"] == cut
            restored = rehearsal_env.restore(data, world=world, **options)
            assert fork.episode.lineage is not None and fork.episode.lineage.parent_turn == cut
            assert fork.episode.lineage.parent_episode == parent.episode.id
            assert restored.episode.lineage is not None and restored.episode.lineage.kind == "restore"
            if full:
                assert fork.digest() == parent.digest() == restored.digest()
            # the fork goes first, all the way: the parent must not feel it
            got = outcome(fork, rest, digest=full)
            assert got == expected, f"fork of {scenario.id} at turn {cut} diverged ({spec}, {backend})"
            if len(rest) > 1:  # a fork of a fork, one step later
                second = restored.fork()
                restored.step(rest[0])
                second.step(rest[0])
                twice = outcome(second, rest[1:], digest=full)
                assert twice == {**expected, "observations": expected["observations"][1:]}
                second.close()
                assert outcome(restored, rest[1:], digest=full) == twice
            else:
                assert outcome(restored, rest, digest=full) == expected
            fork.close()
            restored.close()
            if i == 0 and len(saved) < 2:
                saved.append((data, rest, expected))  # the first is compared with its digest
            CHECKED[f"{spec.split(':')[0]}/{backend}"] = CHECKED.get(f"{spec.split(':')[0]}/{backend}", 0) + 1
        assert outcome(parent, actions[done:]) == {**expected_all,
                                                     "observations": expected_all["observations"][done:]}
        parent.close()
    return saved


def _restore_elsewhere(spec: str, dsn: str | None, saved: list[tuple[bytes, list[str], dict]]) -> None:
    job = {"world": spec, "dsn": dsn, "cases": [{"checkpoint": d.hex(), "actions": a, "digest": e["digest"] is not None}
                                                for d, a, e in saved]}
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "forkcheck.py")], input=json.dumps(job),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = [json.loads(line) for line in done.stdout.splitlines()]
    assert got == [json.loads(json.dumps(e)) for _, _, e in saved]


@pytest.mark.parametrize("spec", WORLDS)
def test_forks_and_checkpoints_continue_as_the_uninterrupted_episode_on_sqlite(
        spec: str, request: pytest.FixtureRequest) -> None:
    saved = _check_world(spec, "sqlite", request)
    if spec == "builtin:shop":
        _restore_elsewhere(spec, None, saved)


@pytest.mark.parametrize("spec", WORLDS)
def test_forks_and_checkpoints_continue_as_the_uninterrupted_episode_on_postgres(
        spec: str, request: pytest.FixtureRequest) -> None:
    saved = _check_world(spec, "postgres", request)
    if spec == f"folder:{NOTES}":
        _restore_elsewhere(spec, request.getfixturevalue("postgres_dsn"), saved)


def test_a_sqlite_checkpoint_restores_onto_postgres(request: pytest.FixtureRequest) -> None:
    env = rehearsal_env.make("shop/refund-item-0001")
    obs, info = env.reset(seed=3)
    agent = make_agent("reference", env.scenario)
    for _ in range(3):
        obs, *_, info = env.step(agent(obs, info))
    data = env.checkpoint()
    there = rehearsal_env.restore(data, backend="postgres", dsn=request.getfixturevalue("postgres_dsn"))
    assert there.digest() == env.digest()
    rest = [agent(obs, info)]
    assert outcome(there, rest)["observations"] == outcome(env, rest)["observations"]


# -- bad input and limits ------------------------------------------------------------------------------
@pytest.fixture
def midway() -> RehearsalEnv:
    env = rehearsal_env.make("shop/refund-item-0001")
    obs, info = env.reset(seed=0)
    env.step(make_agent("reference", env.scenario)(obs, info))
    return env


def test_an_ended_episode_a_closed_env_and_an_unreset_env_cannot_be_forked_or_checkpointed(
        midway: RehearsalEnv) -> None:
    fresh = rehearsal_env.make("shop/refund-item-0001")
    with pytest.raises(RuntimeError, match="never reset"):
        fresh.fork()
    midway.step('{"tool": "give_up", "args": {"reason": "x"}}')
    with pytest.raises(RuntimeError, match="has ended"):
        midway.fork()
    with pytest.raises(RuntimeError, match="has ended"):
        midway.checkpoint()
    midway.close()
    with pytest.raises(RuntimeError, match="closed env"):
        midway.checkpoint()


def test_truncated_edited_and_foreign_checkpoints_are_refused_saying_what_was_expected(midway: RehearsalEnv) -> None:
    data = midway.checkpoint()
    for cut in (5, 30, len(data) // 2, len(data) - 1):
        with pytest.raises(CheckpointError, match="truncated"):
            rehearsal_env.restore(data[:cut])
    with pytest.raises(CheckpointError, match="not a rehearsal-env checkpoint"):
        rehearsal_env.restore(b"PK\x03\x04" + data)
    flipped = bytearray(data)
    flipped[-5] ^= 1
    with pytest.raises(CheckpointError, match="edited or damaged"):
        rehearsal_env.restore(bytes(flipped))
    header = read_header(data)
    for field, value, said in (("world_version", "wv_0000000000000000", "world version"),
                               ("package_version", "0.0.1", "rehearsal-env 0.0.1"),
                               ("format", 99, "format version 99")):
        forged = _rewrite_header(data, {**header, field: value}, resign=True)
        with pytest.raises(CheckpointError, match=said):
            rehearsal_env.restore(forged)
    with pytest.raises(CheckpointError, match="edited or damaged"):
        rehearsal_env.restore(_rewrite_header(data, {**header, "turn": 9}, resign=False))
    with pytest.raises(CheckpointError, match="expected checkpoint bytes"):
        rehearsal_env.restore("not bytes")  # type: ignore[arg-type]
    with pytest.raises(CheckpointError, match="world 'shop'"):
        rehearsal_env.restore(data, world=rehearsal_env.load_world("analytics"))


def _rewrite_header(data: bytes, header: dict[str, Any], *, resign: bool) -> bytes:
    """The checkpoint with another header (re-signed as an honest writer of that version would)."""
    import hashlib
    import struct

    from rehearsal_env.env._checkpoint import MAGIC

    start = len(MAGIC) + 4 + struct.unpack_from(">I", data, len(MAGIC))[0]
    body = data[start:]
    if resign:
        fields = {k: v for k, v in header.items() if k != "digest"}
        canon = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
        header = {**header, "digest": hashlib.sha256(canon + b"\x00" + body).hexdigest()}
    head = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    return MAGIC + struct.pack(">I", len(head)) + head + body


def test_forks_share_no_mutable_state_and_records_name_their_parent(midway: RehearsalEnv) -> None:
    from rehearsal_env.records import record_episode

    fork = midway.fork()
    assert fork.db is not midway.db and fork.episode.journal is not midway.episode.journal
    assert fork.episode.events is not midway.episode.events and fork.episode.customer is not midway.episode.customer
    fork.step('{"tool": "give_up", "args": {"reason": "branch"}}')
    assert not midway.episode.ended and midway.episode.turn == 1
    record = record_episode(fork.episode, run_id="r", agent="a", agent_version="v", repeat=0, seed=0,
                            backend="sqlite", stress=True, provenance=fork.provenance())
    assert (record.parent_episode, record.parent_turn, record.parent_kind) == (midway.episode.id, 1, "fork")
    assert record.episode_id is None and len(record.trace) == 2


def test_forking_is_not_an_agent_action(midway: RehearsalEnv) -> None:
    obs, *_ , info = midway.step('{"tool": "fork", "args": {}}')
    assert info["status"] == "rejected" and "fork" not in midway.tools


def test_report_how_many_cut_points_were_checked() -> None:
    print(f"\nfork/checkpoint cut points checked: {sum(CHECKED.values())} {dict(sorted(CHECKED.items()))}")


def test_rehearsal_replay_hands_a_recorded_episode_to_another_agent_at_turn_k(tmp_path: Path, capsys) -> None:
    from rehearsal_env.cli import main

    careless = rehearsal_env.load_world("shop").scenario("refund-item-0001").wrong[0].name
    assert main(["run", "--world", "shop", "--agent", careless, "--scenario", "refund-item-0001",
                 "--out", str(tmp_path / "run")]) == 0
    out = tmp_path / "replay.jsonl"
    assert main(["replay", str(tmp_path / "run"), "--scenario", "refund-item-0001", "--turn", "1",
                 "--agent", "reference", "--out", str(out)]) == 0
    new = json.loads(out.read_text().splitlines()[0])
    assert new["outcome"] == "verified" and new["parent_turn"] == 1 and new["parent_kind"] == "fork"
    assert new["parent_episode"].endswith(f"/refund-item-0001/{careless}/0")
    assert "then reference -> verified" in capsys.readouterr().out
    assert main(["replay", str(tmp_path / "run"), "--scenario", "refund-item-0001", "--turn", "9",
                 "--agent", "reference"]) == 2
    assert "--turn must be 0..1" in capsys.readouterr().err
