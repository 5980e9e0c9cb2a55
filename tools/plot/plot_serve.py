#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Pictures of a `kvinfer serve` run from its JSON report (`--json PATH`).

Three panels over the run's steps: the attention time of each step split into
append / prefill / decode (stacked, ms), the batch (requests in the step) with the
query rows it carried, and the page pool's occupancy (pages in use against the
pool). Needs matplotlib (PyPI: pip install matplotlib).

    tools/plot/plot_serve.py report.json -o serve.png [--x time] [--log] [--title TEXT]

Exit codes: 0 written, 2 bad input (a missing file, not a report, no series), 3
matplotlib missing.
"""
import argparse
import json
import math
import os
import sys

SERIES = ("step", "t_s", "step_ms", "batch", "prefill_tokens", "decode_tokens", "append_ms", "prefill_ms",
          "decode_ms", "pages_in_use")


class BadInput(Exception):
    pass


def load_report(path):
    """The report's series as lists of equal length, and the pool's size."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: not valid JSON: {e}")
    if not isinstance(report, dict) or "series" not in report:
        raise BadInput(f"{path}: no \"series\" (not a report of kvinfer serve --json, "
                       "or one from a version without them)")
    series = report["series"]
    missing = [k for k in SERIES if k not in series]
    if missing:
        raise BadInput(f"{path}: the series lack {', '.join(missing)}")
    n = len(series["step"])
    for k in SERIES:
        v = series[k]
        if not isinstance(v, list) or len(v) != n:
            raise BadInput(f"{path}: series \"{k}\" must be a list of {n} numbers like \"step\"")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v):
            raise BadInput(f"{path}: series \"{k}\" holds a value that is not a finite number")
    if n == 0:
        raise BadInput(f"{path}: the run has no steps")
    try:
        num_pages = int(report["pages"]["num_pages"])
    except (KeyError, TypeError, ValueError):
        raise BadInput(f"{path}: no pages.num_pages")
    return report, series, num_pages


def plot(report, series, num_pages, out, x_axis, title, log_time=False):
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    # Each step is drawn from where it starts: t_s is when it ended.
    if x_axis == "time":
        x = [t - ms / 1e3 for t, ms in zip(series["t_s"], series["step_ms"])]
    else:
        x = series["step"]
    x_label = "time since the start (s)" if x_axis == "time" else "engine step"
    fig, (ax_t, ax_b, ax_p) = plt.subplots(3, 1, figsize=(11, 8.5), sharex=True,
                                           gridspec_kw={"height_ratios": [3, 2, 2]})
    parts = [("append_ms", "append", "#8c8c8c"), ("prefill_ms", "prefill", "#d95f02"),
             ("decode_ms", "decode", "#1b9e77")]
    ax_t.stackplot(x, *[series[k] for k, _, _ in parts], labels=[name for _, name, _ in parts],
                   colors=[c for _, _, c in parts], step="post" if len(x) > 1 else None, alpha=0.9)
    ax_t.set_ylabel("attention time per step (ms)")
    if log_time:
        smallest = min((v for v in series["decode_ms"] if v > 0), default=1.0)
        ax_t.set_yscale("symlog", linthresh=max(1e-3, smallest))
    ax_t.legend(loc="upper right", frameon=False, ncol=3)
    ax_t.grid(alpha=0.3)

    ax_b.step(x, series["batch"], where="post", color="#4c4c9c", label="requests in the step")
    ax_b.set_ylabel("batch (requests)")
    ax_b.grid(alpha=0.3)
    rows = ax_b.twinx()
    tokens = [p + d for p, d in zip(series["prefill_tokens"], series["decode_tokens"])]
    rows.step(x, tokens, where="post", color="#e7298a", alpha=0.6, label="query rows (prefill + decode)")
    rows.set_ylabel("query rows")
    rows.set_yscale("symlog", linthresh=max(1, max(series["batch"])))
    handles = ax_b.get_legend_handles_labels()[0] + rows.get_legend_handles_labels()[0]
    ax_b.legend(handles, [h.get_label() for h in handles], loc="upper right", frameon=False, ncol=2)

    pages = series["pages_in_use"]
    occupancy = [100.0 * p / num_pages for p in pages] if num_pages > 0 else pages
    ax_p.fill_between(x, occupancy, step="post", color="#66a61e", alpha=0.5)
    ax_p.step(x, occupancy, where="post", color="#66a61e")
    ax_p.set_ylim(0, 105)
    ax_p.set_ylabel(f"page pool in use (% of {num_pages})")
    ax_p.set_xlabel(x_label)
    ax_p.grid(alpha=0.3)

    cfg = report.get("config", {})
    model = cfg.get("model", {}).get("name", "?")
    device = cfg.get("device", "?")
    res = report.get("result", {})
    fig.suptitle(title or f"kvinfer serve: {model} on {device}, {res.get('steps', len(x))} steps, "
                          f"{res.get('tokens_per_s', 0):.0f} tokens/s")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", help="the JSON report of kvinfer serve --json")
    ap.add_argument("-o", "--output", default=None, help="the PNG to write (default: REPORT with .png)")
    ap.add_argument("--x", choices=("step", "time"), default="step",
                    help="the horizontal axis (default: step)")
    ap.add_argument("--log", action="store_true",
                    help="a logarithmic time axis (decode steps stay visible beside long prefill steps)")
    ap.add_argument("--title", default=None, help="the figure's title")
    a = ap.parse_args(argv)
    out = a.output or os.path.splitext(a.report)[0] + ".png"
    if not out.lower().endswith(".png"):
        print(f"plot_serve: -o {out}: must name a .png file", file=sys.stderr)
        return 2
    try:
        report, series, num_pages = load_report(a.report)
    except BadInput as e:
        print(f"plot_serve: {e}", file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot_serve: matplotlib is missing (pip install matplotlib)", file=sys.stderr)
        return 3
    try:
        plot(report, series, num_pages, out, a.x, a.title, a.log)
    except OSError as e:
        print(f"plot_serve: {out}: cannot write: {e.strerror}", file=sys.stderr)
        return 2
    print(f"plot_serve: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
