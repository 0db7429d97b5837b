"""Communication and monitoring measures of LDP-IDS's evaluation (Section 7 of the arXiv version).

* **CFPU** (communication frequency per user): reports per user per slot,
  ``(1/(N T)) * total reports``; an M1 and an M2 report at the same slot count as two.
* **Bits per user per slot**: ``(1/(N T)) * total bits`` with the accounting :mod:`._base` states (Table 2's bits),
  which :class:`~wevent.core.local.protocol.LocalStepResult` already carries per slot.
* **Event monitoring ROC** (the papers' monitoring task): a scalar ``s_t`` of each histogram (the share of value 1 on
  binary data), the event ``s_t > delta`` with ``delta = 0.75 (max s - min s) + min s`` on the true
  stream, and the same scalar of the releases as the score; the ROC sweeps a cut-off over the
  scores and the AUC is the area under it (ties between a positive and a negative count 1/2).

>>> truth = np.array([[0.9, 0.1], [0.5, 0.5], [0.8, 0.2], [0.1, 0.9]])
>>> releases = np.array([[0.8, 0.2], [0.6, 0.4], [0.7, 0.3], [0.2, 0.8]])
>>> labels, scores = monitoring_events(releases, truth)
>>> labels.tolist(), roc_auc(scores, labels)
([False, False, False, True], 1.0)
>>> fpr, tpr = roc_curve(scores, labels)
>>> fpr.tolist(), tpr.tolist()
([0.0, 0.0, 0.3333333333333333, 0.6666666666666666, 1.0], [0.0, 1.0, 1.0, 1.0, 1.0])
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..validation import ParameterError
from .protocol import LocalStepResult

__all__ = ["cfpu", "bits_per_user_per_slot", "monitored_scalar", "monitoring_events", "roc_curve", "roc_auc"]

EVENT_LEVEL = 0.75


def cfpu(results: Sequence[LocalStepResult], population: int) -> float:
    """Reports per user per slot."""
    return sum(r.reports for r in results) / (population * len(results)) if results else 0.0


def bits_per_user_per_slot(results: Sequence[LocalStepResult], population: int) -> float:
    """Communicated bits per user per slot (the accounting :mod:`._base` states)."""
    return sum(r.bits for r in results) / (population * len(results)) if results else 0.0


def monitored_scalar(histograms: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """The scalar watched per slot (event monitoring), chosen on the true stream ``truth``.

    Binary data: the share of value 1. Otherwise the mean over the bins where it varies over time
    (data with absent users); else the bin with the largest time-average (a constant mean would
    carry no event).
    """
    histograms, truth = np.atleast_2d(histograms), np.atleast_2d(truth)
    if truth.shape[1] == 1:
        return histograms[:, 0]
    if truth.shape[1] == 2:
        return histograms[:, 1]
    if np.ptp(truth.mean(axis=1)) > 1e-12:
        return histograms.mean(axis=1)
    return histograms[:, int(np.argmax(truth.mean(axis=0)))]


def monitoring_events(releases: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, scores)``: the true events ``s_t > delta`` and the released scalar per slot."""
    actual = monitored_scalar(truth, truth)
    delta = EVENT_LEVEL * (actual.max() - actual.min()) + actual.min()
    return actual > delta, monitored_scalar(releases, truth)


def roc_curve(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """False and true positive rates of the rule ``score >= cut`` over every distinct cut, from (0, 0) to (1, 1)."""
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    positives, negatives = int(labels.sum()), int((~labels).sum())
    if positives == 0 or negatives == 0:
        raise ParameterError("an ROC needs both events and non-events in the true stream")
    order = np.argsort(-scores, kind="stable")
    ordered, hits = scores[order], labels[order]
    last_of_tie = np.concatenate([ordered[1:] != ordered[:-1], [True]])
    tp = np.cumsum(hits)[last_of_tie]
    fp = np.cumsum(~hits)[last_of_tie]
    return np.concatenate([[0.0], fp / negatives]), np.concatenate([[0.0], tp / positives])


def roc_auc(scores, labels) -> float:
    """Area under :func:`roc_curve` (trapezoids: a tie between an event and a non-event counts 1/2)."""
    fpr, tpr = roc_curve(scores, labels)
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
