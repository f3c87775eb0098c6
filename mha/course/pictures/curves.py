"""Line plots for chapters 11 and 12: training curves, cost against sequence length, benchmark results.

Chinese labels come from the shipped font subset (:mod:`mha.course.pictures.cjk`); figures are sized for a phone.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from .style import head_color

__all__ = ["plot_curves", "plot_benchmark"]

_MARKERS = "osD^v<>p"


def plot_curves(x, series: dict, xlabel: str, ylabel: str, title=None, log=False, ref_slopes=(), ax=None):
    """Draw several curves over the same x values.

    Args:
        x: the shared x values (e.g. training steps or sequence lengths L).
        series: ``{label: y values}``, one curve each (same length as ``x``).
        log: log-log axes (for costs that grow like a power of L).
        ref_slopes: on log axes, dashed reference lines ``y ~ x**p`` for each
            p, anchored at the first point of the first series.

    Returns:
        The matplotlib ``Axes``.
    """
    x = list(x)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.4, 3.8))
    for i, (label, y) in enumerate(series.items()):
        y = [float(v) for v in y]
        if len(y) != len(x):
            raise ValueError(f"series {label!r} has {len(y)} values but x has {len(x)}")
        ax.plot(x, y, marker=_MARKERS[i % len(_MARKERS)], markersize=4 if len(x) > 15 else 6,
                color=head_color(i), label=label)
    if log:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(x)
        ax.set_xticklabels([str(v) for v in x])
        ax.minorticks_off()
        first = [float(v) for v in next(iter(series.values()))]
        for j, p in enumerate(ref_slopes):
            ref = [first[0] * (xi / x[0]) ** p for xi in x]
            ax.plot(x, ref, linestyle=("--", ":", "-.")[j % 3], color="gray", linewidth=1.2,
                    label=rf"$\propto L^{{{p}}}$")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=10)
    return ax


def plot_benchmark(result: dict, names: dict | None = None):
    """Two panels from a ``python -m mha.course.bench`` result: median time and peak memory against L.

    Args:
        result: the dict that :func:`mha.course.bench.run_benchmark` returns (or its JSON file, loaded).
        names: optional legend names for the cases (e.g. :data:`mha.course.bench.CASE_NAMES_ZH`).

    Returns:
        The matplotlib ``Figure``.
    """
    rows = result["rows"]
    names = names or {}
    cases = list(dict.fromkeys(r["case"] for r in rows))
    lengths = sorted({r["L"] for r in rows})
    cfg = result["config"]
    fig, (left, right) = plt.subplots(2, 1, figsize=(5.4, 8.0))
    for ax, key, ylabel in ((left, "median_ms", "前向 + 反向，中位数 ms"),
                            (right, "peak_mib", "额外内存峰值 MiB")):
        series = {names.get(c, c): [next(r[key] for r in rows if r["case"] == c and r["L"] == L) for L in lengths]
                  for c in cases}
        plot_curves(lengths, series, "序列长度 L", ylabel, log=True, ax=ax)
    fig.suptitle(f"B={cfg['batch']}, d_model={cfg['d_model']}, h={cfg['n_heads']}, {cfg['device']} {cfg['dtype']},\n"
                 f"{cfg['threads']} 个线程, torch {cfg['torch']}", fontsize=11)
    fig.tight_layout()
    return fig
