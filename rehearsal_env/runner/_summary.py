"""The run summary: counts per outcome, mean reward and the run metrics, from records alone."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from ..agents import given_for, store_given
from ..records import RECORD_VERSION, checked_parts, part_version, write_bytes_atomic
from ..verdict import NotScoredCause
from ..versions import note_tool_crashes, version_dir
from ._plan import plan, write_provenance
from ._resolved import ResolvedRun
from ._stamp import NOT_WORLD_TOOLS

OUTCOMES = ("verified", "not_achieved", "rule_violated", "not_scored")
METRICS = ("false_completions", "duplicate_effects", "recovered", "unnecessary_interruptions",
           "rejected_attempts", "faults_injected")


class Summarized(Protocol):
    """What the summary reads of a record (an :class:`~rehearsal_env.records.EpisodeRecord` has it all)."""

    @property
    def outcome(self) -> str: ...
    @property
    def reward(self) -> float | None: ...
    @property
    def outcome_reward(self) -> float | None: ...
    @property
    def false_completion(self) -> bool: ...
    @property
    def duplicate_effects(self) -> int: ...
    @property
    def recovered(self) -> bool: ...
    @property
    def unnecessary_interruptions(self) -> int: ...
    @property
    def rejected_attempts(self) -> int: ...
    @property
    def faults_injected(self) -> int: ...
    @property
    def not_scored_cause(self) -> str | None: ...
    @property
    def tokens(self) -> int | None: ...
    @property
    def model_calls(self) -> int | None: ...
    @property
    def model_latency_ms(self) -> float | None: ...
    @property
    def tool_crashes(self) -> Sequence[Any] | None: ...
    @property
    def world_tool_calls(self) -> int | None: ...


class SummaryRow(NamedTuple):
    """The columns of a record the summary reads (see :class:`~rehearsal_env.records.EpisodeRecord`)."""

    outcome: str
    """verified / not_achieved / rule_violated / not_scored."""
    reward: float | None
    """The reward under the run's profile; None when not scored."""
    outcome_reward: float | None
    """1, 0, -1; None when not scored."""
    false_completion: bool
    """Said done while a goal check failed."""
    duplicate_effects: int
    """Repeated identical requests to outside services."""
    recovered: bool
    """A fault happened and the episode still verified cleanly."""
    unnecessary_interruptions: int
    """Customer contacts beyond what the scenario allows."""
    rejected_attempts: int
    """Actions not carried out."""
    faults_injected: int
    """Scenario faults injected."""
    not_scored_cause: str | None
    """The part that failed when not scored (world, database, provider, sandbox, worker); None when scored."""
    tokens: int | None
    """Tokens the agent reported; None when it reported none."""
    model_calls: int | None
    """Calls to the agent's model; None when the agent is not a model."""
    model_latency_ms: float | None
    """Wall time of those calls in ms; None when the agent is not a model."""
    tool_crashes: Sequence[Any] | None
    """The tool crashes of the episode (each with its ``tool``); None in records of version 3 and older."""
    world_tool_calls: int | None
    """Calls of the world's own tools carried out; None for an episode not played."""


def summary_row(record: Summarized) -> SummaryRow:
    """What the summary reads of one record."""
    return SummaryRow(*(getattr(record, name) for name in SummaryRow._fields))


def summary_rows(run_dir: str | Path) -> dict[tuple[str, int], SummaryRow]:
    """The summed columns of every record in a run directory by (scenario, repeat); no whole record is read.

    Raises:
        FileNotFoundError: no part files in ``run_dir``.
        ValueError: a part written with another record version; a damaged part; parts of several runs.
    """
    names = ["scenario", "repeat", *SummaryRow._fields]
    tables = []
    for path in checked_parts(run_dir):
        version = part_version(path)
        if version != str(RECORD_VERSION):
            raise ValueError(f"{path}: expected episode records of version {RECORD_VERSION}, found "
                             f"{version}; finish this run with the rehearsal-env release that started it")
        tables.append(pq.read_table(path, columns=names))
    table = pa.concat_tables(tables)
    columns = [table.column(name).to_pylist() for name in names]
    return {(row[0], row[1]): SummaryRow(*row[2:]) for row in zip(*columns, strict=True)}


