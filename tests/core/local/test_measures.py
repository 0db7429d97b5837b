"""ROC/AUC and the monitored scalar (LDP-IDS event monitoring)."""

import numpy as np
import pytest

from wevent.core.local.measures import monitored_scalar, monitoring_events, roc_auc, roc_curve
from wevent.core.validation import ParameterError


def test_auc_counts_ties_as_half_and_matches_pairwise_definition():
    rng = np.random.default_rng(0)
    labels = rng.random(300) < 0.3
    scores = np.round(rng.normal(labels * 0.8, 1.0), 1)  # rounding makes ties
    positives, negatives = scores[labels], scores[~labels]
    pairwise = ((positives[:, None] > negatives[None, :]) + 0.5 * (positives[:, None] == negatives[None, :])).mean()
    assert roc_auc(scores, labels) == pytest.approx(pairwise, abs=1e-12)
    assert roc_auc([1, 1, 1], [True, False, True]) == 0.5
    fpr, tpr = roc_curve(scores, labels)
    assert fpr[0] == tpr[0] == 0 and fpr[-1] == tpr[-1] == 1 and np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)


def test_no_events_is_a_clear_error():
    with pytest.raises(ParameterError, match="events"):
        roc_auc([0.1, 0.2], [False, False])


def test_monitored_scalar_choice():
    binary = np.array([[0.9, 0.1], [0.6, 0.4]])
    assert monitored_scalar(binary, binary).tolist() == [0.1, 0.4]
    full = np.array([[0.5, 0.3, 0.2], [0.2, 0.6, 0.2]])  # rows sum to 1: the mean is constant
    assert monitored_scalar(full, full).tolist() == [0.3, 0.6]  # bin 1 has the largest average
    absent = np.array([[0.5, 0.3, 0.1], [0.2, 0.2, 0.2]])  # absent users: the mean varies
    assert monitored_scalar(absent, absent) == pytest.approx([0.3, 0.2])
    truth = np.array([[0.0, s] for s in (0.1, 0.2, 0.9, 1.0)])
    labels, scores = monitoring_events(truth + 0.01, truth)
    assert labels.tolist() == [False, False, True, True]  # delta = 0.75 * 0.9 + 0.1 = 0.775
    assert scores == pytest.approx([0.11, 0.21, 0.91, 1.01])
