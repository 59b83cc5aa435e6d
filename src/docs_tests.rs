//! The documents hold together: every link to a heading, within a document
//! or between them, lands on a heading that exists; the README's table of
//! contents lists every `##` section; and nothing in the repository's docs,
//! scripts or code refers to an issue tracker's numbers or to numbered work
//! periods, which a reader of the repository does not have (a date, or what
//! the number named, says it instead).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// The documents whose links are checked, from the repository's top.
const DOCS: [&str; 4] = [
    "README.md",
    "BENCHMARKS.md",
    "RELIABILITY.md",
    "scenarios/README.md",
];

/// Files and directories (walked whole) held to [`tracker_refs`].
const NO_TRACKER: [&str; 14] = [
    "README.md",
    "BENCHMARKS.md",
    "RELIABILITY.md",
    "scenarios",
    "scripts",
    "src",
    "netns-tests",
    "tests",
    "benches",
    "examples",
    "bpf",
    "xdp-prog/src",
    "build.rs",
    "Cargo.toml",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// GitHub's anchor for a heading's text: lowercase, each space a `-`,
/// every other character but letters, digits, `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines of a Markdown text outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if let Some(marker) = ["```", "~~~"].into_iter().find(|m| t.starts_with(m)) {
            match fence {
                None => fence = Some(marker),
                Some(open) if open == marker => fence = None,
                Some(_) => {}
            }
            continue;
        }
        if fence.is_none() {
            out.push((i + 1, line));
        }
    }
    out
}

/// Every heading of a Markdown text: (level, text, anchor), a repeated
/// anchor numbered as GitHub numbers it (`-1`, `-2`, …).
fn headings(text: &str) -> Vec<(usize, String, String)> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (_, line) in prose_lines(text) {
        let level = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&level) || !line[level..].starts_with(' ') {
            continue;
        }
        let text = line[level..].trim().to_string();
        let base = anchor(&text);
        let n = seen.iter().filter(|a| **a == base).count();
        seen.push(base.clone());
        let a = if n == 0 { base } else { format!("{base}-{n}") };
        out.push((level, text, a));
    }
    out
}

/// Every link target `](target)` of a Markdown text outside code blocks,
/// with its line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose_lines(text) {
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push((n, rest[..end].to_string()));
                rest = &rest[end..];
            }
        }
    }
    out
}

/// `base` joined with a relative `path`, `..` and `.` resolved.
fn join(base: &Path, path: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

fn read(rel: &Path) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{}: {e}", rel.display()))
}

/// What is wrong with the links of `doc` (a path from the top).
fn broken_links(doc: &str) -> Vec<String> {
    let text = read(Path::new(doc));
    let here = Path::new(doc).parent().unwrap_or(Path::new(""));
    let mut bad = Vec::new();
    for (line, target) in links(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, frag) = match target.split_once('#') {
            Some((f, a)) => (f, Some(a)),
            None => (target.as_str(), None),
        };
        let file = if file.is_empty() {
            PathBuf::from(doc)
        } else {
            join(here, file)
        };
        if !root().join(&file).exists() {
            bad.push(format!(
                "{doc}:{line}: ]({target}): no file {}",
                file.display()
            ));
            continue;
        }
        let Some(frag) = frag else { continue };
        if file.extension().is_none_or(|x| x != "md") {
            continue;
        }
        let anchors: BTreeSet<String> = headings(&read(&file)).into_iter().map(|h| h.2).collect();
        if !anchors.contains(frag) {
            bad.push(format!(
                "{doc}:{line}: ]({target}): {} has no heading whose anchor is #{frag}",
                file.display()
            ));
        }
    }
    bad
}

