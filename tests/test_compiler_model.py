"""The world compiler with a model (the project's scripted OpenAI-protocol server, over real HTTP and the openai
SDK): unfair proposals are kept out with the right reason, a repairable one is repaired, garbage is one error.

The reviews application runs as local processes on a private PostgreSQL server (skipped without it, see
tests/test_compiler.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_compiler import DESCRIBE, REVIEWS, _require, app_processes

from rehearsal_env.agents.testing import ModelServer, Reply
from rehearsal_env.compiler import JOBS_SCHEMA, PHASES, CompileError, ModelConfig, compile_world, read_jobs
from rehearsal_env.worlds import load_world_folder


def job(job_id: str, request: str, calls: list[dict[str, Any]], check: dict[str, Any]) -> dict[str, Any]:
    return {"id": job_id, "request": request, "reference": {"calls": calls}, "goal_checks": [check]}


def call(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool": tool, "args": args}


def state_is(pr_id: int, state: str) -> dict[str, Any]:
    return {"name": f"pull request {pr_id} is {state}", "sql": "SELECT state FROM pull_requests WHERE id = ?",
            "params": [pr_id], "op": "eq", "want": state}


CLOSE = [call("get_pull_request", repo="beacon", number=4), call("close_pull_request", repo="beacon", number=4)]
PROPOSALS = {"jobs": [
    job("count-users", "Please make sure we have users.", [call("list_repositories")],
        {"name": "there are users", "sql": "SELECT COUNT(*) FROM users", "op": "ge", "want": 1}),
    job("merge-closed", "Please merge pull request #7 in atlas.", [call("merge_pull_request", repo="atlas", number=7)],
        state_is(7, "merged")),
    job("comment-unreachable", "Please comment 'Nice work' on the pull request about caching.",
        [call("post_comment", repo="atlas", number=3, body="Nice work")],
        {"name": "the comment is there", "sql": "SELECT COUNT(*) FROM comments WHERE pull_request_id = ? AND body = ?",
         "params": [3, "Nice work"], "op": "eq", "want": 1}),
    job("two-statements", "Please close pull request #10 in dune.",
        [call("close_pull_request", repo="dune", number=10)],
        {"name": "closed", "sql": "SELECT COUNT(*) FROM comments; SELECT 1", "op": "eq", "want": 1}),
    job("close-beacon-4", "Please close pull request #4 in beacon.", CLOSE, state_is(16, "merged")),
]}
REPAIRED = {"jobs": [job("close-beacon-4", "Please close pull request #4 in beacon.", CLOSE, state_is(16, "closed"))]}


@pytest.fixture(scope="module")
def with_model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    _require()
    out = tmp_path_factory.mktemp("model") / "reviews"
    with ModelServer() as server:
        server.script("compiler", Reply.text("Here are the jobs:\n```json\n" + json.dumps(PROPOSALS) + "\n```"),
                      Reply.text(json.dumps(REPAIRED)))
        result = compile_world(REVIEWS, out, describe=DESCRIBE,
                               model=ModelConfig("compiler", server.base_url, seed=7), repairs=2)
        requests = list(server.requests)
    return result, requests, out


def test_unfair_proposals_are_kept_out_with_the_right_reason(with_model: Any) -> None:
    result, _, out = with_model
    kept_out = {j["id"]: j["reason"] for j in result.phases["validate"]["kept_out"]}
    assert kept_out["count-users"].startswith("the checks do not fail when nothing is done"), kept_out
    assert kept_out["merge-closed"].startswith("the reference solution does not pass"), kept_out
    assert kept_out["comment-unreachable"].startswith("a needed fact is not reachable: the job needs repo='atlas'")
    assert kept_out["two-statements"].startswith("malformed: check 'closed' is refused"), kept_out
    assert "(the model did not repair it)" in kept_out["count-users"]
    page = (out / "world" / "COMPILE.md").read_text()
    assert all(f"`{name}`" in page for name in kept_out)


def test_a_repairable_proposal_is_repaired_and_kept(with_model: Any) -> None:
    result, requests, out = with_model
    kept = {j["id"]: j for j in result.phases["validate"]["kept"]}
    assert kept["close-beacon-4"]["origin"] == "model" and kept["close-beacon-4"]["repair_rounds"] == 1
    assert len(requests) == 2  # the proposals, then one repair round with every refused job and its reason
    refused = json.loads(requests[1]["messages"][1]["content"])["refused"]
    assert {r["job"]["id"] for r in refused} == {"count-users", "merge-closed", "comment-unreachable",
                                                 "close-beacon-4"}
    world = load_world_folder(out / "world")
    assert "close-beacon-4" in {s.id for s in world.scenarios()}
    author = result.phases["author"]["model"]
    assert author["prompt_version"] == "compile-author/1" and author["seed"] == 7 and author["proposed"] == 5
    # the jobs' schema asked of the endpoint on every request (and recorded), so a small model answers jobs
    assert author["response_format"] == "json_schema"
    assert all(r["response_format"] == {"type": "json_schema", "json_schema": {"name": "jobs", "schema": JOBS_SCHEMA}}
               for r in requests), requests
    assert result.summary["from_model"] == 1


def test_a_model_answering_garbage_is_one_error_and_keeps_the_phases_done(with_model: Any, tmp_path: Path) -> None:
    _, _, out = with_model
    again = tmp_path / "garbage"
    shutil.copytree(out, again)
    with ModelServer() as server:
        server.script("other", Reply.text("I'm sorry, I can't write jobs."))
        with pytest.raises(CompileError) as caught:
            compile_world(REVIEWS, again, describe=DESCRIBE,
                          model=ModelConfig("other", server.base_url, response_format="none"))
    assert "response_format" not in server.requests[0]  # an endpoint without JSON mode is asked for none
    message = str(caught.value)
    assert message.startswith("compile phase author: expected the model to answer a JSON object")
    assert "\n" not in message
    assert (again / ".compile" / "06-adapt.json").is_file()
    assert not app_processes(again)
    with ModelServer() as server:  # an answer cut off at max_tokens: said so, with the way out
        server.script("other", Reply(content='{"jobs": [{"id": "close-', finish_reason="length"))
        with pytest.raises(CompileError) as caught:
            compile_world(REVIEWS, again, describe=DESCRIBE, model=ModelConfig("other", server.base_url, max_tokens=9))
    assert str(caught.value).startswith("compile phase author: expected the model's JSON object of jobs to end "
                                        "within max_tokens (9); the answer was cut off there"), caught.value
    assert "raise --max-tokens" in str(caught.value)


def test_the_live_attempt_shows_each_job_tried_and_keeps_every_job(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``--live-agent``: after the nine phases (all skipped on a compile already done), a model agent tries every
    validated job once on the application; .compile/LIVE.md lists each attempt; a model that fails keeps nothing
    out and changes no phase result and no file of the world folder (so not its version)."""
    from rehearsal_env.agents import Endpoint, model_profile
    from rehearsal_env.cli import main
    from rehearsal_env.identity import world_version

    _require()
    out = tmp_path / "reviews"
    first = compile_world(REVIEWS, out, describe=DESCRIBE)
    manifest = (out / ".compile" / "manifest.json").read_text()
    folder = {p: p.read_bytes() for p in first.folder.rglob("*") if p.is_file()}
    with ModelServer(world=load_world_folder(first.folder)) as server:  # its solver plays each job's reference
        assert main(["world", "compile", str(REVIEWS), "--describe", str(DESCRIBE), "--out", str(out),
                     "--live-agent", "openai:solver", "--base-url", server.base_url]) == 0
        jobs = first.summary["jobs"]
        assert f"live attempts by openai:solver: {jobs} verified" in capsys.readouterr().out
        server.script("weak", *[Reply.call("give_up", reason="I cannot do this")] * jobs)
        weak = compile_world(REVIEWS, out, describe=DESCRIBE, live=(model_profile("weak"),
                                                                  Endpoint(base_url=server.base_url)))
    assert weak.skipped == PHASES[1:] and {a.outcome for a in weak.live} == {"not_achieved"}  # inspect always runs
    assert len(weak.live) == jobs and weak.summary == first.summary  # nothing kept out
    assert (out / ".compile" / "manifest.json").read_text() == manifest
    assert {p: p.read_bytes() for p in first.folder.rglob("*") if p.is_file()} == folder
    assert world_version(load_world_folder(first.folder)) == first.summary["world_version"]
    attempts = (out / ".compile" / "live_attempts.jsonl").read_text().splitlines()
    assert len(attempts) == 2 * jobs  # appended, never rewritten
    page = (out / ".compile" / "LIVE.md").read_text()  # the latest attempt of each job
    assert f"{jobs} not_achieved" in page and "openai:weak: not_achieved (gave_up" in page
    assert "openai:solver" not in page
    assert not app_processes(out)


def test_an_answer_is_read_as_json_wherever_it_stands() -> None:
    """The first JSON object holding ``jobs``, fenced or not; a raw line break inside a text, which a grammar-
    constrained endpoint lets through, is read too; no such object is one error."""
    assert read_jobs('Here:\n```json\n{"note": 1}\n{"jobs": [{"id": "a\nb"}, 3]}\n```') == [
        {"id": "a\nb", "origin": "model"}]
    with pytest.raises(CompileError, match="expected the model to answer a JSON object"):
        read_jobs('{"jobs": {"id": "a"}}')
