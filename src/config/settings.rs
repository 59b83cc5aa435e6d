//! The resolved settings (what the data path is built from) and the lines
//! describing them at start-up.

use crate::aqm::{AqmConfig, AqmEnv};
use crate::port::{NotEctPolicy, PortConfig};
use crate::units::{self, Nanos, Rate};

use super::{ConfigError, PcapSettings};

/// Everything one port needs.
#[derive(Clone, Debug)]
pub struct PortSettings {
    /// Interface.
    pub name: String,
    /// Egress pipeline.
    pub port: PortConfig,
    /// AQM (effective parameters).
    pub aqm: AqmConfig,
    /// What the AQM was scaled to.
    pub env: AqmEnv,
    /// One-way delay after the shaper.
    pub delay_ns: Nanos,
    /// Rate of the emulated host link on ingress (`--ingress-rate`), if on.
    pub ingress_rate: Option<Rate>,
}

/// The switch's effective settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Ports, in `--ports` order. With a fabric: the interfaces, each with
    /// the settings of its host's port.
    pub ports: Vec<PortSettings>,
    /// A fabric of several switches (`--topology`) instead of one.
    pub fabric: Option<super::FabricSettings>,
    /// Run over interfaces with the default route.
    pub force: bool,
    /// UMEM frames (None: sized from the ports, see `dataplane::frames_needed`).
    pub frames: Option<u32>,
    /// Seed for random AQM decisions.
    pub seed: u64,
    /// Stats socket.
    pub stats_socket: std::path::PathBuf,
    /// Stop after this long.
    pub duration_ns: Option<Nanos>,
    /// MAC ageing.
    pub ageing_ns: Nanos,
    /// Print JSON counters on exit.
    pub json: bool,
    /// Exit 0 on a NOT FAITHFUL verdict (`--allow-unfaithful`).
    pub allow_unfaithful: bool,
    /// Nice value of the data path.
    pub nice: i32,
    /// CPU the data path is pinned to (resolved at start against the CPUs
    /// the process may use).
    pub cpu: crate::cpu::CpuChoice,
    /// Between departures: spin or sleep (`--poll`).
    pub poll: crate::poll::PollMode,
    /// The tx kicks on a thread of their own (`--tx-thread`).
    pub tx_thread: bool,
    /// Queue time-series CSV file and its sampling interval.
    pub timeseries: Option<(std::path::PathBuf, Nanos)>,
    /// Fidelity guard limits.
    pub guard: crate::fidelity::Thresholds,
    /// Capture (`--pcap`), if on.
    pub pcap: Option<PcapSettings>,
    /// R-AQM on the reverse path (`--aqm r-aqm`), with its parameters.
    pub raqm: Option<crate::raqm::Config>,
    /// Frames each emulated host link may hold (`--ingress-limit`).
    pub ingress_limit: u32,
    /// Time dilation (`--dilation`): every rate and time above is emulated;
    /// the data path runs the core D times slower than real time.
    pub dilation: crate::timebase::Dilation,
}

impl Settings {
    /// What running the switch on interfaces needs beyond a consistent
    /// configuration: a second port. A frame never leaves by the port it came
    /// in on, so a one-port switch forwards nothing — while it holds the
    /// interface, the host behind it is cut off. (One-port settings remain
    /// valid for the core: the harness and tests drive such switches.)
    pub fn check_runnable(&self) -> Result<(), ConfigError> {
        if let (Some(f), [only]) = (&self.fabric, &self.ports[..]) {
            if f.is_part() {
                return Err(ConfigError::Invalid(format!(
                    "--switches with --topology {}: the switches this process runs have one \
                     port to the outside ({only}): a frame never leaves by the port it came \
                     in on, so it forwards nothing; run more switches here",
                    f.file.display(),
                    only = only.name
                )));
            }
            return Err(ConfigError::Invalid(format!(
                "--topology {}: a fabric of one host ({only}) forwards nothing: \
                 give the topology at least two hosts",
                f.file.display(),
                only = only.name
            )));
        }
        if let [only] = &self.ports[..] {
            return Err(ConfigError::Invalid(format!(
                "--ports {}: a switch needs at least two ports (a frame never leaves by the \
                 port it came in on, so one port forwards nothing); name two or more, \
                 e.g. --ports veth0,veth1",
                only.name
            )));
        }
        Ok(())
    }

