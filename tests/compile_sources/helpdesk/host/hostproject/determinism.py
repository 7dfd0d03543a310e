"""The world's determinism for an application that reads the clock and random numbers (ours, not helpdesk's).

A world must give the same rows for the same actions: the application's clock is the world's frozen
clock (``django.utils.timezone.now``), and its random identifiers (``uuid.uuid4``: helpdesk's ticket
secret keys) come from a generator seeded again at every reset (``POST /__rehearsal/reset``, the world's
reset hook), so a replay after a reset makes the same values.
"""

import random
import uuid
from datetime import UTC, datetime

_state: dict[str, object] = {}


def install(clock: str, seed: str) -> None:
    from django.utils import timezone

    frozen = datetime.fromisoformat(clock.replace("Z", "+00:00"))
    if frozen.tzinfo is None:  # the world's clock is UTC
        frozen = frozen.replace(tzinfo=UTC)
    timezone.now = lambda: frozen
    _state["seed"] = seed
    reseed()
    uuid.uuid4 = lambda: uuid.UUID(int=_state["rng"].getrandbits(128), version=4)  # type: ignore[attr-defined]


def reseed() -> None:
    _state["rng"] = random.Random(f"helpdesk:{_state['seed']}")
