"""The personalized model's logic: PBD and PBA, one group per requirement type (:class:`PersonalizedLogic`)."""

from __future__ import annotations

import csv
from typing import cast

import numpy as np

from ...core.personalized import PersonalizedMechanism, Requirements, generate
from ...core.randomness import DerivedRandomness
from ...core.registry import mechanisms
from ...core.validation import ParameterError
from ..config import ConfigError, StreamConfig
from ..wire.records import AuditRecord, personalized_release_record
from .central import CentralLogic

__all__ = ["PersonalizedLogic", "load_requirements"]


class PersonalizedLogic(CentralLogic):
    """PBD, PBA: one group per requirement type (w_k, eps_k); M1 is DC, M2 is OBS + decision + SM.

    The requirements come from ``options.requirements``: a CSV file of ``user,w,epsilon`` lines
    whose users are the stream's user indices, or a table of generation settings
    (``mix``, ``epsilon``, ``window``, ``groups``, ``share``, ``seed``: the strictest pair the mix is tied
    to and its shape; as in Du et al. 2025, Section 5.2).
    """

    def __init__(self, stream: StreamConfig, randomness: DerivedRandomness, requirements) -> None:
        self.requirements = requirements
        self.groups = requirements.types.count
        super().__init__(stream, randomness)

    _template: PersonalizedMechanism

    def new_mechanism(self) -> PersonalizedMechanism:
        s = self.stream
        mechanism = cast(type[PersonalizedMechanism], mechanisms()[s.mechanism])  # the config took a personalized one
        try:
            return mechanism.for_requirements(self.requirements, s.domain, randomness=self.randomness,
                                              **s.mechanism_options)
        except TypeError as exc:
            raise ConfigError(f"stream {s.name!r}: invalid options for {s.mechanism}: {exc}") from None

    def group_of_users(self):
        return self.requirements.user_types

    def budget_gauges(self, tightest):
        return tightest.spend, 0.0, tightest.bound  # the type closest to its own eps_k, nothing reserved

    def _input(self, counts):
        return np.asarray(counts, dtype=np.int64)  # (types, d): SM thins each type's histogram

    def record(self, mechanism, result, group_window_spend, slot_start=0.0, slot_end=0.0):
        return personalized_release_record(self.stream.name, mechanism, result, group_window_spend, slot_start,
                                           slot_end)

    def audit(self, mechanism, result):
        types = mechanism.types
        return AuditRecord(
            stream=self.stream.name, slot=result.slot, mechanism=mechanism.name, epsilon=mechanism.epsilon,
            window=mechanism.window, eps1=float(result.eps1), eps2=float(result.eps2),
            types=[[int(w), float(e), int(n)] for w, e, n in zip(types.windows, types.epsilons, types.sizes)],
            charges=result.type_charges.tolist(),
        )


def load_requirements(stream: StreamConfig):
    spec = stream.requirements  # a CSV path or generation settings, typed by the config
    where = f"stream {stream.name!r}"
    try:
        if isinstance(spec, str):
            requirements = Requirements.load_csv(spec)
        else:
            settings = dict(cast(dict, spec))  # the config requires it of a personalized stream
            requirements = generate(settings.pop("mix", "groups"), stream.users, **settings)
        return requirements.for_users([str(u) for u in range(stream.users)])
    except ParameterError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:  # not a text CSV at all
        raise ConfigError(f"{where}: {spec} is not a CSV of user,w,epsilon lines: {' '.join(str(exc).split())}") \
            from None
