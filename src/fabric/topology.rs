//! Describing a fabric: a TOML topology (`[[switch]]`, `[[link]]`) or the
//! leaf-spine shorthand (`[leaf_spine]`), read into one validated
//! [`FabricDesc`]. No I/O: the caller reads the file.
//!
//! ```toml
//! subnet = "10.99.0.0/24"   # the hosts' subnet (as `softswitch topo up`); h<i> is its i-th address
//! seed = 1                  # ECMP hash seed
//! [defaults]                # every egress port, unless a switch or link says otherwise
//! rate = "10gbit"           # "0" or "unlimited": unshaped
//! delay = "10us"            # one-way propagation delay after the shaper
//! buffer = "300kb"          # shared buffer of the port
//! aqm = "dctcp"             # as --aqm
//! aqm_opts = { k = "65kb" } # as [aqm_opts]
//!
//! [[switch]]
//! name = "leaf1"
//! hosts = ["h1-h4"]         # h<i> or a range h<i>-h<j>
//! prefixes = ["10.99.0.0/30"]  # optional: other switches route the whole prefix here
//! host_link = { rate = "1gbit" }  # this switch's host-facing egress ports
//!
//! [[link]]
//! a = "leaf1"
//! b = "spine1"
//! rate = "40gbit"           # both directions ...
//! ab = { buffer = "1mb" }   # ... but leaf1 → spine1 only
//! ba = { aqm = "tcn" }      # ... and spine1 → leaf1 only
//! ```
//!
//! Shorthand, PRED's large-scale setup (PRED paper §VI-C: 8 spines, 8 leaves,
//! 16 hosts per leaf, 10 Gbit/s everywhere, 10 µs per link):
//!
//! ```toml
//! [leaf_spine]
//! leaves = 8
//! spines = 8
//! hosts_per_leaf = 16
//! host_rate = "10gbit"
//! fabric_rate = "10gbit"    # or oversubscription = 2.0 (host capacity : uplink capacity of a leaf)
//! delay = "10us"
//! links_per_pair = 1        # parallel links between every leaf and spine
//! ```
//!
//! Two switches may be joined by several links (parallel links, each its
//! own port at either end): the first keeps the name `leaf1:spine1`, the
//! others are `leaf1:spine1#2`, `leaf1:spine1#3`, … in the order given, and
//! ECMP spreads flows over all of them as over any equal-cost next hops.
//!
//! Host `h<i>` has the MAC and address `softswitch topo up` gives it
//! (`02:00:00:00:<i/256>:<i%256>`, the subnet's `i`-th address), so a fabric
//! runs over the hosts `topo up` builds. Errors name the line and field.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::Ipv4Addr;

use serde::Deserialize;
use toml::Spanned;

use crate::topo::names::{host_mac, Ipv4Net};
use crate::units::{self, Nanos, Rate};
use crate::wire::MacAddr;

/// The hosts' subnet when the topology does not name one (as `topo up`).
pub const DEFAULT_SUBNET: &str = "10.99.0.0/24";
/// Link rate when nothing names one.
pub const DEFAULT_RATE: &str = "1gbit";

/// A topology the user must fix; says where and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// Not TOML, a wrong type or an unknown key (toml's message has the line).
    #[error("topology: {0}")]
    Parse(String),
    /// A value at a known place in the text.
    #[error("topology line {line}: {msg}")]
    At {
        /// 1-based line.
        line: usize,
        /// What is wrong and what to do.
        msg: String,
    },
    /// The fabric as a whole (no place in the text to point at).
    #[error("topology: {0}")]
    Invalid(String),
}

/// Settings of one egress port, as the topology gives them.
#[derive(Clone, Debug, PartialEq)]
pub struct PortDesc {
    /// Link rate (0 bit/s: unshaped).
    pub rate: Rate,
    /// One-way propagation delay after the shaper.
    pub delay_ns: Nanos,
    /// Shared buffer (None: the port's default).
    pub buffer_bytes: Option<u64>,
    /// AQM name (None: the caller's default).
    pub aqm: Option<String>,
    /// AQM parameters, as `[aqm_opts]`.
    pub aqm_opts: Vec<(String, toml::Value)>,
}

