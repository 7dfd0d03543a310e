"""The gate's live attempt on a compiled world: a model agent tries every validated job once (``--live-agent``).

As for a published version (``rehearsal world build --live-agent``), an attempt is evidence for a person
reading the page, never a verdict on the job: the gate decided which jobs are fair before it, and a model
failing keeps nothing out. It runs after the nine phases, on the world folder as packaged, with the
application started as the phases start it; each attempt is appended to ``.compile/live_attempts.jsonl``
as it ends, and ``.compile/LIVE.md`` lists the latest attempt of each job. It is not a phase: its results are not
inputs of any phase, and nothing in the world folder changes (every file there is part of the world
version).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._atomic import write_atomic
from ..agents import AgentProfile, Endpoint, ModelAgents
from ..versions import LiveAttempt, attempt, describe_attempt, latest_by_scenario, load_attempts, save_attempts
from ._phases import STATE_DIR
from ._sandboxed import start_runtime
from ._worldfolder import load

PAGE = "LIVE.md"
"""The page of the latest attempt of each job, beside the phases' results (rewritten by every live attempt)."""


def attempt_compiled(world_dir: Path, plan: Mapping[str, Any], profile: AgentProfile,
                     endpoint: Endpoint) -> tuple[LiveAttempt, ...]:
    """Let ``profile`` attempt every job of the compiled world in ``world_dir`` (``plan``: the plan phase's result,
    where the application runs); record the attempts and list them on ``.compile/LIVE.md``."""
    world = load(world_dir, "live attempt")
    state = world_dir.parent / STATE_DIR
    agents = ModelAgents(profile, endpoint)
    attempts: list[LiveAttempt] = []
    with start_runtime(world, world_dir, dict(plan), "live attempt") as runtime:
        for scenario in world.scenarios():  # each saved as it ends: a killed attempt keeps the jobs it tried
            attempts.append(attempt(world, scenario, runtime, agents))
            save_attempts(state, attempts[-1:])
    _show(state / PAGE, world.name, list(latest_by_scenario(load_attempts(state)).values()))
    return tuple(attempts)


def summary_line(attempts: Sequence[LiveAttempt]) -> str:
    """How the attempts ended, in one line (``3 verified, 5 not_achieved``)."""
    counts = Counter(a.outcome for a in attempts)
    return ", ".join(f"{counts[o]} {o}" for o in ("verified", "not_achieved", "rule_violated", "not_scored")
                     if counts[o]) or "none"


def _show(page: Path, name: str, attempts: Sequence[LiveAttempt]) -> None:
    lines = [f"# {name}: live attempts\n",
             f"A model agent tried each job once after the gate: {summary_line(attempts)}. An attempt is "
             "evidence, never a verdict: a job a model fails stays in (../world/COMPILE.md gives each job's proof).\n"]
    lines += [f"- `{a.scenario}`: {describe_attempt(a)}" for a in attempts]
    write_atomic(page, "\n".join(lines) + "\n")
