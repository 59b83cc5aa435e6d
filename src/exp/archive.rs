//! The raw results behind the docs, kept in the repository in a compact
//! form (`softswitch-exp archive RESULTS ARCHIVE`), from which `report`
//! rebuilds every summary and `report --markdown` every table.
//!
//! An archived run is a directory that `report` reads as it reads a
//! results directory:
//!
//! * `manifest.json` — as the run wrote it: the scenario as run, the
//!   command, the commit and whether its sources were dirty, the kernel and
//!   the machine, the combinations asked for and the attempts set aside
//!   (`retried`);
//! * `combos.json.gz` — every combination's `result.json` (flows, queries,
//!   static flows, counters, the fidelity verdict), its switch's exit report
//!   (`switch.json`: every port's counters and the guard's reasons) and its
//!   hosts' TCP counters (`hosts.json`), for the repeats kept *and* for the
//!   unfaithful attempts set aside (`<dir>.unfaithful<k>`), keyed by
//!   directory name;
//! * `summary.json.gz`, `stats.csv.gz` — what `report` made of them when
//!   archived (regenerated from the two above by `report ARCHIVE`);
//! * `archive.json` — where it came from, when, by which build, and what
//!   was left out.
//!
//! Left out, to keep an archive at tens of MB for every table the docs
//! cite: the queue time series (`timeseries.csv`, `switch_timeseries.csv`),
//! packet captures, per-flow text files (their rows are in `result.json`),
//! and logs. Figures rebuilt from an archive therefore have no queue
//! traces (`report` says so in its notes).

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

/// The file holding every combination of an archived run.
pub const COMBOS_FILE: &str = "combos.json.gz";

/// The files of a combination directory an archive keeps.
const KEPT: [&str; 3] = ["result.json", "switch.json", "hosts.json"];

/// Gzip-compressed bytes of `data`.
pub fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data)?;
    Ok(e.finish()?)
}

/// The bytes of a gzip file.
pub fn gunzip_file(path: &Path) -> Result<Vec<u8>> {
    let f = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(f)
        .read_to_end(&mut out)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(out)
}

/// Every combination of an archived run: directory name → `{"result",
/// "switch", "hosts"}` (the last two may be absent).
pub fn read_combos(archive: &Path) -> Result<BTreeMap<String, Value>> {
    let path = archive.join(COMBOS_FILE);
    serde_json::from_slice(&gunzip_file(&path)?)
        .with_context(|| format!("parsing {}", path.display()))
}

/// Whether `dir` is an archived run (rather than a results directory).
pub fn is_archive(dir: &Path) -> bool {
    dir.join(COMBOS_FILE).is_file()
}

/// What [`write`] did.
#[derive(Debug)]
pub struct Archived {
    /// Where.
    pub dir: PathBuf,
    /// Combinations kept (repeats, and attempts set aside).
    pub combos: usize,
    /// Of them, unfaithful attempts set aside.
    pub set_aside: usize,
    /// Bytes written in all.
    pub bytes: u64,
}

/// The directory names to keep: every combination the manifest asked for
/// that completed, and every attempt it set aside.
fn combo_names(results: &Path, manifest: &Value) -> Vec<(String, bool)> {
    let mut v: Vec<(String, bool)> = manifest["combos"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["dir"].as_str())
        .filter(|d| results.join(d).join("result.json").is_file())
        .map(|d| (d.to_owned(), false))
        .collect();
    v.extend(
        manifest["retried"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["kept_as"].as_str())
            .filter(|d| results.join(d).join("result.json").is_file())
            .map(|d| (d.to_owned(), true)),
    );
    v
}