#[test]
fn every_link_to_a_heading_lands_on_one() {
    let bad: Vec<String> = DOCS.iter().flat_map(|d| broken_links(d)).collect();
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn the_readmes_contents_list_every_section() {
    let readme = read(Path::new("README.md"));
    let contents = readme
        .split("\n## Contents\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README has a ## Contents section");
    let listed: BTreeSet<String> = links(contents)
        .into_iter()
        .filter_map(|(_, t)| t.strip_prefix('#').map(str::to_string))
        .collect();
    let missing: Vec<String> = headings(&readme)
        .into_iter()
        .filter(|(level, text, _)| *level == 2 && text != "Contents")
        .filter(|(_, _, a)| !listed.contains(a))
        .map(|(_, text, _)| text)
        .collect();
    assert!(
        missing.is_empty(),
        "README's Contents does not list: {missing:?}"
    );
}

/// The words around a reference to a tracker or a work period.
const ISSUE: &str = "issue";
const SESSION: &str = "session";
/// Words that number or name a work period when put before "session".
const ORDINALS: [&str; 28] = [
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
    "twentieth",
    "last",
    "previous",
    "next",
    "this",
    "that",
    "same",
    "earlier",
    "later",
];

/// References in `text` to an issue tracker's numbers (the word for an
/// issue followed by a number, `#` and `-` allowed between) or to numbered
/// work periods (the word for a session followed by a number, or preceded by
/// an ordinal: first … twentieth, 3rd, last, this, …), as (line, what).
/// Ordinary prose — the plural in a sentence, a TCP connection's session —
/// is not; the unit test below shows both kinds.
fn tracker_refs(text: &str) -> Vec<(usize, String)> {
    // Words (runs of letters and digits) with their byte offsets.
    let mut words: Vec<(usize, &str)> = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                words.push((s, &text[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, &text[s..]));
    }
    let is_number = |w: &str| w.bytes().all(|b| b.is_ascii_digit());
    let is_ordinal = |w: &str| {
        let w = w.to_lowercase();
        ORDINALS.contains(&w.as_str())
            || ["st", "nd", "rd", "th"].iter().any(|s| {
                w.strip_suffix(s)
                    .is_some_and(|n| !n.is_empty() && is_number(n))
            })
    };
    let is = |w: &str, stem: &str| {
        let w = w.to_lowercase();
        w == stem || w == format!("{stem}s")
    };
    let mut out = Vec::new();
    for pair in words.windows(2) {
        let ((a_at, a), (b_at, b)) = (pair[0], pair[1]);
        let between = &text[a_at + a.len()..b_at];
        // Word and number: only spaces, a `-` or a `#` between them, on one
        // line (so a number after a full stop is not).
        let joined: String = between.chars().filter(|c| !c.is_whitespace()).collect();
        let tight = ["", "#", "-", "-#"].contains(&joined.as_str()) && !between.contains('\n');
        // Ordinal and word: only blanks between them, also across a line
        // break and a comment leader.
        let spaced = between
            .chars()
            .all(|c| c.is_whitespace() || matches!(c, '/' | '!' | '#' | '*'));
        let hit = (tight && is_number(b) && (is(a, ISSUE) || is(a, SESSION)))
            || (spaced && is(b, SESSION) && is_ordinal(a));
        if hit {
            let line = text[..a_at].matches('\n').count() + 1;
            out.push((line, format!("{a}{between}{b}")));
        }
    }
    out
}

#[test]
fn tracker_refs_finds_numbers_and_work_periods_and_nothing_else() {
    let (i, s) = (ISSUE, SESSION);
    for hit in [
        format!("the guard ({i} 10)"),
        format!("see {i} #22."),
        format!("the {i}-22 table"),
        format!("{}{} 2 (2026-11-22)", "S", &s[1..]),
        format!("(2026-11-28, ninth {s})"),
        format!("(2026-11-28, tenth\n{s})"),
        format!("//! the tenth\n//! {s}"),
        format!("the last {s} proposed"),
        format!("in the 3rd {s}"),
        format!("four more runs in {s}s 2"),
    ] {
        assert_eq!(tracker_refs(&hit).len(), 1, "{hit:?}");
    }
    for miss in [
        format!("known {i}s with veth"),
        format!("a TCP {s} to the server"),
        format!("the {i}. 5 flows"),
        format!("{i}s, 3 of them"),
        format!("{s}s of TCP"),
        format!("the {i}\n10 flows"),
        format!("t{i} 10"),
        format!("one {s}-level timer"),
    ] {
        assert_eq!(tracker_refs(&miss), vec![], "{miss:?}");
    }
}

/// Every file under `rel` (a file or a directory), from the top.
fn files(rel: &str, out: &mut Vec<PathBuf>) {
    let p = root().join(rel);
    if p.is_dir() {
        let mut entries: Vec<_> = fs::read_dir(&p)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        entries.sort();
        for e in entries {
            files(&format!("{rel}/{}", e.to_string_lossy()), out);
        }
    } else if p.is_file() {
        out.push(PathBuf::from(rel));
    }
}

#[test]
fn no_issue_numbers_or_work_periods_in_the_repository() {
    let mut all = Vec::new();
    for rel in NO_TRACKER {
        files(rel, &mut all);
    }
    assert!(all.len() > 100, "found only {} files", all.len());
    let mut found = Vec::new();
    for f in &all {
        let bytes = fs::read(root().join(f)).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for (line, what) in tracker_refs(&text) {
            found.push(format!("{}:{line}: {what:?}", f.display()));
        }
    }
    assert!(
        found.is_empty(),
        "references to an issue tracker or to numbered work periods (say the date, or what it named, instead):\n{}",
        found.join("\n")
    );
}
