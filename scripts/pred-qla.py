#!/usr/bin/env python3
"""PRED's QLA, combination by combination, from an archived run or a results
directory: the decisions it took (more / less / stay) and where its setting
(min_K, lambda) ended, on every port that ran PRED (named by the host behind it: in
pred-flows.toml h2's port carries the data, h1's only the ACKs).

Usage: scripts/pred-qla.py ARCHIVE_OR_RESULTS_DIR...

The verdict is the fidelity guard's (a NOT kept under the repeat's own
name is a repeat left out). It answers "did the QLA settle or walk": a QLA that stays put most of the
time and ends near its start settled; near-equal more / less counts and a
min_K far from its start are a random walk (scenarios/README.md, "PRED:
queue length vs number of flows").
"""
import os
import sys

from archive_combos import combos_of


def main(paths):
    if not paths:
        sys.exit(__doc__.strip())
    print(f"{'combination':<28} {'port':>8} {'more':>6} {'less':>6} {'stay':>6} "
          f"{'stay %':>6} {'min_K':>6} {'lambda':>7}  verdict")
    for path in paths:
        if not os.path.isdir(path):
            sys.exit(f"{path}: not a directory (give an archived run or a results directory)")
        for name, combo in sorted(combos_of(path).items()):
            switch, result = combo.get("switch") or {}, combo.get("result") or {}
            faithful = (result.get("fidelity") or {}).get("faithful")
            verdict = {True: "faithful", False: "NOT"}.get(faithful, "-")
            for i, port in enumerate(switch.get("ports", [])):
                # The runner's ports are <prefix>-<host>-sw: name the host.
                name_of = port.get("name", str(i)).split("-")
                where = "-".join(name_of[1:-1]) if len(name_of) > 2 else str(i)
                aqm = port.get("aqm") or {}
                if aqm.get("kind") != "pred" or not aqm.get("params", {}).get("qla"):
                    continue
                c = aqm.get("counters", {})
                more, less, stay = (c.get(f"decisions_{k}", 0) for k in ("more", "less", "stay"))
                total = more + less + stay
                share = f"{100 * stay / total:.0f}" if total else "-"
                setting = aqm.get("setting", {})
                if more + less + stay == 0 and not setting:
                    continue
                print(f"{name:<28} {where:>8} {more:>6} {less:>6} {stay:>6} {share:>6} "
                      f"{setting.get('min_k', '-'):>6} {setting.get('lambda', 0):>7.3f}  {verdict}")


if __name__ == "__main__":
    main(sys.argv[1:])
