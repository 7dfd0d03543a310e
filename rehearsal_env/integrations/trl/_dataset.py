"""The prompts of a world's split, as rows for ``GRPOTrainer(train_dataset=...)``."""

from __future__ import annotations

from typing import Any

from ...scenarios import Split
from ...worlds import World, load_world
from .._prompt import system_prompt


def dataset_rows(world: str | World, split: Split = "train", *, seeds: int = 1, instructions: str = "",
                 routed: bool = False) -> list[dict[str, Any]]:
    """One row per scenario of ``split`` and seed ``0 .. seeds-1``: ``prompt`` (a system message, and an
    empty user message that ``reset`` fills with the customer's words), ``scenario``, ``seed`` and ``split``.

    Args:
        world: A world name or :class:`~rehearsal_env.World`.
        split: ``train``, ``dev`` or ``holdout``.
        seeds: How many seeds per scenario.
        instructions: An agent profile's instructions, added to the system message.
        routed: Add the ``environment`` column naming the scenario's tool set (for :func:`environment_classes`).
    """
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    w = load_world(world) if isinstance(world, str) else world
    rows = []
    for scenario in w.scenarios(split):
        for seed in range(seeds):
            row: dict[str, Any] = {
                "prompt": [{"role": "system", "content": system_prompt(w, scenario, instructions)},
                           {"role": "user", "content": ""}],
                "scenario": scenario.id, "seed": seed, "split": scenario.split}
            if routed:
                row["environment"] = f"{scenario.role}+retry" if scenario.offers_retry else scenario.role
            rows.append(row)
    return rows


def dataset(world: str | World, split: Split = "train", **options: Any) -> Any:
    """:func:`dataset_rows` as a ``datasets.Dataset`` (needs ``pip install rehearsal-env[trl]``)."""
    try:
        import datasets
    except ImportError as exc:  # an optional extra: say which
        raise ImportError("rehearsal_env.integrations.trl.dataset needs the datasets package: "
                          "pip install 'rehearsal-env[trl]' (or use dataset_rows for plain rows)") from exc
    return datasets.Dataset.from_list(dataset_rows(world, split, **options))
