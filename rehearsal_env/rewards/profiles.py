"""Reward profiles: versioned TOML files that turn components into one scalar reward.

A profile file ``configs/profiles/<name>.toml`` holds::

    name = "rl"                    # must equal the file's stem
    reward_version = "rl/1"        # the scoring contract; bump it whenever anything below changes
    description = "..."
    [gates]                        # component = floor: measured below the floor -> the reward is 0
    safety = 1.0
    [weights]                      # fixed weights over the components that remain
    correctness = 0.6
    [shaping]                      # optional: a reward at every turn (see rewards/shaping.py)
    potential = "goal_share"

:func:`apply_profile` is a pure function of the profile and the components:
if a measured gate component is below its floor the reward is 0; otherwise it
is the weighted mean of the measured weighted components (unmeasured ones are
left out and the remaining weights renormalized). The directory is
``$REHEARSAL_PROFILES_DIR`` when set, else the package's ``configs/profiles`` (``configs/`` at the
repository root links to it).
"""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .components import COMPONENTS, EXTERNAL_MODE, Components

PROFILES_DIR = Path(__file__).resolve().parents[1] / "configs" / "profiles"
"""Where the built-in profiles live: shipped inside the package (``configs/`` at the repository root
links here), overridden by ``$REHEARSAL_PROFILES_DIR``."""
_KEYS = {"name", "reward_version", "description", "gates", "weights", "shaping"}
POTENTIALS = ("goal_share",)
"""The potentials a profile's ``[shaping]`` may name: ``goal_share``, the share of the scenario's goal checks that
pass on the current state."""


class UnknownProfileError(ValueError):
    """No profile file by that name; the message names the known profiles."""


class ProfileError(ValueError):
    """A profile file is malformed; the message says which field and how to fix it."""


@dataclass(frozen=True)
class Profile:
    """One reward profile, as read from its file."""

    name: str
    """``benchmark``, ``rl``, ... (the file's stem)."""
    reward_version: str
    """The scoring contract: rewards of different versions are different measurements."""
    description: str
    """What the profile is for."""
    weights: Mapping[str, float]
    """Component -> weight of the weighted mean (only measured components take part)."""
    gates: Mapping[str, float] = field(default_factory=dict)
    """Component -> floor: a measured value below its floor makes the reward 0."""
    shaping: str | None = None
    """The potential of a per-turn shaped reward (one of :data:`POTENTIALS`); None: a reward at the end only."""


@dataclass(frozen=True)
class RewardResult:
    """An episode's reward under one profile, with everything that made it."""

    profile: str
    """The profile's name."""
    reward_version: str
    """The profile's scoring contract."""
    reward: float | None
    """The scalar reward in [0, 1]; None when the episode was not scored."""
    components: Components
    """The components it was computed from."""
    gated_by: tuple[str, ...] = ()
    """Gate components that were below their floor (the reward is then 0)."""
    caveats: tuple[str, ...] = ()
    """What limits the comparability of this reward (e.g. external mode)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile, "reward_version": self.reward_version, "reward": self.reward,
            "components": self.components.values(), "notes": dict(self.components.notes),
            "gated_by": list(self.gated_by), "caveats": list(self.caveats),
        }


def profiles_dir() -> Path:
    """The directory profiles are read from."""
    return Path(os.environ.get("REHEARSAL_PROFILES_DIR") or PROFILES_DIR)


def profile_names() -> list[str]:
    """The names of every profile file in :func:`profiles_dir`."""
    return sorted(p.stem for p in profiles_dir().glob("*.toml"))


def load_profile(name: str) -> Profile:
    """The profile ``name``.

    Raises:
        UnknownProfileError: no such file; the message names the known profiles.
        ProfileError: the file is malformed.
    """
    return _load(profiles_dir(), name)


@functools.lru_cache(maxsize=32)
def _load(directory: Path, name: str) -> Profile:
    path = directory / f"{name}.toml"
    if not name or "/" in name or not path.is_file():
        known = ", ".join(sorted(p.stem for p in directory.glob("*.toml"))) or "none"
        raise UnknownProfileError(
            f"unknown reward profile {name!r}; known profiles: {known} (files in {directory}). "
            "Pass one of those names, or add a profile file there")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}") from exc
    return _validate(path, raw)


def _numbers(path: Path, section: str, raw: Any) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: [{section}] must be a table of component = number")
    bad = sorted(set(raw) - set(COMPONENTS))
    if bad:
        raise ProfileError(f"{path}: [{section}] names unknown component(s) {bad}; known: {', '.join(COMPONENTS)}")
    out = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ProfileError(f"{path}: [{section}] {key} must be a number in [0, 1], got {value!r}")
        out[key] = float(value)
    return out


def _validate(path: Path, raw: dict[str, Any]) -> Profile:
    extra = sorted(set(raw) - _KEYS)
    if extra:
        raise ProfileError(f"{path}: unknown key(s) {extra}; a profile has {', '.join(sorted(_KEYS))}")
    if raw.get("name") != path.stem:
        raise ProfileError(f"{path}: name must equal the file's stem {path.stem!r}, got {raw.get('name')!r}")
    version = raw.get("reward_version")
    if not isinstance(version, str) or not version:
        raise ProfileError(f"{path}: reward_version must be a non-empty string like '{path.stem}/1'")
    weights = _numbers(path, "weights", raw.get("weights"))
    if not any(weights.values()):
        raise ProfileError(f"{path}: [weights] needs at least one positive weight")
    return Profile(name=path.stem, reward_version=version, description=str(raw.get("description", "")),
                   weights=weights, gates=_numbers(path, "gates", raw.get("gates", {})),
                   shaping=_shaping(path, raw.get("shaping")))


def _shaping(path: Path, raw: Any) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"potential"} or raw["potential"] not in POTENTIALS:
        raise ProfileError(f"{path}: [shaping] must be the one key potential = one of {list(POTENTIALS)}, got "
                           f"{raw!r}")
    return str(raw["potential"])


def apply_profile(profile: Profile, components: Components) -> RewardResult:
    """The reward of ``components`` under ``profile`` (pure: no I/O, no episode)."""
    values = components.values()
    caveats = (EXTERNAL_MODE,) if values["efficiency"] is None and "efficiency" in profile.weights else ()
    gated = tuple(n for n, floor in profile.gates.items() if (v := values[n]) is not None and v < floor)
    if gated:
        return RewardResult(profile.name, profile.reward_version, 0.0, components, gated, caveats)
    measured = {n: w for n, w in profile.weights.items() if values[n] is not None and w > 0}
    total = sum(measured.values())
    if not total:
        return RewardResult(profile.name, profile.reward_version, None, components, (),
                            (*caveats, "no weighted component was measured; the episode is not scored"))
    reward = sum(w * float(values[n] or 0.0) for n, w in measured.items()) / total
    return RewardResult(profile.name, profile.reward_version, round(reward, 6), components, (), caveats)
