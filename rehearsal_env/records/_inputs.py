"""The reward inputs of a stored record: what rescoring recomputes components from, without a database."""

from __future__ import annotations

import json
from datetime import date

from ..env import readable_action
from ..rewards import ComponentInputs, TurnInput, inputs_for
from ..worlds import World, load_world
from ._record import EpisodeRecord


def inputs_from_record(record: EpisodeRecord, world: World | None = None) -> ComponentInputs:
    """Inputs rebuilt from a stored episode record alone (its world's scenario supplies the scoring facts).

    The world is loaded by name and moved to the record's data anchor when it was frozen at another day.
    These are the inputs :func:`~rehearsal_env.records.record_episode` computed the stored components from.
    """
    world = world or load_world(record.world)
    anchor = record.provenance.dataset.data_anchor
    if anchor and anchor != world.data_anchor.isoformat():
        world = world.with_anchor(date.fromisoformat(anchor))
    return inputs_for(
        world, world.scenario(record.scenario), outcome=record.outcome,
        goal_passed=[c.passed for c in record.checks if c.kind == "goal"],
        rules_passed=[c.passed for c in record.checks if c.kind == "hard_rule"],
        duplicate_effects=record.duplicate_effects, turns=record.turns, tool_calls=record.tool_calls,
        tokens=record.tokens, trace=[TurnInput(t.tool, readable_action(t.action), t.status, t.observation)
               for t in record.trace],
        changed=[(c.table, c.change, json.loads(c.key)) for c in record.changes],
    )
