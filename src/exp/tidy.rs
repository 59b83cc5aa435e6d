//! Tidy tables of a results directory, one observation per row, for pandas
//! or R: every flow of every combination in `flows.csv`, every incast
//! query in `queries.csv`, and every headline number of every repeat in
//! `repeats.csv` (long format: one row per repeat and metric, the numbers
//! [`summary::repeat_values`] computes — what `summary.json` aggregates).
//!
//! The per-flow records are also each combination's whitespace text
//! (`flows-h<c>.txt`, TrafficGenerator's columns); these tables put every
//! combination in one file with what tells them apart (scenario, sweep,
//! AQM, repeat, seed, the guard's verdict, the directory), so that
//! `pd.read_csv("flows.csv").groupby(["aqm", "x"])` needs nothing else.
//! Unfaithful repeats are in the tables, marked `faithful = false` (the
//! summary leaves them out; a table user decides).
//!
//! Written by `report::write`, so at the end of every run and by every
//! `softswitch-exp report`, from what the run stored.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::results::StoredResult;
use super::summary;
use super::sweep::SweepValue;

/// The columns every table starts with: which repeat of which point.
const REPEAT: [&str; 8] = [
    "scenario", "sweep", "x", "aqm", "repeat", "seed", "faithful", "dir",
];
/// `flows.csv`'s own columns.
const FLOW: [&str; 4] = ["size_bytes", "fct_us", "start_us", "dscp"];
/// `queries.csv`'s own columns.
const QUERY: [&str; 3] = ["size_bytes", "qct_us", "fanout"];
/// `repeats.csv`'s own columns.
const METRIC: [&str; 2] = ["metric", "value"];

/// `(sweep key, value)` of a combination: `load`, `fanin`, `flows`, or
/// `none` (0) when nothing is swept but the AQM.
fn sweep(v: SweepValue) -> (&'static str, f64) {
    match v {
        SweepValue::Load(l) => ("load", l),
        SweepValue::Fanin(n) => ("fanin", n as f64),
        SweepValue::Flows(n) => ("flows", n as f64),
        SweepValue::None => ("none", 0.0),
    }
}

/// The [`REPEAT`] columns of one stored combination of scenario `name`;
/// its directory relative to `out` when below it.
fn repeat_fields(name: &str, s: &StoredResult, out: &Path) -> Vec<String> {
    let r = &s.result;
    let (key, x) = sweep(r.sweep);
    vec![
        name.to_string(),
        key.to_string(),
        x.to_string(),
        r.aqm.clone(),
        r.repeat.to_string(),
        r.seed.to_string(),
        r.fidelity.faithful.to_string(),
        s.dir
            .strip_prefix(out)
            .unwrap_or(&s.dir)
            .display()
            .to_string(),
    ]
}

/// One table at `path`: the [`REPEAT`] columns and `own`, then for every
/// combination its rows (`rows` gives each row's own fields).
fn table(
    path: &Path,
    name: &str,
    results: &[StoredResult],
    out: &Path,
    own: &[&str],
    rows: impl Fn(&StoredResult) -> Vec<Vec<String>>,
) -> Result<()> {
    let write = || -> Result<()> {
        let mut w = csv::Writer::from_path(path)?;
        w.write_record(REPEAT.iter().chain(own))?;
        for s in results {
            let common = repeat_fields(name, s, out);
            for row in rows(s) {
                w.write_record(common.iter().chain(&row))?;
            }
        }
        w.flush()?;
        Ok(())
    };
    write().with_context(|| format!("writing {}", path.display()))
}

