"""The Docker sandbox backend on the reviews world: episodes, reset, isolation, clock, cleanup.

Needs a Docker daemon and the sandbox base image (``python -m rehearsal_env.sandbox`` builds it
with debootstrap, about three minutes, once per recipe; tests never download anything). Skips
without them, unless REHEARSAL_REQUIRE_DOCKER=1, which makes that a failure. One sandbox is
started for the module; at the end no container, network or volume of ours may be left.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from rehearsal_env.agents import make_agent
from rehearsal_env.backends import DatabaseError, digest, open_database
from rehearsal_env.cli import main
from rehearsal_env.env import RehearsalEnv
from rehearsal_env.runner import run_episode
from rehearsal_env.sandbox import SandboxDatabase
from rehearsal_env.verdict import Outcome
from rehearsal_env.worlds import World, load_world


def _require_docker() -> None:
    from rehearsal_env.sandbox import base_image_built, docker_available

    why = docker_available()
    if why is None and not base_image_built():
        why = ("the sandbox base image is not built; build it with `python -m rehearsal_env.sandbox` "
               "(debootstrap downloads Debian packages, which tests never do)")
    if why is not None:
        if os.environ.get("REHEARSAL_REQUIRE_DOCKER") == "1":
            pytest.fail(f"REHEARSAL_REQUIRE_DOCKER=1 but {why}")
        pytest.skip(why)


@pytest.fixture(scope="module")
def reviews() -> World:
    return load_world("reviews")


@pytest.fixture(scope="module")
def sandbox(reviews: World) -> Iterator[SandboxDatabase]:
    """One running reviews sandbox for the module; afterwards nothing of ours may be left."""
    _require_docker()
    from rehearsal_env.sandbox import ours_left

    db = open_database(reviews, "docker")
    assert isinstance(db, SandboxDatabase)
    try:
        yield db
    finally:
        db.close()
    assert ours_left() == [], f"the sandbox left these behind: {ours_left()}"


def _play(world: World, db: SandboxDatabase, scenario_id: str, solution: str) -> Outcome:
    scenario = world.scenario(scenario_id)
    env = RehearsalEnv(scenario, world, database=db)
    return run_episode(env, make_agent(solution, scenario)).verdict.outcome


def test_every_reference_is_verified_in_the_sandbox(reviews: World, sandbox: SandboxDatabase) -> None:
    for scenario in reviews.scenarios():
        assert _play(reviews, sandbox, scenario.id, "reference") is Outcome.VERIFIED, scenario.id


def test_null_and_wrong_solutions_are_caught(reviews: World, sandbox: SandboxDatabase) -> None:
    for scenario_id in ("comment-once-atlas-04", "merge-not-ready-dune-02", "label-changed-cobalt-08",
                        "request-review-atlas-09"):
        assert _play(reviews, sandbox, scenario_id, "null") is Outcome.NOT_ACHIEVED
        for wrong in reviews.scenario(scenario_id).wrong:
            assert _play(reviews, sandbox, scenario_id, wrong.name) in (Outcome.NOT_ACHIEVED,
                                                                        Outcome.RULE_VIOLATED), wrong.name


def test_a_repeated_comment_is_two_comments_and_a_duplicate_email(reviews: World, sandbox: SandboxDatabase) -> None:
    scenario = reviews.scenario("comment-once-atlas-04")
    env = RehearsalEnv(scenario, reviews, database=sandbox)
    verdict = run_episode(env, make_agent("wrong:repeat-write", scenario)).verdict
    failed = [c.name for c in verdict.checks if not c.passed]
    assert "Exactly one maintainer comment on the pull request" in failed
    assert verdict.metrics.duplicate_effects == 1


def test_reset_reaches_the_first_digest_and_probe(reviews: World, sandbox: SandboxDatabase) -> None:
    db = sandbox
    db.reset()  # the last test's episode left its end state
    first = digest(db)
    status, _ = db.request("POST", "/repos/beacon/pulls/4/comments", query={}, body={"body": "x"},
                           headers={"X-Actor": "review-bot", "Idempotency-Key": "t-1"})
    assert status == 200 and digest(db) != first
    db.reset()
    assert digest(db) == first == db.first_digest
    assert db.probe() == db.first_probe


def test_a_change_the_reset_cannot_see_fails_the_reset(reviews: World, sandbox: SandboxDatabase) -> None:
    import psycopg

    db = sandbox
    dbname = db.database_name
    with psycopg.connect(db.sandbox.admin_dsn(dbname), autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # no triggers: the reset log misses it
        conn.execute("UPDATE repositories SET description = 'changed behind the reset' WHERE name = 'atlas'")
    try:
        with pytest.raises(DatabaseError, match="did not reset to its first state.*probe differs"):
            db.reset()
    finally:
        with psycopg.connect(db.sandbox.admin_dsn(dbname), autocommit=True) as conn:
            conn.execute("SET session_replication_role = replica")
            conn.execute("UPDATE repositories SET description = 'Maps and geocoding library' WHERE name = 'atlas'")
    db.reset()


def test_the_emulator_records_every_request_and_replays_a_key(sandbox: SandboxDatabase) -> None:
    db = sandbox
    db.reset()
    headers = {"X-Actor": "triage-bot", "Idempotency-Key": "t-2"}
    body = {"reviewer": "review-bot"}
    first = db.request("POST", "/repos/cobalt/pulls/1/requested_reviewers", query={}, body=body,
                       headers=headers)
    assert first[0] == 200
    rows = db.query("SELECT service, operation, idempotency_key, requested_at FROM service_requests")
    assert rows == [("email", "send", "t-2:review_requested:1", "2025-06-30T12:00:00")]
    db.reset()
    assert db.query("SELECT COUNT(*) FROM service_requests") == [(0,)]


def test_isolation_and_clock_are_measured_and_hold(sandbox: SandboxDatabase) -> None:
    facts = {f.name: f for f in sandbox.isolation_facts()}
    assert set(facts) == {"network", "route", "outside", "host", "clock"}
    assert all(f.holds for f in facts.values()), [f for f in facts.values() if not f.holds]
    assert "application clock 2025-06-30T12:00:00; application OS clock on 2025-06-30" in facts["clock"].detail


def test_leftovers_of_a_dead_owner_are_removed(sandbox: SandboxDatabase) -> None:
    from rehearsal_env.sandbox import LABEL, clean_leftovers
    from rehearsal_env.sandbox._docker import OWNER, docker_client

    dead = f"{socket.gethostname()}-{2**22 + 12345}"  # above pid_max's default: no such process
    from rehearsal_env.sandbox._hostguard import guarded_networks, install_guard

    network = docker_client().networks.create("rh-test-leftover", internal=True,
                                              labels={LABEL: "network", OWNER: dead})
    install_guard(network.id)
    assert network.id[:12] in guarded_networks()
    assert clean_leftovers(again=True) >= 1
    import docker.errors

    with pytest.raises(docker.errors.NotFound):
        docker_client().networks.get(network.id)
    assert network.id[:12] not in guarded_networks()  # its host rule went with it


def test_rehearsal_run_picks_the_sandbox_for_a_world_whose_tools_call_its_application(
        reviews: World, tmp_path: Path) -> None:
    """`rehearsal run --world reviews` without --backend runs on docker (its tools need the application)."""
    _require_docker()
    scenario = reviews.scenarios(split="dev")[0].id
    out = tmp_path / "run"
    assert main(["run", "--world", "reviews", "--scenario", scenario, "--out", str(out)]) == 0
    assert json.loads((out / "run.json").read_text())["config"]["backend"] == "docker"
    assert json.loads((out / "summary.json").read_text())["verified"] == 1


def test_an_application_that_dies_mid_episode_is_restarted_and_the_call_is_a_tool_error(reviews: World) -> None:
    """A dead application is the call's tool crash, not the sandbox's: it is restarted and the episode goes on
    (a sandbox that cannot be brought back is not scored: tests/test_sandbox_limits.py)."""
    _require_docker()
    db = open_database(reviews, "docker")
    assert isinstance(db, SandboxDatabase)
    try:
        scenario = reviews.scenarios("dev")[0]
        env = RehearsalEnv(scenario, reviews, database=db, stress=False)
        observation, info = env.reset(seed=0)
        action = make_agent("reference", scenario)(observation, info)
        db.sandbox.containers["app"].container.kill()  # the application dies; its database still answers
        observation, _, terminated, _, info = env.step(action)
        assert not terminated and json.loads(observation)["tool_result"]["status"] == "error", observation
        assert len(env.episode.tool_crashes) == 1 and db.restarts == 1
        observation, _, terminated, _, _ = env.step(action)  # the same call again, on the restarted application
        assert json.loads(observation)["tool_result"]["status"] == "ok", observation
        env.reset(seed=0)
        assert digest(db) == db.first_digest and db.probe() == db.first_probe
    finally:
        db.close()
