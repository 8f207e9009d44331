#!/usr/bin/env python3
"""The routing balance experiment of docs/MODEL_NOTES.md ("Does the expert bias balance?"):
reads the --log-json files of training runs that differ only in their MoE routing options and
writes (1) a Markdown table of the expert-load spread over the steps and the final validation
loss, (2) an SVG plot of the largest and smallest expert share per step. Stdlib only.

    routing_balance.py --svg out.svg NAME=RUNDIR/log.jsonl [NAME=...]

A layer's share of expert e is counts[e] / sum(counts) of the step's last micro-batch (before
any capacity dropping); the plot shows, per step, the largest share over all MoE layers and
experts and the smallest one. A perfectly balanced router gives 1/E everywhere.
"""
import argparse
import json

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def read(path):
    steps, evals = [], []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            (evals if "eval" in r else steps).append(r)
    return steps, evals


def spread(step):
    """(largest share, smallest share, mean dropped fraction) over the MoE layers of a step."""
    hi, lo, dropped = 0.0, 1.0, 0.0
    for layer in step["expert_load"]:
        total = sum(layer["counts"])
        shares = [c / total for c in layer["counts"]]
        hi, lo = max(hi, max(shares)), min(lo, min(shares))
        dropped += layer.get("dropped", 0.0)
    return hi, lo, dropped / len(step["expert_load"])


def svg_plot(series, n_experts, width=760, height=380):
    """series: [(name, [(step, hi, lo)])] -> SVG text (hi solid, lo dashed)."""
    left, right, top, bottom = 60, 190, 20, 40
    max_step = max(s for _, pts in series for s, _, _ in pts)
    y_max = max(hi for _, pts in series for _, hi, _ in pts) * 1.05

    def x(s):
        return left + (width - left - right) * s / max_step

    def y(v):
        return top + (height - top - bottom) * (1 - v / y_max)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    for i in range(6):  # horizontal grid and labels
        v = y_max * i / 5
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'stroke="#ddd"/><text x="{left - 6}" y="{y(v) + 4:.1f}" '
                   f'text-anchor="end">{v:.2f}</text>')
    for i in range(5):
        s = max_step * i / 4
        out.append(f'<text x="{x(s):.1f}" y="{height - bottom + 16}" '
                   f'text-anchor="middle">{s:.0f}</text>')
    out.append(f'<text x="{(left + width - right) / 2}" y="{height - 6}" '
               f'text-anchor="middle">optimizer step</text>')
    out.append(f'<text x="14" y="{(top + height - bottom) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(top + height - bottom) / 2})">expert share of the '
               f'selections (max solid, min dashed)</text>')
    ideal = 1.0 / n_experts
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{y(ideal):.1f}" y2="{y(ideal):.1f}" '
               f'stroke="black" stroke-dasharray="2,3"/>')
    for i, (name, pts) in enumerate(series):
        c = COLOURS[i % len(COLOURS)]
        for k, dash in ((1, ""), (2, ' stroke-dasharray="5,3"')):
            path = " ".join(f"{x(p[0]):.1f},{y(p[k]):.1f}" for p in pts)
            out.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.3"{dash} '
                       f'points="{path}"/>')
        out.append(f'<line x1="{width - right + 12}" x2="{width - right + 32}" '
                   f'y1="{top + 14 + 18 * i}" y2="{top + 14 + 18 * i}" stroke="{c}" '
                   f'stroke-width="2"/><text x="{width - right + 38}" '
                   f'y="{top + 18 + 18 * i}">{name}</text>')
    out.append(f'<text x="{width - right + 12}" y="{top + 18 + 18 * len(series) + 6}">'
               f'dotted: 1/E = {ideal:.4f}</text>')
    out.append("</svg>")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--svg", required=True)
    ap.add_argument("runs", nargs="+", help="NAME=path/to/log.jsonl")
    args = ap.parse_args()
    series, rows, n_experts = [], [], 0
    for spec in args.runs:
        name, path = spec.split("=", 1)
        steps, evals = read(path)
        n_experts = len(steps[0]["expert_load"][0]["counts"])
        pts = [(s["step"], *spread(s)[:2]) for s in steps]
        series.append((name, pts))
        his = [p[1] for p in pts]
        los = [p[2] for p in pts]
        tail = pts[len(pts) // 2:]  # the second half of the run
        drop = [spread(s)[2] for s in steps]
        final = evals[-1]["eval"] if evals else {"ce": float("nan"), "loss": float("nan")}
        rows.append(f"| {name} | {max(his):.3f} / {min(los):.3f} | "
                    f"{sum(p[1] for p in tail) / len(tail):.3f} / "
                    f"{sum(p[2] for p in tail) / len(tail):.3f} | "
                    f"{sum(drop[len(drop) // 2:]) / len(drop[len(drop) // 2:]):.3f} | "
                    f"{final['ce']:.4f} / {final['loss']:.4f} |")
    with open(args.svg, "w") as f:
        f.write(svg_plot(series, n_experts))
    print("| run | max / min share, all steps | mean max / min share, 2nd half | "
          "dropped, 2nd half | final val ce / loss |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