def summary_of(records: Sequence[Summarized]) -> dict[str, Any]:
    """``summary.json``'s numbers. Not-scored episodes count in ``not_scored`` (and, by the part that failed,
    in ``not_scored_by_cause``) and nowhere else."""
    scored = [r for r in records if r.outcome != "not_scored"]
    out: dict[str, Any] = {"episodes": len(records)}
    for outcome in OUTCOMES:
        out[outcome] = sum(r.outcome == outcome for r in records)
    causes = [r.not_scored_cause or "unknown" for r in records if r.outcome == "not_scored"]
    out["not_scored_by_cause"] = {c: causes.count(c) for c in [*(c.value for c in NotScoredCause), "unknown"]
                                  if c in causes}
    rewards = [r.reward for r in scored if r.reward is not None]
    outcome_rewards = [r.outcome_reward for r in scored if r.outcome_reward is not None]
    out["mean_reward"] = sum(rewards) / len(rewards) if rewards else None
    out["mean_outcome_reward"] = sum(outcome_rewards) / len(outcome_rewards) if outcome_rewards else None
    out["false_completions"] = sum(r.false_completion for r in scored)
    out["duplicate_effects"] = sum(r.duplicate_effects for r in scored)
    out["recovered"] = sum(r.recovered for r in scored)
    out["unnecessary_interruptions"] = sum(r.unnecessary_interruptions for r in scored)
    out["rejected_attempts"] = sum(r.rejected_attempts for r in records)
    out["faults_injected"] = sum(r.faults_injected for r in records)
    out.update(model_cost(records))
    out.update(tool_crash_counts(records))
    out.update(world_tool_use(records))
    return out


def world_tool_use(records: Sequence[Summarized]) -> dict[str, Any]:
    """Calls of the world's own tools in all, and ``no_world_tool_calls``: true when episodes were played and
    not one called a world tool (the agent only talked: its outcomes say nothing of its tool use)."""
    counted = [r.world_tool_calls for r in records if r.world_tool_calls is not None]
    return {"world_tool_calls": sum(counted) if counted else None,
            "no_world_tool_calls": bool(counted) and not any(counted)}


def no_world_tool_hint(summary: dict[str, Any]) -> str:
    """What a run in which no episode called a world tool says, by what its model was offered
    (``world_tools_offered``, ``tool_choice``): not offered, offered but not to be called, or offered and
    answered in text (or with ``ask_customer``/``finish``/``give_up`` only)."""
    head = ("NO WORLD-TOOL CALLS: no episode called one of the world's tools (the agent only talked, finished or "
            "gave up)")
    offered = summary.get("world_tools_offered")
    choice = summary.get("tool_choice")
    if offered is None:
        return f"{head}; check that the agent is offered the world's tools"
    if offered == 0:
        return (f"{head}: NOT OFFERED: the model's requests carried none of the world's tools (its role has only "
                "the built-in ones); choose a scenario role with tools")
    if choice == "none":
        return (f"{head}: every request carried {offered} world tools with tool_choice \"none\", which forbids "
                "calling them; set [provider] tool_choice = \"auto\" or \"required\" in the profile")
    omitted = (" without tool_choice (some servers, e.g. llama-cpp-python's chatml-function-calling, then leave the "
               "tools out of the prompt: set [provider] tool_choice)" if choice == "omit" else
               f" with tool_choice \"{choice}\"")
    return (f"{head}: OFFERED, ANSWERED IN TEXT: every request carried {offered} world tools{omitted}, and the "
            "model answered in text or with the built-in tools only; a model or prompt-format problem (see each "
            "record's trace), not a missing tool list")


def tool_crash_counts(records: Sequence[Summarized]) -> dict[str, Any]:
    """How often each tool raised while handling an agent's call (``tool_crashes``, per tool, and in all):
    the world's defects, each returned to the agent as an error while its episode went on."""
    per_tool: dict[str, int] = {}
    for r in records:
        for crash in r.tool_crashes or ():
            name = crash["tool"] if isinstance(crash, dict) else crash.tool
            per_tool[name] = per_tool.get(name, 0) + 1
    return {"tool_crashes": dict(sorted(per_tool.items())), "tool_crashes_total": sum(per_tool.values())}


