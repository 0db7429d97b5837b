"""Binary streams where each user holds 1 with probability p_t (Du et al., PVLDB 2025, Section 5.1).

LDP-IDS's generator (:mod:`wevent.core.synthetic`) gives exactly ``round(p_t N)`` users value 1
at slot t; the personalized paper draws every user's value independently, 1 with probability
``p_t``, so the count of 1s is Binomial(N, p_t) and varies around ``p_t N`` from slot to slot.
The ``p_t`` sequences (TLNS, Sin, Log) are the same models.

>>> values = bernoulli_values("sin", users=1000, slots=3, seed=1)
>>> values.shape, values.dtype.name, sorted(set(values.ravel().tolist()))
((3, 1000), 'uint8', [0, 1])
"""

from __future__ import annotations

import numpy as np

from .synthetic import synthetic
from .validation import check_positive_int

__all__ = ["bernoulli_values"]

_DRAWS_PER_BLOCK = 10_000_000  # uniform draws held at once (80 MB)


def bernoulli_values(name: str, users: int, slots: int, seed: int = 0) -> np.ndarray:
    """The (slots, users) uint8 matrix of a stream whose users hold 1 independently with probability p_t.

    Parameters
    ----------
    name : the model of ``p_t``: ``lns`` (TLNS), ``sin`` or ``log``, with the papers' parameters.
    users, slots : N and T.
    seed : seeds both ``p_t`` (the same sequence as ``synthetic(name, users, slots, seed)``) and the draws.
    """
    users = check_positive_int(users, "users")
    p = synthetic(name, users, check_positive_int(slots, "slots"), seed).p
    rng = np.random.default_rng([seed, 3])
    values = np.empty((p.size, users), dtype=np.uint8)
    rows = max(1, _DRAWS_PER_BLOCK // users)
    for start in range(0, p.size, rows):  # blocks of slots bound the memory of the uniform draws
        block = p[start : start + rows]
        values[start : start + block.size] = rng.random((block.size, users)) < block[:, None]
    return values
