"""LDP-IDS (Ren et al., SIGMOD 2022), Section 7: w-event LDP on binary synthetic and real streams.

Synthetic streams: N = 200,000 users, T = 800 slots (Section 7.1.1); the real ones are T-Drive
(5 areas, 10-minute slots; a taxi without a point in a slot answers in the devices' "absent"
category) and Foursquare (countries). Every cell runs the devices' sufficient statistic (the
reports' exact distribution, fast; on the synthetic binary streams also how many asked users hold
1), MRE with floor 1e-3, Ada as the oracle. Fig. 10's mean estimation runs on the "-Con" streams
with HM, clipped at the threshold a calibration period selects (Section 6.1.2). Fig. 11 sets
the extensions beside PeGaSus and FAST in the central model, on the same streams' counts. Taobao
is not public in a form we can read, so it and Fig. 9 are left out.
"""

from __future__ import annotations

import functools

from ..core.data import load_dump
from ..core.metrics import FREQUENCY_MRE_FLOOR
from .cells import Paper
from .figures import ROC_POINTS, Figure

SYNTHETIC = ("lns", "sin", "log")
CONTINUOUS = {"lns-con": "lns", "sin-con": "sin"}  # the "-Con" streams of the mean-estimation figures
DATASETS = (*SYNTHETIC, "tdrive-ldp-ids", "foursquare-ldp-ids")
BUDGET = ("lbu", "lbd", "lba")
POPULATION = ("lsp", "lpu", "lpd", "lpa")
ALL = BUDGET + POPULATION
EXTENSIONS = ("lba", "lb-dsat", "lb-rescuedp", "lpa", "lp-dsat", "lp-rescuedp")  # Fig. 11: budget, then population
CENTRAL = ("pegasus", "fast-w")  # Fig. 11's central-model competitors
USERS, SLOTS = 200_000, 800
# Mean estimation reads every user's value at every slot (HM's sum has no cheaper exact draw): about
# 5 s a cell at the paper's 200,000 users, an hour of the full run, so Fig. 10 runs a tenth of them.
MEAN_USERS = 20_000
EPSILONS = (0.5, 1.0, 1.5, 2.0, 2.5)
WINDOWS = (10, 20, 30, 40, 50)
LNS_STDS = (0.001, 0.002, 0.003, 0.004, 0.005)  # sqrt(Q) of LNS, Fig. 6(c)
SIN_BS = (0.005, 0.01, 0.02, 0.04, 0.08)  # b of Sin, Fig. 6(d)
TABLE2 = ("eps=1,w=20", "eps=2,w=20", "eps=2,w=40")

# Table 2: bits per user per slot, in the paper's order LNS, Sin, Log, Taxi, Foursquare (Taobao left out).
_TABLE2 = {
    "eps=1,w=20": {"lbu": (1, 1, 1, 3, 77), "lbd": (1.5585, 1.5516, 1.5572, 4.2195, 102.5540),
                   "lba": (1.3410, 1.3380, 1.3284, 3.8126, 93.4408), "lsp": (0.1, 0.1, 0.1, 0.2032, 4.0208),
                   "lpu": (0.1, 0.1, 0.1, 0.1998, 3.9), "lpd": (0.0912, 0.0913, 0.0915, 0.1870, 3.7815),
                   "lpa": (0.0804, 0.0806, 0.0803, 0.1651, 3.5701)},
    "eps=2,w=20": {"lbu": (1, 1, 1, 3, 77), "lbd": (1.55, 1.541, 1.554, 4.281, 102.9946),
                   "lba": (1.354, 1.358, 1.3368, 3.803, 93.3017), "lsp": (0.1, 0.1, 0.1, 0.2032, 3.9431),
                   "lpu": (0.1, 0.1, 0.1, 0.1998, 3.9), "lpd": (0.0934, 0.0933, 0.0937, 0.1917, 3.8728),
                   "lpa": (0.0825, 0.0828, 0.0822, 0.1746, 3.8277)},
    "eps=2,w=40": {"lbu": (1, 1, 1, 3, 77), "lbd": (1.542, 1.5268, 1.4832, 4.1953, 99.4699),
                   "lba": (1.3395, 1.3656, 1.3148, 3.7991, 92.6292), "lsp": (0.05, 0.05, 0.05, 0.1038, 2.0048),
                   "lpu": (0.05, 0.05, 0.05, 0.0999, 1.95), "lpd": (0.0485, 0.0484, 0.049, 0.0987, 1.9454),
                   "lpa": (0.041, 0.0411, 0.0414, 0.0863, 1.8943)},
}
TABLE2_REPORTED = {(dataset, setting, method, "bits_per_user_per_slot"): bits
                   for setting, methods in _TABLE2.items() for method, row in methods.items()
                   for dataset, bits in zip(DATASETS, row)}

