#!/usr/bin/env python3
"""Every attempt of an archived run as the fidelity guard saw it.

Usage: scripts/guard-attempts.py ARCHIVE_OR_RESULTS_DIR...

One line per combination directory kept in ARCHIVE/combos.json.gz, or
found in a results directory (a run still going included) — the
repeats kept *and* the unfaithful attempts set aside (`<dir>.unfaithful<k>`)
— with its verdict, the largest share of a judged port's backlogged link
time lost, the data path's stalls over 100 us (real) and the time stalled
inside tx kicks, and the switch thread's stolen time (the VM's host not
running it). It answers "why did these repeats not hold": the machine's own
work (stalls inside kicks, where the hosts' stacks run) or its host (steal).
"""
import json
import sys

from archive_combos import combos_of


def main(archives):
    if not archives:
        sys.exit(__doc__.split("\n\n")[1])
    print(f"{'combination':40} {'verdict':8} {'lost %':>6} {'stalls':>6}"
          f" {'in kicks ms':>11} {'stolen ms':>9}")
    for archive in archives:
        combos = combos_of(archive)
        for name, c in sorted(combos.items()):
            fid = c["result"]["fidelity"]
            loop = c.get("switch", {}).get("loop", {})
            verdict = "faithful" if fid["faithful"] else "NOT"
            print(f"{name:40} {verdict:8} {100 * fid['max_lost_fraction']:6.1f}"
                  f" {fid['stalls']:6} {loop.get('stalled_in_kicks_ms', 0):11.0f}"
                  f" {loop.get('thread_stolen_ms', 0):9.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