/// One host of the fabric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostDesc {
    /// `h<i>`.
    pub name: String,
    /// `i` (1-based, as `topo up` numbers hosts).
    pub index: usize,
    /// Its MAC.
    pub mac: MacAddr,
    /// Its IPv4 address.
    pub ip: Ipv4Addr,
    /// The switch it is attached to (index into [`FabricDesc::switches`]).
    pub switch: usize,
}

/// One switch of the fabric.
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchDesc {
    /// Name (`leaf1`).
    pub name: String,
    /// Its hosts (indices into [`FabricDesc::hosts`]), in port order.
    pub hosts: Vec<usize>,
    /// Prefixes other switches route here as a whole.
    pub prefixes: Vec<Ipv4Net>,
    /// Its host-facing egress ports.
    pub host_port: PortDesc,
}

/// A link between two switches: one egress port at each end.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkDesc {
    /// One end (index into [`FabricDesc::switches`]).
    pub a: usize,
    /// The other end.
    pub b: usize,
    /// The egress port at `a`, towards `b`.
    pub ab: PortDesc,
    /// The egress port at `b`, towards `a`.
    pub ba: PortDesc,
}

/// A validated fabric: every name unique, every host on exactly one switch,
/// every link between two different existing switches, the switches connected.
#[derive(Clone, Debug, PartialEq)]
pub struct FabricDesc {
    /// The hosts' subnet.
    pub subnet: Ipv4Net,
    /// ECMP hash seed.
    pub seed: u64,
    /// Switches, in the order given.
    pub switches: Vec<SwitchDesc>,
    /// Hosts, by ascending index.
    pub hosts: Vec<HostDesc>,
    /// Links, in the order given.
    pub links: Vec<LinkDesc>,
}

impl FabricDesc {
    /// Reads a topology from TOML text.
    pub fn parse(text: &str) -> Result<Self, TopologyError> {
        let file: File = toml::from_str(text).map_err(|e| TopologyError::Parse(e.to_string()))?;
        Reader { text }.read(file)
    }

    /// The index of the switch named `name`.
    pub fn switch_index(&self, name: &str) -> Option<usize> {
        self.switches.iter().position(|s| s.name == name)
    }

    /// The index (into `hosts`) of host `h<i>` given by name.
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }
}

// ---- the file as written ----

#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct RawPort {
    rate: Option<Spanned<String>>,
    delay: Option<Spanned<String>>,
    buffer: Option<Spanned<String>>,
    aqm: Option<String>,
    aqm_opts: Option<BTreeMap<String, toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    name: Spanned<String>,
    #[serde(default)]
    hosts: Vec<Spanned<String>>,
    #[serde(default)]
    prefixes: Vec<Spanned<String>>,
    host_link: Option<RawPort>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    a: Spanned<String>,
    b: Spanned<String>,
    rate: Option<Spanned<String>>,
    delay: Option<Spanned<String>>,
    buffer: Option<Spanned<String>>,
    aqm: Option<String>,
    aqm_opts: Option<BTreeMap<String, toml::Value>>,
    ab: Option<RawPort>,
    ba: Option<RawPort>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLeafSpine {
    leaves: Spanned<usize>,
    spines: Spanned<usize>,
    hosts_per_leaf: Spanned<usize>,
    host_rate: Option<Spanned<String>>,
    fabric_rate: Option<Spanned<String>>,
    oversubscription: Option<Spanned<f64>>,
    delay: Option<Spanned<String>>,
    links_per_pair: Option<Spanned<usize>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    subnet: Option<Spanned<String>>,
    seed: Option<u64>,
    defaults: Option<RawPort>,
    #[serde(default, rename = "switch")]
    switches: Vec<RawSwitch>,
    #[serde(default, rename = "link")]
    links: Vec<RawLink>,
    leaf_spine: Option<Spanned<RawLeafSpine>>,
}

impl RawPort {
    /// `self` over `base`: every key `self` sets wins.
    fn over(&self, base: &RawPort) -> RawPort {
        let mut opts = base.aqm_opts.clone().unwrap_or_default();
        // A different AQM does not inherit the other's parameters.
        if self.aqm.is_some() && self.aqm != base.aqm {
            opts.clear();
        }
        opts.extend(self.aqm_opts.clone().unwrap_or_default());
        RawPort {
            rate: self.rate.clone().or(base.rate.clone()),
            delay: self.delay.clone().or(base.delay.clone()),
            buffer: self.buffer.clone().or(base.buffer.clone()),
            aqm: self.aqm.clone().or(base.aqm.clone()),
            aqm_opts: Some(opts),
        }
    }
}

