//! Choosing and configuring an AQM: `--aqm NAME`, `--aqm-opt key=value`,
//! the config file's `[aqm_opts]`, the paper defaults scaled to the
//! emulated link, and the enum the port dispatches through.
//!
//! Every AQM is one line in the [`aqms!`] list below; its file supplies the
//! rest through [`AqmParams`]: its paper's defaults scaled to the port (each
//! file's header gives the formulas; `--aqm NAME --aqm-opt help=1` prints the
//! values), what each key means, how to build the port's instance, and what
//! it needs from the port. Adding an AQM is its file, one line in the list,
//! and a row in the README's AQM table (a test holds the README to the list).
//!
//! Overrides are applied to the scaled defaults, by key, and the result is
//! validated; an unknown key is an error that lists the valid keys.

pub use super::params::{AqmConfigError, AqmEnv, AqmParams, PortNeeds};
use super::{codel, dctcp, diffecn, droptail, ecnsharp, mqecn, pred, red, tcn};
use super::{Aqm, QueueCtx, Verdict};
use crate::packet::Packet;
use crate::rng::SimRng;
use crate::units::{fmt_size, Nanos, Quantity, UnitError};
use serde::{Deserialize, Serialize};

/// The list: `Variant = "name" | "alias" ...: parameters`. Generates
/// [`AQM_NAMES`], [`AqmConfig`] (the parameters, tagged by name in TOML),
/// [`AqmKind`] (the instances; the per-packet path dispatches through this
/// enum, not `Box<dyn Aqm>`), and the matches over them.
macro_rules! aqms {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal $(| $alias:literal)* : $params:ty, )*) => {
        /// Names accepted by `--aqm`, in the list's order.
        pub const AQM_NAMES: [&str; [$($name),*].len()] = [$($name),*];

        /// An AQM and its parameters, tagged by `kind` in TOML
        /// (`[aqm] kind = "tcn"  threshold = "250us"`).
        #[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
        #[serde(tag = "kind")]
        pub enum AqmConfig {
            $( $(#[$doc])* #[serde(rename = $name)] $variant($params), )*
        }

        /// The port's AQM: enum dispatch, no `Box<dyn>` on the per-packet path.
        #[derive(Clone, Debug)]
        pub enum AqmKind {
            $( $(#[$doc])* $variant(<$params as AqmParams>::Instance), )*
        }

        /// One entry per AQM, for what is looked up by name.
        const REGISTRY: &[Entry] = &[$(
            Entry {
                name: $name,
                aliases: &[$($alias),*],
                needs: <$params as AqmParams>::NEEDS,
                keys: <$params as AqmParams>::KEYS,
                length_keys: <$params as AqmParams>::LENGTH_KEYS,
                size_keys: <$params as AqmParams>::SIZE_KEYS,
                for_port: |env| AqmConfig::$variant(<$params as AqmParams>::for_port(env)),
            },
        )*];

        impl AqmConfig {
            /// The `--aqm` name of this AQM.
            pub fn name(&self) -> &'static str {
                match self { $( AqmConfig::$variant(_) => $name, )* }
            }
            /// Runs the AQM's own checks.
            pub fn validate(&self) -> Result<(), AqmConfigError> {
                match self { $( AqmConfig::$variant(c) => c.validate(), )* }
                    .map_err(AqmConfigError::Invalid)
            }
            /// One line with the effective values, for the start-up banner.
            pub fn describe(&self) -> String {
                match self { $( AqmConfig::$variant(c) => c.describe(), )* }
            }
            /// The parameters as a TOML table, keyed as `--aqm-opt` takes them.
            fn table(&self) -> toml::Table {
                match self { $( AqmConfig::$variant(c) => to_table(c), )* }
            }
            /// `opts` applied by key, not yet validated as a whole.
            fn overridden(&self, opts: &[(String, toml::Value)]) -> Result<Self, AqmConfigError> {
                let name = self.name();
                Ok(match self { $( AqmConfig::$variant(c) => AqmConfig::$variant(apply(name, c, opts)?), )* })
            }
            /// Builds the port's AQM instance.
            pub fn build(&self, env: &AqmEnv) -> Result<AqmKind, AqmConfigError> {
                self.validate()?;
                Ok(match self { $( AqmConfig::$variant(c) => AqmKind::$variant(c.build(env)?), )* })
            }
        }

        impl AqmKind {
            /// The `--aqm` name.
            pub fn name(&self) -> &'static str {
                match self { $( AqmKind::$variant(_) => $name, )* }
            }
            /// Internal state and counters as JSON (MQ-ECN T_round and K_i, CoDel
            /// count/dropping, ECN♯ marking_state/count, RED avg, ...).
            pub fn report(&self) -> serde_json::Value {
                match self { $( AqmKind::$variant(a) => a.report(), )* }
            }
        }

        impl Aqm for AqmKind {
            #[inline]
            fn on_enqueue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, rng: &mut SimRng) -> Verdict {
                match self { $( AqmKind::$variant(a) => a.on_enqueue(pkt, q, now, rng), )* }
            }
            #[inline]
            fn on_dequeue(&mut self, pkt: &Packet, q: &QueueCtx, now: Nanos, rng: &mut SimRng) -> Verdict {
                match self { $( AqmKind::$variant(a) => a.on_dequeue(pkt, q, now, rng), )* }
            }
            #[inline]
            fn on_round(&mut self, queue: usize, now: Nanos) {
                match self { $( AqmKind::$variant(a) => a.on_round(queue, now), )* }
            }
            #[inline]
            fn on_idle(&mut self, now: Nanos) {
                match self { $( AqmKind::$variant(a) => a.on_idle(now), )* }
            }
            #[inline]
            fn on_tick(&mut self, now: Nanos) {
                match self { $( AqmKind::$variant(a) => a.on_tick(now), )* }
            }
            #[inline]
            fn next_tick(&self) -> Option<Nanos> {
                match self { $( AqmKind::$variant(a) => a.next_tick(), )* }
            }
            fn gauges(&self, emit: &mut dyn FnMut(&'static str, f64)) {
                match self { $( AqmKind::$variant(a) => a.gauges(emit), )* }
            }
        }
    };
}

aqms! {
    /// No AQM.
    DropTail = "droptail" | "drop-tail": droptail::Config,
    /// Floyd RED / point-slope RED.
    Red = "red": red::Config,
    /// DCTCP single threshold.
    Dctcp = "dctcp" | "dctcp-ecn": dctcp::Config,
    /// MQ-ECN.
    MqEcn = "mq-ecn" | "mqecn": mqecn::Config,
    /// TCN.
    Tcn = "tcn": tcn::Config,
    /// CoDel.
    Codel = "codel": codel::Config,
    /// ECN♯.
    EcnSharp = "ecn-sharp" | "ecnsharp" | "ecn#": ecnsharp::Config,
    /// PRED (its instance is boxed: its flow counter and QLA state make it the largest).
    Pred = "pred": pred::Config,
    /// DiffECN's selective marking unit.
    DiffEcn = "diffecn": diffecn::Config,
}

/// What is looked up by an AQM's name.
struct Entry {
    name: &'static str,
    aliases: &'static [&'static str],
    needs: PortNeeds,
    keys: &'static [(&'static str, &'static str)],
    length_keys: &'static [&'static str],
    size_keys: &'static [&'static str],
    for_port: fn(&AqmEnv) -> AqmConfig,
}