FIGURES = (
    Figure("fig3", "Data utility with different epsilon (w = 20)", "epsilon", EPSILONS, ALL, ("mre",), DATASETS,
           groups=(BUDGET, POPULATION)),
    Figure("fig4", "Data utility with different w (epsilon = 1)", "w", WINDOWS, ALL, ("mre",), DATASETS,
           groups=(BUDGET, POPULATION)),
    Figure("fig5", "Event monitoring (epsilon = 1, w = 50): ROC curves", "setting", ("eps=1,w=50",),
           ("lba", "lsp", "lpu", "lpd", "lpa"), ("roc_auc", *ROC_POINTS), DATASETS, roc=True,
           note="Events are the slots whose monitored frequency exceeds 0.75 of its range; the CSV gives each "
           "curve's area and its true positive rate at 21 false positive rates."),
    Figure("fig6", "Effect of the population n on MRE (epsilon = 1, w = 20)", "n",
           (50_000, 100_000, 200_000, 400_000), ALL, ("mre",), ("lns", "sin"), log_x=True,
           groups=(BUDGET, POPULATION),
           note="Below full scale the population is n divided by the scale's shrink factor."),
    Figure("fig6c", "Effect of the fluctuation sqrt(Q) on MRE, LNS (epsilon = 1, w = 20)", "sqrt(Q)", LNS_STDS, ALL,
           ("mre",), ("lns",), groups=(BUDGET, POPULATION),
           note="The paper prints no axis values; ours bracket its default sqrt(Q) = 0.0025."),
    Figure("fig6d", "Effect of the fluctuation b on MRE, Sin (epsilon = 1, w = 20)", "b", SIN_BS, ALL,
           ("mre",), ("sin",), log_x=True, groups=(BUDGET, POPULATION),
           note="The paper prints no axis values; ours bracket its default b = 0.01."),
    Figure("fig7a", "Communication bits per user, LNS, with different n (epsilon = 1, w = 20)", "n",
           (50_000, 100_000, 200_000, 400_000), ALL, ("bits_per_user_per_slot",), ("lns",), log_x=True, log_y=True,
           note="The LNS cells of Fig. 6, their communication."),
    Figure("fig7b", "Communication bits per user, LNS, with different sqrt(Q) (epsilon = 1, w = 20)", "sqrt(Q)",
           LNS_STDS, ALL, ("bits_per_user_per_slot",), ("lns",), log_y=True,
           note="The cells of Fig. 6(c), their communication."),
    Figure("fig7c", "Communication bits per user, LNS, with different epsilon (w = 20)", "epsilon", EPSILONS, ALL,
           ("bits_per_user_per_slot",), ("lns",), log_y=True),
    Figure("fig7d", "Communication bits per user, LNS, with different w (epsilon = 1)", "w", WINDOWS, ALL,
           ("bits_per_user_per_slot",), ("lns",), log_y=True),
    Figure("table2", "Time average communication bits per user", "setting", TABLE2, ALL,
           ("bits_per_user_per_slot",), DATASETS, table=True, reported=TABLE2_REPORTED,
           note="Real datasets: the devices answer in d + 1 categories, the last for a user without a value: "
           "6 for our T-Drive's d = 5 areas (GRR's 3 bits, as the paper's) and 11 for the Foursquare sample's "
           "10 countries, against the paper's 77, so the Foursquare bit counts differ by construction."),
    Figure("fig8", "Varying budget allocation portion beta (epsilon = 1, w = 20)", "beta",
           (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), ("lbd", "lba", "lpd", "lpa"), ("mre",), DATASETS,
           groups=(("lbd", "lba"), ("lpd", "lpa"))),
    Figure("fig10a", "Mean estimation on LNS-Con with different sqrt(Q) (threshold truncation, epsilon = 1, w = 20)",
           "sqrt(Q)", LNS_STDS, ALL, ("mre",), ("lns-con",), groups=(BUDGET, POPULATION),
           note=f"N = {MEAN_USERS:,} users (the paper's 200,000 divided by 10; below full scale also by the scale's "
           "shrink factor), values N(p_t, 0.1^2) clipped at the bound a calibration period selects (--select-bound), "
           "HM reports, MRE against the unclipped true mean."),
    Figure("fig10b", "Mean estimation on Sin-Con with different b (threshold truncation, epsilon = 1, w = 20)", "b",
           SIN_BS, ALL, ("mre",), ("sin-con",), log_x=True, groups=(BUDGET, POPULATION),
           note=f"N = {MEAN_USERS:,} users, as in Fig. 10(a)."),
    Figure("fig11", "The extensions DSAT_w and RescueDP against LBA/LPA, and PeGaSus and FAST in the central model "
           "(epsilon = 1, w = 30)", "setting", ("eps=1,w=30",), EXTENSIONS + CENTRAL, ("mre",), DATASETS, table=True,
           note="The extensions run with our default parameters (C = ceil(w/4); RescueDP's published gains), "
           "untuned. PeGaSus and FAST_w run in the central model (a trusted aggregator sees every user's value) "
           "on the same streams' counts, with Lap(1/eps) noise; their MRE is of the counts with the floor 1e-3 "
           "times the users, which is the MRE of the frequencies with the local methods' floor 1e-3."),
)


