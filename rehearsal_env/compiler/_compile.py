"""The compile: nine phases in order, each result written before the next starts (see ``._phases``).

:func:`compile_world` runs them; a phase already done for the same inputs is skipped, so a compile
killed in any phase resumes there (its runtime is started again: it holds nothing the phase files
do not). A phase that fails raises :class:`CompileError` naming it; every process it started is
stopped, and the phases done so far stay. With a live agent, the gate's live attempt follows the nine
phases (``._live``): evidence for the page, never an input of a phase.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents import AgentProfile, Endpoint, ProviderRefused
from ..versions import LiveAttempt
from ._errors import CompileError
from ._live import attempt_compiled
from ._model import PROMPT_VERSION, ModelConfig
from ._phases import PHASES, canonical, sha
from ._sandboxed import RUNTIMES
from ._steps import PhaseWork


@dataclass(frozen=True)
class CompileResult:
    """What a compile did."""

    folder: Path
    """The world folder it wrote (``OUT/world``)."""
    phases: dict[str, Any]
    """Each phase's result, by name."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time of each phase this run (0 for one skipped)."""
    skipped: tuple[str, ...] = ()
    """The phases found done and skipped."""
    live: tuple[LiveAttempt, ...] = ()
    """The live agent's attempt at each job (empty without one)."""

    @property
    def summary(self) -> dict[str, Any]:
        return dict(self.phases.get("package", {}))


def _inputs(run: PhaseWork, phase: str, previous: str) -> str:
    options: dict[str, Any] = {"previous": previous}
    if phase == "inspect":
        options |= {"source": str(run.source.resolve()), "describe": str(run.describe.resolve()) if run.describe
                    else None}
    if phase in ("author", "validate") and run.model is not None:
        options |= {"model": run.model.model, "base_url": run.model.base_url, "seed": run.model.seed,
                    "prompt_version": PROMPT_VERSION, "response_format": run.model.response_format}
    if phase == "validate":
        options["repairs"] = run.repairs
    if phase == "plan" and run.runtime_choice is not None:
        options["runtime"] = run.runtime_choice
    return sha(canonical(options))


def compile_world(source: str | Path, out: str | Path, *, describe: str | Path | None = None,
                  model: ModelConfig | None = None, repairs: int = 2, stop_after: str | None = None,
                  progress: Callable[[str, str, float], None] | None = None,
                  live: tuple[AgentProfile, Endpoint] | None = None, runtime: str | None = None) -> CompileResult:
    """Compile the application in ``source`` into a world folder under ``out`` (see the package docstring).

    Args:
        source: The application's folder.
        out: The compile folder: ``out/world`` (the world folder) and ``out/.compile`` (each phase's result).
        describe: How the application runs (default: ``source/rehearsal-app.toml``).
        model: The compiler's model (None: evidence only).
        repairs: Rounds of the repair loop for a model's jobs.
        stop_after: Stop once this phase is done (a person edits its result, then compiles again).
        progress: Called ``(phase, "ran" | "skipped", seconds)`` after each phase.
        live: A model agent and its endpoint that then tries every validated job once (the gate's live attempt;
            evidence on the page, never a reason to keep a job out). None: no live attempt.
        runtime: Where the application runs, ``auto``, ``docker`` or ``local``, over the description's
            ``[application] runtime`` (None: as the description says).

    Raises:
        CompileError: one line naming the phase, what was expected and what arrived.
    """
    if stop_after is not None and stop_after not in PHASES:
        raise CompileError("inspect", f"expected --stop-after among {', '.join(PHASES)}; got {stop_after!r}")
    if runtime is not None and runtime not in RUNTIMES:
        raise CompileError("plan", f"expected --runtime among {', '.join(RUNTIMES)}; got {runtime!r}")
    run = PhaseWork(Path(source), Path(out), Path(describe) if describe else None, model, repairs, runtime)
    seconds: dict[str, float] = {}
    skipped: list[str] = []
    previous = ""
    for phase in PHASES:
        inputs = _inputs(run, phase, previous)
        started = time.perf_counter()
        done = run.store.done(phase, inputs) if phase != "inspect" else None
        if done is not None:
            run.results[phase] = done
            skipped.append(phase)
            previous = sha(previous + run.store.result_digest(phase))
        else:
            try:
                result = getattr(run, phase)()
            except CompileError:
                raise
            except Exception as exc:  # a defect of the application or of its description, named by phase
                raise CompileError(phase, f"expected the phase to finish; it raised {type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0][:300] if str(exc) else ''}") from exc
            run.results[phase] = json.loads(canonical(result))  # as a resumed compile reads it back: same order
            previous = sha(previous + run.store.save(phase, inputs, result))  # every earlier result: a chain
        seconds[phase] = time.perf_counter() - started
        run.store.record_time(phase, seconds[phase], done is not None)
        if progress is not None:
            progress(phase, "skipped" if done is not None else "ran", seconds[phase])
        if phase == stop_after:
            break
    attempts: tuple[LiveAttempt, ...] = ()
    if live is not None and "package" in run.results:
        started = time.perf_counter()
        try:
            attempts = attempt_compiled(run.world_dir, run.results["plan"], *live)
        except ProviderRefused as exc:
            raise CompileError("live attempt", f"expected the live agent's model to answer; {exc}") from None
        seconds["live attempt"] = time.perf_counter() - started
        if progress is not None:
            progress("live", "ran", seconds["live attempt"])
    return CompileResult(run.world_dir, dict(run.results), seconds, tuple(skipped), attempts)
