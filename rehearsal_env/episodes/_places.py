"""Session places: at most ``total`` sessions live or being opened, at most ``per_key`` of one key's."""

from __future__ import annotations

from collections.abc import Callable

from ._session import AtCapacity


class Places:
    """Places held per key (not locked: the session table calls it holding its own lock)."""

    def __init__(self, total: int, per_key: int) -> None:
        self.total, self.per_key = total, per_key
        self._held: dict[str, int] = {}

    def take(self, key: str, retry_after: Callable[[str | None], int]) -> None:
        """Hold one place for ``key``; :class:`AtCapacity` (with ``retry_after(key or None)``) when none is free."""
        held = self._held.get(key, 0)
        if sum(self._held.values()) >= self.total:
            raise AtCapacity(f"expected a free session; all {self.total} are in use. Retry later, "
                             f"or end finished episodes with DELETE /v1/episodes/ID", retry_after=retry_after(None))
        if held >= self.per_key:
            raise AtCapacity(f"expected this key to hold fewer than {self.per_key} live sessions; it holds {held}. "
                             f"End finished episodes with DELETE /v1/episodes/ID, or retry later",
                             retry_after=retry_after(key))
        self._held[key] = held + 1

    def give(self, key: str) -> None:
        """Free one of ``key``'s places."""
        self._held[key] -= 1
        if not self._held[key]:
            del self._held[key]