def _setting(figure: Figure, x) -> dict:
    setting = {"epsilon": 1.0, "w": 20, "beta": 0.5, "n": USERS}
    if figure.x == "setting":
        for part in x.split(","):
            key, value = part.split("=")
            setting["epsilon" if key == "eps" else key] = float(value) if key == "eps" else int(value)
    else:
        setting[figure.x] = x
    return setting


@functools.lru_cache(maxsize=8)
def _dump_users(path: str) -> int:
    return load_dump(path).users


def command(figure: Figure, dataset: str, x, method: str, scale, inputs: dict) -> list[str]:
    s = _setting(figure, x)
    if dataset in SYNTHETIC or dataset in CONTINUOUS:
        longest = max(_setting(figure, point)["w"] for point in figure.xs)  # one stream length for the whole sweep
        users, slots = scale.size(MEAN_USERS if dataset in CONTINUOUS else s["n"], SLOTS, min_slots=2 * longest)
        data = ["--dataset", CONTINUOUS.get(dataset, dataset), "--users", str(users), "--slots", str(slots)]
    else:
        users, data = _dump_users(inputs[dataset]), ["--input", inputs[dataset]]
    privacy = ["-m", method, "-e", f"{s['epsilon']:g}", "-w", str(s["w"])]
    if method in CENTRAL:  # counts: the floor that makes their MRE the frequencies' (the local default, 1e-3)
        return [*data, *privacy, "--noise", "laplace", "--mre-floor", f"{users * FREQUENCY_MRE_FLOOR:g}"]
    tokens = [*data, *privacy, "--mode", "sufficient"]
    if dataset in CONTINUOUS:
        tokens += ["--task", "mean", "--select-bound"]
    if method in ("lbd", "lba", "lpd", "lpa", "lb-dsat", "lp-dsat"):
        tokens += ["--beta", f"{s['beta']:g}"]
    if figure.x == "sqrt(Q)":
        tokens += ["--lns-std", f"{x:g}"]
    if figure.x == "b":
        tokens += ["--sin-b", f"{x:g}"]
    if "roc_auc" in figure.metrics:
        tokens.append("--roc")
    return tokens


PAPER = Paper("ldp-ids", "Ren et al., LDP-IDS, SIGMOD 2022", FIGURES, command=command)
