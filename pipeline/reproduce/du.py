"""Du et al., personalized w-event privacy (PVLDB 2025), Section 5: PBD and PBA against BD and BA.

Every user has their own (w_i, eps_i), drawn as in Section 5.2: the strictest pair is the x-axis
value (Figs. 10, 11), or two requirement types in the ratio o (Figs. 12, 13). BD and BA run at
the strictest pair, the only one that satisfies every user. Data: the TLNS, Sin and Log binary
streams with each user 1 with probability p_t (N = T = 10,000) and the bundled T-Drive (10 x 10
grid, 1-minute slots) and Foursquare (countries, 100-minute slots) samples, all as dumps: the data
is drawn once (seed 0) and run r varies the noise and the generated requirements (seed r). PLBU,
the local baseline, is ``wevent simulate -m plbu`` on the same requirements. AMRE is the paper's
Equation (15), a mean squared error, drawn on a log scale as the paper draws ln(AMRE); AJSD
(Equation 16) is the second row.
"""

from __future__ import annotations

from .cells import Paper
from .figures import Figure

SYNTHETIC = ("lns-bernoulli", "sin-bernoulli", "log-bernoulli")
DATASETS = ("tdrive-personalized", "foursquare-personalized", *SYNTHETIC)
METHODS = ("pbd", "pba", "bd", "ba", "plbu")
STRICT_EPSILON, STRICT_WINDOW = 0.6, 120
RATIOS = (0.1, 0.3, 0.5, 0.7, 0.9)

# Section 5.4: average AMRE reductions (%) over each sweep's points, as printed.
_REDUCTIONS = {
    "fig10": {"tdrive-personalized": ("pbd vs bd", 70.8), "foursquare-personalized": ("pbd vs bd", 69.6),
              "lns-bernoulli": ("pba vs ba", 36.9), "sin-bernoulli": ("pba vs ba", 27.7),
              "log-bernoulli": ("pba vs ba", 28.9)},
    "fig11": {"tdrive-personalized": ("pbd vs bd", 63.1), "foursquare-personalized": ("pbd vs bd", 68.4),
              "lns-bernoulli": ("pba vs ba", 35.1), "sin-bernoulli": ("pba vs ba", 4.2),
              "log-bernoulli": ("pba vs ba", 16.6)},
}


def _reported(name: str) -> dict:
    return {(dataset, "avg", pair, "amre"): percent for dataset, (pair, percent) in _REDUCTIONS[name].items()}


FIGURES = (
    Figure("fig10", "AMRE with epsilon varied (w = 120)", "epsilon", (0.2, 0.4, 0.6, 0.8, 1.0), METHODS,
           ("amre", "ajsd"), DATASETS, log_y=True, reported=_reported("fig10"),
           note="The 'ours' column of a reduction is 1 - AMRE(A) / AMRE(B) in percent, averaged over the "
           "sweep's points."),
    Figure("fig11", "AMRE with w varied (epsilon = 0.6)", "w", (40, 80, 120, 160, 200), METHODS, ("amre", "ajsd"),
           DATASETS, log_y=True, reported=_reported("fig11")),
    Figure("fig12", "AMRE with the ratio of users at epsilon_k = 1.0 varied (w_k = 120, others at 0.6)", "ratio",
           RATIOS, METHODS, ("amre", "ajsd"), DATASETS, log_y=True),
    Figure("fig13", "AMRE with the ratio of users at w_k = 40 varied (epsilon_k = 0.6, others at 120)", "ratio",
           RATIOS, METHODS, ("amre", "ajsd"), DATASETS, log_y=True),
)

_MIXES = {"epsilon": "groups", "w": "groups", "fig12": "two-type-epsilon", "fig13": "two-type-window"}


def _strictest(figure: Figure, x) -> tuple[float, int]:
    return (x if figure.x == "epsilon" else STRICT_EPSILON), (x if figure.x == "w" else STRICT_WINDOW)


def command(figure: Figure, dataset: str, x, method: str, scale, inputs: dict) -> list[str]:
    epsilon, window = _strictest(figure, x)
    noise = [] if method == "plbu" else ["--noise", "laplace"]  # PLBU's noise is its reports' randomized response
    tokens = ["--input", inputs[dataset], "-m", method, *noise]
    if method in ("bd", "ba"):
        return [*tokens, "-e", f"{epsilon:g}", "-w", str(window)]
    tokens += ["--strict-epsilon", f"{epsilon:g}", "--strict-window", str(window),
               "--requirement-mix", _MIXES[figure.name if figure.x == "ratio" else figure.x]]
    if method != "plbu":  # BD and BA are cells of their own
        tokens.append("--no-baseline")
    return tokens + (["--share", f"{x:g}"] if figure.x == "ratio" else [])


PAPER = Paper("du", "Du et al., Personalized w-event private publishing for infinite data streams, PVLDB 2025",
              FIGURES, command=command)
