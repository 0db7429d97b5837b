"""Draw a Grafana dashboard JSON from a live Prometheus's data, in Grafana's layout and dark theme.

Grafana itself cannot be installed on the project's machines (no package registry carries it), so the
picture in the README is drawn by this script from the very queries of the dashboard file, sent to a
real Prometheus that scraped a real run: tests/deploy/test_dashboards.py runs it when
WEVENT_DASHBOARD_PNG is set (see docker/README.md). Needs matplotlib.

    python docker/grafana/render_dashboard.py --prometheus http://127.0.0.1:9090 --minutes 5 \\
        --out docker/grafana/dashboard.png taxi
"""

from __future__ import annotations

import argparse
import json
import re
import time
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

DASHBOARD = Path(__file__).with_name("dashboards") / "wevent.json"
BACKGROUND, PANEL, GRID, TEXT, MUTED = "#111217", "#181b1f", "#2c3235", "#ccccdc", "#8e8e9e"
PALETTE = ["#73bf69", "#f2cc0c", "#5794f2", "#ff780a", "#f2495c", "#b877d9", "#8ab8ff", "#ff9830"]  # Grafana classic
COLORS = {"green": "#73bf69", "red": "#f2495c", "orange": "#ff9830", "blue": "#5794f2"}


def grafana_promql(expr: str, streams: list[str], rate_interval: str) -> str:
    """The expression as Grafana sends it: the stream variable set to ``streams``, $__rate_interval filled."""
    expr = expr.replace("$__rate_interval", rate_interval)
    escaped = [re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\\\1", s) for s in streams]  # as Grafana: \\ in a PromQL string
    expr = re.sub(r"\$\{stream\}|\$stream\b", lambda _: "(" + "|".join(escaped) + ")", expr)
    if "$" in expr:
        raise ValueError(f"a dashboard variable this renderer does not set: {expr}")
    return expr


def query_range(prometheus: str, expr: str, start: float, end: float, step: float) -> list[dict]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{params}", timeout=30) as response:
        return json.loads(response.read())["data"]["result"]


def legend(template: str, labels: dict) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip() or "value"


def formatted(value: float, unit: str, decimals: int | None = None) -> str:
    if unit == "percentunit":
        return f"{value * 100:.{1 if decimals is None else decimals}f}%"
    if unit == "s":
        return f"{value:.2f} s" if value < 60 else f"{value / 60:.1f} min"
    if unit == "bps":
        return f"{value:,.0f} b/s"
    return f"{value:,.{decimals if decimals is not None else (0 if float(value).is_integer() else 3)}f}"


def threshold_color(defaults: dict, value: float) -> str:
    color = COLORS["green"]
    for step in defaults.get("thresholds", {}).get("steps", []):
        if step["value"] is None or value >= step["value"]:
            color = COLORS.get(step["color"], step["color"])
    return color


def render(dashboard: dict,  # noqa: C901 - one pass over the dashboard's panels, a branch per panel kind
           prometheus: str, streams: list[str], minutes: float, rate_interval: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    end = time.time()
    start = end - minutes * 60
    step = max(1.0, minutes * 60 / 300)
    panels = dashboard["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    unit_height = 0.36  # inches per grid row
    fig = plt.figure(figsize=(20, rows * unit_height + 0.9), facecolor=BACKGROUND)
    top = 1 - 0.6 / fig.get_figheight()
    fig.text(0.008, 1 - 0.3 / fig.get_figheight(), f"{dashboard['title']}   stream: {', '.join(streams)}",
             color=TEXT, fontsize=14, va="center", weight="bold")

    def box(pos, inset: bool | str = False):
        """The panel's rectangle in figure coordinates; ``inset``: the plot area inside the margins
        (True) or below the title ("title")."""
        gap = 0.004
        x, y, w, h = (pos[k] for k in "xywh")
        left, bottom = x / 24 + gap, top - (y + h) / rows * top + gap
        width, height = w / 24 - 2 * gap, h / rows * top - 2 * gap
        margin_top = 0.38 / fig.get_figheight()  # the title's line
        if inset == "title":
            return [left, bottom, width, height - margin_top]
        if not inset:
            return [left, bottom, width, height]
        margin_x, margin_bottom = 0.042, 0.3 / fig.get_figheight()
        return [left + margin_x, bottom + margin_bottom, width - margin_x - 0.006, height - margin_bottom - margin_top]

    for panel in panels:
        if panel["type"] == "row":
            x, y, w, h = box(panel["gridPos"])
            fig.text(x, y + h / 2, panel["title"], color=TEXT, fontsize=12, weight="bold", va="center")
            continue
        frame = fig.add_axes(box(panel["gridPos"]), facecolor=PANEL)
        frame.set_xticks([]), frame.set_yticks([])
        for spine in frame.spines.values():
            spine.set_color(GRID)
        frame.text(0.008, 0.985, panel["title"], color=TEXT, fontsize=10, ha="left", va="top", transform=frame.transAxes)
        ax = fig.add_axes(box(panel["gridPos"], inset="title" if panel["type"] == "stat" else True), facecolor=PANEL)
        for spine in ax.spines.values():
            spine.set_visible(False)
        defaults = panel["fieldConfig"]["defaults"]
        series = []
        for target in panel["targets"]:
            for result in query_range(prometheus, grafana_promql(target["expr"], streams, rate_interval), start, end, step):
                points = [(datetime.fromtimestamp(t), float(v)) for t, v in result["values"] if v not in ("NaN", "+Inf")]
                if points:
                    series.append((legend(target.get("legendFormat", ""), result["metric"]), points, target["refId"]))
        if not series:
            ax.set_xticks([]), ax.set_yticks([])
            ax.text(0.5, 0.5, "No data", color=MUTED, fontsize=12, ha="center", va="center", transform=ax.transAxes)
            continue
        if panel["type"] == "stat":
            ax.set_xticks([]), ax.set_yticks([])
            for i, (name, points, _) in enumerate(series):
                value = points[-1][1]
                left, width = i / len(series), 1 / len(series)
                ax.add_patch(plt.Rectangle((left + 0.01, 0.04), width - 0.02, 0.92, transform=ax.transAxes,
                                           color=threshold_color(defaults, value), alpha=0.85))
                ax.text(left + width / 2, 0.55, formatted(value, defaults.get("unit", ""), defaults.get("decimals")),
                        color="white", fontsize=20, weight="bold", ha="center", va="center", transform=ax.transAxes)
                ax.text(left + width / 2, 0.2, name, color="white", fontsize=9, ha="center", transform=ax.transAxes)
            continue
        if defaults.get("custom", {}).get("stacking", {}).get("mode") == "normal":
            times = sorted({t for _, points, _ in series for t, _ in points})
            stacked = [[dict(points).get(t, 0.0) for t in times] for _, points, _ in series]
            ax.stackplot(times, stacked, labels=[name for name, _, _ in series], colors=PALETTE[:len(series)], alpha=0.7)
        else:
            for i, (name, points, ref) in enumerate(series):
                times, values = zip(*points)
                dashed = any(o["matcher"] == {"id": "byFrameRefID", "options": ref}
                             for o in panel["fieldConfig"].get("overrides", []))
                ax.plot(times, values, color=PALETTE[i % len(PALETTE)], linewidth=1.4, label=name,
                        linestyle="--" if dashed else "-")
        ax.grid(color=GRID, linewidth=0.6)
        ax.tick_params(colors=MUTED, labelsize=8)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
        ax.yaxis.set_major_formatter(lambda v, _, unit=defaults.get("unit", ""): formatted(v, unit))
        ax.legend(loc="upper left", fontsize=7, frameon=False, labelcolor=TEXT, ncol=3)
    fig.text(0.995, 0.004, "Drawn by docker/grafana/render_dashboard.py from Prometheus data of a real `wevent run` "
             "(the dashboard's own queries; Grafana itself is not installable here)",
             color=MUTED, fontsize=8, ha="right", va="bottom")
    fig.savefig(out, dpi=80, facecolor=BACKGROUND)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("streams", nargs="+", help="values of the dashboard's stream variable")
    parser.add_argument("--prometheus", required=True, help="Prometheus base URL")
    parser.add_argument("--dashboard", type=Path, default=DASHBOARD, help="dashboard JSON file")
    parser.add_argument("--minutes", type=float, default=15, help="time range ending now (default: 15)")
    parser.add_argument("--rate-interval", default="1m", help="$__rate_interval: four scrape intervals (default: 1m)")
    parser.add_argument("--out", type=Path, required=True, help="PNG file to write")
    args = parser.parse_args()
    render(json.loads(args.dashboard.read_text()), args.prometheus, args.streams, args.minutes, args.rate_interval, args.out)


if __name__ == "__main__":
    main()
