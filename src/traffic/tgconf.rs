//! HKUST-SING/TrafficGenerator's client configuration file, so that an
//! experiment written for its `client` runs unchanged with
//! `softswitch-tg client --config FILE` (`-c FILE`).
//!
//! # Format (TrafficGenerator README, "Client Configuration File")
//!
//! One key and its values per line, fields separated by white space:
//!
//! ```text
//! server 192.168.1.51 5001        # a server: IP address and TCP port (repeatable, ≥ 1)
//! req_size_dist conf/DCTCP_CDF.txt  # the flow-size CDF file (exactly one)
//! rate 0Mbps 10                   # per-flow sending rate and weight (repeatable;
//! rate 500Mbps 30                 #   0Mbps = not rate-limited; default: none limited)
//! dscp 0 25                       # DSCP value (< 64) and weight (repeatable; default 0)
//! fanout 1 50                     # fanout and weight: incast-client only (see below)
//! ```
//!
//! As TrafficGenerator reads it (`read_config` in `src/client/client.c`):
//! `Mbps` is megabits per second (note: softswitch's own `--rate` units
//! read `mbps` as megabytes, so a `rate` line is read here, not by those
//! units); weights are whole numbers; a `server` line may carry more fields
//! after the port (the repository's own `websearch_inter_rack_config.txt`
//! adds a rack number), which TrafficGenerator ignores and so do we. The
//! request size file is opened relative to the working directory, as
//! TrafficGenerator does; if it is not there, relative to the config
//! file's directory.
//!
//! Differences, all toward saying what is wrong instead of guessing:
//! TrafficGenerator silently skips keys it does not know and repeats the
//! previous key on a blank line; here blank lines and `#` comments are
//! skipped and an unknown key is an error naming the line. `fanout` lines
//! belong to TrafficGenerator's `incast-client`; its `client` ignores them
//! (every request one flow), and so does `softswitch-tg client`, saying so.
//!
//! # The older format: `load` and `num_reqs`
//!
//! Today the offered load (`-b MBPS`) and the number of requests (`-n N`)
//! are command-line options of TrafficGenerator, which `softswitch-tg
//! client` takes under the same letters. Before TrafficGenerator commit
//! d6a4928 ("Add some arguments", 2016-03-23) they were config keys — the
//! format of its README and `conf/example_config_1g.txt` up to commit
//! 7644604 (2016-03-22); commit 7ee04ce removed them from the sample files:
//!
//! ```text
//! load 800Mbps      # "average RX throughput at the client in Mbps"
//! num_reqs 5000     # "the total number of requests"
//! ```
//!
//! Its `read_config` (`src/client/client.c` at 7644604) read `load` with
//! `sscanf("%s %lfMbps")` into the same variable `-b` sets later and
//! derived the arrival period from it with the same formula
//! (`period_us = avg_CDF · 8 / load / TG_GOODPUT_RATIO`), and read
//! `num_reqs` with `sscanf("%s %d")` into the request count `-n` sets. So
//! they map exactly: `load 800Mbps` is `-b 800` and `num_reqs 5000` is
//! `-n 5000`, and are read so here (the command line overrides them, as
//! it does every line of the file). That version wanted exactly one line of
//! each; a second one is refused here, and `load` must carry its `Mbps`
//! (its `sscanf` would also have read `load 0.8Gbps` as 0.8 Mbit/s).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use super::dscp::DscpMix;
use super::rates::FlowRateMix;

/// What a TrafficGenerator client config file says.
#[derive(Clone, Debug, PartialEq)]
pub struct TgClientFile {
    /// The servers, in file order.
    pub servers: Vec<SocketAddr>,
    /// The request size CDF file, as written.
    pub req_size_dist: PathBuf,
    /// The `dscp` lines (None: no line, every flow DSCP 0).
    pub dscp: Option<DscpMix>,
    /// The `rate` lines (None: no line, no flow rate-limited).
    pub rates: Option<FlowRateMix>,
    /// The `fanout` lines: (fanout, weight); `client` does not use them.
    pub fanout: Vec<(u32, u64)>,
    /// The older format's `load NMbps`: the expected average RX bandwidth in
    /// Mbit/s, as `-b` gives it (see the module docs).
    pub load_mbps: Option<f64>,
    /// The older format's `num_reqs N`: the number of requests, as `-n`.
    pub num_reqs: Option<u32>,
}

/// A line of the file that cannot be read; says which and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}: `{text}`: {reason}")]
pub struct TgConfError {
    /// The file (as given).
    pub file: String,
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    /// The line's text.
    pub text: String,
    /// What is wrong and what to write instead.
    pub reason: String,
}

/// The TrafficGenerator keys `softswitch-tg client` reads.
const KEYS: &str = "server, req_size_dist, rate, dscp, fanout (and the older load, num_reqs)";