/// Turns the raw file into a [`FabricDesc`], with the text for line numbers.
struct Reader<'t> {
    text: &'t str,
}

impl Reader<'_> {
    fn line(&self, span: std::ops::Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text[..end].bytes().filter(|&b| b == b'\n').count() + 1
    }

    fn at<T>(&self, s: &Spanned<T>, msg: impl Into<String>) -> TopologyError {
        TopologyError::At {
            line: self.line(s.span()),
            msg: msg.into(),
        }
    }

    fn read(&self, mut file: File) -> Result<FabricDesc, TopologyError> {
        let subnet = self.subnet(&file)?;
        let defaults = file.defaults.clone().unwrap_or_default();
        self.expand_shorthand(&mut file, &defaults)?;
        let mut names: HashMap<String, usize> = HashMap::new();
        let mut switches = Vec::with_capacity(file.switches.len());
        // host index → (switch, line)
        let mut host_switch: BTreeMap<usize, (usize, usize)> = BTreeMap::new();
        for (i, s) in file.switches.iter().enumerate() {
            let name = s.name.get_ref().trim().to_string();
            check_name(&name).map_err(|e| self.at(&s.name, e))?;
            if let Some(&j) = names.get(&name) {
                return Err(self.at(
                    &s.name,
                    format!(
                        "switch `{name}` is defined twice (also switch #{}): give each switch its own name",
                        j + 1
                    ),
                ));
            }
            names.insert(name.clone(), i);
            let indices = self.switch_hosts(&file, i, &name, subnet, &mut host_switch)?;
            let mut prefixes = Vec::new();
            for p in &s.prefixes {
                prefixes.push(
                    p.get_ref()
                        .parse::<Ipv4Net>()
                        .map_err(|e| self.at(p, format!("prefixes: {e}")))?,
                );
            }
            let port = s.host_link.clone().unwrap_or_default().over(&defaults);
            switches.push(SwitchDesc {
                name,
                hosts: indices, // host indices for now; positions below
                prefixes,
                host_port: self.port(&port)?,
            });
        }
        let hosts = hosts_in_order(&host_switch, subnet, &mut switches)?;
        let links = self.links(&file, &names, &defaults)?;
        let desc = FabricDesc {
            subnet,
            seed: file.seed.unwrap_or(1),
            switches,
            hosts,
            links,
        };
        check_prefixes(&desc)?;
        check_connected(&desc)?;
        Ok(desc)
    }

    /// The hosts' subnet: the file's, or the default.
    fn subnet(&self, file: &File) -> Result<Ipv4Net, TopologyError> {
        match &file.subnet {
            Some(s) => s
                .get_ref()
                .parse::<Ipv4Net>()
                .map_err(|e| self.at(s, format!("subnet: {e}"))),
            None => DEFAULT_SUBNET.parse().map_err(TopologyError::Invalid),
        }
    }

    /// Replaces a `[leaf_spine]` table by the switches and links it stands
    /// for; refuses a file with neither.
    fn expand_shorthand(&self, file: &mut File, defaults: &RawPort) -> Result<(), TopologyError> {
        if let Some(ls) = file.leaf_spine.take() {
            if !file.switches.is_empty() || !file.links.is_empty() {
                return Err(self.at(
                    &ls,
                    "[leaf_spine] builds the switches and links itself: \
                     remove the [[switch]] / [[link]] tables, or the [leaf_spine] table",
                ));
            }
            let (switches, links) = self.expand_leaf_spine(ls.get_ref(), defaults)?;
            file.switches = switches;
            file.links = links;
        }
        if file.switches.is_empty() {
            return Err(TopologyError::Invalid(
                "no switches: add [[switch]] tables (name, hosts) and [[link]] tables, \
                 or a [leaf_spine] table"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The host indices of switch `i` (`name`), each checked to have an
    /// address in `subnet` and no other switch; noted in `host_switch`.
    fn switch_hosts(
        &self,
        file: &File,
        i: usize,
        name: &str,
        subnet: Ipv4Net,
        host_switch: &mut BTreeMap<usize, (usize, usize)>,
    ) -> Result<Vec<usize>, TopologyError> {
        let mut indices = Vec::new();
        for h in &file.switches[i].hosts {
            for idx in parse_hosts(h.get_ref()).map_err(|e| self.at(h, e))? {
                if subnet.host(idx).is_none() {
                    return Err(self.at(
                        h,
                        format!(
                            "host h{idx} has no address in subnet {subnet} (it holds {} hosts): \
                             use a larger subnet",
                            subnet.host_capacity()
                        ),
                    ));
                }
                if let Some(&(other, line)) = host_switch.get(&idx) {
                    let on = &file.switches[other].name;
                    return Err(self.at(
                        h,
                        format!(
                            "host h{idx} is on two switches: `{}` (line {line}) and `{name}`; \
                             a host has one link",
                            on.get_ref()
                        ),
                    ));
                }
                host_switch.insert(idx, (i, self.line(h.span())));
                indices.push(idx);
            }
        }
        Ok(indices)
    }

    fn links(
        &self,
        file: &File,
        names: &HashMap<String, usize>,
        defaults: &RawPort,
    ) -> Result<Vec<LinkDesc>, TopologyError> {
        let known = || {
            let mut v: Vec<&str> = names.keys().map(String::as_str).collect();
            v.sort();
            v.join(", ")
        };
        let mut links = Vec::with_capacity(file.links.len());
        for l in &file.links {
            let end = |s: &Spanned<String>, key: &str| {
                names.get(s.get_ref().trim()).copied().ok_or_else(|| {
                    self.at(
                        s,
                        format!(
                            "link {key} = `{}`: no switch has that name (switches: {})",
                            s.get_ref(),
                            known()
                        ),
                    )
                })
            };
            let (a, b) = (end(&l.a, "a")?, end(&l.b, "b")?);
            if a == b {
                return Err(self.at(
                    &l.b,
                    format!(
                        "link from `{}` to itself: a and b must differ",
                        l.a.get_ref()
                    ),
                ));
            }
            let both = RawPort {
                rate: l.rate.clone(),
                delay: l.delay.clone(),
                buffer: l.buffer.clone(),
                aqm: l.aqm.clone(),
                aqm_opts: l.aqm_opts.clone(),
            }
            .over(defaults);
            links.push(LinkDesc {
                a,
                b,
                ab: self.port(&l.ab.clone().unwrap_or_default().over(&both))?,
                ba: self.port(&l.ba.clone().unwrap_or_default().over(&both))?,
            });
        }
        Ok(links)
    }

    fn port(&self, p: &RawPort) -> Result<PortDesc, TopologyError> {
        let rate = match &p.rate {
            Some(r) => parse_rate(r.get_ref()).map_err(|e| self.at(r, format!("rate: {e}")))?,
            None => parse_rate(DEFAULT_RATE).map_err(TopologyError::Invalid)?,
        };
        let delay_ns = match &p.delay {
            Some(d) => {
                units::parse_duration(d.get_ref()).map_err(|e| self.at(d, format!("delay: {e}")))?
            }
            None => 0,
        };
        let buffer_bytes = match &p.buffer {
            Some(b) => Some(
                units::parse_size(b.get_ref()).map_err(|e| self.at(b, format!("buffer: {e}")))?,
            ),
            None => None,
        };
        Ok(PortDesc {
            rate,
            delay_ns,
            buffer_bytes,
            aqm: p.aqm.clone(),
            aqm_opts: p.aqm_opts.clone().unwrap_or_default().into_iter().collect(),
        })
    }

    /// `[leaf_spine]` as the tables it stands for: leaf<i> with hosts
    /// h<(i−1)·H+1>..h<i·H>, spine<j>, a link from every leaf to every spine.
    fn expand_leaf_spine(
        &self,
        ls: &RawLeafSpine,
        defaults: &RawPort,
    ) -> Result<(Vec<RawSwitch>, Vec<RawLink>), TopologyError> {
        let counts = [
            (&ls.leaves, "leaves"),
            (&ls.spines, "spines"),
            (&ls.hosts_per_leaf, "hosts_per_leaf"),
        ];
        let optional = ls.links_per_pair.as_ref().map(|n| (n, "links_per_pair"));
        for (v, key) in counts.into_iter().chain(optional) {
            if *v.get_ref() == 0 {
                return Err(self.at(v, format!("leaf_spine.{key} must be at least 1")));
            }
        }
        let (leaves, spines, per_leaf) = (
            *ls.leaves.get_ref(),
            *ls.spines.get_ref(),
            *ls.hosts_per_leaf.get_ref(),
        );
        let parallel = ls.links_per_pair.as_ref().map_or(1, |n| *n.get_ref());
        let host_rate = ls.host_rate.clone().or(defaults.rate.clone());
        let fabric_rate = match (&ls.fabric_rate, &ls.oversubscription) {
            (Some(_), Some(o)) => {
                return Err(self.at(
                    o,
                    "give leaf_spine.fabric_rate or leaf_spine.oversubscription, not both",
                ))
            }
            (Some(r), None) => Some(r.clone()),
            (None, Some(o)) => {
                let ratio = *o.get_ref();
                if !(ratio.is_finite() && ratio > 0.0) {
                    return Err(self.at(
                        o,
                        "leaf_spine.oversubscription must be a positive ratio, e.g. 2.0 for 2:1",
                    ));
                }
                let h = host_rate.as_ref().ok_or_else(|| {
                    self.at(
                        o,
                        "oversubscription needs leaf_spine.host_rate (or [defaults] rate)",
                    )
                })?;
                let host_bps =
                    parse_rate(h.get_ref()).map_err(|e| self.at(h, format!("host_rate: {e}")))?;
                if host_bps.bps() == 0 {
                    return Err(self.at(o, "oversubscription needs a shaped host_rate"));
                }
                // ratio = hosts × host rate : uplinks × uplink rate (per
                // leaf), with spines × links_per_pair uplinks.
                let uplinks = (spines * parallel) as f64;
                let bps = (per_leaf as f64 * host_bps.bps() as f64 / (uplinks * ratio)).round();
                Some(Spanned::new(o.span(), format!("{}bit", bps as u64)))
            }
            (None, None) => host_rate.clone(),
        };
        let with_rate = |rate: &Option<Spanned<String>>| RawPort {
            rate: rate.clone(),
            delay: ls.delay.clone(),
            ..RawPort::default()
        };
        let span = ls.leaves.span();
        let spanned = |s: String| Spanned::new(span.clone(), s);
        let mut switches = Vec::with_capacity(leaves + spines);
        for i in 1..=leaves {
            let first = (i - 1) * per_leaf + 1;
            switches.push(RawSwitch {
                name: spanned(format!("leaf{i}")),
                hosts: vec![spanned(format!("h{first}-h{}", first + per_leaf - 1))],
                prefixes: Vec::new(),
                host_link: Some(with_rate(&host_rate)),
            });
        }
        for j in 1..=spines {
            switches.push(RawSwitch {
                name: spanned(format!("spine{j}")),
                hosts: Vec::new(),
                prefixes: Vec::new(),
                host_link: None,
            });
        }
        let mut links = Vec::with_capacity(leaves * spines * parallel);
        for i in 1..=leaves {
            for j in 1..=spines {
                for _ in 0..parallel {
                    let p = with_rate(&fabric_rate);
                    links.push(RawLink {
                        a: spanned(format!("leaf{i}")),
                        b: spanned(format!("spine{j}")),
                        rate: p.rate,
                        delay: p.delay,
                        buffer: None,
                        aqm: None,
                        aqm_opts: None,
                        ab: None,
                        ba: None,
                    });
                }
            }
        }
        Ok((switches, links))
    }
}

/// A rate; `0`, `unlimited` and `none` mean unshaped.
fn parse_rate(s: &str) -> Result<Rate, String> {
    match s.trim() {
        "0" | "unlimited" | "none" => Ok(Rate::from_bps(0)),
        other => units::parse_rate(other).map_err(|e| e.to_string()),
    }
}

/// Switch names become port names (`leaf1:spine2`): letters, digits, `-`, `_`.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("switch name is empty".into());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "switch name `{name}`: use letters, digits, `-` and `_` only (it names ports as `{name}:peer`)"
        ));
    }
    Ok(())
}