/// Writes `flows.csv` and `repeats.csv` (and `queries.csv` when there are
/// incast queries) of `results` of scenario `name` into `out`; the files
/// written. A table without rows still has its columns.
pub fn write(out: &Path, name: &str, results: &[StoredResult]) -> Result<Vec<PathBuf>> {
    let mut files = vec![out.join("flows.csv"), out.join("repeats.csv")];
    table(&files[0], name, results, out, &FLOW, |s| {
        s.result
            .flows
            .iter()
            .map(|f| {
                vec![
                    f.size.to_string(),
                    f.fct_us.to_string(),
                    f.start_us.to_string(),
                    f.dscp.to_string(),
                ]
            })
            .collect()
    })?;
    table(&files[1], name, results, out, &METRIC, |s| {
        summary::repeat_values(&s.result)
            .into_iter()
            .map(|(metric, value)| vec![metric, value.to_string()])
            .collect()
    })?;
    if results.iter().any(|s| !s.result.queries.is_empty()) {
        files.push(out.join("queries.csv"));
        table(&files[2], name, results, out, &QUERY, |s| {
            s.result
                .queries
                .iter()
                .map(|q| {
                    vec![
                        q.size.to_string(),
                        q.qct_us.to_string(),
                        q.fanout.to_string(),
                    ]
                })
                .collect()
        })?;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exp::results::QueryRow as Query;
    use crate::exp::summary::tests::{combo, flow};

    /// Stored results of `combos` in `dir` (as `report::load` finds them).
    fn stored(dir: &Path, combos: Vec<crate::exp::results::ComboResult>) -> Vec<StoredResult> {
        combos
            .into_iter()
            .map(|result| StoredResult {
                dir: dir.join(&result.dir),
                result,
            })
            .collect()
    }

    fn read(p: &Path) -> Vec<csv::StringRecord> {
        csv::Reader::from_path(p)
            .unwrap()
            .records()
            .map(Result::unwrap)
            .collect()
    }

    fn header(p: &Path) -> Vec<String> {
        let mut r = csv::Reader::from_path(p).unwrap();
        r.headers().unwrap().iter().map(String::from).collect()
    }

    #[test]
    fn one_row_per_flow_and_per_repeat_and_metric() {
        let dir = tempfile::tempdir().unwrap();
        let mut unfaithful = combo("tcn", 0.5, 1, vec![flow(1_000_000, 900)], 2);
        unfaithful.fidelity.faithful = false;
        let results = stored(
            dir.path(),
            vec![
                combo(
                    "dctcp",
                    0.5,
                    0,
                    vec![flow(1_000, 100), flow(50_000, 400)],
                    7,
                ),
                unfaithful,
            ],
        );
        let files = write(dir.path(), "ws", &results).unwrap();
        assert_eq!(
            files,
            [dir.path().join("flows.csv"), dir.path().join("repeats.csv")],
            "no queries, no queries.csv"
        );
        assert_eq!(
            header(&files[0]),
            [
                "scenario",
                "sweep",
                "x",
                "aqm",
                "repeat",
                "seed",
                "faithful",
                "dir",
                "size_bytes",
                "fct_us",
                "start_us",
                "dscp"
            ]
        );
        let flows = read(&files[0]);
        assert_eq!(flows.len(), 3, "every flow of every combination");
        let row = |r: &csv::StringRecord| r.iter().collect::<Vec<_>>().join(",");
        assert_eq!(
            row(&flows[0]),
            "ws,load,0.5,dctcp,0,1,true,dctcp-load0.50-r0,1000,100,0,0"
        );
        assert_eq!(
            row(&flows[1]),
            "ws,load,0.5,dctcp,0,1,true,dctcp-load0.50-r0,50000,400,0,0"
        );
        // The unfaithful repeat is there, marked.
        assert_eq!(
            row(&flows[2]),
            "ws,load,0.5,tcn,1,1001,false,tcn-load0.50-r1,1000000,900,0,0"
        );

        assert_eq!(
            header(&files[1]),
            [
                "scenario", "sweep", "x", "aqm", "repeat", "seed", "faithful", "dir", "metric",
                "value"
            ]
        );
        let repeats = read(&files[1]);
        // Exactly repeat_values of each, in order.
        let want: Vec<(String, String, f64)> = results
            .iter()
            .flat_map(|s| {
                summary::repeat_values(&s.result)
                    .into_iter()
                    .map(|(k, v)| (s.result.aqm.clone(), k, v))
            })
            .collect();
        assert_eq!(repeats.len(), want.len());
        for (r, (aqm, metric, value)) in repeats.iter().zip(&want) {
            assert_eq!((&r[3], &r[8]), (aqm.as_str(), metric.as_str()));
            let v: f64 = r[9].parse().unwrap();
            assert!(
                v == *value || (v.is_nan() && value.is_nan()),
                "{metric}: {v} vs {value}"
            );
        }
        let drops: Vec<_> = repeats.iter().filter(|r| &r[8] == "drops").collect();
        assert_eq!((&drops[0][9], &drops[1][9]), ("7", "2"));
        assert_eq!((&drops[0][6], &drops[1][6]), ("true", "false"));
    }

    #[test]
    fn incast_queries_get_their_own_table_and_static_runs_an_empty_flows_table() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = combo("dctcp", 0.0, 0, vec![flow(65_536, 800)], 0);
        c.sweep = SweepValue::Fanin(8);
        c.dir = "dctcp-fanin8-r0".into();
        c.queries = vec![
            Query {
                size: 8 * 65_536,
                qct_us: 5_000,
                fanout: 8,
            },
            Query {
                size: 8 * 65_536,
                qct_us: 7_500,
                fanout: 8,
            },
        ];
        let files = write(dir.path(), "incast", &stored(dir.path(), vec![c])).unwrap();
        assert_eq!(files[2], dir.path().join("queries.csv"));
        assert_eq!(
            header(&files[2]),
            [
                "scenario",
                "sweep",
                "x",
                "aqm",
                "repeat",
                "seed",
                "faithful",
                "dir",
                "size_bytes",
                "qct_us",
                "fanout"
            ]
        );
        let q = read(&files[2]);
        assert_eq!(q.len(), 2);
        assert_eq!(
            q[1].iter().collect::<Vec<_>>(),
            [
                "incast",
                "fanin",
                "8",
                "dctcp",
                "0",
                "1",
                "true",
                "dctcp-fanin8-r0",
                "524288",
                "7500",
                "8"
            ]
        );
        // Nothing swept but the AQM, no per-flow records: an empty table
        // with its columns; the repeat's numbers still in repeats.csv.
        let other = tempfile::tempdir().unwrap();
        let mut s = combo("tcn", 0.0, 0, vec![], 0);
        s.sweep = SweepValue::None;
        s.dir = "tcn-r0".into();
        let files = write(other.path(), "static", &stored(other.path(), vec![s])).unwrap();
        assert_eq!(files.len(), 2);
        assert!(read(&files[0]).is_empty());
        assert_eq!(header(&files[0]).len(), REPEAT.len() + FLOW.len());
        let r = read(&files[1]);
        assert!(r
            .iter()
            .any(|r| &r[1] == "none" && &r[2] == "0" && &r[8] == "queue.mean_kb"));
        // Results merged from elsewhere keep their whole path.
        let elsewhere = stored(
            Path::new("/runs/day2"),
            vec![combo("tcn", 0.5, 2, vec![flow(1, 1)], 0)],
        );
        let files = write(other.path(), "static", &elsewhere).unwrap();
        assert_eq!(&read(&files[0])[0][7], "/runs/day2/tcn-load0.50-r2");
    }
}