/// The entry of `--aqm name` (any case, aliases included).
fn entry(name: &str) -> Option<&'static Entry> {
    let name = name.trim().to_ascii_lowercase();
    REGISTRY
        .iter()
        .find(|e| e.name == name || e.aliases.contains(&name.as_str()))
}

/// What `--aqm name` needs from its port (nothing for an unknown name: the
/// name is refused later, with the list of names).
pub fn port_needs(name: &str) -> PortNeeds {
    entry(name).map_or(PortNeeds::NOTHING, |e| e.needs)
}

/// Parameters as a TOML table, keyed as `--aqm-opt` (or `--raqm-opt`) takes them.
pub(crate) fn to_table<T: Serialize>(cfg: &T) -> toml::Table {
    match toml::Value::try_from(cfg) {
        Ok(toml::Value::Table(t)) => t,
        _ => toml::Table::new(),
    }
}

/// Reads a `--aqm-opt` (or `--raqm-opt`) value: bool, integer, float, else string.
pub(crate) fn cli_value(v: &str) -> toml::Value {
    let v = v.trim();
    if let Ok(b) = v.parse::<bool>() {
        toml::Value::Boolean(b)
    } else if let Ok(i) = v.parse::<i64>() {
        toml::Value::Integer(i)
    } else if let Ok(f) = v.parse::<f64>() {
        toml::Value::Float(f)
    } else {
        toml::Value::String(v.to_string())
    }
}

/// The size keys of an AQM ([`AqmParams::SIZE_KEYS`]) and which of them
/// count packets when its `unit` is `packets` ([`AqmParams::LENGTH_KEYS`]);
/// none for a name the registry does not have (R-AQM: its sizes are
/// counts named by their unit, `*_pkts`, `*_bytes`).
#[derive(Clone, Copy)]
struct SizeKeys {
    sizes: &'static [&'static str],
    lengths: &'static [&'static str],
}

impl SizeKeys {
    fn of(aqm: &str) -> Self {
        entry(aqm).map_or(
            SizeKeys {
                sizes: &[],
                lengths: &[],
            },
            |e| SizeKeys {
                sizes: e.size_keys,
                lengths: e.length_keys,
            },
        )
    }

