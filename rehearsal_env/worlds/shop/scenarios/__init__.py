"""The shop's scenarios: templates instantiated with seeded parameters from the seed data.

Each template picks entities in the state it needs (a delivered order to
refund, a paid one to cancel, ...), writes the customer's request, the goal
checks of the final request, the hard rules of the policies involved, a
reference solution and named wrong solutions. Instance ``i`` of a template goes
to ``train`` (i mod 6 in 0-2), ``dev`` (3-4) or ``holdout`` (5).

Templates by module:

- :mod:`._basic`: nine clean tasks (no change of request, no fault);
- :mod:`._faults`: a write whose outcome is unknown (``retry_operation`` offered);
- :mod:`._changes`: the customer changes the request (before the first write,
  after it, or at turn N, varying by instance);
- :mod:`._both`: a change of request and an unknown outcome.

Every scenario with a change or a fault also ships the careless players of
:func:`._common.careless` (``wrong:ignore-refusal``, ``wrong:over-ask``, and
``wrong:repeat-write`` where an outcome can be unknown), and those with a
change ``wrong:first-request-only``. Every such scenario declares a ``refuse``
fault on a write the final request needs, so each wrong solution fails with the
stress layer on or off.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from ....scenarios import Scenario, Solution, Split, ToolCall
from ..._world import World
from ._basic import BASIC
from ._both import BOTH
from ._changes import CHANGES
from ._common import Data, Template
from ._faults import FAULTS

PER_TEMPLATE = 6
SPLIT_OF: tuple[Split, ...] = ("train", "train", "train", "dev", "dev", "holdout")
TEMPLATES: dict[str, Template] = {**BASIC, **FAULTS, **CHANGES, **BOTH}
"""Every template by name, in suite order (the first nine keep their ids from the first suite)."""


def _solution(name: str, spec: Solution | tuple[ToolCall, ...]) -> Solution:
    if isinstance(spec, Solution):
        if spec.name != name:
            raise ValueError(f"solution named {spec.name!r} is filed under {name!r}; use the same name")
        return spec
    return Solution(name, tuple(spec))


def _instances(world: World) -> Iterator[Scenario]:
    data = Data.of(world)
    for name, template in TEMPLATES.items():
        rng = random.Random(f"{world.seed}:{name}")
        for i in range(PER_TEMPLATE):
            fields = template(data, rng, i)
            wrong = fields.pop("wrong")
            reference = _solution("reference", fields.pop("reference"))
            yield Scenario(
                id=f"{name}-{i + 1:04d}", world=world.name, split=SPLIT_OF[i % len(SPLIT_OF)],
                reference=reference,
                wrong=tuple(_solution(n, calls) for n, calls in wrong.items()),
                turn_limit=fields.pop("turn_limit", 16), **fields,
            )


def generate(world: World) -> list[Scenario]:
    """Every shop scenario, in template order."""
    return list(_instances(world))
