"""A world's split as a verifiers v1 taskset: one task per scenario and seed, our verdict as the reward.

Each :class:`RehearsalTask` has one per-rollout toolset, :class:`~._toolset.RehearsalToolset` (the
episode as an MCP server), so any verifiers harness that speaks MCP (``null``'s chat loop, ``bash``,
``codex``, ``claude-code``, ...) plays the episode with its own loop, and verifiers' interception
server carries its model calls. The task:

- opens with the scenario's system prompt (role, how messages arrive, the policies) and the customer's
  request;
- tallies each model response's usage into the rollout's state, which the toolset reports with the
  next step (the episode's tokens are measured: no external-mode caveat);
- stops the rollout once the episode has ended (``@vf.stop``: the ending tool was called, or the turn
  limit reached), so the harness does not go on calling tools of an ended episode;
- scores with one weighted reward, ``rehearsal``: the episode's reward under the toolset's reward
  profile (0.0 for a not-scored episode, which the ``not_scored`` metric flags), and the metrics
  ``verified``, ``rule_violated``, ``false_completion``, ``not_scored`` and ``turns`` (recorded, not summed).
  The verdict itself is on the trace's ``info["rehearsal"]`` (episode id, verdict, reward detail, run
  directory).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf

from ...worlds import load_world
from .._prompt import system_prompt
from ._toolset import RehearsalState, RehearsalToolset, RehearsalToolsetConfig


class RehearsalTaskData(vf.TaskData):  # type: ignore[misc]
    """One episode to play: a scenario of a world, and the reset seed."""

    world: str
    """The world's name."""
    scenario: str
    """The scenario's id."""
    split: str
    """The scenario's split (train, dev or holdout)."""
    seed: int = 0
    """The reset seed."""


class RehearsalTaskConfig(vf.TaskConfig):  # type: ignore[misc]
    """The task's knobs (``--env.taskset.task.*``)."""

    tools: RehearsalToolsetConfig = RehearsalToolsetConfig()
    """Where the episodes run and are recorded, and the reward profile."""


class RehearsalTask(vf.Task[RehearsalTaskData, RehearsalState, RehearsalTaskConfig]):  # type: ignore[misc]
    """One scenario and seed (see the module doc)."""

    @property
    def key(self) -> str:
        data = self.data
        return f"{data.world}/{data.scenario}#{data.seed}"

    @classmethod
    def toolsets(cls, config: RehearsalTaskConfig) -> list[Any]:
        return [RehearsalToolset(config.tools)]

    @vf.stop  # type: ignore[untyped-decorator]
    async def episode_ended(self, trace: vf.Trace) -> bool:
        return bool(trace.state.ended)

    @vf.stop  # type: ignore[untyped-decorator]
    async def model_usage(self, response: vf.Response, trace: vf.Trace) -> bool:
        """Never stops: tallies each model response's usage into the state, for the episode's next step to
        report (verifiers' response hooks that see the trace are its stop hooks)."""
        state: RehearsalState = trace.state
        state.model_calls += 1
        usage = response.usage
        if usage is None:
            state.unmeasured_calls += 1
        else:
            state.model_tokens += usage.prompt_tokens + usage.completion_tokens + (usage.cached_input_tokens or 0)
        return False

    async def finalize(self, trace: vf.Trace, runtime: Any) -> None:
        state: RehearsalState = trace.state
        trace.info["rehearsal"] = {"episode_id": state.episode_id, "ended_by": state.ended_by,
                                   "verdict": state.verdict, "reward": state.reward,
                                   "reward_detail": state.reward_detail, "run_dir": state.run_dir,
                                   "caveats": state.caveats, "model_calls": state.model_calls,
                                   "unmeasured_calls": state.unmeasured_calls}

    @vf.reward(weight=1.0)  # type: ignore[untyped-decorator]
    async def rehearsal(self, trace: vf.Trace) -> float:
        """The episode's reward under the profile (0.0 when not scored or never settled)."""
        value = trace.state.reward
        return float(value) if value is not None else 0.0

    @vf.metric  # type: ignore[untyped-decorator]
    async def outcomes(self, trace: vf.Trace) -> dict[str, float]:
        verdict = trace.state.verdict or {}
        outcome = verdict.get("outcome")
        return {"verified": float(outcome == "verified"), "rule_violated": float(outcome == "rule_violated"),
                "not_scored": float(outcome == "not_scored"),
                "false_completion": float(bool((verdict.get("metrics") or {}).get("false_completion"))),
                "turns": float(trace.state.turns)}


class RehearsalTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]
    """Which episodes the taskset holds (``--env.taskset.*``)."""

    world: str = "shop"
    """A world's name (or folder)."""
    split: str | None = "train"
    """train, dev or holdout (None: every scenario)."""
    seeds: int = 1
    """Tasks per scenario, with reset seeds 0 .. seeds-1."""
    instructions: str = ""
    """Appended to every system prompt (an agent profile's instructions)."""
    task: RehearsalTaskConfig = RehearsalTaskConfig()
    """Passed to every task."""


class RehearsalTaskset(vf.Taskset[RehearsalTask, RehearsalTasksetConfig]):  # type: ignore[misc]
    """A world's split as verifiers v1 tasks (``--env.taskset.id rehearsal-verifiers``)."""

    def load(self) -> Iterator[RehearsalTask]:
        cfg = self.config
        if cfg.seeds < 1:
            raise ValueError(f"seeds must be at least 1, got {cfg.seeds}")
        world = load_world(cfg.world)
        for scenario in world.scenarios(cfg.split):  # type: ignore[arg-type]
            prompt = system_prompt(world, scenario, cfg.instructions)
            for seed in range(cfg.seeds):
                yield RehearsalTask(RehearsalTaskData(
                    id=f"{world.name}/{scenario.id}#{seed}", name=f"{world.name}/{scenario.id}",
                    prompt=scenario.request, system_prompt=prompt, world=world.name, scenario=scenario.id,
                    split=scenario.split, seed=seed), cfg.task)