def model_cost(records: Sequence[Summarized]) -> dict[str, Any]:
    """Per episode: mean reported tokens, mean model-call latency; in all: model calls and ms per call
    (None where nothing was reported or the agent is not a model)."""
    tokens = [r.tokens for r in records if r.tokens is not None]
    modelled = [r for r in records if r.model_calls is not None]
    calls = sum(r.model_calls or 0 for r in modelled)
    latency = sum(r.model_latency_ms or 0.0 for r in modelled)
    return {"tokens_per_episode": sum(tokens) / len(tokens) if tokens else None,
            "model_calls": calls if modelled else None,
            "model_latency_ms_per_episode": latency / len(modelled) if modelled else None,
            "model_latency_ms_per_call": latency / calls if calls else None}


def write_summary(run: ResolvedRun, out: Path, records: Sequence[Summarized]) -> dict[str, Any]:
    """Write ``summary.json`` (and ``provenance.json``) for ``records`` of the resolved run; return the summary."""
    summary = summary_of(records)
    summary["config"] = {k: v for k, v in asdict(run.config).items() if k != "backend_options"}
    write_provenance(run.provenance, out)
    offered = store_prompts(run, out)
    profile = run.stamp.agent_profile
    if offered is not None and profile is not None:  # a model agent: what its requests carried
        summary["world_tools_offered"] = offered
        summary["tool_choice"] = profile.provider.tool_choice
    write_bytes_atomic(out / "summary.json", (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode())
    note_run_crashes(out, summary)
    return summary


def store_prompts(run: ResolvedRun, out: Path) -> int | None:
    """Write what a model agent was given in each planned scenario into ``out/prompts/`` once per text (the
    records name them by hash: ``system_prompt_sha``, ``tools_sha``); nothing for other agents. Returns how
    many of the world's own tools its requests carried (None: not a model agent)."""
    profile = run.stamp.agent_profile
    if profile is None or profile.agent != "openai":
        return None
    world_tools: set[str] = set()
    for scenario in sorted({spec.scenario for spec in plan(run.config, run.world)}):
        given = given_for(profile.instructions, run.world, run.world.scenario(scenario))
        store_given(out, given)
        world_tools.update(t["function"]["name"] for t in json.loads(given["tools"][1]))
    return len(world_tools - NOT_WORLD_TOOLS)


def note_run_crashes(out: Path, summary: dict[str, Any]) -> bool:
    """Enter the run's tool crashes per tool on its published world version's page (the version named in the
    run's ``provenance.json``); False when there were none or the version is not published here."""
    if not summary.get("tool_crashes"):
        return False
    try:
        stamp = json.loads((out / "provenance.json").read_text())
        folder = version_dir(str(stamp["world"]), str(stamp["world_version"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return note_tool_crashes(folder, str(out.resolve()), summary["tool_crashes"])


def format_table(summary: dict[str, Any]) -> str:
    """The summary as a small table for people."""
    n = summary["episodes"] or 1
    lines = [f"{'outcome':<16}{'episodes':>9}{'share':>8}"]
    for outcome in OUTCOMES:
        lines.append(f"{outcome:<16}{summary[outcome]:>9}{summary[outcome] / n:>8.1%}")
    for cause, count in (summary.get("not_scored_by_cause") or {}).items():
        lines.append(f"{'  ' + cause:<16}{count:>9}")
    crashes = summary.get("tool_crashes") or {}
    if crashes:
        lines.append("tool crashes (the world's defects; each returned to the agent as an error): "
                     + ", ".join(f"{tool}={count}" for tool, count in crashes.items()))
    if summary.get("no_world_tool_calls"):
        lines.append(no_world_tool_hint(summary))
    mean = summary["mean_reward"]
    lines.append(f"{'mean reward':<16}{'-' if mean is None else f'{mean:.3f}':>9}")
    lines.append("")
    lines.append("  ".join(f"{m}={summary[m]}" for m in METRICS))
    if summary.get("model_calls"):
        tokens = summary.get("tokens_per_episode")
        lines.append(f"model: {summary['model_calls']} calls, {summary['model_latency_ms_per_call']:.0f} ms per call, "
                     f"{summary['model_latency_ms_per_episode']:.0f} ms and "
                     f"{'-' if tokens is None else f'{tokens:.0f}'} tokens per episode")
    return "\n".join(lines)
