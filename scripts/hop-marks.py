#!/usr/bin/env python3
"""Which hop of a fabric queued and marked, combination by combination,
from an archived run or a results directory: every hop that marked or
dropped, with its share of the run's CE marks, its marks, drops and largest
queue, and the ECMP split between hops whose names share a prefix before
':' and lead to different switches (the uplinks of one leaf).

Usage: scripts/hop-marks.py [--group PREFIX] ARCHIVE_OR_RESULTS_DIR...

  --group PREFIX   also print, per combination, the share of all marks
                   taken by the hops whose names start with PREFIX (e.g.
                   "leaf1:spine" for leaf1's uplinks) and the least loaded
                   of them as a fraction of the busiest (tx packets).

The per-hop numbers are result.json's `hops` (the switch's counters at
the end of the run); `softswitch-exp report` has each as hop.<name>.*,
with its spread; this prints them per run, as the console did.
"""
import os
import sys

from archive_combos import combos_of


def main(argv):
    group = None
    if len(argv) >= 2 and argv[0] == "--group":
        group, argv = argv[1], argv[2:]
    if not argv:
        sys.exit(__doc__.strip())
    for path in argv:
        if not os.path.isdir(path):
            sys.exit(f"{path}: not a directory (give an archived run or a results directory)")
        for name, combo in sorted(combos_of(path).items()):
            result = combo.get("result") or {}
            hops = result.get("hops") or []
            if not hops:
                continue
            faithful = (result.get("fidelity") or {}).get("faithful")
            verdict = {True: "faithful", False: "NOT"}.get(faithful, "-")
            total = sum(h.get("marked_pkts", 0) for h in hops)
            line = f"{name:32} {verdict:8} marks {total:>7}"
            if group is not None:
                ours = [h for h in hops if h.get("name", "").startswith(group)]
                share = sum(h.get("marked_pkts", 0) for h in ours) / total if total else 0.0
                tx = sorted(h.get("tx_pkts", 0) for h in ours)
                split = tx[0] / tx[-1] if tx and tx[-1] else 0.0
                line += f"  {group}*: {100 * share:5.1f} % of marks, split {split:.2f}"
            print(line)
            for h in hops:
                marks, drops = h.get("marked_pkts", 0), h.get("dropped_pkts", 0)
                if marks or drops:
                    share = 100 * marks / total if total else 0.0
                    print(f"    {h.get('name', '?'):20} {share:5.1f} %  marks {marks:>7}  "
                          f"drops {drops:>5}  max queue {h.get('max_backlog_bytes', 0) / 1000:7.1f} KB")


if __name__ == "__main__":
    main(sys.argv[1:])
