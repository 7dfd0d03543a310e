"""A Ray-native env pool: actors each holding many sessions, an async API a rollout worker awaits directly.

:class:`EnvPool` starts actors across the cluster's nodes (:mod:`._pool`); each actor
(:class:`SessionActor`) holds many sessions on databases it opened once and resets per episode. Full pools
refuse with :class:`PoolFull`; a dead actor's sessions go on from their checkpoints on another actor, or are
recorded not scored (cause ``worker``) and reported as :class:`SessionLost`. Records go to an ordinary run
directory (:class:`RunRecords`). See docs/scale.md.
"""

from ._actor import GIVE_UP, SessionActor, Turn
from ._errors import PoolFull, SessionClosed, SessionLost
from ._pool import MOVES, EnvPool, Opened, Stepped
from ._records import RunRecords

__all__ = ["GIVE_UP", "MOVES", "EnvPool", "Opened", "PoolFull", "RunRecords", "SessionActor", "SessionClosed",
           "SessionLost", "Stepped", "Turn"]
