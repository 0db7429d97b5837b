"""Requirements: generation as in the paper's experiments (Section 5.2), the CSV format, validation, grouping into types."""

from fractions import Fraction

import numpy as np
import pytest

from wevent.core.data import ABSENT
from wevent.core.personalized import Requirements, RequirementTypes, generate, grouped, two_type
from wevent.core.personalized.requirements import epsilon_candidates, window_candidates
from wevent.core.validation import ParameterError


def test_candidate_lists():
    assert epsilon_candidates(0.6).tolist() == [0.6, 0.8, 1.0]
    assert epsilon_candidates(0.2).tolist() == [0.2, 0.4, 0.6, 0.8, 1.0]
    assert epsilon_candidates(1.0).tolist() == [1.0]
    assert epsilon_candidates(2.0).tolist() == [2.0]
    assert window_candidates(120).tolist() == [40, 80, 120]
    assert window_candidates(200).tolist() == [40, 80, 120, 160, 200]
    assert window_candidates(100).tolist() == [40, 80]
    assert window_candidates(20).tolist() == [20]


@pytest.mark.parametrize("eps, w", [(0.6, 120), (0.2, 120), (0.6, 200), (1.0, 40)])
def test_grouped_requirements_follow_the_artifact(eps, w):
    r = grouped(1003, eps, w, seed=7)
    groups = np.array_split(np.arange(1003), 10)
    assert sorted(len(g) for g in groups) == [100] * 7 + [101] * 3
    for g in groups:  # one draw per contiguous group
        assert len(set(r.windows[g].tolist())) == 1 and len(set(r.epsilons[g].tolist())) == 1
    assert set(r.epsilons.tolist()) <= set(epsilon_candidates(eps).tolist())
    assert set(r.windows.tolist()) <= set(window_candidates(w).tolist())
    strictest_w, strictest_eps = r.strictest
    assert strictest_w <= w and strictest_eps >= eps  # BD/BA at (w, eps) satisfy everyone
    assert np.array_equal(grouped(1003, eps, w, seed=7).windows, r.windows)


def test_grouped_draws_cover_the_candidates_and_per_user_draws_vary_within_groups():
    draws = np.concatenate([grouped(10, 0.6, 120, seed=s).epsilons for s in range(30)])
    assert set(draws.tolist()) == {0.6, 0.8, 1.0}
    per_user = grouped(1000, 0.6, 120, seed=1, per_user=True)
    assert len(set(per_user.epsilons[:100].tolist())) == 3 and per_user.types.count == 9
    assert grouped(5, 0.6, 120, groups=10, seed=0).users == 5  # fewer users than groups


@pytest.mark.parametrize("share, relaxed", [(0.1, 100), (0.5, 500), (0.9, 900), (0.0, 0), (1.0, 1000)])
def test_two_type_study(share, relaxed):
    eps_study = two_type(1000, share, "epsilon")
    assert (eps_study.epsilons[:relaxed] == 1.0).all() and (eps_study.epsilons[relaxed:] == 0.6).all()
    assert (eps_study.windows == 120).all()
    w_study = two_type(1000, share, "window")
    assert (w_study.windows[:relaxed] == 40).all() and (w_study.windows[relaxed:] == 120).all()
    assert (w_study.epsilons == 0.6).all()


def test_generate_dispatches_and_rejects_unknown_mixes():
    assert generate("two-type-window", 10, share=0.3).windows.tolist() == [40] * 3 + [120] * 7
    assert generate("per-user", 50, seed=2).types.count > 1
    with pytest.raises(ParameterError, match="mix"):
        generate("uniform", 10)
    with pytest.raises(ParameterError, match="share"):
        two_type(10, 1.5)


def test_types_group_identical_pairs():
    r = Requirements([4, 2, 4, 3, 2], [1.0, 0.5, 1.0, 2.0, 0.5], ["a", "b", "c", "d", "e"])
    assert r.types.count == 3 and r.types.sizes.tolist() == [2, 1, 2]
    for user in range(r.users):
        k = r.user_types[user]
        assert (r.types.windows[k], r.types.epsilons[k]) == (r.windows[user], r.epsilons[user])
    # eps / (2w), rounded down onto eps's grid: exact for 0.5 / 4 and 1 / 8, just below 2 / 6
    budgets = r.types.dissimilarity_budgets.tolist()
    assert budgets[0] == 0.5 / 4 and budgets[2] == 1.0 / 8
    assert Fraction(2, 6) - Fraction(2.0**-51) < Fraction(budgets[1]) <= Fraction(2, 6)
    assert r.types.publication_pools == pytest.approx(r.types.epsilons / 2, rel=1e-15)


def test_type_counts_from_per_user_values():
    r = Requirements([4, 2, 4, 3, 2], [1.0, 0.5, 1.0, 2.0, 0.5])
    values = np.array([2, 0, 2, ABSENT, 1])
    counts = r.type_counts(values, 3)
    assert counts.tolist() == [[1, 1, 0], [0, 0, 0], [0, 0, 2]]
    with pytest.raises(ParameterError, match="covers? 5|cover 5"):
        r.type_counts(values[:4], 3)
    with pytest.raises(ParameterError, match="0..2"):
        r.type_counts(np.array([0, 0, 3, 0, 0]), 3)
    with pytest.raises(ParameterError, match="integers"):
        r.type_counts(values.astype(float), 3)