/// `h3` → [3]; `h1-h4` → [1, 2, 3, 4].
fn parse_hosts(s: &str) -> Result<Vec<usize>, String> {
    let one = |t: &str| -> Result<usize, String> {
        t.trim()
            .strip_prefix('h')
            .and_then(|d| d.parse::<usize>().ok())
            .filter(|&i| i >= 1)
            .ok_or_else(|| {
                format!(
                    "host `{}`: write hosts as h<i> (i ≥ 1) or a range h<i>-h<j>",
                    t.trim()
                )
            })
    };
    match s.split_once('-') {
        Some((lo, hi)) => {
            let (lo, hi) = (one(lo)?, one(hi)?);
            if lo > hi {
                return Err(format!(
                    "host range `{s}` runs backwards: write h{hi}-h{lo}"
                ));
            }
            Ok((lo..=hi).collect())
        }
        None => Ok(vec![one(s)?]),
    }
}

/// The hosts in index order, each on its switch; the switches' host
/// lists turned from indices into positions in that order.
fn hosts_in_order(
    host_switch: &BTreeMap<usize, (usize, usize)>,
    subnet: Ipv4Net,
    switches: &mut [SwitchDesc],
) -> Result<Vec<HostDesc>, TopologyError> {
    if host_switch.is_empty() {
        return Err(TopologyError::Invalid(
            "no hosts: give at least one switch `hosts = [\"h1\", ...]`".into(),
        ));
    }
    let hosts: Vec<HostDesc> = host_switch
        .iter()
        .map(|(&idx, &(sw, _))| HostDesc {
            name: format!("h{idx}"),
            index: idx,
            mac: MacAddr(host_mac(idx)),
            ip: subnet.host(idx).expect("checked when read"),
            switch: sw,
        })
        .collect();
    let position: HashMap<usize, usize> = hosts
        .iter()
        .enumerate()
        .map(|(p, h)| (h.index, p))
        .collect();
    for s in switches {
        for h in &mut s.hosts {
            *h = position[h];
        }
    }
    Ok(hosts)
}

