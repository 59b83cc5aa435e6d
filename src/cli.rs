//! Command-line interface (clap). `softswitch --ports a,b ...` runs the switch;
//! `softswitch topo up|down` manages host namespaces; `softswitch stats` reads
//! a running switch's counters.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::Options;

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
    /// Switch settings (when no subcommand is given): every flag of
    /// [`Options`], which the config file may also set.
    #[command(flatten)]
    pub run: Options,
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