/// Parses the text of a client config file; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<TgClientFile, TgConfError> {
    let mut lines = Lines::default();
    for (idx, raw) in text.lines().enumerate() {
        let body = raw.split('#').next().unwrap_or("").trim();
        if body.is_empty() {
            continue;
        }
        let fields: Vec<&str> = body.split_whitespace().collect();
        lines.read(idx + 1, &fields).map_err(|reason| TgConfError {
            file: file.to_owned(),
            line: idx + 1,
            text: body.to_owned(),
            reason,
        })?;
    }
    lines.finish(file)
}

/// The lines read so far, by key.
#[derive(Default)]
struct Lines {
    servers: Vec<SocketAddr>,
    /// `req_size_dist` lines with their line numbers (one is required).
    dists: Vec<(usize, PathBuf)>,
    dscp: Vec<(u8, u64)>,
    rates: Vec<(u64, u64)>,
    fanout: Vec<(u32, u64)>,
    /// `load` and `num_reqs` lines with their line numbers (at most one each).
    loads: Vec<(usize, f64)>,
    num_reqs: Vec<(usize, u32)>,
}

impl Lines {
    /// Reads line `line` (its fields, comment removed), or says what is
    /// wrong with it and what to write instead.
    fn read(&mut self, line: usize, fields: &[&str]) -> Result<(), String> {
        match fields[0] {
            "server" => self.servers.push(server(fields)?),
            "req_size_dist" => match fields[1..] {
                [path] => self.dists.push((line, PathBuf::from(path))),
                _ => return Err("write `req_size_dist FILE` (one CDF file path)".into()),
            },
            "dscp" => {
                let (v, w) = value_weight(fields, "dscp 0 25")?;
                if v >= 64 {
                    return Err(format!("DSCP {v} is out of range: it is 6 bits (0..=63)"));
                }
                self.dscp.push((v as u8, w));
            }
            "rate" => self.rates.push(rate(fields)?),
            "fanout" => {
                let (v, w) = value_weight(fields, "fanout 8 20")?;
                if v == 0 {
                    return Err("a fanout is at least 1".into());
                }
                self.fanout.push((v, w));
            }
            "load" => self.loads.push((line, load_line(fields)?)),
            "num_reqs" => self.num_reqs.push((line, num_reqs_line(fields)?)),
            other => {
                return Err(format!(
                    "unknown key `{other}`; a TrafficGenerator client config has {KEYS}"
                ))
            }
        }
        Ok(())
    }

    /// The file's settings, once every line is read: exactly one
    /// `req_size_dist`, at least one server, the weighted mixes valid.
    fn finish(self, file: &str) -> Result<TgClientFile, TgConfError> {
        let whole = |reason: &str| TgConfError {
            file: file.to_owned(),
            line: 0,
            text: String::new(),
            reason: reason.to_owned(),
        };
        let req_size_dist = match self.dists.as_slice() {
            [(_, p)] => p.clone(),
            [] => {
                return Err(whole(
                    "no `req_size_dist FILE` line (the flow-size CDF is required)",
                ))
            }
            [_, (line, p), ..] => {
                return Err(TgConfError {
                    line: *line,
                    text: format!("req_size_dist {}", p.display()),
                    ..whole("a second `req_size_dist` line: give exactly one")
                })
            }
        };
        if self.servers.is_empty() {
            return Err(whole("no `server IP PORT` line (give at least one server)"));
        }
        let at_most_one = |key: &str, lines: &[usize]| {
            match lines {
            [_, second, ..] => Err(TgConfError {
                line: *second,
                text: key.to_owned(),
                ..whole(&format!(
                    "a second `{key}` line: give one (TrafficGenerator's older format has exactly one)"
                ))
            }),
            _ => Ok(()),
        }
        };
        at_most_one("load", &self.loads.iter().map(|l| l.0).collect::<Vec<_>>())?;
        at_most_one(
            "num_reqs",
            &self.num_reqs.iter().map(|l| l.0).collect::<Vec<_>>(),
        )?;
        let mix_err = |what: &str, e: String| whole(&format!("the `{what}` lines: {e}"));
        Ok(TgClientFile {
            servers: self.servers,
            req_size_dist,
            dscp: match self.dscp.is_empty() {
                true => None,
                false => Some(DscpMix::weighted(self.dscp).map_err(|e| mix_err("dscp", e))?),
            },
            rates: match self.rates.is_empty() {
                true => None,
                false => Some(FlowRateMix::weighted(self.rates).map_err(|e| mix_err("rate", e))?),
            },
            fanout: self.fanout,
            load_mbps: self.loads.first().map(|l| l.1),
            num_reqs: self.num_reqs.first().map(|l| l.1),
        })
    }
}

