"""Two bench reports of the same code, row by row: the plan's signed prediction error (+: predicted
high), the plan as measured in each, and how far the measurement moved between the runs.

    python pair.py A/report.json B/report.json
"""
import json
import statistics
import sys


def rows(report: dict) -> dict:
    out = {}
    for e in report["end_to_end"]:
        measured, predicted = e["measured"].get("plumbkit"), e.get("predicted_plumbkit")
        if e.get("failed") or not measured or not predicted:
            continue
        out[e["pipeline"]] = dict(err=predicted / measured - 1, meas=measured, pred=predicted,
                                  shipped=e.get("applied"), spread=(e.get("spread") or {}).get("plumbkit"))
    return out


a, b = (rows(json.load(open(f))) for f in sys.argv[1:3])
moved, swing = [], []
print(f"| pipeline | error A | error B | plan measured A | B | moved | IQR/median B |")
print("|---|---|---|---|---|---|---|")
for name, x in a.items():
    if name not in b:
        continue
    y = b[name]
    moved.append(abs(y["meas"] / x["meas"] - 1))
    swing.append(abs(y["err"] - x["err"]))
    print(f"| {name} | {x['err']:+.0%} | {y['err']:+.0%} | {x['meas']:,.0f} | {y['meas']:,.0f} | "
          f"{y['meas'] / x['meas'] - 1:+.0%} | {y['spread']:.0%} |")
print(f"\nplan measured, moved between the runs: median {statistics.median(moved):.0%}, most {max(moved):.0%}")
print(f"signed error, moved between the runs: median {statistics.median(swing):.0%} points, most {max(swing):.0%}")
