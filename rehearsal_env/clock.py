"""The frozen clock: which day the environment calls today, and who pinned it.

A world's clock is frozen at noon of its ``data_anchor``, the day its seed data
is dated for. ``--freeze-time DATE`` (``RunConfig.freeze_time``,
``RehearsalEnv(freeze_time=...)``) moves both to ``DATE`` through
:meth:`World.with_anchor`, so a task about "the last 30 days" asks the same
question on any day it is run. ``capabilities.freeze_time_source`` in the
provenance names who pinned the clock.
"""

from __future__ import annotations

import functools
from datetime import date, datetime

from .worlds import World

WORLD_ANCHOR = "world.data_anchor"
"""``freeze_time_source`` when nobody passed a date: the world's own anchor pins the clock."""
CLI = "--freeze-time"
"""``freeze_time_source`` of ``rehearsal run --freeze-time`` and ``rehearsal health --freeze-time``."""
RUN_CONFIG = "RunConfig.freeze_time"
"""``freeze_time_source`` of a run configured in Python."""
ENV = "RehearsalEnv(freeze_time=...)"
"""``freeze_time_source`` of an env made in Python."""


def parse_day(value: str | date) -> date:
    """A day from ``YYYY-MM-DD`` text or a :class:`date`.

    Raises:
        ValueError: what arrived and the expected form.
    """
    if isinstance(value, datetime):
        raise ValueError(f"freeze_time takes a day, got the datetime {value.isoformat()!r}; the clock reads "
                         f"noon of that day: pass {value.date().isoformat()!r}")
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value).strip())
    except ValueError:
        raise ValueError(f"freeze_time: expected a day as YYYY-MM-DD (e.g. 2026-03-02), got {value!r}") from None


def frozen_world(world: World, day: str | date | None) -> World:
    """``world`` with its clock and data anchor at ``day`` (``world`` itself when ``day`` is None or its anchor)."""
    if day is None:
        return world
    anchor = parse_day(day)
    if anchor == world.data_anchor:
        return world
    return _anchored(world, anchor)


@functools.lru_cache(maxsize=32)
def _anchored(world: World, anchor: date) -> World:
    # One object per (world, day): the scenario and snapshot caches are keyed by it.
    return world.with_anchor(anchor)


def freeze_time_source(day: str | date | None, pinned_by: str) -> str:
    """Who pinned the clock: ``pinned_by`` when a day was passed, else :data:`WORLD_ANCHOR`."""
    return WORLD_ANCHOR if day is None else pinned_by