def test_csv_round_trip_and_matching_to_the_data_users(tmp_path):
    r = Requirements([40, 120, 80], [1.0, 0.6, 0.8], ["taxi-7", "taxi-2", "taxi-9"])
    path = tmp_path / "req.csv"
    r.save_csv(path)
    back = Requirements.load_csv(path)
    assert back.user_ids == r.user_ids and np.array_equal(back.windows, r.windows)
    assert np.array_equal(back.epsilons, r.epsilons)
    subset = back.for_users(["taxi-9", "taxi-7"])
    assert subset.windows.tolist() == [80, 40] and subset.user_ids == ["taxi-9", "taxi-7"]
    with pytest.raises(ParameterError, match="2 reporting user.*'taxi-1'"):
        back.for_users(["taxi-1", "taxi-2", "taxi-3"])


def test_csv_without_header_with_comments(tmp_path):
    path = tmp_path / "req.csv"
    path.write_text("# users of the pilot\n0, 4, 1.5\n\n1,2,0.25\n")
    r = Requirements.load_csv(path)
    assert r.user_ids == ["0", "1"] and r.windows.tolist() == [4, 2] and r.epsilons.tolist() == [1.5, 0.25]


@pytest.mark.parametrize(
    "text, message",
    [
        ("user,w,epsilon\na,0,1.0\n", "line 2: w of user 'a' must be an integer >= 1, got 0"),
        ("a,2.5,1.0\n", "line 1: w of user 'a' must be an integer >= 1"),
        ("a,x,1.0\n", "line 1: w of user 'a'"),
        ("a,3,0\n", "line 1: epsilon of user 'a' must be a finite number >= 1e-290"),
        ("a,3,-1\n", "epsilon of user 'a'"),
        ("a,3,1e-320\n", "line 1: epsilon of user 'a' must be a finite number >= 1e-290, got 1e-320"),
        ("a,3,nan\n", "epsilon of user 'a'"),
        ("a,3,inf\n", "epsilon of user 'a'"),
        ("a,3\n", "line 1: expected 3 columns"),
        ("a,3,1\nb,3,1\na,4,1\n", "line 3: user 'a' already has a requirement (line 1)"),
        (",3,1\n", "empty user id"),
        ("user,w,epsilon\n", "holds no requirements"),
    ],
)
def test_csv_errors_name_the_line(tmp_path, text, message):
    path = tmp_path / "req.csv"
    path.write_text(text)
    with pytest.raises(ParameterError) as info:
        Requirements.load_csv(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_missing_file_is_one_clear_error(tmp_path):
    with pytest.raises(ParameterError, match="cannot read requirements file .*No such file"):
        Requirements.load_csv(tmp_path / "nope.csv")


@pytest.mark.parametrize(
    "args, message",
    [
        (([1, 0], [1.0, 1.0]), "windows w_i must be whole numbers >= 1; user '1' has 0"),
        (([1, 2.5], [1.0, 1.0], ["a", "b"]), "user 'b' has 2.5"),
        (([1, 2], [1.0, -1.0], ["a", "b"]), "epsilons eps_i must be finite numbers >= 1e-290; user 'b' has -1"),
        (([1, 2], [1.0, 1e-320], ["a", "b"]), "epsilons eps_i must be finite numbers >= 1e-290; user 'b' has 9.99989e-321"),
        (([1, 2], [np.inf, 1.0]), "user '0' has inf"),
        (([1, 2], ["x", "y"]), "must be numbers"),
        (([1, 2], [1.0]), "2 windows but 1 epsilons"),
        (([1, 2], [1.0, 1.0], ["a", "a"]), "unique"),
        (([1, 2], [1.0, 1.0], ["a"]), "1 user ids for 2"),
        (([], []), "non-empty"),
    ],
)
def test_requirement_validation(args, message):
    with pytest.raises(ParameterError) as info:
        Requirements(*args)
    assert message in str(info.value)


def test_requirement_types_are_read_only():
    types = RequirementTypes([3], [1.0], [2])
    with pytest.raises(ValueError):
        types.windows[0] = 5


@pytest.mark.parametrize("domain_size", [2, 5, 12])  # counted by matrix products up to 8 values, by bincount above
def test_type_counts_of_many_slots_are_each_slots_counts(domain_size):
    rng = np.random.default_rng(domain_size)
    requirements = Requirements(rng.choice([40, 80], 300), rng.choice([0.6, 1.0], 300))
    values = rng.integers(ABSENT, domain_size, (40, 300))
    counts = requirements.type_counts(values, domain_size)
    for slot, row in enumerate(values):
        expected = np.zeros((requirements.types.count, domain_size), dtype=np.int64)
        np.add.at(expected, (requirements.user_types[row >= 0], row[row >= 0]), 1)
        assert (counts[slot] == expected).all() and (requirements.type_counts(row, domain_size) == expected).all()


@pytest.mark.parametrize("mix", ["groups", "per-user", "two-type-epsilon", "two-type-window"])
def test_generated_requirements_refuse_a_denormal_strictest_epsilon(mix):
    with pytest.raises(ParameterError, match="epsilon must be a finite number >= 1e-290, got 1e-320"):
        generate(mix, 10, 1e-320, 40)


def test_requirement_types_refuse_a_denormal_budget():
    # a mechanism built from types directly (not from Requirements) is held to the same bound
    with pytest.raises(ParameterError, match="type epsilons must be finite numbers >= 1e-290"):
        RequirementTypes([2, 3], [1.0, 1e-320], [1, 1])
