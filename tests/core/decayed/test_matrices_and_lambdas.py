"""Decayed matrices: matrix identity, sensitivity, δ/λ, telescoping, Δ_w."""

import numpy as np
import pytest

from tests.core.decayed.helpers import reconstruction_matrix, strategy_matrix, workload, zero_noise
from wevent.core.decayed import RTPDMM, column_norms, get_lambda, lambda_table, window_sensitivity
from wevent.core.decayed.lambdas import cai_factors, paper_deltas
from wevent.core.decayed.tree import ancestors, height_of, level

TOL = 1e-12


# 4. matrix identity -------------------------------------------------------------------------
@pytest.mark.parametrize("block_size", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("p", [1.0, 0.5, 0.9995])
def test_reconstruction_times_strategy_is_the_decayed_workload(block_size, p):
    n = 64
    strategy, reconstruction = strategy_matrix(n, block_size, p), reconstruction_matrix(n, block_size, p)
    np.testing.assert_allclose(reconstruction @ strategy, workload(n, p), rtol=TOL, atol=TOL)
    height = height_of(block_size)
    for r in range(1, n + 1):
        block, local = divmod(r - 1, block_size)
        assert np.count_nonzero(reconstruction[r - 1]) == bin(local + 1).count("1") + block
        assert np.count_nonzero(reconstruction[r - 1, block * block_size :]) == bin(local + 1).count("1")
    assert (np.count_nonzero(strategy, axis=0) <= height).all()
    assert strategy.max() <= 1.0


def test_example_matrices_l4_n7():
    """The rows of 𝐋 and 𝐁 for n = 7, L = 4, written out (the printed matrices (13)-(14) are garbled)."""
    p = 0.7
    expected_strategy = np.zeros((7, 7))
    for row, values in enumerate([[1], [p, 1], [0, 0, 1], [p**3, p**2, p, 1], [0, 0, 0, 0, 1],
                                  [0, 0, 0, 0, p, 1]]):
        expected_strategy[row, : len(values)] = values
    expected_strategy[6, 6] = 1
    expected_reconstruction = np.eye(7)
    expected_reconstruction[2, :3] = [0, p, 1]
    expected_reconstruction[4, :5] = [0, 0, 0, p, 1]
    expected_reconstruction[5, :6] = [0, 0, 0, p**2, 0, 1]
    expected_reconstruction[6, :7] = [0, 0, 0, p**3, 0, p, 1]
    np.testing.assert_allclose(strategy_matrix(7, 4, p), expected_strategy, rtol=TOL)
    np.testing.assert_allclose(reconstruction_matrix(7, 4, p), expected_reconstruction, rtol=TOL)


@pytest.mark.parametrize("block_size", [4, 8, 16])
@pytest.mark.parametrize("p", [1.0, 0.5, 0.93])
def test_prefix_noise_terms_are_the_rows_of_the_reconstruction_matrix(block_size, p):
    """The code's noise layout of a prefix query [1, r] at t = r is row r of 𝐁."""
    n = 3 * block_size + 3
    index = RTPDMM(1.0, n, p, block_size=block_size, randomness=zero_noise())
    for _ in range(n):
        index.insert(0.0)
    reconstruction = reconstruction_matrix(n, block_size, p)
    for r in range(1, n + 1):
        positions, coefficients = index._store.noise_terms(1, r, t=r)
        row = np.zeros(n)
        row[positions - 1] = coefficients
        np.testing.assert_allclose(row, reconstruction[r - 1], rtol=TOL, atol=0)


# 5. sensitivity -----------------------------------------------------------------------------
@pytest.mark.parametrize("block_size", [1, 2, 8, 64, 1024])
def test_undecayed_event_sensitivity_is_the_height(block_size):
    norms = column_norms(lambda_table(block_size, 1.0, "none"), 1.0)
    assert window_sensitivity(norms, 1) == height_of(block_size)


@pytest.mark.parametrize("block_size", [2, 8, 64, 4096])
@pytest.mark.parametrize("p", [0.5, 0.9995, 0.99999])
def test_decayed_event_sensitivity_closed_form(block_size, p):
    """Δ_L = Σ_{b<H} p^(2^b - 1), attained by item 1 of a block."""
    height = height_of(block_size)
    norms = column_norms(lambda_table(block_size, p, "none"), p)
    expected = sum(p ** ((1 << b) - 1) for b in range(height))
    assert window_sensitivity(norms, 1) == pytest.approx(expected, rel=TOL)
    assert norms[1] == pytest.approx(expected, rel=TOL)


@pytest.mark.parametrize("variant", ["none", "paper", "cai"])
@pytest.mark.parametrize("block_size", [1, 4, 8, 32])
@pytest.mark.parametrize("p", [1.0, 0.9995, 0.6])
def test_column_norm_dp_matches_brute_force(variant, block_size, p):
    lambdas = lambda_table(block_size, p, variant)
    brute = np.abs(strategy_matrix(block_size, block_size, p, lambdas)).sum(axis=0)
    np.testing.assert_allclose(column_norms(lambdas, p)[1:], brute, rtol=TOL)


def test_node_counts_per_item_l8():
    assert [len(ancestors(j, 8)) for j in range(1, 9)] == [4, 3, 3, 2, 3, 2, 2, 1]
    assert (np.count_nonzero(strategy_matrix(8, 8, 1.0), axis=0) == [4, 3, 3, 2, 3, 2, 2, 1]).all()


# 6. δ/λ reference values --------------------------------------------------------------------
def test_error_and_delta_reference_values():
    err = [1.0]
    for m in range(2, 6):  # err_m = (cbrt(err_{m-1}) + cbrt(2^{m-1}))³
        err.append((np.cbrt(err[-1]) + np.cbrt(2.0 ** (m - 1))) ** 3)
    np.testing.assert_allclose(err, [1, 11.541966, 56.947628, 199.926818, 585.780453], atol=1e-6)
    np.testing.assert_allclose(paper_deltas(5, 1.0), [0.442493, 0.587401, 0.657963, 0.698842, 0.724934], atol=1e-6)
    for p in (1.0, 0.9, 0.5):
        assert paper_deltas(3, p)[0] == pytest.approx(1 / (1 + np.cbrt(2 * p * p)), rel=TOL)


def event_delta(block_size, p, variant):
    return window_sensitivity(column_norms(lambda_table(block_size, p, variant), p), 1)


@pytest.mark.parametrize("block_size, p, variant, lambdas, delta", [
    (4, 1.0, "paper", [0.215470, 0.271475, 0.366819, 0.342037], 0.828982),
    (8, 1.0, "paper", [0.150579, 0.189718, 0.256348, 0.239030, 0.228857, 0.288341, 0.389609, 0.301158], 0.880485),
    (4, 0.9995, "paper", [0.215600, 0.271588, 0.366990, 0.342133], 0.828673),
    (4, 1.0, "cai", [0.262884, 0.331213, 0.594097, 0.405903], 1.0),
])
def test_lambda_reference_values(block_size, p, variant, lambdas, delta):
    np.testing.assert_allclose(lambda_table(block_size, p, variant)[1:], lambdas, atol=1e-6)
    assert event_delta(block_size, p, variant) == pytest.approx(delta, abs=1e-6)


def loop_equals_closed_form(max_height):
    for p in (1.0, 0.9995):
        for height in range(1, max_height + 1):
            block_size = 1 << (height - 1)
            deltas = paper_deltas(height, p)
            closed = lambda_table(block_size, p, "paper")
            loop = np.array([get_lambda(block_size, k, p, deltas) for k in range(1, block_size + 1)])
            np.testing.assert_allclose(loop, closed[1:], rtol=1e-13)


def test_get_lambda_loop_equals_closed_form_up_to_4096():
    loop_equals_closed_form(13)


@pytest.mark.slow
def test_get_lambda_loop_equals_closed_form_up_to_65536():
    loop_equals_closed_form(17)


# 7. telescoping -----------------------------------------------------------------------------
@pytest.mark.parametrize("block_size", [1, 2, 16, 256])
@pytest.mark.parametrize("p", [1.0, 0.9995, 0.7])
def test_chain_sums_telescope(block_size, p):
    paper, cai = lambda_table(block_size, p, "paper"), lambda_table(block_size, p, "cai")
    deltas = paper_deltas(height_of(block_size), p)
    assert (paper[1:] > 0).all() and (cai[1:] > 0).all()
    for j in range(1, block_size + 1):
        chain = ancestors(j, block_size)
        product = np.prod([deltas[level(a)] for a in chain])
        assert sum(p * paper[a] for a in chain) == pytest.approx(1 - product, rel=1e-12)
        if j % 2 == 1:
            assert sum(cai[a] for a in chain) == pytest.approx(1.0, rel=1e-12)
    assert event_delta(block_size, p, "paper") < 1 / p


def test_cai_first_factor_is_zero_and_the_rest_match_the_recurrence():
    mu = cai_factors(4, 1.0)
    assert mu[0] == 0.0 and mu[1] == pytest.approx(1 / (1 + np.cbrt(2)), rel=TOL)


# 14. w-event sensitivity (Mode B) -----------------------------------------------------------
@pytest.mark.parametrize("variant", ["none", "paper", "cai"])
@pytest.mark.parametrize("block_size", [1, 4, 8])
@pytest.mark.parametrize("p", [1.0, 0.95])
def test_window_sensitivity_matches_brute_force_over_all_windows(variant, block_size, p):
    lambdas = lambda_table(block_size, p, variant)
    norms = column_norms(lambdas, p)
    delta = window_sensitivity(norms, 1)
    for w in (1, 2, 3, 5, 8, 13, 21):
        n = block_size * (w // block_size + 3)  # every window offset, also straddling blocks
        columns = np.abs(strategy_matrix(n, block_size, p, lambdas)).sum(axis=0)
        brute = max(columns[s : s + w].sum() for s in range(n - w + 1))
        for neighbours in (1, 2):
            got = window_sensitivity(norms, w, neighbours)
            assert got == pytest.approx(neighbours * brute, rel=1e-12)
            assert got <= w * neighbours * delta * (1 + 1e-12)
        assert window_sensitivity(norms, w, bound=3.0) == pytest.approx(3 * brute, rel=1e-12)


def test_mode_b_noise_is_calibrated_to_the_window_sensitivity():
    w, epsilon = 6, 0.5
    index = RTPDMM(epsilon, 64, 0.99, privacy_window=w, neighbours=2, lambda_variant="cai", noise="laplace",
                   randomness=zero_noise())  # the Laplace calibration; the discrete one: tests/core/test_noise.py
    expected = window_sensitivity(column_norms(index.lambdas, 0.99), w, 2)
    assert index.sensitivity == pytest.approx(expected, rel=TOL)
    np.testing.assert_allclose(index.node_scales[1:], expected / (epsilon * index.lambdas[1:]), rtol=TOL)
    literal = RTPDMM(epsilon, 64, 0.99, privacy_window=w, neighbours=2, noise_mode="paper_literal",
                     randomness=zero_noise())
    assert literal.sensitivity == w * 2 * 7  # the crude bound w·m·H, H = 7 for L = 64
    assert index.window_spend_bound == epsilon
