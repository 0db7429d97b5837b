"""AJSD (Du et al., Eq. 16) against its definition and scipy's Jensen-Shannon distance."""

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from wevent.core.divergence import ajsd, jensen_shannon
from wevent.core.validation import ParameterError


def test_equals_scipy_on_distributions():
    rng = np.random.default_rng(4)
    r, c = rng.random((50, 7)), rng.random((50, 7))
    expected = [jensenshannon(a, b) ** 2 for a, b in zip(r, c)]  # scipy gives the square root, nats
    assert jensen_shannon(r, c) == pytest.approx(expected, rel=1e-9)
    assert ajsd(r, c) == pytest.approx(np.mean(expected), rel=1e-9)


def test_bounds_zeros_and_negative_bins():
    assert ajsd([[3.0, 1.0]], [[6.0, 2.0]]) == 0.0          # the same distribution at another scale
    assert ajsd([[1.0, 0.0]], [[0.0, 1.0]]) == pytest.approx(np.log(2))
    assert ajsd([[-5.0, 2.0]], [[0.0, 7.0]]) == 0.0          # a negative bin is clipped to 0
    assert ajsd([[-1.0, -1.0]], [[1.0, 1.0]]) == 0.0         # nothing left: uniform


def test_shapes_must_match():
    with pytest.raises(ParameterError):
        ajsd(np.zeros((3, 2)), np.zeros((3, 3)))