/// Prefixes of different switches may not overlap, and a host may not sit
/// inside another switch's prefix (its traffic would be routed away from it).
fn check_prefixes(d: &FabricDesc) -> Result<(), TopologyError> {
    let all: Vec<(usize, Ipv4Net)> = d
        .switches
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.prefixes.iter().map(move |&p| (i, p)))
        .collect();
    for (k, &(i, p)) in all.iter().enumerate() {
        for &(j, q) in &all[k + 1..] {
            if i != j && (p.contains(q.network()) || q.contains(p.network())) {
                return Err(TopologyError::Invalid(format!(
                    "prefix {p} of `{}` overlaps prefix {q} of `{}`: a prefix belongs to one switch",
                    d.switches[i].name, d.switches[j].name
                )));
            }
        }
        if let Some(h) = d.hosts.iter().find(|h| h.switch != i && p.contains(h.ip)) {
            return Err(TopologyError::Invalid(format!(
                "host {} ({}) is on `{}` but inside prefix {p} of `{}`: \
                 move the host or narrow the prefix",
                h.name, h.ip, d.switches[h.switch].name, d.switches[i].name
            )));
        }
    }
    Ok(())
}

/// Every switch reachable from the first.
fn check_connected(d: &FabricDesc) -> Result<(), TopologyError> {
    let n = d.switches.len();
    let mut adj = vec![Vec::new(); n];
    for l in &d.links {
        adj[l.a].push(l.b);
        adj[l.b].push(l.a);
    }
    let mut seen = vec![false; n];
    seen[0] = true;
    let mut todo = VecDeque::from([0]);
    while let Some(s) = todo.pop_front() {
        for &t in &adj[s] {
            if !std::mem::replace(&mut seen[t], true) {
                todo.push_back(t);
            }
        }
    }
    let cut: Vec<&str> = (0..n)
        .filter(|&i| !seen[i])
        .map(|i| d.switches[i].name.as_str())
        .collect();
    if cut.is_empty() {
        Ok(())
    } else {
        Err(TopologyError::Invalid(format!(
            "the fabric is not connected: no path from `{}` to {}; add [[link]] tables joining them",
            d.switches[0].name,
            cut.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}
