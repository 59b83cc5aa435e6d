#!/usr/bin/env python3
"""PRED's QLA: the effect of its trials on the utility against the noise.

Reads a PRED run's switch time series (`switch_timeseries.port.csv` in a
`softswitch-exp` combination directory, or the switch's `--timeseries`
output) and, for every port PRED ran on, rebuilds the sequence of T_QLA
periods from the `pred_*` columns (a new period whenever the last period's
goodput / queue / utility change) and the four-period rounds from the
decision counters (the period in which a decision is counted closes a
round). In a round, trials 0 and 3 are one step more aggressive and trials
1 and 2 one step less (PRED paper §IV-B, Fig. 10(b)); the script prints the
mean and standard deviation over rounds of

    U(more) − U(less) = (U1 + U4 − U2 − U3) / 2

and the same for the average queue and R/C. When the standard deviation is
much larger than the mean, the "consistent in both pairs" rule decides on
noise and λ_QLA / min_K random-walk (README "PRED"). The time series must
be sampled faster than T_QLA (the runner samples every 1 ms).

    scripts/pred-qla-signal.py RUN/pred@gain-flows2-r0/switch_timeseries.port.csv
"""
import collections
import csv
import statistics as st
import sys


def periods_by_port(path):
    rows = collections.defaultdict(dict)
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["name"].startswith("pred_"):
                rows[(float(r["t_us"]), r["port"])][r["name"]] = float(r["value"])
    out = collections.defaultdict(list)
    last = {}
    for (t, port), v in sorted(rows.items()):
        if "pred_utility" not in v:
            continue
        key = (v["pred_goodput_frac"], v["pred_q_avg_pkts"], v["pred_utility"])
        if last.get(port) != key:
            out[port].append(v)
            last[port] = key
    return out


def decisions(v):
    return v["pred_decisions_more"] + v["pred_decisions_less"] + v["pred_decisions_stay"]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    found = False
    for port, ps in sorted(periods_by_port(sys.argv[1]).items()):
        if len(ps) < 20 or max(p["pred_goodput_frac"] for p in ps) < 0.1:
            continue  # a port PRED saw no traffic on
        du, dq, dr = [], [], []
        for e in range(4, len(ps)):
            if decisions(ps[e]) <= decisions(ps[e - 1]):
                continue
            r = ps[e - 3 : e + 1]
            pair = lambda k: (r[0][k] + r[3][k] - r[1][k] - r[2][k]) / 2
            du.append(pair("pred_utility"))
            dq.append(pair("pred_q_avg_pkts"))
            dr.append(pair("pred_goodput_frac"))
        if len(du) < 10:
            print(f"port {port}: {len(du)} rounds found — is the series sampled faster than T_QLA?")
            continue
        found = True
        g = [p["pred_goodput_frac"] for p in ps]
        print(
            f"port {port}: {len(ps)} periods, {len(du)} rounds; "
            f"U(more) − U(less) mean {st.mean(du):+.4f} sd {st.pstdev(du):.4f}; "
            f"queue {st.mean(dq):+.2f} sd {st.pstdev(dq):.2f} pkts; "
            f"R/C {st.mean(dr):+.4f} sd {st.pstdev(dr):.4f}; "
            f"one period's R/C sd {st.pstdev(g):.4f}"
        )
    if not found:
        sys.exit("no port with PRED periods in " + sys.argv[1])


if __name__ == "__main__":
    main()
