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

  # a leaf-spine fabric (2 leaves, 2 spines, 2 hosts per leaf; README, \"Fabrics\"):
  sudo softswitch --topology leafspine.toml --ports $(sudo softswitch topo up --topology leafspine.toml)

  # live counters of a running switch, once, or rates every second:
  sudo softswitch stats
  sudo softswitch stats --interval 1s

Exit status:
  0  done; a switch run's fidelity guard found it faithful
  1  error (the message says what to do)
  2  bad command line
  3  the switch ran, but the fidelity guard said NOT FAITHFUL: its numbers
     are not the emulated link's (--allow-unfaithful: exit 0)";

/// Exit status of a run the fidelity guard called NOT FAITHFUL (the same
/// for `softswitch` and `softswitch-exp run`).
pub const EXIT_NOT_FAITHFUL: u8 = 3;

/// A software datacenter switch for AQM / ECN research.
#[derive(Parser, Debug)]
#[command(name = "softswitch", version = crate::VERSION_LONG, about, after_help = EXAMPLES, args_conflicts_with_subcommands = true)]
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
    /// Print the live counters of a running switch; with --interval, the
    /// rates per port and queue every interval, until Ctrl-C.
    Stats {
        /// The switch's stats socket.
        #[arg(long, default_value = crate::stats::DEFAULT_SOCKET)]
        socket: PathBuf,
        /// Print JSON instead of a table (with --interval: one line of
        /// rates per interval).
        #[arg(long)]
        json: bool,
        /// Every TIME (e.g. 1s; a time with its unit, at least 100ms, the
        /// switch's publishing period), print each port's and queue's rates
        /// over it (Mbit/s, packets/s, marks/s, drops/s at the egress) and
        /// the backlog now, as `watch tc -s` would; until Ctrl-C, or
        /// --count times. Exits non-zero if the switch goes away.
        #[arg(long, value_name = "TIME")]
        interval: Option<String>,
        /// With --interval: stop after this many intervals.
        #[arg(long, value_name = "N", requires = "interval")]
        count: Option<u64>,
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
    /// The hosts of a fabric (`softswitch --topology FILE`): h1 up to the highest host the file names, in its subnet; prints the interfaces of the file's hosts in the order `--ports` takes them.
    #[arg(long, value_name = "FILE", conflicts_with = "hosts")]
    pub topology: Option<PathBuf>,
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
    /// CPUs that run the hosts' receive processing (RPS on their interfaces): `auto` = every CPU but the last, which `softswitch --cpu last` then has to itself; or a list (`0`, `0-2`, `0,3`); `off` (default) keeps Linux's, which runs a receiving host's stack inside the switch's tx kicks.
    #[arg(long, value_name = "CPUS|auto", default_value = "off")]
    pub rps: String,
    /// Time dilation D of the hosts' timers: RTO_min (--rto-min is the emulated value), the SYN's initial RTO, SACK compression and the other time constants last D times longer (README, "Time dilation"). Default 1.
    #[arg(long, default_value = "1")]
    pub dilation: String,
}

/// Makes a closed stdout or stderr (`softswitch ... | head -1`) end the
/// process as it ends standard tools: killed by SIGPIPE, without a word.
/// Rust ignores SIGPIPE, so a write to a closed pipe fails and `print!`
/// panics (exit 101, a panic message); every binary calls this first, and a
/// print anywhere, on any thread, then ends quietly. Only printing is
/// affected: sockets (the stats socket, traffic) still see EPIPE as an error.
pub fn exit_quietly_on_closed_output() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if is_closed_output(message) {
            // Terminates the process by SIGPIPE (as the default action would);
            // if that failed, fall through to the usual panic.
            let _ = signal_hook::low_level::emulate_default_handler(signal_hook::consts::SIGPIPE);
        }
        default_hook(info)
    }));
}

/// Whether a panic message is `print!` failing on a closed pipe (the text
/// std panics with: "failed printing to stdout: Broken pipe (os error 32)").
fn is_closed_output(message: &str) -> bool {
    let epipe = format!("(os error {})", libc::EPIPE);
    message.starts_with("failed printing to std") && message.ends_with(&epipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_print_to_a_closed_pipe_ends_quietly() {
        assert!(is_closed_output(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(is_closed_output(
            "failed printing to stderr: Broken pipe (os error 32)"
        ));
        // Other print failures and other panics keep their message.
        assert!(!is_closed_output(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!is_closed_output(
            "called `Option::unwrap()` on a `None` value"
        ));
        assert!(!is_closed_output("Broken pipe (os error 32)"));
    }

    /// The real panic text of a print to a closed pipe, as std words it.
    #[test]
    fn std_words_a_closed_pipe_as_expected() {
        use std::io::Write;
        let (reader, mut writer) = std::io::pipe().unwrap();
        drop(reader);
        let e = writer.write_all(b"x").unwrap_err();
        assert!(
            is_closed_output(&format!("failed printing to stdout: {e}")),
            "{e}"
        );
    }
}