/// Archives the results directory `results` (a finished `softswitch-exp
/// run`) into `to`, which must not exist yet or be empty: an archive is
/// written once and never changed. `summary.json` and `stats.csv` are taken
/// as the run wrote them.
pub fn write(results: &Path, to: &Path) -> Result<Archived> {
    let manifest_text = fs::read_to_string(results.join("manifest.json")).with_context(|| {
        format!(
            "{}: no manifest.json — is this a softswitch-exp results directory?",
            results.display()
        )
    })?;
    let manifest: Value = serde_json::from_str(&manifest_text)
        .with_context(|| format!("parsing {}/manifest.json", results.display()))?;
    if manifest["finished"].is_null() {
        bail!(
            "{}: the run did not finish (manifest.json has no `finished`); archive finished runs only",
            results.display()
        );
    }
    if to.exists() && fs::read_dir(to)?.next().is_some() {
        bail!(
            "{} exists and is not empty: an archive is written once (choose a new directory)",
            to.display()
        );
    }
    fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    let names = combo_names(results, &manifest);
    let mut combos = serde_json::Map::new();
    for (name, _) in &names {
        let mut entry = serde_json::Map::new();
        for file in KEPT {
            let p = results.join(name).join(file);
            if let Ok(text) = fs::read_to_string(&p) {
                let v: Value = serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", p.display()))?;
                entry.insert(file.trim_end_matches(".json").to_owned(), v);
            }
        }
        combos.insert(name.clone(), Value::Object(entry));
    }
    let mut bytes = 0;
    let mut put = |name: &str, data: &[u8]| -> Result<()> {
        let p = to.join(name);
        fs::write(&p, data).with_context(|| format!("writing {}", p.display()))?;
        bytes += data.len() as u64;
        Ok(())
    };
    put("manifest.json", manifest_text.as_bytes())?;
    put(COMBOS_FILE, &gzip(&serde_json::to_vec(&combos)?)?)?;
    for f in ["summary.json", "stats.csv"] {
        if let Ok(data) = fs::read(results.join(f)) {
            put(&format!("{f}.gz"), &gzip(&data)?)?;
        }
    }
    let set_aside = names.iter().filter(|n| n.1).count();
    let about = json!({
        "source": results.display().to_string(),
        "archived": crate::timebase::utc_now_rfc3339(),
        "archived_by": crate::build_info(),
        "combinations": names.len() - set_aside,
        "attempts_set_aside": set_aside,
        "kept_per_combination": KEPT,
        "left_out": "queue time series (timeseries.csv, switch_timeseries.csv), packet captures, per-flow text files (their rows are in result.json), logs",
    });
    put(
        "archive.json",
        (serde_json::to_string_pretty(&about)? + "\n").as_bytes(),
    )?;
    Ok(Archived {
        dir: to.to_owned(),
        combos: names.len(),
        set_aside,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exp::summary::tests::{combo, flow};

    /// A finished results directory with two repeats and one attempt set
    /// aside.
    fn results_dir(root: &Path) -> PathBuf {
        let dir = root.join("run");
        let mut combos = Vec::new();
        for r in 0..2u32 {
            let c = combo("dctcp", 0.5, r, vec![flow(1_000, 100 + r as u64)], 0);
            let d = dir.join(&c.dir);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("result.json"), serde_json::to_string(&c).unwrap()).unwrap();
            fs::write(d.join("switch.json"), r#"{"fidelity": {"faithful": true}}"#).unwrap();
            fs::write(d.join("timeseries.csv"), "t_ms,port\n").unwrap();
            combos.push(json!({"aqm": "dctcp", "sweep": c.sweep, "dir": c.dir}));
        }
        let aside = dir.join("dctcp-load0.50-r1.unfaithful1");
        fs::create_dir_all(&aside).unwrap();
        let mut bad = combo("dctcp", 0.5, 1, vec![flow(1_000, 999)], 0);
        bad.fidelity.faithful = false;
        fs::write(
            aside.join("result.json"),
            serde_json::to_string(&bad).unwrap(),
        )
        .unwrap();
        let manifest = json!({
            "scenario_name": "t",
            "combos": combos,
            "retried": [{"dir": "dctcp-load0.50-r1", "kept_as": "dctcp-load0.50-r1.unfaithful1", "reasons": ["lost 3 %"]}],
            "finished": "2026-11-29T00:00:00Z",
        });
        fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
        fs::write(dir.join("summary.json"), "{}").unwrap();
        dir
    }

    #[test]
    fn keeps_every_repeat_and_every_attempt_set_aside_and_no_time_series() {
        let root = tempfile::tempdir().unwrap();
        let results = results_dir(root.path());
        let to = root.path().join("archive/t/run1");
        let a = write(&results, &to).unwrap();
        assert_eq!((a.combos, a.set_aside), (3, 1));
        assert!(is_archive(&to));
        let combos = read_combos(&to).unwrap();
        assert_eq!(
            combos.keys().collect::<Vec<_>>(),
            [
                "dctcp-load0.50-r0",
                "dctcp-load0.50-r1",
                "dctcp-load0.50-r1.unfaithful1"
            ]
        );
        assert_eq!(
            combos["dctcp-load0.50-r0"]["result"]["flows"][0]["fct_us"],
            100
        );
        assert_eq!(
            combos["dctcp-load0.50-r0"]["switch"]["fidelity"]["faithful"],
            true
        );
        assert_eq!(
            combos["dctcp-load0.50-r1.unfaithful1"]["result"]["fidelity"]["faithful"],
            false
        );
        assert!(!combos["dctcp-load0.50-r0"]
            .as_object()
            .unwrap()
            .contains_key("timeseries"));
        assert_eq!(
            fs::read_to_string(to.join("manifest.json")).unwrap(),
            fs::read_to_string(results.join("manifest.json")).unwrap()
        );
        assert_eq!(gunzip_file(&to.join("summary.json.gz")).unwrap(), b"{}");
        let about: Value =
            serde_json::from_str(&fs::read_to_string(to.join("archive.json")).unwrap()).unwrap();
        assert_eq!(about["attempts_set_aside"], 1);
        // Written once: a second archive into the same place is refused.
        let e = write(&results, &to).unwrap_err();
        assert!(e.to_string().contains("written once"), "{e}");
    }

    #[test]
    fn an_unfinished_run_is_not_archived() {
        let root = tempfile::tempdir().unwrap();
        let results = results_dir(root.path());
        let m = results.join("manifest.json");
        let mut v: Value = serde_json::from_str(&fs::read_to_string(&m).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("finished");
        fs::write(&m, v.to_string()).unwrap();
        let e = write(&results, &root.path().join("a")).unwrap_err();
        assert!(e.to_string().contains("did not finish"), "{e}");
    }
}
