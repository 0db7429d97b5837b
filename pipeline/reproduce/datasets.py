"""The datasets prepared as dumps: the real ones (bundled samples, or the user's full files with
``--data DIR``) and Du et al.'s Bernoulli synthetic streams.

Each dataset is prepared once per output directory the papers' way (the feeds' profiles) and
dumped as a (slot x user) ``.npz`` that ``wevent simulate --input`` reads. ``--data DIR`` replaces
the bundled samples by ``DIR/tdrive`` (one ``N.txt`` per taxi, searched recursively) and
``DIR/foursquare`` (``dataset_TIST2015_Checkins.txt`` and ``dataset_TIST2015_POIs.txt``), each
only when present.

Du et al.'s synthetic streams draw every user's value independently, 1 with probability p_t
(:func:`wevent.core.bernoulli_stream.bernoulli_values`, seed 0): ``wevent simulate --dataset``
sets exact counts instead, so they go to the mechanisms as dumps too.

The Foursquare sample spans 10 days: at LDP-IDS's 102,800 s slots it has 9 slots, fewer than one
window, so on the *sample* that dataset uses the personalized paper's 6,000 s slots instead (the
CSV headers say so). The full data keeps the paper's setting.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Protocol

from wevent.producers import foursquare, tdrive
from wevent.producers.fixtures import TDRIVE, TIST_CHECKINS, TIST_POIS
from wevent.producers.profiles import resolve

from ..core.bernoulli_stream import bernoulli_values
from ..core.data import UserValues
from ..errors import UsageError
from .figures import Scale

__all__ = ["Dataset", "RealDataset", "BernoulliDataset", "DATASETS", "prepare"]

_SAMPLE_FOURSQUARE_SLOT_SECONDS = 6000.0


class Dataset(Protocol):
    """A dataset the figures read: what identifies its dump, its description for the CSV headers,
    and its values, each for the ``--data`` directory and the scale."""

    def key(self, data_dir: Path | None, scale: Scale) -> str: ...

    def describe(self, data_dir: Path | None, scale: Scale) -> str: ...

    def read(self, data_dir: Path | None, scale: Scale) -> UserValues: ...


@dataclass(frozen=True)
class RealDataset:
    """A real dataset as one paper prepares it: the feed and its profile."""

    feed: str  # "tdrive" | "foursquare"
    profile: str

    def source(self, data_dir: Path | None) -> tuple[Path, bool]:
        """The input path and whether it is the bundled sample."""
        if data_dir is not None and (data_dir / self.feed).is_dir():
            return data_dir / self.feed, False
        return (TDRIVE if self.feed == "tdrive" else TIST_CHECKINS.parent), True

    def key(self, data_dir: Path | None, scale: Scale) -> str:
        return str(self.source(data_dir)[0].resolve())

    def describe(self, data_dir: Path | None, scale: Scale) -> str:
        path, sample = self.source(data_dir)
        slots = f", {_SAMPLE_FOURSQUARE_SLOT_SECONDS:g} s slots" if sample and self._resliced() else ""
        return f"{self.feed} ({'bundled sample' if sample else path}), profile {self.profile}{slots}"

    def _resliced(self) -> bool:
        return self.feed == "foursquare" and self.profile == "ldp-ids"

    def read(self, data_dir: Path | None, scale: Scale) -> UserValues:
        path, sample = self.source(data_dir)
        if self.feed == "tdrive":
            return tdrive.read_tdrive([str(path)], resolve(tdrive.PROFILES, self.profile)).values
        overrides = {"slot_seconds": _SAMPLE_FOURSQUARE_SLOT_SECONDS} if sample and self._resliced() else {}
        profile = resolve(foursquare.PROFILES, self.profile, **overrides)
        checkins = path / TIST_CHECKINS.name
        if not checkins.is_file():
            raise UsageError(f"{path} has no {TIST_CHECKINS.name}")
        return foursquare.read_foursquare(str(checkins), profile, pois=str(path / TIST_POIS.name)).values


@dataclass(frozen=True)
class BernoulliDataset:
    """A binary stream of ``users`` x ``slots`` at full scale, each user 1 with probability p_t."""

    model: str  # "lns" | "sin" | "log"
    users: int
    slots: int
    min_slots: int  # at least this many slots at any scale (twice the longest window swept)

    def size(self, scale: Scale) -> tuple[int, int]:
        return scale.size(self.users, self.slots, min_slots=self.min_slots)

    def key(self, data_dir: Path | None, scale: Scale) -> str:
        return f"{self.model} {self.size(scale)}"

    def describe(self, data_dir: Path | None, scale: Scale) -> str:
        users, slots = self.size(scale)
        return f"{self.model} with each user 1 with probability p_t, N = {users}, T = {slots}, seed 0"

    def read(self, data_dir: Path | None, scale: Scale) -> UserValues:
        return UserValues(bernoulli_values(self.model, *self.size(scale), seed=0), domain_size=2, name=self.model)


DATASETS: dict[str, Dataset] = {
    "tdrive-ldp-ids": RealDataset("tdrive", "ldp-ids"),
    "foursquare-ldp-ids": RealDataset("foursquare", "ldp-ids"),
    "tdrive-personalized": RealDataset("tdrive", "personalized"),
    "foursquare-personalized": RealDataset("foursquare", "personalized"),
    **{f"{model}-bernoulli": BernoulliDataset(model, 10_000, 10_000, min_slots=400) for model in ("lns", "sin", "log")},
}


def prepare(names, out: Path, data_dir: Path | None, scale: Scale, map_=map) -> dict[str, str]:
    """Dump each named dataset under ``out/data`` (once per source and size); return name -> dump path.

    ``map_`` runs the missing dumps (an executor's ``map`` runs them in parallel)."""
    (out / "data").mkdir(parents=True, exist_ok=True)
    paths, missing = {}, []
    for name in sorted(set(names) & set(DATASETS)):
        dataset = DATASETS[name]
        digest = hashlib.blake2b(dataset.key(data_dir, scale).encode(), digest_size=4).hexdigest()
        path = out / "data" / f"{name}-{digest}.npz"
        if not path.exists():
            missing.append((dataset, path))
        paths[name] = str(path)
    for _ in map_(_dump, [d for d, _ in missing], [p for _, p in missing], repeat(data_dir), repeat(scale)):
        pass  # the dumps are written by the workers; wait for all of them
    return paths


def _dump(dataset: Dataset, path: Path, data_dir: Path | None, scale: Scale) -> None:
    partial = path.with_suffix(f".{os.getpid()}.partial.npz")
    dataset.read(data_dir, scale).save(partial)
    partial.replace(path)
