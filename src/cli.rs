//! Command-line interface (clap). `softswitch --ports a,b ...` runs the switch;
//! `softswitch topo up|down` manages host namespaces; `softswitch stats` reads
//! a running switch's counters.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const EXAMPLES: &str = "\
Examples:
  # two hosts with DCTCP around the switch, a 1 Gbit/s bottleneck with TCN:
  sudo softswitch topo up --hosts 2
  sudo softswitch --ports ss-h1-sw,ss-h2-sw --aqm tcn --rtt 250us --rate 1gbit
  sudo softswitch topo down

  # 8 queues by DSCP, DWRR, DCTCP-style marking at K = 30 KB:
  sudo softswitch --ports veth0,veth1 --queues 8 --sched dwrr --aqm dctcp --aqm-opt k=30kb

  # everything from a file (flags override it):
  sudo softswitch --config switch.toml --rate 10gbit

  # live counters of a running switch:
  sudo softswitch stats";

/// A software datacenter switch for AQM / ECN research.
#[derive(Parser, Debug)]
#[command(name = "softswitch", version, about, after_help = EXAMPLES, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// Switch settings (when no subcommand is given).
    #[command(flatten)]
    pub run: RunArgs,
    /// Other tasks.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create or remove host namespaces (with DCTCP) around the switch.
    Topo {
        /// up or down.
        #[command(subcommand)]
        action: TopoAction,
    },
    /// Print the live counters of a running switch.
    Stats {
        /// The switch's stats socket.
        #[arg(long, default_value = crate::stats::DEFAULT_SOCKET)]
        socket: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// `topo up` / `topo down`.
#[derive(Subcommand, Debug)]
pub enum TopoAction {
    /// Create N host namespaces, each with a veth to the switch; prints the port list.
    Up(TopoUpArgs),
    /// List the topologies `topo up` made that are still there.
    List,
    /// Remove everything `topo up` made with this prefix.
    Down {
        /// Name prefix used at `up`.
        #[arg(long, default_value = "ss")]
        prefix: String,
    },
}

/// `topo up` settings.
#[derive(Args, Debug)]
pub struct TopoUpArgs {
    /// Number of hosts.
    #[arg(long, default_value_t = 2)]
    pub hosts: usize,
    /// Name prefix for namespaces and interfaces.
    #[arg(long, default_value = "ss")]
    pub prefix: String,
    /// Congestion control on the hosts: dctcp (default; the kernel's or softswitch's BPF one), or any name the kernel has (e.g. cubic).
    #[arg(long, default_value = "dctcp")]
    pub cc: String,
    /// Minimum RTO on the hosts' routes (e.g. 5ms; default: kernel's 200ms).
    #[arg(long)]
    pub rto_min: Option<String>,
    /// Disable ECN negotiation on the hosts.
    #[arg(long)]
    pub no_ecn: bool,
    /// ACK every segment (`quickack 1` on the hosts' route, no delayed ACKs), as R-AQM's hosts do.
    #[arg(long)]
    pub quickack: bool,
    /// Initial congestion window of the hosts' connections, segments (`initcwnd N` on their route; default: kernel's 10). R-AQM's ns-3 hosts start from 1.
    #[arg(long, value_name = "SEGMENTS")]
    pub initcwnd: Option<u32>,
    /// Most segments the hosts' TCP sends as one GSO packet (`gso_max_segs` of their veth; default: kernel's). Linux sends ~1 ms of data per packet as one burst; 1 sends segment by segment, ACK-clocked like a simulator's hosts.
    #[arg(long, value_name = "SEGMENTS")]
    pub gso_segs: Option<u32>,
}

/// Settings of the switch itself.
#[derive(Args, Debug, Default, Clone)]
pub struct RunArgs {
    /// Interfaces to switch between, comma-separated (e.g. veth0,veth1).
    #[arg(long, value_delimiter = ',')]
    pub ports: Vec<String>,
    /// TOML file with any of these settings (flags override it).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Emulated link rate of every egress port (tc units: 100mbit, 1gbit, 10gbit; 0 = unshaped).
    #[arg(long)]
    pub rate: Option<String>,
    /// Shaper bucket size (default 2500b ≈ 1.67 MTU, as the TCN prototype).
    #[arg(long)]
    pub bucket: Option<String>,
    /// Per-frame overhead counted against the rate, bytes (default 24: preamble, FCS, gap).
    #[arg(long)]
    pub overhead: Option<u32>,
    /// Software-robustness option: link time a busy port may make up when the poll loop ran late (default 0 = the prototype's strict token bucket; e.g. 1ms). Bursts above rate + bucket are then counted by the fidelity guard; dequeue AQMs see the stall-free departure time.
    #[arg(long)]
    pub catchup: Option<String>,
    /// Shared buffer per port (default 96kb, the TCN testbed's per-port buffer at 1 Gbit/s).
    #[arg(long)]
    pub buffer: Option<String>,
    /// Per-queue limit (default: none, only the shared buffer).
    #[arg(long)]
    pub queue_limit: Option<String>,
    /// One-way delay added after the shaper on every port (e.g. 50us); per port: --port-delay IF=TIME.
    #[arg(long)]
    pub delay: Option<String>,
    /// Emulate the sending hosts' NICs: a frame arriving on a port enters the switch only when a link of this rate would have delivered it (store-and-forward, FIFO). off (default, as the prototypes, which sit behind real NICs), line (each port's --rate, a testbed's symmetric links) or a rate. A veth delivers a host's burst at memory speed; a NIC spreads it at line rate.
    #[arg(long)]
    pub ingress_rate: Option<String>,
    /// Frames the emulated host link may hold before counted drops (ingress_full); default 1000, Linux's txqueuelen.
    #[arg(long)]
    pub ingress_limit: Option<u32>,
    /// Per-port delay override, IF=TIME (repeatable).
    #[arg(long = "port-delay", value_name = "IF=TIME")]
    pub port_delay: Vec<String>,
    /// Per-port rate override, IF=RATE (repeatable).
    #[arg(long = "port-rate", value_name = "IF=RATE")]
    pub port_rate: Vec<String>,
    /// Base RTT the AQM defaults are scaled to (default 250us).
    #[arg(long)]
    pub rtt: Option<String>,
    /// Queues per port (1–128).
    #[arg(long)]
    pub queues: Option<usize>,
    /// Scheduler: sp, dwrr, wfq, sp+dwrr, sp+wfq.
    #[arg(long)]
    pub sched: Option<String>,
    /// DWRR quanta in bytes (--sched-bytes), comma-separated (one value = every queue; default one MTU frame: 1538 wire bytes, 1514 frame bytes).
    #[arg(long)]
    pub quantum: Option<String>,
    /// WFQ weights, comma-separated (one value = every queue; default 1).
    #[arg(long)]
    pub weights: Option<String>,
    /// Strict-priority queues, highest priority first (sp, sp+dwrr, sp+wfq), e.g. 0,1.
    #[arg(long)]
    pub strict: Option<String>,
    /// What DWRR / WFQ charge a packet: wire (default: frame + --overhead, as the prototypes' skb_size, so quanta and MQ-ECN's round time share a unit) or frame.
    #[arg(long)]
    pub sched_bytes: Option<String>,
    /// WFQ virtual time: prototype (default: V = largest finish tag assigned, as the TCN prototype's sch_wfq) or scfq (self-clocked fair queueing).
    #[arg(long)]
    pub wfq_vtime: Option<String>,
    /// DSCP → queue map: `mod` (default: DSCP mod queues), `46=0,10=1` pairs, or 64 queue numbers.
    #[arg(long)]
    pub dscp_map: Option<String>,
    /// Classifier: `dscp` (the DSCP map, default) or `flow[,temp=0|none][,pass-limit=SIZE][,timeout=TIME]` (per-flow queues by 5-tuple, DiffECN's QMU; the default with --aqm diffecn).
    #[arg(long)]
    pub classify: Option<String>,
    /// AQM: droptail, red, dctcp, mq-ecn, tcn, codel, ecn-sharp, pred, diffecn; or r-aqm (reverse-path ACK control, r-aqm.txt) with a forward AQM: r-aqm+NAME or --raqm-forward (default dctcp).
    #[arg(long)]
    pub aqm: Option<String>,
    /// With --aqm r-aqm: the forward-path AQM (default dctcp, the paper's "R-AQM (ECN)"); --aqm-opt sets its parameters.
    #[arg(long)]
    pub raqm_forward: Option<String>,
    /// R-AQM parameter KEY=VALUE (repeatable), e.g. k_min_pkts=20, interval=60us, rwnd_threshold_pkts=40.
    #[arg(long = "raqm-opt", value_name = "KEY=VALUE")]
    pub raqm_opt: Vec<String>,
    /// AQM parameter KEY=VALUE (repeatable); `--aqm X --aqm-opt help=1` lists the keys.
    #[arg(long = "aqm-opt", value_name = "KEY=VALUE")]
    pub aqm_opt: Vec<String>,
    /// Packet the AQM marks but that is Not-ECT: pass (default, as the TCN/MQ-ECN prototypes) or drop.
    #[arg(long)]
    pub not_ect: Option<String>,
    /// Test hook: CE-mark every N-th ECN-capable packet at dequeue.
    #[arg(long)]
    pub mark_every: Option<u32>,
    /// Run over interfaces that carry the default route.
    #[arg(long)]
    pub force: bool,
    /// Stop after this long (e.g. 30s; emulated time with --dilation) and print counters, as on Ctrl-C.
    #[arg(long)]
    pub duration: Option<String>,
    /// Time dilation D (default 1): the switch runs D times slower than real time, so every rate it is given is emulated and goes on the wire at rate / D, and every time it is given or reports is emulated (D times longer in real time). The fidelity guard judges real time. Run the hosts with the same D (README, "Time dilation").
    #[arg(long, value_name = "D")]
    pub dilation: Option<String>,
    /// Where `softswitch stats` finds this switch.
    #[arg(long)]
    pub stats_socket: Option<PathBuf>,
    /// Seed for the AQMs' random decisions.
    #[arg(long)]
    pub seed: Option<u64>,
    /// CPU priority (nice, −20..19) of the busy-polling data path (default −10).
    #[arg(long, allow_hyphen_values = true)]
    pub nice: Option<i32>,
    /// Pin the data path to this CPU (`last`: the highest-numbered one this
    /// process may use; default: not pinned). Best on a core kept free of
    /// other work (isolcpus, or a cpuset).
    #[arg(long, value_name = "N|last")]
    pub cpu: Option<String>,
    /// Between departures of a shaped port: `busy` spins (default), `adaptive` sleeps until just before the next departure while backlogged (frees CPU for the hosts; the fidelity guard shows what it costs).
    #[arg(long, value_name = "busy|adaptive")]
    pub poll: Option<String>,
    /// UMEM frames shared by all ports (4 KiB each).
    #[arg(long)]
    pub frames: Option<u32>,
    /// Write a queue time series (CSV: backlog, dequeued bytes, marks, drops per queue) to this file.
    #[arg(long)]
    pub timeseries: Option<PathBuf>,
    /// Sampling interval of --timeseries (default 1ms; down to 100us).
    #[arg(long)]
    pub ts_interval: Option<String>,
    /// Capture what the switch saw into DIR: pcapng per port and direction (DIR/<port>-rx.pcapng, -tx.pcapng), each packet commented with its queue and verdict.
    #[arg(long, value_name = "DIR")]
    pub pcap: Option<PathBuf>,
    /// Capture only these ports (default: all), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "IF,IF")]
    pub pcap_ports: Vec<String>,
    /// Bytes of each frame captured (default 256: every Ethernet + IP + TCP header).
    #[arg(long, value_name = "BYTES")]
    pub pcap_snaplen: Option<u32>,
    /// Bound of each capture file in MB (default 100); packets beyond it are counted, not written.
    #[arg(long, value_name = "MB")]
    pub pcap_max_mb: Option<f64>,
    /// Print counters as JSON on exit.
    #[arg(long)]
    pub json: bool,
    /// Fidelity guard: a run is not faithful when a port loses more than this share of the link time it was backlogged for (default 1%).
    #[arg(long, value_name = "SHARE")]
    pub max_lost: Option<String>,
    /// Fidelity guard: ... or when the data path stalls longer than this at once while frames wait (default 5ms).
    #[arg(long, value_name = "TIME")]
    pub max_stall: Option<String>,
    /// Fidelity guard: ... or spends more than this share of the run in stalls over 100us (default 2%).
    #[arg(long, value_name = "SHARE")]
    pub max_stalled: Option<String>,
}