    fn is_size(&self, key: &str) -> bool {
        self.sizes.contains(&key)
    }

    /// Whether `key` is a number of packets in `table`: a length key of an
    /// AQM whose `unit` is `packets`.
    fn counts_packets(&self, key: &str, table: &toml::Table) -> bool {
        self.lengths.contains(&key)
            && table.get("unit").and_then(toml::Value::as_str) == Some("packets")
    }

    /// A size given as a string that is only a number (`"1500"`) is read
    /// as that number, so that one rule decides what it may mean.
    fn normalised(&self, key: &str, v: &toml::Value) -> toml::Value {
        match v {
            toml::Value::String(s) if self.is_size(key) && crate::units::is_bare_number(s) => {
                cli_value(s)
            }
            other => other.clone(),
        }
    }

    /// The unit rule for the sizes the user gave (`given`: key and value),
    /// once every option is in `table`: a bare number only counts packets;
    /// a size with a byte unit is no number of packets.
    fn check(
        &self,
        aqm: &'static str,
        table: &toml::Table,
        given: &[(String, String, toml::Value)],
    ) -> Result<(), AqmConfigError> {
        for (as_given, key, v) in given {
            if !self.is_size(key) {
                continue;
            }
            let packets = self.counts_packets(key, table);
            let bad = |msg: String| AqmConfigError::BadValue {
                aqm,
                key: as_given.clone(),
                value: shown(v),
                msg,
            };
            let bare = match v {
                toml::Value::Integer(n) => Some(*n != 0),
                toml::Value::Float(f) => Some(*f != 0.0),
                _ => None,
            };
            match bare {
                Some(true) if !packets => {
                    let mut msg = UnitError::needs_unit(Quantity::Size, &shown(v)).to_string();
                    if self.lengths.contains(&key.as_str()) && table.contains_key("unit") {
                        msg.push_str("; or count packets: unit=packets and a number of packets");
                    }
                    return Err(bad(msg));
                }
                None if packets => {
                    return Err(bad(format!(
                        "with unit=packets, {key} is a number of packets: write {key}=20 \
                         (packets), or unit=bytes to give a size"
                    )))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A value as the user wrote it, for messages.
fn shown(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Applies `key = value` overrides to `cfg`; an unknown key or a bad value
/// is an error naming it (also R-AQM's `--raqm-opt`). A time or a size
/// needs a unit (`crate::units`, "One rule"): times are refused bare by
/// their deserializer, sizes here, where the AQM's `unit` is known.
pub(crate) fn apply<T>(
    aqm: &'static str,
    cfg: &T,
    opts: &[(String, toml::Value)],
) -> Result<T, AqmConfigError>
where
    T: Serialize + for<'de> Deserialize<'de>,
{
    let sizes = SizeKeys::of(aqm);
    let mut table = to_table(cfg);
    let mut given = Vec::with_capacity(opts.len());
    for (k, v) in opts {
        let key = k.trim().replace('-', "_");
        if !table.contains_key(&key) {
            return Err(AqmConfigError::UnknownKey {
                aqm,
                key: k.clone(),
                valid: table.keys().cloned().collect(),
            });
        }
        let v = sizes.normalised(&key, v);
        // Check this one value alone so the error names its key.
        let mut probe = table.clone();
        probe.insert(key.clone(), v.clone());
        if let Err(e) = toml::Value::Table(probe).try_into::<T>() {
            return Err(AqmConfigError::BadValue {
                aqm,
                key: k.clone(),
                value: shown(&v),
                msg: e.message().to_string(),
            });
        }
        table.insert(key.clone(), v.clone());
        given.push((k.clone(), key, v));
    }
    sizes.check(aqm, &table, &given)?;
    toml::Value::Table(table)
        .try_into::<T>()
        .map_err(|e| AqmConfigError::Invalid(format!("{aqm}: {}", e.message())))
}

/// What `--aqm-opt help=1` (and `--raqm-opt help=1`) prints: the effective
/// line `describe`, then every key of `keys` with its value in `table`
/// (`show` renders it as it is typed back), what it is and its unit, then
/// `units`, how values are written. `flag` and `file_table` name where the
/// keys are given.
pub(crate) fn keys_help(
    describe: &str,
    flag: &str,
    file_table: &str,
    keys: &[(&str, &str)],
    table: &toml::Table,
    show: impl Fn(&str, &toml::Value) -> String,
    units: &str,
) -> String {
    let mut out = format!(
        "{describe}\nKeys ({flag} KEY=VALUE, or KEY = VALUE under {file_table} in the config file), with their values here:\n"
    );
    if keys.is_empty() {
        out.push_str("  (none)\n");
    }
    let setting = |key: &str| match table.get(key) {
        Some(v) => format!("{key}={}", show(key, v)),
        None => key.to_string(),
    };
    let width = keys
        .iter()
        .map(|(k, _)| setting(k).len())
        .max()
        .unwrap_or(0);
    for (key, what) in keys {
        out.push_str(&format!("  {:<width$}  {what}\n", setting(key)));
    }
    out.push_str(units);
    out.push('\n');
    out
}

/// Checks `opts` for `--aqm name` the way the switch will apply them (keys,
/// values, units), on a port like `env`, without the AQM's checks of the
/// whole: a scenario is checked with this before it runs.
pub fn check_options(
    name: &str,
    env: &AqmEnv,
    opts: &[(String, toml::Value)],
) -> Result<(), AqmConfigError> {
    AqmConfig::defaults_for(name, env)?
        .overridden(opts)
        .map(|_| ())
}

/// The options of `--aqm name` that are queue-length thresholds
/// ([`AqmParams::LENGTH_KEYS`]); none for an unknown name.
pub fn length_keys(name: &str) -> &'static [&'static str] {
    entry(name).map_or(&[], |e| e.length_keys)
}

impl AqmConfig {
    /// The paper's defaults for `--aqm name`, scaled to `env` (see each
    /// AQM file's header).
    pub fn defaults_for(name: &str, env: &AqmEnv) -> Result<Self, AqmConfigError> {
        match entry(name) {
            Some(e) => Ok((e.for_port)(env)),
            None => Err(AqmConfigError::UnknownAqm {
                name: name.trim().to_ascii_lowercase(),
                known: &AQM_NAMES,
            }),
        }
    }

    /// The keys `--aqm-opt` accepts for this AQM.
    pub fn valid_keys(&self) -> Vec<String> {
        self.table().keys().cloned().collect()
    }

    /// Applies `--aqm-opt key=value` pairs (values tc-style: `250us`, `32kb`,
    /// `0.1`, `true`, `probabilistic`), then validates.
    pub fn with_overrides(self, opts: &[(String, String)]) -> Result<Self, AqmConfigError> {
        let vals: Vec<(String, toml::Value)> = opts
            .iter()
            .map(|(k, v)| (k.clone(), cli_value(v)))
            .collect();
        self.with_toml_overrides(&vals)
    }

    /// Applies overrides given as TOML values (config file), then validates.
    pub fn with_toml_overrides(
        self,
        opts: &[(String, toml::Value)],
    ) -> Result<Self, AqmConfigError> {
        let out = self.overridden(opts)?;
        out.validate()?;
        Ok(out)
    }

    /// Reads a config file's `[aqm]` table: `kind` picks the AQM, every other
    /// key overrides its scaled defaults.
    pub fn from_toml(table: &toml::Table, env: &AqmEnv) -> Result<Self, AqmConfigError> {
        let kind = table.get("kind").and_then(|v| v.as_str()).ok_or_else(|| {
            AqmConfigError::Invalid(format!(
                "[aqm] needs kind = one of: {}",
                AQM_NAMES.join(", ")
            ))
        })?;
        let opts: Vec<(String, toml::Value)> = table
            .iter()
            .filter(|(k, _)| k.as_str() != "kind")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Self::defaults_for(kind, env)?.with_toml_overrides(&opts)
    }

    /// What `--aqm NAME --aqm-opt help=1` prints: the effective line, then
    /// every key with its value here (as it is typed: sizes with their
    /// unit), what it is and its unit.
    pub fn help(&self) -> String {
        let keys = entry(self.name()).map_or(&[][..], |e| e.keys);
        let sizes = SizeKeys::of(self.name());
        let table = self.table();
        keys_help(
            &self.describe(),
            "--aqm-opt",
            "[aqm_opts]",
            keys,
            &table,
            |key, v| match v {
                toml::Value::Integer(n)
                    if sizes.is_size(key) && !sizes.counts_packets(key, &table) =>
                {
                    fmt_size(*n as u64)
                }
                other => shown(other),
            },
            "Times and sizes need a unit (250us, 1.5ms; 1514b, 32kb with k = 1024 bytes); \
             counts (packets, flows, table slots) and probabilities are plain numbers.",
        )
    }
}

impl AqmKind {
    /// The RED instance, for PRED's controller (`set_point_slope`).
    pub fn as_red_mut(&mut self) -> Option<&mut red::Red> {
        match self {
            AqmKind::Red(r) => Some(r),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Rate, US};

    fn env() -> AqmEnv {
        AqmEnv {
            rate: Rate::gbit(1),
            rtt_ns: 250 * US,
            num_queues: 2,
            mtu_bytes: 1500,
            quanta: None,
        }
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn tcn_threshold_is_lambda_rtt() {
        let c = AqmConfig::defaults_for("tcn", &env()).unwrap();
        let AqmConfig::Tcn(t) = &c else { panic!() };
        assert_eq!(t.threshold, 250 * US);
        assert!(c.describe().contains("250us"), "{}", c.describe());
        let mut e = env();
        e.rtt_ns = 100 * US;
        let AqmConfig::Tcn(t) = AqmConfig::defaults_for("tcn", &e).unwrap() else {
            panic!()
        };
        assert_eq!(t.threshold, 100 * US);
    }

    #[test]
    fn scaled_defaults() {
        let e = env();
        let AqmConfig::Dctcp(d) = AqmConfig::defaults_for("dctcp", &e).unwrap() else {
            panic!()
        };
        assert_eq!(d.k, 31_250); // λ·C·RTT
        let mut e10 = e.clone();
        e10.rate = Rate::gbit(10);
        e10.rtt_ns = 100 * US;
        let AqmConfig::Dctcp(d) = AqmConfig::defaults_for("dctcp", &e10).unwrap() else {
            panic!()
        };
        assert_eq!(d.k, 125_000); // TCN paper §3.3
        let AqmConfig::Codel(c) = AqmConfig::defaults_for("codel", &e).unwrap() else {
            panic!()
        };
        assert_eq!((c.target, c.interval), (51_200, 1_024_000)); // TCN paper §6.1
        let mut e200 = e.clone();
        e200.rtt_ns = 200 * US;
        let AqmConfig::EcnSharp(s) = AqmConfig::defaults_for("ecn-sharp", &e200).unwrap() else {
            panic!()
        };
        assert_eq!(
            (s.ins_target, s.pst_interval, s.pst_target),
            (200 * US, 200 * US, 85 * US)
        ); // §5.2
        let AqmConfig::MqEcn(m) = AqmConfig::defaults_for("mq-ecn", &e).unwrap() else {
            panic!()
        };
        assert_eq!((m.beta, m.t_idle), (0.75, 12 * US));
        let AqmConfig::Red(r) = AqmConfig::defaults_for("red", &e).unwrap() else {
            panic!()
        };
        assert_eq!((r.min_th, r.max_th), (10_416, 31_250));
        for name in AQM_NAMES {
            let c = AqmConfig::defaults_for(name, &e).unwrap();
            c.validate().unwrap();
            assert_eq!(c.name(), name);
        }
    }

    #[test]
    fn overrides_parse_tc_units_and_validate() {
        let c = AqmConfig::defaults_for("tcn", &env())
            .unwrap()
            .with_overrides(&[kv("threshold", "50us")])
            .unwrap();
        let AqmConfig::Tcn(t) = &c else { panic!() };
        assert_eq!(t.threshold, 50 * US);
        let c = AqmConfig::defaults_for("tcn", &env())
            .unwrap()
            .with_overrides(&[
                kv("mode", "probabilistic"),
                kv("t-min", "20us"),
                kv("t_max", "80us"),
                kv("p_max", "1"),
            ])
            .unwrap();
        let AqmConfig::Tcn(t) = &c else { panic!() };
        assert_eq!(
            (t.mode, t.t_min, t.t_max, t.p_max),
            (tcn::Mode::Probabilistic, 20 * US, 80 * US, 1.0)
        );
        let c = AqmConfig::defaults_for("dctcp", &env())
            .unwrap()
            .with_overrides(&[kv("k", "32kb"), kv("occupancy", "port")])
            .unwrap();
        let AqmConfig::Dctcp(d) = &c else { panic!() };
        assert_eq!(d.k, 32 * 1024);
        assert_eq!(d.occupancy, crate::aqm::Occupancy::Port);
    }

    #[test]
    fn bad_override_key_lists_valid_keys() {
        let e = AqmConfig::defaults_for("ecn-sharp", &env())
            .unwrap()
            .with_overrides(&[kv("target", "10us")])
            .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, AqmConfigError::UnknownKey { .. }));
        assert!(
            msg.contains("ins_target")
                && msg.contains("pst_interval")
                && msg.contains("pst_target"),
            "{msg}"
        );
        let e = AqmConfig::DropTail(droptail::Config {})
            .with_overrides(&[kv("k", "1")])
            .unwrap_err();
        assert!(e.to_string().contains("(none)"));
    }

    #[test]
    fn bad_values_and_validation_errors() {
        let e = AqmConfig::defaults_for("tcn", &env())
            .unwrap()
            .with_overrides(&[kv("threshold", "50 parsecs")])
            .unwrap_err();
        assert!(matches!(e, AqmConfigError::BadValue { .. }), "{e}");
        assert!(e.to_string().contains("threshold"));
        let e = AqmConfig::defaults_for("codel", &env())
            .unwrap()
            .with_overrides(&[kv("target", "2ms"), kv("interval", "1ms")])
            .unwrap_err();
        assert!(matches!(e, AqmConfigError::Invalid(_)), "{e}");
        let e = AqmConfig::defaults_for("red", &env())
            .unwrap()
            .with_overrides(&[kv("min_th", "40kb")])
            .unwrap_err();
        assert!(e.to_string().contains("min_th"), "{e}");
        assert!(matches!(
            AqmConfig::defaults_for("pie", &env()),
            Err(AqmConfigError::UnknownAqm { .. })
        ));
    }

    /// A bare number is refused for a time, whether it came from
    /// `--aqm-opt` (a string the CLI reads as a number) or a config file
    /// (a TOML integer): it once meant nanoseconds, 1000 × less than tc's
    /// microseconds.
    #[test]
    fn a_bare_time_needs_a_unit() {
        let tcn = || AqmConfig::defaults_for("tcn", &env()).unwrap();
        let e = tcn().with_overrides(&[kv("threshold", "100")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tcn: threshold=100: a time needs a unit — write 100us (or 100ns, 100ms)"
        );
        let file = [("threshold".to_string(), toml::Value::Integer(100))];
        let e = tcn().with_toml_overrides(&file).unwrap_err().to_string();
        assert!(
            e.contains("threshold=100: a time needs a unit — write 100us"),
            "{e}"
        );
        let file = [("t_max".to_string(), toml::Value::String("80".into()))];
        let e = tcn().with_toml_overrides(&file).unwrap_err().to_string();
        assert!(
            e.contains("t_max=80: a time needs a unit — write 80us"),
            "{e}"
        );
        let e = tcn().with_overrides(&[kv("t_min", "2.5")]).unwrap_err();
        assert!(e.to_string().contains("write 2.5us"), "{e}");
        // 0 is 0 in every unit.
        let c = AqmConfig::defaults_for("mq-ecn", &env())
            .unwrap()
            .with_overrides(&[kv("t_idle", "0")])
            .unwrap();
        let AqmConfig::MqEcn(m) = c else { panic!() };
        assert_eq!(m.t_idle, 0);
    }

    /// A size in bytes needs its unit; a bare number is a number of
    /// packets, so it stands only where the AQM counts packets.
    #[test]
    fn a_bare_size_needs_a_unit_unless_it_counts_packets() {
        let dctcp = || AqmConfig::defaults_for("dctcp", &env()).unwrap();
        let e = dctcp().with_overrides(&[kv("k", "23906")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "dctcp: k=23906: a size needs a unit — write 23906b for bytes (or 23906kb, \
             k = 1024 bytes); or count packets: unit=packets and a number of packets"
        );
        let file = [("k".to_string(), toml::Value::String("23906".into()))];
        let e = dctcp().with_toml_overrides(&file).unwrap_err().to_string();
        assert!(e.contains("k=23906: a size needs a unit"), "{e}");
        let AqmConfig::Dctcp(d) = dctcp().with_overrides(&[kv("k", "23906b")]).unwrap() else {
            panic!()
        };
        assert_eq!(d.k, 23906);
        // Packets: a bare number is the count, whichever order the keys come in.
        for opts in [
            [kv("k", "65"), kv("unit", "packets")],
            [kv("unit", "packets"), kv("k", "65")],
        ] {
            let AqmConfig::Dctcp(d) = dctcp().with_overrides(&opts).unwrap() else {
                panic!()
            };
            assert_eq!((d.k, d.unit), (65, crate::aqm::LengthUnit::Packets));
        }
        // ... and a size in bytes is no number of packets.
        let e = dctcp()
            .with_overrides(&[kv("unit", "packets"), kv("k", "30kb")])
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("k=30kb: with unit=packets, k is a number of packets"),
            "{e}"
        );
        // A size that is always bytes says nothing of packets.
        let e = AqmConfig::defaults_for("codel", &env())
            .unwrap()
            .with_overrides(&[kv("maxpacket", "1514")])
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("write 1514b for bytes (or 1514kb, k = 1024 bytes)"),
            "{e}"
        );
        let e = AqmConfig::defaults_for("red", &env())
            .unwrap()
            .with_overrides(&[kv("unit", "packets"), kv("avpkt", "1000")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("avpkt=1000: a size needs a unit"), "{e}");
        // PRED's thresholds are packets by definition: plain counts.
        AqmConfig::defaults_for("pred", &env())
            .unwrap()
            .with_overrides(&[kv("min_k", "4"), kv("max_k", "200")])
            .unwrap();
    }

    #[test]
    fn mq_ecn_needs_a_round_robin_scheduler() {
        let c = AqmConfig::defaults_for("mq-ecn", &env()).unwrap();
        let e = c.build(&env()).unwrap_err();
        assert!(e.to_string().contains("--sched dwrr"), "{e}");
        let mut rr = env();
        rr.quanta = Some(vec![1500, 1500]);
        let k = c.build(&rr).unwrap();
        assert_eq!(k.report()["k_bytes"][0], 31_250);
        rr.quanta = Some(vec![1500]);
        assert!(matches!(
            c.build(&rr),
            Err(AqmConfigError::QuantaMismatch { .. })
        ));
    }

    #[test]
    fn toml_table_and_serde_roundtrip() {
        let t: toml::Table = toml::from_str("kind = \"tcn\"\nthreshold = \"80us\"").unwrap();
        let c = AqmConfig::from_toml(&t, &env()).unwrap();
        let AqmConfig::Tcn(tc) = &c else { panic!() };
        assert_eq!(tc.threshold, 80 * US);
        // Full tagged form.
        let full: AqmConfig =
            toml::from_str("kind = \"codel\"\ntarget = \"50us\"\ninterval = \"1ms\"").unwrap();
        let AqmConfig::Codel(cd) = &full else {
            panic!()
        };
        assert_eq!(
            (cd.target, cd.interval, cd.maxpacket),
            (50 * US, 1_000_000, 1514) // one MTU frame, Linux psched_mtu()
        );
        let s = toml::to_string(&c).unwrap();
        let back: AqmConfig = toml::from_str(&s).unwrap();
        assert_eq!(back, c);
        assert!(toml::from_str::<AqmConfig>("kind = \"tcn\"\nbogus = 1").is_err());
    }

    #[test]
    fn build_every_kind_and_dispatch() {
        let mut e = env();
        e.quanta = Some(vec![1500, 1500]);
        let mut rng = SimRng::new(1);
        for name in AQM_NAMES {
            let mut k = AqmConfig::defaults_for(name, &e)
                .unwrap()
                .build(&e)
                .unwrap();
            assert_eq!(k.name(), name);
            let p = crate::aqm::util::testutil::ect(1500, 0);
            let q = QueueCtx::default();
            assert_eq!(k.on_enqueue(&p, &q, 1, &mut rng), Verdict::Pass);
            assert_eq!(k.on_dequeue(&p, &q, 2, &mut rng), Verdict::Pass);
            k.on_round(0, 3);
            k.on_idle(4);
            assert!(k.report().is_object());
        }
    }
}

#[cfg(test)]
mod registry_tests {
    use super::*;
    use crate::units::{Rate, US};

    fn env() -> AqmEnv {
        AqmEnv {
            rate: Rate::gbit(1),
            rtt_ns: 250 * US,
            num_queues: 2,
            mtu_bytes: 1500,
            quanta: Some(vec![1500, 1500]),
        }
    }

    #[test]
    fn every_key_is_explained_and_every_explained_key_exists() {
        for name in AQM_NAMES {
            let c = AqmConfig::defaults_for(name, &env()).unwrap();
            let mut explained: Vec<&str> = entry(name).unwrap().keys.iter().map(|k| k.0).collect();
            explained.sort_unstable();
            assert_eq!(
                explained,
                c.valid_keys(),
                "{name}: KEYS against its parameters"
            );
            let help = c.help();
            for key in c.valid_keys() {
                assert!(
                    help.contains(&format!("  {key}=")),
                    "{name}: {key} missing:\n{help}"
                );
            }
            for key in entry(name).unwrap().length_keys {
                assert!(
                    c.valid_keys().iter().any(|k| k == key),
                    "{name}: length key {key}"
                );
            }
        }
    }

    /// Which keys are times and sizes is declared once, by the
    /// parameters' own deserializers and [`AqmParams::SIZE_KEYS`]; the two
    /// agree, and every one of them refuses a bare number from the user.
    #[test]
    fn every_time_and_size_key_refuses_a_bare_number() {
        for name in AQM_NAMES {
            let c = AqmConfig::defaults_for(name, &env()).unwrap();
            let e = entry(name).unwrap();
            for (key, v) in c.table() {
                let takes = |s: &str| {
                    c.clone()
                        .overridden(&[(key.clone(), toml::Value::String(s.into()))])
                        .is_ok()
                };
                let is_time =
                    matches!(&v, toml::Value::String(s) if crate::units::parse_duration(s).is_ok());
                let is_size = matches!(v, toml::Value::Integer(_)) && takes("2kb");
                assert_eq!(
                    is_size,
                    e.size_keys.contains(&key.as_str()),
                    "{name}: {key} in SIZE_KEYS"
                );
                if is_time || is_size {
                    let bare = c
                        .clone()
                        .overridden(&[(key.clone(), toml::Value::Integer(7))])
                        .unwrap_err()
                        .to_string();
                    assert!(bare.contains("needs a unit"), "{name}: {key}=7: {bare}");
                }
            }
        }
    }

    #[test]
    fn help_shows_the_scaled_values_with_their_units() {
        let h = AqmConfig::defaults_for("tcn", &env()).unwrap().help();
        assert!(
            h.starts_with("tcn: mark at dequeue iff sojourn > T = 250us"),
            "{h}"
        );
        assert!(
            h.contains("  threshold=250us  ") && h.contains("time"),
            "{h}"
        );
        assert!(h.contains("  mode=threshold  "), "{h}");
        let h = AqmConfig::defaults_for("dctcp", &env()).unwrap().help();
        assert!(
            h.contains("  k=31250b  ") && h.contains("bytes (or packets)"),
            "{h}: a size as it is typed back"
        );
        let packets = AqmConfig::defaults_for("dctcp", &env())
            .unwrap()
            .with_overrides(&[
                ("unit".to_string(), "packets".to_string()),
                ("k".to_string(), "20".to_string()),
            ])
            .unwrap()
            .help();
        assert!(packets.contains("  k=20  "), "{packets}");
        let h = AqmConfig::defaults_for("droptail", &env()).unwrap().help();
        assert!(h.contains("  (none)"), "{h}");
    }

    #[test]
    fn names_aliases_and_what_each_needs_from_the_port() {
        for (alias, name) in [
            ("drop-tail", "droptail"),
            ("DCTCP-ECN", "dctcp"),
            ("mqecn", "mq-ecn"),
            ("ecn#", "ecn-sharp"),
            (" EcnSharp ", "ecn-sharp"),
            ("DiffECN", "diffecn"),
        ] {
            assert_eq!(AqmConfig::defaults_for(alias, &env()).unwrap().name(), name);
        }
        assert_eq!(length_keys("dctcp-ecn"), ["k"]);
        assert_eq!(length_keys("red"), ["min_th", "max_th", "min_k", "max_k"]);
        assert!(length_keys("tcn").is_empty() && length_keys("pie").is_empty());
        for name in AQM_NAMES {
            let flows = port_needs(name).per_flow_queues.is_some();
            assert_eq!(flows, name == "diffecn", "{name}");
        }
        assert_eq!(port_needs("pie"), PortNeeds::NOTHING);
    }

    /// The README's AQM table names exactly the AQMs `--aqm` accepts (and
    /// R-AQM, the reverse-path wrapper of `src/raqm/`), so it cannot drift.
    #[test]
    fn readme_aqm_table_lists_exactly_the_registered_aqms() {
        let readme = include_str!("../../README.md");
        let section = readme
            .split("\n## AQMs\n")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("README has an ## AQMs section");
        let mut listed: Vec<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .filter(|n| *n != "--aqm")
            .collect();
        listed.sort_unstable();
        let mut want: Vec<&str> = AQM_NAMES.iter().copied().chain(["r-aqm"]).collect();
        want.sort_unstable();
        assert_eq!(listed, want, "README.md ## AQMs against aqm::config's list");
    }

    /// One queue at `rate` (PRED refuses an unshaped port).
    fn pred_env(rate: Rate) -> AqmEnv {
        AqmEnv {
            rate,
            num_queues: 1,
            quanta: None,
            ..env()
        }
    }

    #[test]
    fn pred_opts_override_and_errors_name_the_option() {
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        let c = AqmConfig::defaults_for("pred", &pred_env(Rate::gbit(1)))
            .unwrap()
            .with_overrides(&[
                kv("lambda", "0.2"),
                kv("fcs", "sqrt"),
                kv("qla", "false"),
                kv("t_fcs", "500us"),
                kv("min_k", "4"),
            ])
            .unwrap();
        let AqmConfig::Pred(p) = &c else { panic!() };
        assert_eq!(
            (p.lambda, p.t_fcs, p.min_k, p.qla),
            (0.2, 500 * US, 4, false)
        );
        assert_eq!(p.fcs, pred::FlowScaling::Sqrt);
        assert!(c.describe().contains("√N") && c.describe().contains("QLA off"));
        let e = AqmConfig::defaults_for("pred", &pred_env(Rate::gbit(1)))
            .unwrap()
            .with_overrides(&[kv("fcs", "cube")])
            .unwrap_err();
        assert!(e.to_string().contains("fcs"), "{e}");
        let e = AqmConfig::defaults_for("pred", &pred_env(Rate::gbit(1)))
            .unwrap()
            .with_overrides(&[kv("beta", "2")])
            .unwrap_err();
        assert!(e.to_string().contains("beta"), "{e}");
        // An unshaped port has no C to normalise the goodput by.
        let e = AqmConfig::defaults_for("pred", &pred_env(Rate::from_bps(0)))
            .unwrap()
            .build(&pred_env(Rate::from_bps(0)))
            .unwrap_err();
        assert_eq!(e, AqmConfigError::NeedsRate);
        assert!(e.to_string().contains("--rate"));
    }
}
