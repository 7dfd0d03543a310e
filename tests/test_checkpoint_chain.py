"""Incremental checkpoints (issue 37): a full checkpoint and the turns' delta records restore as a full one would.

The property, on SQLite and PostgreSQL, over shop, analytics and the notes folder world with the stress layer
on: episodes played by a mixture of the reference, the wrong solutions and hostile actions are checkpointed by a
:class:`CheckpointChain` after every turn (a full checkpoint every few turns, to cross the boundaries). At every
turn the chain's bytes hold exactly the state a full checkpoint would (merged payload equal to
``env.checkpoint()``'s), and at random turns the chain's bytes, restored, continue as the uninterrupted episode
(observations, database, ledger, verdict, trace).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from forkcheck import outcome, world_of

import rehearsal_env
from rehearsal_env import RehearsalEnv
from rehearsal_env.agents import make_agent
from rehearsal_env.env import CheckpointChain, CheckpointError
from rehearsal_env.env._chain import merge_records
from rehearsal_env.env._checkpoint import DELTA_MAGIC, decode, delta_record, read_header

NOTES = Path(__file__).parent / "worlds" / "notes"
WORLDS = ["builtin:shop", "builtin:analytics", f"folder:{NOTES}"]


def _hostile(rng: random.Random, env: RehearsalEnv) -> str:
    tool = rng.choice(list(env.tools.values()))
    args = {name: rng.choice([1, 2, 3, "x", "", 10 ** 12]) for name in tool.parameters.get("properties", {})}
    return rng.choice(["not json", json.dumps({"tool": "retry_operation", "args": {"operation_id": "op-0001"}}),
                       json.dumps({"tool": tool.name, "args": args})])


def _actions(env: RehearsalEnv, rng: random.Random, seed: int) -> list[str]:
    names = ["reference", *(w.name for w in env.scenario.wrong)]
    agents = {n: make_agent(n, env.scenario) for n in names}
    obs, info = env.reset(seed=seed)
    actions: list[str] = []
    while True:
        action = agents[rng.choice(names)](obs, info) if rng.random() < 0.8 else _hostile(rng, env)
        actions.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return actions


def _merged(env: RehearsalEnv, data: bytes) -> dict[str, Any]:
    checkpoint = decode(data, env.world)
    payload = dict(checkpoint.payload)
    if checkpoint.records:
        payload = merge_records(payload, checkpoint.records, [t.name for t in env.db.tables])
    return json.loads(json.dumps(payload))


def _check(spec: str, backend: str, options: dict[str, Any], episodes: int, replay: bool = False) -> int:
    world = world_of(spec)
    rng = random.Random(f"chain/{spec}/{backend}")
    eventful = [s for s in world.scenarios() if s.faults or s.change] or list(world.scenarios())
    checked = 0
    for _ in range(episodes):
        scenario, seed = rng.choice(eventful), rng.randrange(1000)
        env = RehearsalEnv(scenario, world, backend=backend, **options)
        actions = _actions(env, rng, seed)
        env.reset(seed=seed)
        expected = outcome(env, actions, digest=False)
        env.reset(seed=seed)
        chain = CheckpointChain(env, every=rng.choice([2, 3, 5, 1000]), replay=replay)
        cuts = set(rng.sample(range(len(actions)), min(3, len(actions))))
        for turn, action in enumerate(actions):
            full, _ = chain.take()
            data = chain.data()
            if not replay:
                assert _merged(env, data) == _merged(env, env.checkpoint()), (spec, backend, turn, full)
            if turn in cuts:
                back = rehearsal_env.restore(data, world=world, backend=backend, resume=True, **options)
                if replay:  # the turns taken again reach the state a full checkpoint holds
                    assert _merged(back, back.checkpoint()) == _merged(env, env.checkpoint()), (spec, turn)
                got = outcome(back, actions[turn:], digest=False)
                back.close()
                want_obs = expected["observations"][turn:]
                assert got["observations"] == want_obs, (spec, backend, turn)
                assert {k: got[k] for k in ("delta", "verdict")} == {k: expected[k] for k in ("delta", "verdict")}
                checked += 1
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        env.close()
    return checked


@pytest.mark.parametrize("spec", WORLDS)
def test_a_chain_restores_as_a_full_checkpoint_on_sqlite(spec: str) -> None:
    assert _check(spec, "sqlite", {}, episodes=3) > 0


@pytest.mark.parametrize("spec", ["builtin:shop", f"folder:{NOTES}"])
def test_a_chain_restores_as_a_full_checkpoint_on_postgres(spec: str, request: pytest.FixtureRequest) -> None:
    assert _check(spec, "postgres", {"dsn": request.getfixturevalue("postgres_dsn")}, episodes=2) > 0


@pytest.mark.parametrize("spec", WORLDS)
def test_a_chain_of_turn_records_replays_to_the_same_state_on_sqlite(spec: str) -> None:
    assert _check(spec, "sqlite", {}, episodes=3, replay=True) > 0


def test_a_chain_of_turn_records_replays_to_the_same_state_on_postgres(request: pytest.FixtureRequest) -> None:
    assert _check("builtin:shop", "postgres", {"dsn": request.getfixturevalue("postgres_dsn")}, episodes=2,
                  replay=True) > 0


def test_turn_records_keep_a_raising_policy_and_refuse_a_replay_that_diverges() -> None:
    env = rehearsal_env.make("shop/refund-item-0001")
    obs, info = env.reset(seed=0)
    agent = make_agent("reference", env.scenario)
    chain = CheckpointChain(env, every=100, replay=True)
    chain.take()
    obs, *_, info = env.step(agent(obs, info))
    full, first = chain.take()
    assert full is False
    env.policy_failed(KeyError("the policy's own bug"))  # kept as its type's name and message
    full, record = chain.take()
    assert not full and b'"raised":["KeyError"' in record
    back = rehearsal_env.restore(chain.data(), resume=True)
    assert [t.action for t in back.episode.trace] == [t.action for t in env.episode.trace]
    assert [t.latency_ms for t in back.episode.trace] == [t.latency_ms for t in env.episode.trace]
    assert _merged(back, back.checkpoint()) == _merged(env, env.checkpoint())
    back.close()
    records = [first, record]
    full_bytes = chain.data()[:len(chain.data()) - sum(map(len, records))]
    previous = bytes.fromhex(read_header(full_bytes)["digest"])
    forged = b""
    for i, kept in enumerate(records):  # a validly chained record whose observation is not what a replay gives
        body = json.loads(kept[len(DELTA_MAGIC) + 4:-32])
        if i == 1:
            body["observation"] = "0" * len(body["observation"])
        piece, previous = delta_record(previous, json.dumps(body).encode())
        forged += piece
    with pytest.raises(CheckpointError, match="replaying turn 2 gave another observation"):
        rehearsal_env.restore(full_bytes + forged)
    env.step(12345)  # type: ignore[arg-type]  # an input a turn record cannot keep: a full checkpoint instead
    assert chain.take()[0] is True
    env.close()


def test_an_episode_with_a_model_customer_is_kept_as_delta_records() -> None:
    from rehearsal_env.agents import Endpoint, ModelCustomer

    world = rehearsal_env.load_world("shop")
    scenario = world.scenario("refund-item-0001")
    env = RehearsalEnv(scenario, world, customer=ModelCustomer.for_model(scenario, "m", Endpoint(base_url="http://127.0.0.1:9/v1")))
    obs, info = env.reset(seed=0)
    agent = make_agent("reference", scenario)
    chain = CheckpointChain(env, every=100, replay=True)
    taken = []
    for _ in range(3):
        taken.append(chain.take())
        obs, *_, info = env.step(agent(obs, info))
    assert [full for full, _ in taken] == [True, False, False]
    assert all(b'"act"' not in record for _, record in taken[1:])  # its answers would be asked of the model again
    env.close()


def test_delta_records_edited_dropped_or_reordered_are_refused() -> None:
    env = rehearsal_env.make("shop/refund-item-0001")
    obs, info = env.reset(seed=0)
    agent = make_agent("reference", env.scenario)
    chain = CheckpointChain(env, every=100)
    records = []
    for _ in range(3):
        full, record = chain.take()
        if not full:
            records.append(record)
        obs, _, _, _, info = env.step(agent(obs, info))
    full_bytes = chain.data()[:len(chain.data()) - sum(map(len, records))]
    assert len(records) == 2
    rehearsal_env.restore(full_bytes + records[0] + records[1]).close()
    with pytest.raises(CheckpointError, match="edited, dropped or reordered"):
        rehearsal_env.restore(full_bytes + records[1])
    with pytest.raises(CheckpointError, match="edited, dropped or reordered"):
        rehearsal_env.restore(full_bytes + records[1] + records[0])
    edited = records[0].replace(b'"turn":', b'"turn": ', 1)
    with pytest.raises(CheckpointError, match="edited, dropped or reordered|cut short"):
        rehearsal_env.restore(full_bytes + edited)
    with pytest.raises(CheckpointError, match="cut short"):
        rehearsal_env.restore(full_bytes + records[0][:-5])
    with pytest.raises(CheckpointError, match="not a delta record|bytes appended"):
        rehearsal_env.restore(full_bytes + b"junk")
    env.close()


def test_a_chain_takes_a_full_checkpoint_every_k_turns_and_for_a_new_episode() -> None:
    env = rehearsal_env.make("shop/refund-item-0001")
    obs, info = env.reset(seed=0)
    agent = make_agent("reference", env.scenario)
    chain = CheckpointChain(env, every=3)
    kinds = []
    for _ in range(5):
        kinds.append(chain.take()[0])
        obs, _, _, _, info = env.step(agent(obs, info))
    env.reset(seed=1)
    kinds.append(chain.take()[0])
    assert kinds == [True, False, False, True, False, True]
    with pytest.raises(ValueError, match="every >= 1"):
        CheckpointChain(env, every=0)
    env.close()


def test_an_episode_reset_without_a_seed_is_not_kept_as_a_reset() -> None:
    env = rehearsal_env.make("shop/refund-item-0001")
    env.reset(seed=3)
    env.reset()  # continues the generator's state: no seed to reset to
    chain = CheckpointChain(env, replay=True)
    full, data = chain.take()
    assert full and "reset" not in decode(data, env.world).payload
    env.reset(seed=4)
    chain = CheckpointChain(env, replay=True)
    assert "reset" in decode(chain.take()[1], env.world).payload
    env.close()
