//! Where a command runs: in this namespace, in a named network namespace
//! on this machine (one standing in for another machine, as the tests
//! do), or on another machine over SSH. A split fabric's wires, tunnels
//! and switches are made and started through it, so one code path serves
//! every kind of machine.
//!
//! Over SSH the command line is quoted for the remote shell and run with
//! `BatchMode=yes` (a missing key fails at once instead of asking for a
//! password) and a shared connection per destination (`ControlMaster`,
//! `ControlPersist=60`), so the few dozen short commands of a run's set-up
//! cost one key exchange. The user's `~/.ssh/config` applies as for any
//! `ssh`; `options` adds to it (a port, a key, a jump host) and overrides
//! those defaults.

use std::process::Command;

/// Where a command runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Site {
    /// This namespace.
    Here,
    /// A network namespace on this machine (`ip netns exec`).
    Netns(String),
    /// Another machine: `ssh [options] dest`.
    Ssh {
        /// `[user@]host`.
        dest: String,
        /// More `ssh` arguments, given before the destination.
        options: Vec<String>,
    },
}

/// The options every SSH call gets before the user's: no password
/// prompt, one shared connection per destination.
pub const SSH_BASE_OPTIONS: [&str; 10] = [
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=10",
    "-o",
    "ControlMaster=auto",
    "-o",
    "ControlPath=/tmp/softswitch-ssh-%C",
    "-o",
    "ControlPersist=60",
];

impl Site {
    /// `argv` run there: `argv` itself here, `ip netns exec NS argv` in a
    /// namespace, `ssh … DEST 'argv'` on another machine.
    pub fn command<S: AsRef<str>>(&self, argv: &[S]) -> Command {
        let argv: Vec<&str> = argv.iter().map(AsRef::as_ref).collect();
        match self {
            Site::Here => {
                let mut c = Command::new(argv.first().copied().unwrap_or("true"));
                c.args(argv.iter().skip(1));
                c
            }
            Site::Netns(ns) => {
                let mut c = super::cmd::command(super::cmd::IP);
                c.args(["netns", "exec", ns]).args(&argv);
                c
            }
            Site::Ssh { dest, options } => ssh_command(dest, options, &[], &shell_line(&argv)),
        }
    }

    /// The shell command line `line` (already quoted) run there by `sh -c`
    /// (over SSH: by the login shell); `ssh_extra`: more `ssh` options,
    /// before all others (ignored elsewhere).
    pub fn shell(&self, ssh_extra: &[String], line: &str) -> Command {
        match self {
            Site::Ssh { dest, options } => ssh_command(dest, options, ssh_extra, line),
            _ => self.command(&["sh", "-c", line]),
        }
    }

    /// `ip ARGS` there (`ip -n NS ARGS` in a namespace, resolved as
    /// [`super::cmd::command`] does here).
    pub fn ip<S: AsRef<str>>(&self, args: &[S]) -> Command {
        match self {
            Site::Here => {
                let mut c = super::cmd::command(super::cmd::IP);
                c.args(args.iter().map(AsRef::as_ref));
                c
            }
            Site::Netns(ns) => {
                let mut c = super::cmd::command(super::cmd::IP);
                c.args(["-n", ns]).args(args.iter().map(AsRef::as_ref));
                c
            }
            Site::Ssh { .. } => {
                let mut argv = vec!["ip"];
                argv.extend(args.iter().map(AsRef::as_ref));
                self.command(&argv)
            }
        }
    }

    /// Ends the shared SSH connection to it, if one is open (`ssh -O
    /// exit`), so that nothing of the run's stays behind for
    /// `ControlPersist`; nothing elsewhere.
    pub fn close_shared(&self) {
        if let Site::Ssh { dest, options } = self {
            let _ = Command::new("ssh")
                .args(options)
                .args(SSH_BASE_OPTIONS)
                .args(["-O", "exit", "--", dest])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }

    /// Another machine, reached over SSH.
    pub fn is_remote(&self) -> bool {
        matches!(self, Site::Ssh { .. })
    }
}

/// `ssh [extra] [options] [base options] -- DEST LINE`: the runner's own
/// `extra`, then the user's `options`, then [`SSH_BASE_OPTIONS`] — ssh
/// keeps the first value it is given for an option, so each overrides
/// what follows it; `line` is one remote shell command line, already
/// quoted.
pub fn ssh_command(dest: &str, options: &[String], extra: &[String], line: &str) -> Command {
    let mut c = Command::new("ssh");
    c.args(extra)
        .args(options)
        .args(SSH_BASE_OPTIONS)
        .arg("--")
        .arg(dest)
        .arg(line);
    c
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Site::Here => write!(f, "this machine"),
            Site::Netns(ns) => write!(f, "namespace {ns}"),
            Site::Ssh { dest, .. } => write!(f, "{dest} (ssh)"),
        }
    }
}

/// `s` as one word of a POSIX shell command line: as it is when it has
/// nothing the shell would read, else single-quoted.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'_' | b'-' | b'.' | b'/' | b'=' | b':' | b',' | b'+' | b'@' | b'%'
                )
        });
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `argv` as one shell command line.
pub fn shell_line<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter()
        .map(|a| shell_quote(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(c: &Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn words_the_shell_would_read_are_quoted() {
        assert_eq!(shell_quote("softswitch"), "softswitch");
        assert_eq!(shell_quote("--ports=a,b"), "--ports=a,b");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(
            shell_line(&["ip", "link", "del", "x y"]),
            "ip link del 'x y'"
        );
        // What sh reads back is the words given.
        let line = shell_line(&["printf", "%s|", "a b", "it's", "$HOME", ""]);
        let out = Command::new("sh").arg("-c").arg(&line).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a b|it's|$HOME||");
    }

    #[test]
    fn each_site_runs_the_command_its_way() {
        let c = Site::Here.command(&["softswitch", "--version"]);
        assert_eq!(c.get_program(), "softswitch");
        assert_eq!(args(&c), ["--version"]);
        let c = Site::Netns("m1".into()).command(&["softswitch", "--version"]);
        assert_eq!(args(&c), ["netns", "exec", "m1", "softswitch", "--version"]);
        assert_eq!(
            args(&Site::Netns("m1".into()).ip(&["link"])),
            ["-n", "m1", "link"]
        );
        let ssh = Site::Ssh {
            dest: "root@10.0.0.2".into(),
            options: vec!["-p".into(), "2222".into()],
        };
        let c = ssh.ip(&["link", "del", "a b"]);
        assert_eq!(c.get_program(), "ssh");
        let a = args(&c);
        assert_eq!(a[..2], ["-p", "2222"]);
        assert_eq!(a[2..2 + SSH_BASE_OPTIONS.len()], SSH_BASE_OPTIONS);
        assert_eq!(
            a[2 + SSH_BASE_OPTIONS.len()..],
            ["--", "root@10.0.0.2", "ip link del 'a b'"]
        );
        // The runner's own options come first, then the user's.
        let a = args(&ssh.shell(&["-L".into(), "a:b".into()], "true"));
        assert_eq!(a[..4], ["-L", "a:b", "-p", "2222"]);
        assert!(ssh.is_remote() && !Site::Netns("m".into()).is_remote());
        assert_eq!(ssh.to_string(), "root@10.0.0.2 (ssh)");
    }
}
