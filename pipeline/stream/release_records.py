"""A slot's release line as each model shapes it: what the workers publish on ``releases`` and
``wevent simulate --releases`` writes, alike.

A central release is :meth:`ReleaseRecord.from_step` with the window's spend. A local-model one
adds its reports, communication and oracles; a personalized one adds every requirement type's
charges.
"""

from __future__ import annotations

import numpy as np

from .codecs import ReleaseRecord

__all__ = ["local_release_record", "personalized_release_record"]


def local_release_record(stream: str, mechanism, result, window_spend: float, slot_start: float = 0.0,
                         slot_end: float = 0.0) -> ReleaseRecord:
    """One slot's release line of a local-model stream, with its reports, communication and oracles.

    ``n2`` reports at ``eps2`` through ``oracle2`` made a fresh release: enough for its noise
    variance (:func:`wevent.stream.query.release_variance`). ``asked1``/``asked2`` count the
    users each phase asked (0 where it did not run), so a release short of device answers (a
    device down past the deadline) says so itself: ``n1 < asked1`` or ``n2 < asked2``.
    """
    extras = {"n1": result.n1, "n2": result.n2, "reports": result.reports, "bits": result.bits,
              "oracle1": result.oracle1, "oracle2": result.oracle2,
              "asked1": _asked(result.users1, result.eps1, mechanism.population),
              "asked2": _asked(result.users2, result.eps2, mechanism.population)}
    return ReleaseRecord.from_step(stream, mechanism, result, window_spend, slot_start, slot_end, extras=extras)


def _asked(users: np.ndarray | None, epsilon: float, population: int) -> int:
    """How many users a phase asked: its listed users, everyone (None), or none when it did not run."""
    if epsilon <= 0:
        return 0
    return population if users is None else int(len(users))


def personalized_release_record(stream: str, mechanism, result, type_window_spend: np.ndarray,
                                slot_start: float = 0.0, slot_end: float = 0.0) -> ReleaseRecord:
    """One slot's release line with every type's charges.

    ``type_window_spend[k]`` is type k's spend over its own window ending at this slot;
    ``window_spend`` is the largest of them (the most any user's own window holds).
    """
    extras = {"type_eps1": result.type_eps1.tolist(), "type_eps2": result.type_eps2.tolist(),
              "window_spend_ratio": float((type_window_spend / mechanism.types.epsilons).max()),
              "theta": result.theta}
    return ReleaseRecord.from_step(stream, mechanism, result, float(type_window_spend.max()), slot_start, slot_end,
                                   extras=extras)
