"""How every wevent picture looks: one style per method, legends off the data, the PNG written.

A method keeps one colour, marker and dash pattern in every panel of every figure, and in
``wevent plot``'s picture of a run of it. The styles follow the method's place in one catalogue:
the methods in the order the papers' figures first draw them (LDP-IDS, Kellaris et al., the
benchmark of every central mechanism, Du et al., Sun et al.), then every other registered mechanism by model (central, local, personalized)
and name. A new mechanism gets its style from that place with nothing to add here. (The
registry's own order, alphabetical by model, would give LDP-IDS's seven methods the palette's
palest colours and two of them the same one.) The palette is matplotlib's ``tab10`` without its
grey and olive, which read as "no method" and fade on white, and four darker colours of ``tab20b``
and ``Dark2``: twelve, so that the benchmark's eleven central mechanisms, which follow one another
in the catalogue, all differ in colour.

Colour tells the methods of a figure apart (the tests check it for every figure); most of them
differ in marker shape and dash pattern too, which keeps coinciding curves visible (LDP-IDS's LSP
and LPU spend exactly the same bits): markers are hollow, so where two curves overlap both
outlines show, and the lower curve's colour shows in the gaps of the upper one's dashes. No
offset: it would move points off the x values they were run at.

>>> [method_style(m)["color"] for m in ("lbu", "lbd")]
['#1f77b4', '#ff7f0e']
>>> from wevent.reproduce.benchmark import METHODS
>>> len({method_style(m)["color"] for m in METHODS}) == len(METHODS)
True
"""

from __future__ import annotations

import functools
from pathlib import Path

from ..errors import UsageError

__all__ = ["PALETTE", "check_matplotlib", "pyplot", "catalogue", "method_style", "method_label", "save", "DPI"]

# matplotlib's "tab10" without grey and olive, then indigo, mustard, plum and moss; written out so that
# rcParams cannot recolour the figures.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#393b79", "#e6ab02", "#7b4173", "#637939")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")  # 12, 7 and 4 colours, markers, dashes: styles repeat every 84
DASHES = ("-", "--", "-.", ":")
DPI = 110  # dots an inch of a PNG drawn without a set width


def check_matplotlib() -> None:
    """A usage error naming the extra to install when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("drawing needs the reproduce extra (matplotlib): in the wevent checkout, "
                         "pip install -e '.[reproduce]'") from None


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    check_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@functools.cache
def catalogue() -> tuple[str, ...]:
    """Every method a picture can draw, in the order their styles are given."""
    from ..core.registry import MODELS, mechanisms
    from . import PAPERS

    names: list[str] = []
    for paper in PAPERS.values():
        for figure in paper.figures:
            if not figure.table:
                names += [m for m in figure.methods if m not in names]
    registered = sorted(mechanisms().items(), key=lambda item: (MODELS.index(item[1].model), item[0]))
    return tuple(names + [name for name, _ in registered if name not in names])


def method_style(method: str) -> dict:
    """``color``, ``marker`` and ``linestyle`` of ``method`` (keyword arguments of ``Axes.plot``); a
    method outside the catalogue (a newer writer's) gets the style after the catalogue's last."""
    names = catalogue()
    place = names.index(method) if method in names else len(names)
    return {"color": PALETTE[place % len(PALETTE)], "marker": MARKERS[place % len(MARKERS)],
            "linestyle": DASHES[place % len(DASHES)], "markerfacecolor": "none"}


def method_label(method: str) -> str:
    """How a legend names a method: as the papers write it."""
    return method.upper()


def save(fig, path: Path | str, width: int | None = None) -> None:
    """Write ``fig`` as a PNG: at :data:`DPI` dots an inch, or ``width`` pixels wide; then close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=DPI if width is None else width / fig.get_figwidth())
    plt.close(fig)