/// `load <N>Mbps` of the older format: N Mbit/s, above 0.
fn load_line(fields: &[&str]) -> Result<f64, String> {
    let hint = "write `load 800Mbps` (the average RX bandwidth in megabits per second, as \
                TrafficGenerator's older format and today's -b give it)";
    let [_, v] = fields else {
        return Err(hint.into());
    };
    let mbps: f64 = v
        .strip_suffix("Mbps")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("`{v}` is not a bandwidth in Mbps; {hint}"))?;
    if !(mbps > 0.0 && mbps.is_finite()) {
        return Err(format!("load {v}: the bandwidth must be above 0; {hint}"));
    }
    Ok(mbps)
}

/// `num_reqs N` of the older format: N ≥ 1 requests.
fn num_reqs_line(fields: &[&str]) -> Result<u32, String> {
    let hint = "write `num_reqs 5000` (the number of requests, as today's -n gives it)";
    let [_, v] = fields else {
        return Err(hint.into());
    };
    match v.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "`{v}` is not a number of requests (1 or more); {hint}"
        )),
    }
}

/// Reads and parses `path`.
pub fn load(path: &Path) -> Result<TgClientFile, TgConfError> {
    let text = std::fs::read_to_string(path).map_err(|e| TgConfError {
        file: path.display().to_string(),
        line: 0,
        text: String::new(),
        reason: format!("cannot read it: {e}"),
    })?;
    parse(&text, &path.display().to_string())
}

/// Where the CDF file `dist` named in config file `config` is: as written
/// (relative to the working directory, as TrafficGenerator opens it), else
/// relative to the config file's directory; `None` if neither exists.
pub fn resolve_dist(dist: &Path, config: &Path) -> Option<PathBuf> {
    if dist.exists() {
        return Some(dist.to_path_buf());
    }
    let beside = config.parent()?.join(dist);
    (dist.is_relative() && beside.exists()).then_some(beside)
}

fn server(fields: &[&str]) -> Result<SocketAddr, String> {
    let hint = "write `server IP PORT`, e.g. `server 10.99.0.2 5001`";
    let [_, ip, port, ..] = fields else {
        return Err(hint.into());
    };
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| format!("`{ip}` is not an IP address; {hint}"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("`{port}` is not a TCP port (1..=65535); {hint}"))?;
    if port == 0 {
        return Err(format!("port 0 is not a server port; {hint}"));
    }
    Ok(SocketAddr::new(ip, port))
}

/// `key VALUE WEIGHT`, both whole numbers.
fn value_weight(fields: &[&str], example: &str) -> Result<(u32, u64), String> {
    let hint = format!("write `{example}` (value and weight, whole numbers)");
    let [_, v, w] = fields else {
        return Err(hint);
    };
    let v = v
        .parse()
        .map_err(|_| format!("`{v}` is not a whole number; {hint}"))?;
    let w = w
        .parse()
        .map_err(|_| format!("weight `{w}` is not a whole number; {hint}"))?;
    Ok((v, w))
}

