#!/usr/bin/env python3
"""Summarizes and plots the episodes of plugrl_mujoco_cartpole --csv.

    plot_returns.py LEARNER_CSV [--random RANDOM_CSV] [--out PLOT.svg]
                    [--window K] [--title TEXT]
                    [--require-gain G] [--require-ratio R]

Each CSV has the header episode,env,seconds,return,length,success. Prints
the mean return of the learner's first and last K episodes (K = --window,
default 40) and, with --random, the random policy's mean return and the
ratio of the two. --out writes an SVG (no dependencies) of every episode's
return against wall-clock seconds, with a moving mean over K episodes and
the random policy's mean as a line.

Exits 1 when a requirement fails: --require-gain G wants the last K
episodes' mean to be at least G times the first K's, --require-ratio R at
least R times the random policy's mean.
"""

import argparse
import csv
import math
import sys
from xml.sax.saxutils import escape


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [(float(r["seconds"]), float(r["return"])) for r in rows]


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def nice_step(span, target):
    """A 1, 2 or 5 times a power of ten step giving about target ticks."""
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def fmt(v):
    return f"{v:g}" if abs(v) < 1e6 else f"{v:.3g}"


def svg(episodes, window, random_mean, title):
    w, h = 900, 520
    left, right, top, bottom = 70, 30, 50, 60
    pw, ph = w - left - right, h - top - bottom
    t_max = max((t for t, _ in episodes), default=1.0) or 1.0
    r_max = max([r for _, r in episodes] + [random_mean or 0, 1.0])
    y_step = nice_step(r_max, 5)
    y_top = math.ceil(r_max / y_step) * y_step
    x_step = nice_step(t_max, 8)
    x_top = math.ceil(t_max / x_step) * x_step

    def X(t):
        return left + pw * t / x_top

    def Y(r):
        return top + ph * (1 - r / y_top)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{w / 2}" y="28" text-anchor="middle" font-size="16">{escape(title)}</text>',
    ]
    # Grid and ticks.
    y = 0.0
    while y <= y_top + 1e-9:
        out.append(f'<line x1="{left}" y1="{Y(y):.1f}" x2="{left + pw}" y2="{Y(y):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{left - 8}" y="{Y(y) + 4:.1f}" text-anchor="end">{fmt(y)}</text>')
        y += y_step
    x = 0.0
    while x <= x_top + 1e-9:
        out.append(f'<line x1="{X(x):.1f}" y1="{top}" x2="{X(x):.1f}" y2="{top + ph}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{X(x):.1f}" y="{top + ph + 20}" text-anchor="middle">{fmt(x)}</text>')
        x += x_step
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 15}" text-anchor="middle">wall-clock seconds</text>')
    out.append(f'<text x="18" y="{top + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {top + ph / 2})">episode return</text>')
    # Episodes, then their moving mean.
    for t, r in episodes:
        out.append(f'<circle cx="{X(t):.1f}" cy="{Y(r):.1f}" r="2.2" fill="#4682b4" fill-opacity="0.35"/>')
    pts = []
    for i in range(len(episodes)):
        lo = max(0, i + 1 - window)
        pts.append(f"{X(episodes[i][0]):.1f},{Y(mean([r for _, r in episodes[lo:i + 1]])):.1f}")
    if pts:
        out.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="#08306b" stroke-width="2.5"/>')
    legend = [("#08306b", "", f"mean of the last {window} episodes"),
              ("#4682b4", "dot", "one episode")]
    if random_mean is not None:
        for level, color, dash, label in ((random_mean, "#888", "6,4", f"random policy ({random_mean:.1f})"),
                                          (5 * random_mean, "#d95f02", "2,3", "5 x random policy")):
            if level <= y_top:
                out.append(f'<line x1="{left}" y1="{Y(level):.1f}" x2="{left + pw}" y2="{Y(level):.1f}" '
                           f'stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>')
            legend.append((color, dash, label))
    lx, ly = left + pw - 250, top + ph - 20 * len(legend) - 8
    out.append(f'<rect x="{lx - 10}" y="{ly - 14}" width="250" height="{20 * len(legend) + 8}" '
               'fill="white" fill-opacity="0.9" stroke="#ccc"/>')
    for i, (color, dash, label) in enumerate(legend):
        yy = ly + 20 * i
        if dash == "dot":
            out.append(f'<circle cx="{lx + 14}" cy="{yy - 4}" r="3" fill="{color}" fill-opacity="0.6"/>')
        else:
            d = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(f'<line x1="{lx}" y1="{yy - 4}" x2="{lx + 28}" y2="{yy - 4}" stroke="{color}" '
                       f'stroke-width="2.5"{d}/>')
        out.append(f'<text x="{lx + 38}" y="{yy}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("learner_csv")
    p.add_argument("--random", help="the random policy's episodes (the same CSV form)")
    p.add_argument("--out", help="write the plot here (SVG)")
    p.add_argument("--window", type=int, default=40)
    p.add_argument("--title", default="MuJoCo cartpole trained through PlugRL: episode return vs time")
    p.add_argument("--require-gain", type=float)
    p.add_argument("--require-ratio", type=float)
    a = p.parse_args()

    eps = read(a.learner_csv)
    if len(eps) < 2:
        print(f"{a.learner_csv}: {len(eps)} episodes, too few to compare", file=sys.stderr)
        return 1
    k = min(a.window, len(eps) // 2)
    first, last = mean([r for _, r in eps[:k]]), mean([r for _, r in eps[-k:]])
    ok = True
    print(f"learner: {len(eps)} episodes in {eps[-1][0]:.1f} s; mean return of the first {k}: {first:.1f}, "
          f"of the last {k}: {last:.1f}")
    random_mean = None
    if a.random:
        rnd = [r for _, r in read(a.random)]
        random_mean = mean(rnd)
        ratio = last / random_mean if random_mean > 0 else math.inf
        print(f"random policy: mean return {random_mean:.1f} over {len(rnd)} episodes; "
              f"the learner's last {k} episodes: {ratio:.1f} x that")
        if a.require_ratio is not None and not ratio >= a.require_ratio:
            print(f"FAIL: want at least {a.require_ratio:g} x the random policy's mean return", file=sys.stderr)
            ok = False
    if a.require_gain is not None and not last >= a.require_gain * first:
        print(f"FAIL: the last {k} episodes' mean {last:.1f} is not {a.require_gain:g} x the first {k}'s "
              f"{first:.1f}", file=sys.stderr)
        ok = False
    if a.out:
        with open(a.out, "w") as f:
            f.write(svg(eps, a.window, random_mean, a.title))
        print(f"plot: {a.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