    /// The start-up line of a dilated run: D, and what the first port's
    /// emulated rate is on the wire.
    fn describe_dilation(&self) -> String {
        let d = self.dilation;
        let wire = match self.ports.first().map(|p| p.port.rate) {
            Some(r) if r.bps() > 0 => format!(
                " (port {}: {} emulated = {} on the wire)",
                self.ports[0].name,
                r,
                d.wire_rate(r)
            ),
            _ => String::new(),
        };
        format!(
            "time dilation D = {d}: the rates, delays and AQM times above are emulated; the switch \
             sends at rate / {d} in real time{wire} and every time lasts {d} times longer; reports \
             give emulated times and rates, the fidelity guard's own figures real time\n"
        )
    }

    /// Lines describing the effective configuration, printed at start-up.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        match &self.fabric {
            Some(f) => {
                let ifaces: Vec<String> = self.ports.iter().map(|p| p.name.clone()).collect();
                out.push_str(&f.describe(&ifaces, self.ingress_limit));
            }
            None => {
                for p in &self.ports {
                    out.push_str(&p.describe(self.ingress_limit));
                }
            }
        }
        if !self.dilation.is_none() {
            out.push_str(&self.describe_dilation());
        }
        if self.poll != crate::poll::PollMode::Busy {
            out.push_str(&format!(
                "data path: --poll {} (sleeps until just before the next departure while backlogged)\n",
                self.poll
            ));
        }
        if self.tx_thread {
            out.push_str(
                "data path: --tx-thread (the kernel's transmit is kicked from a second thread)\n",
            );
        }
        if let Some(r) = &self.raqm {
            out.push_str(&format!("reverse path: {}\n", r.describe()));
        }
        let g = &self.guard;
        out.push_str(&format!(
            "fidelity guard: not faithful if a port loses > {:.1} % of its backlogged link time, \
             sends above rate + bucket, or the data path stalls > {} at once or > {:.1} % of the run\n",
            g.max_lost * 100.0,
            if g.dilation == 1.0 {
                units::fmt_duration(g.max_stall_ns)
            } else {
                g.describe_max_stall()
            },
            g.max_stalled * 100.0
        ));
        out
    }
}

impl PortSettings {
    /// This port's lines of [`Settings::describe`] (`ingress_limit`: frames
    /// an emulated host link may hold).
    pub(super) fn describe(&self, ingress_limit: u32) -> String {
        let c = &self.port;
        let rate = if c.rate.bps() == 0 {
            "unshaped".to_string()
        } else {
            c.rate.to_string()
        };
        let shaper = if c.catchup_ns == 0 {
            "strict".to_string()
        } else {
            format!("catch-up {}", units::fmt_duration(c.catchup_ns))
        };
        let mut out = format!(
            "port {}: rate {} (bucket {} B, +{} B/frame, {}), buffer {} B, {} queue(s), sched {}, delay {}, rtt {}\n  aqm {} (Not-ECT on a mark: {})\n",
            self.name,
            rate,
            c.bucket_bytes,
            c.overhead_bytes,
            shaper,
            c.buffer_bytes,
            c.queues,
            c.sched.describe(),
            units::fmt_duration(self.delay_ns),
            units::fmt_duration(self.env.rtt_ns),
            self.aqm.describe(),
            match c.not_ect {
                NotEctPolicy::Pass => "pass",
                NotEctPolicy::Drop => "drop",
            },
        );
        if let Some(r) = self.ingress_rate {
            out.push_str(&format!(
                "  ingress: frames from the host enter at most at {r} (emulated host NIC, store-and-forward, up to {ingress_limit} frames waiting)\n",
            ));
        }
        if let crate::port::Classifier::Flow(f) = &c.classifier {
            out.push_str(&format!(
                "  classify flow: a queue per active flow by 5-tuple{}, {} entries (DiffECN paper §IV-B)\n",
                if f.temp_queue {
                    format!(
                        "; new flows wait in strict queue 0 when no queue is empty, pass limit {} B, idle timeout {}",
                        f.pass_limit_bytes,
                        units::fmt_duration(f.idle_timeout_ns)
                    )
                } else {
                    "; the shortest queue when none is empty".to_string()
                },
                (crate::port::flowmap::ENTRIES_PER_QUEUE * c.queues).next_power_of_two(),
            ));
        }
        out
    }
}
