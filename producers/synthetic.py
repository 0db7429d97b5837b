"""Synthetic feeds: every user's 0/1 value per slot from the core's LNS, Sin and Log generators.

The values come from :func:`wevent.core.synthetic.synthetic` (round(p_t N) users hold 1 at slot
t), generated slot by slot on demand, so a replay of a million users never holds the whole matrix
and a resumed replay (``--from-slot``) sends exactly the values a full one would.

Profiles (every setting can be overridden):

* ``ldp-ids``: LDP-IDS (Section 7.1.1) defaults, N = 200,000 users, T = 800 slots.
* ``personalized``: Du et al. 2025 (the authors' code: the paper gives no N or T), N = T = 10,000.

The streams have no clock of their own; slots are ``slot_seconds`` long from ``start`` (epoch
seconds; default 1 minute from 1970-01-01) so that a replay has event times.

>>> feed = synthetic_feed("personalized", model="sin", users=1000, slots=3, seed=1)
>>> int(feed.values_at(1).sum()), feed.domain_size, feed.labels
(75, 2, ['0', '1'])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wevent.core.synthetic import MODELS, SyntheticStream, synthetic

from .preprocess import check_slot_seconds
from .profiles import positive_int, resolve, setting

__all__ = ["SyntheticProfile", "PROFILES", "SyntheticFeed", "synthetic_feed"]


@dataclass(frozen=True)
class SyntheticProfile:
    description: str = ""
    model: str = setting("lns", "stream model", str, "MODEL", tuple(MODELS))
    users: int = setting(10_000, "users N", positive_int, "N")
    slots: int = setting(10_000, "slots T", positive_int, "T")
    seed: int = setting(0, "seed of the stream", int, "SEED")
    slot_seconds: float = setting(60.0, "slot length in seconds (event times only)", float, "SECONDS")
    start: float = setting(0.0, "epoch seconds at which slot 1 starts", float, "EPOCH")

    def __post_init__(self) -> None:
        check_slot_seconds(self.slot_seconds)


PROFILES = {
    "personalized": SyntheticProfile(description="Du et al. 2025: N = T = 10,000"),
    "ldp-ids": SyntheticProfile(description="LDP-IDS Section 7.1.1: N = 200,000, T = 800", users=200_000, slots=800),
}


class SyntheticFeed:
    """A :class:`wevent.producers.replay.Feed` over a generated binary stream."""

    domain_size = 2
    labels = ["0", "1"]

    def __init__(self, stream: SyntheticStream, slot_seconds: float, start: float) -> None:
        self.stream, self.slot_seconds, self.start = stream, float(slot_seconds), float(start)
        self.name = f"synthetic-{stream.model.name}"

    @property
    def slots(self) -> int:
        return self.stream.slots

    @property
    def users(self) -> int:
        return self.stream.users

    @property
    def user_ids(self) -> list[str]:
        return [str(u) for u in range(self.users)]

    def values_at(self, slot: int) -> np.ndarray:
        return self.stream.values_at(slot)


def synthetic_feed(profile: SyntheticProfile | str = "personalized", **overrides) -> SyntheticFeed:
    """The feed of a named (or given) profile, with overrides."""
    if isinstance(profile, str):
        profile = resolve(PROFILES, profile, **overrides)
    stream = synthetic(profile.model, profile.users, profile.slots, profile.seed)
    return SyntheticFeed(stream, profile.slot_seconds, profile.start)
