"""The improvement step: failed train and dev episodes in, the next version of an agent profile out.

``improve(run_dirs, profile_ref)``:

1. resolves the parent version (``NAME`` is its latest, ``NAME@vN`` that one);
2. reads, through :class:`~._reader.LearningRecords` only, the failed train and dev
   root episodes of that version in every run (holdout rows never leave the scan; forks and
   restores are never evidence about the agent: left out, and counted in :attr:`Improvement.not_root`);
3. refuses a failure whose scenario the world itself places in holdout (records that
   disagree with their world are not learned from);
4. has the writer (:class:`~._lessons.RuleWriter`, or :class:`~._lessons.ModelWriter` when
   a model is configured) write lessons, and puts them into the instructions;
5. registers the result as the next version and writes its :class:`~._lineage.Lineage`
   (parent version, run ids, the episode keys read, the writer, the lessons).

Nothing to learn (no failure), lessons the instructions hold already, or improved instructions that are
empty or the parent's (whitespace aside) write no version: the step refuses them, saying why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..agents import AgentProfile, ProfileStore, is_builtin
from ..worlds import World, load_world
from ._lessons import LessonWriter, RuleWriter, unique, with_lessons
from ._lineage import Lineage, write_lineage
from ._reader import LEARNABLE_SPLITS, FailedEpisode, HoldoutRefused, LearnableSplit, LearningRecords


@dataclass(frozen=True)
class Improvement:
    """What one improvement step did."""

    parent: AgentProfile
    """The version improved from."""
    profile: AgentProfile | None
    """The version written (None: nothing was written; see :attr:`reason`)."""
    lineage: Lineage | None
    """The new version's lineage (None with no new version)."""
    failures: tuple[FailedEpisode, ...]
    """The failed train and dev episodes read."""
    episodes: int
    """Train and dev episodes of the parent version in the runs (failed or not)."""
    reason: str | None
    """Why no version was written (None when one was)."""
    not_root: tuple[tuple[str, int], ...] = ()
    """(kind, episodes): train and dev episodes of the parent version left out because they are forks or restores,
    not root episodes (never evidence about the agent)."""


def _worlds(failures: Sequence[FailedEpisode]) -> list[World]:
    out = []
    for name in sorted({f.world for f in failures}):
        try:
            out.append(load_world(name))
        except KeyError:  # a world this installation lacks: its policy texts are unknown, the rest still counts
            continue
    return out


def _check_against_worlds(failures: Sequence[FailedEpisode], worlds: Sequence[World]) -> None:
    by_name = {w.name: w for w in worlds}
    for f in failures:
        world = by_name.get(f.world)
        if world is None:
            continue
        try:
            split = world.scenario(f.scenario).split
        except KeyError:
            continue  # a scenario this world version no longer has: its record's split stands
        if split not in LEARNABLE_SPLITS:
            raise HoldoutRefused(f"episode {f.key} is recorded as {f.split!r}, but world {f.world!r} places "
                                 f"scenario {f.scenario!r} in {split!r}; the improvement step never learns from "
                                 "holdout, so it stops here. Re-run the scenario with this world")


def _add(counts: Sequence[dict[str, int]]) -> tuple[tuple[str, int], ...]:
    out: dict[str, int] = {}
    for one in counts:
        for kind, n in one.items():
            out[kind] = out.get(kind, 0) + n
    return tuple(sorted(out.items()))


def improve(run_dirs: Sequence[str | Path], profile: str, *, writer: LessonWriter | None = None,
            store: ProfileStore | None = None,
            splits: Sequence[LearnableSplit] = LEARNABLE_SPLITS) -> Improvement:
    """Write the next version of ``profile`` from the failed train and dev episodes of ``run_dirs``.

    Raises:
        KeyError: ``profile`` is not registered.
        ValueError: a built-in agent's profile (it reads no instructions), or no episode of the parent
            version in the runs.
        HoldoutRefused: a split other than train or dev was asked for, or records disagree with their world.
    """
    if not run_dirs:
        raise ValueError("expected at least one RUN_DIR (a directory written by `rehearsal run`)")
    store = store or ProfileStore()
    parent = store.get(profile)
    if is_builtin(parent.agent):
        raise ValueError(f"profile {parent.ref} plays the built-in {parent.agent!r} agent, which reads no "
                         "instructions: there is nothing to improve. Improve a profile with agent = \"openai\"")
    reader = LearningRecords(splits, agent=(parent.name, parent.agent), agent_version=parent.label)
    episodes = sum(reader.count(run_dir) for run_dir in run_dirs)
    not_root = _add([reader.not_root(run_dir) for run_dir in run_dirs])
    apart = (f"; {', '.join(f'{n} {kind}(s)' for kind, n in not_root)} left out: a fork or restore is never "
             "evidence about the agent") if not_root else ""
    if episodes == 0:
        raise ValueError(f"the runs hold no {' or '.join(reader.splits)} episode of {parent.ref} (root episodes with "
                         f"agent {parent.name!r} and version {parent.label!r}{apart}); run it first: "
                         f"`rehearsal run --agent {parent.ref} --split train`")
    failures = tuple(f for run_dir in run_dirs for f in reader.failures(run_dir))
    if not failures:
        return Improvement(parent, None, None, (), episodes, f"no failed {' or '.join(reader.splits)} episode "
                           f"of {parent.ref} in {episodes} read{apart}: nothing to learn from", not_root)
    worlds = _worlds(failures)
    _check_against_worlds(failures, worlds)
    chosen = writer or RuleWriter()
    lessons = unique(chosen.lessons(failures, parent.instructions, worlds))
    instructions = with_lessons(parent.instructions, lessons)
    if not instructions.strip():
        return Improvement(parent, None, None, failures, episodes,
                           f"the improved instructions of {parent.ref} are empty ({chosen.name} wrote no lesson): "
                           "no new version", not_root)
    if " ".join(instructions.split()) == " ".join(parent.instructions.split()):
        return Improvement(parent, None, None, failures, episodes,
                           f"the instructions of {parent.ref} hold every lesson already: no new version", not_root)
    stored, created = store.register(replace(parent, instructions=instructions, version=None))
    if not created or stored.version is None or parent.version is None:
        return Improvement(parent, None, None, failures, episodes,
                           f"the improved profile equals {stored.ref}, which exists already: no new version", not_root)
    lineage = Lineage(profile=stored.name, version=stored.version, parent_version=parent.version,
                      runs=tuple(sorted({f.run_id for f in failures})),
                      episodes=tuple(f.key for f in failures), splits=tuple(reader.splits),
                      writer=chosen.name, lessons=tuple(lessons))
    write_lineage(lineage, store.root)
    return Improvement(parent, stored, lineage, failures, episodes, None, not_root)