/// `rate <N>Mbps WEIGHT` (N in megabits per second, 0 = unlimited).
fn rate(fields: &[&str]) -> Result<(u64, u64), String> {
    let hint = "write `rate 500Mbps 30` (megabits per second and a weight, whole numbers; \
                0Mbps = not rate-limited)";
    let [_, r, w] = fields else {
        return Err(hint.into());
    };
    let mbps: u64 = r
        .strip_suffix("Mbps")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("`{r}` is not a rate in Mbps; {hint}"))?;
    let w = w
        .parse()
        .map_err(|_| format!("weight `{w}` is not a whole number; {hint}"))?;
    Ok((mbps * 1_000_000, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TrafficGenerator's own `conf/incast_client_config.txt`.
    const TG_SAMPLE: &str = "server 192.168.1.51 5001
server 192.168.1.52 5001
server 192.168.1.53 5001
req_size_dist conf/DCTCP_CDF.txt
rate 0Mbps 10
rate 500Mbps 30
rate 800Mbps 60
dscp 0 25
dscp 1 25
dscp 2 25
dscp 3 25
fanout 1 10
fanout 5 60
fanout 10 30
";

    #[test]
    fn reads_trafficgenerators_sample() {
        let c = parse(TG_SAMPLE, "c.txt").unwrap();
        assert_eq!(c.servers.len(), 3);
        assert_eq!(c.servers[1], "192.168.1.52:5001".parse().unwrap());
        assert_eq!(c.req_size_dist, PathBuf::from("conf/DCTCP_CDF.txt"));
        assert_eq!(
            c.rates.unwrap().classes(),
            &[(0, 10), (500_000_000, 30), (800_000_000, 60)]
        );
        assert_eq!(
            c.dscp.unwrap().classes(),
            &[(0, 25), (1, 25), (2, 25), (3, 25)]
        );
        assert_eq!(c.fanout, vec![(1, 10), (5, 60), (10, 30)]);
    }

    /// TrafficGenerator's `conf/example_config_1g.txt` at commit 7644604
    /// (2016-03-22), the older format with `load` and `num_reqs`.
    const TG_OLDER: &str = "server 192.168.1.51 5001
server 192.168.1.52 5001
server 192.168.1.53 5001
req_size_dist conf/DCTCP_CDF.txt
load 800Mbps
num_reqs 5000
rate 0Mbps 10
rate 500Mbps 30
rate 800Mbps 60
dscp 0 25
dscp 1 25
dscp 2 25
dscp 3 25
";

    #[test]
    fn reads_the_older_format_with_load_and_num_reqs() {
        let old = parse(TG_OLDER, "c.txt").unwrap();
        assert_eq!((old.load_mbps, old.num_reqs), (Some(800.0), Some(5000)));
        // Everything else reads as in today's format, which has neither.
        let new = parse(TG_SAMPLE, "c.txt").unwrap();
        assert_eq!((new.load_mbps, new.num_reqs), (None, None));
        assert_eq!(
            (old.servers, old.req_size_dist),
            (new.servers, new.req_size_dist)
        );
        assert_eq!(old.rates, new.rates);
        assert_eq!(old.dscp, new.dscp);
        let c = parse(
            "server 10.0.0.1 5001\nreq_size_dist a\nload 9000.5Mbps\n",
            "c",
        )
        .unwrap();
        assert_eq!(c.load_mbps, Some(9000.5));
    }

    #[test]
    fn optional_lines_default_and_extra_server_fields_are_ignored() {
        // As `conf/websearch_inter_rack_config.txt`: a rack number after the port.
        let c = parse(
            "# two racks\nserver 10.99.0.1 5001 1\n\nserver 10.99.0.2 5001 2\nreq_size_dist ws.txt\n",
            "c",
        )
        .unwrap();
        assert_eq!(c.servers.len(), 2);
        assert_eq!((c.dscp, c.rates), (None, None));
        assert!(c.fanout.is_empty());
    }

    #[test]
    fn errors_name_the_line_and_say_what_to_write() {
        let bad = [
            (
                "server 10.0.0.1 5001\nreq_size_dist a\nthroughput 5\n",
                3,
                "unknown key `throughput`",
            ),
            ("server 10.0.0.1\nreq_size_dist a\n", 1, "server IP PORT"),
            (
                "server host1 5001\nreq_size_dist a\n",
                1,
                "not an IP address",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\ndscp 64 1\n",
                3,
                "0..=63",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\ndscp 1\n",
                3,
                "dscp 0 25",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\nrate 500mbit 3\n",
                3,
                "Mbps",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\nrate 500Mbps\n",
                3,
                "rate 500Mbps 30",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\nload 800\n",
                3,
                "`800` is not a bandwidth in Mbps; write `load 800Mbps`",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\nload 0Mbps\n",
                3,
                "above 0",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\nnum_reqs 0\n",
                3,
                "write `num_reqs 5000`",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\nload 800Mbps\nload 900Mbps\n",
                4,
                "a second `load` line",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\nnum_reqs 5\nnum_reqs 6\n",
                4,
                "a second `num_reqs` line",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a b\n",
                2,
                "one CDF file",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\nreq_size_dist b\n",
                3,
                "exactly one",
            ),
            (
                "server 10.0.0.1 5001\nreq_size_dist a\nfanout 0 1\n",
                3,
                "at least 1",
            ),
        ];
        for (text, line, needle) in bad {
            let e = parse(text, "tg.conf").unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("tg.conf:{line}: ")), "{msg}");
            assert!(msg.contains(needle), "{text:?}: {msg}");
        }
        let e = parse("req_size_dist a\n", "x").unwrap_err().to_string();
        assert!(e.contains("at least one server"), "{e}");
        let e = parse("server 10.0.0.1 5001\n", "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("req_size_dist"), "{e}");
        let e = parse("server 10.0.0.1 5001\nreq_size_dist a\ndscp 0 0\n", "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("weight above 0"), "{e}");
    }

    #[test]
    fn the_cdf_is_found_as_written_or_beside_the_config() {
        let dir = std::env::temp_dir().join(format!("tgconf-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf")).unwrap();
        std::fs::write(dir.join("conf/x.txt"), "1 1\n").unwrap();
        let config = dir.join("client.conf");
        assert_eq!(
            resolve_dist(Path::new("conf/x.txt"), &config),
            Some(dir.join("conf/x.txt"))
        );
        let abs = dir.join("conf/x.txt");
        assert_eq!(resolve_dist(&abs, Path::new("elsewhere/c")), Some(abs));
        assert_eq!(resolve_dist(Path::new("conf/none.txt"), &config), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
