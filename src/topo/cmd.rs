//! Running the external tools (`ip`, `tc`, `ethtool`: what no library in the
//! dependency set does): every call checks the exit status and turns a
//! failure into a [`TopoError::Command`] carrying the command line, its
//! stderr and a hint. Signals, mounts and sysctls go through nix.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::TopoError;

/// A tool `up` / `down` runs, and the Debian package that provides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    pub name: &'static str,
    pub package: &'static str,
}

pub const IP: Tool = Tool {
    name: "ip",
    package: "iproute2",
};
pub const TC: Tool = Tool {
    name: "tc",
    package: "iproute2",
};
pub const ETHTOOL: Tool = Tool {
    name: "ethtool",
    package: "ethtool",
};

/// Where `tool` is: the first executable of that name in `$PATH`, then in the
/// sbin directories (which a non-login root shell may lack in `$PATH`).
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(tool))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Errors with [`TopoError::MissingTool`] for the first tool not found.
pub fn require_tools(tools: &[Tool]) -> Result<(), TopoError> {
    for t in tools {
        if find_tool(t.name).is_none() {
            return Err(TopoError::MissingTool {
                tool: t.name,
                package: t.package,
            });
        }
    }
    Ok(())
}

/// A `Command` for `tool`, resolved through [`find_tool`] so that sbin tools
/// work even when `$PATH` lacks them.
pub fn command(tool: Tool) -> Command {
    Command::new(find_tool(tool.name).unwrap_or_else(|| PathBuf::from(tool.name)))
}

/// Errors with [`TopoError::NotRoot`] unless running as uid 0.
pub fn require_root() -> Result<(), TopoError> {
    if crate::preflight::is_root() {
        Ok(())
    } else {
        Err(TopoError::NotRoot)
    }
}

/// Shell-like rendering of a command line, for error messages.
pub fn render(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// Runs `cmd` to completion; stdout on success, [`TopoError::Command`] with
/// stderr and `hint` otherwise.
pub fn run(cmd: &mut Command, hint: &str) -> Result<String, TopoError> {
    let out = output(cmd)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(failed(cmd, &out, hint))
    }
}

/// Runs `cmd` and returns its output whatever the exit status; errors only if
/// it could not be started.
pub fn output(cmd: &mut Command) -> Result<Output, TopoError> {
    cmd.stdin(std::process::Stdio::null());
    cmd.output().map_err(|source| TopoError::Io {
        context: format!("cannot run `{}`", render(cmd)),
        source,
    })
}

/// The [`TopoError::Command`] for a finished, failed command.
pub fn failed(cmd: &Command, out: &Output, hint: &str) -> TopoError {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // bpftool and clang can print pages; keep the end, where the reason is.
    let text = if stderr.trim().is_empty() {
        stdout.trim()
    } else {
        stderr.trim()
    };
    TopoError::Command {
        command: render(cmd),
        status: out.status.to_string(),
        stderr: tail(text, 40),
        hint: hint.to_string(),
    }
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    let mut s = all[start..].join("\n");
    if start > 0 {
        s = format!("[... {start} lines cut ...]\n{s}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail("a\nb\nc", 2), "[... 1 lines cut ...]\nb\nc");
        assert_eq!(tail("a\nb", 5), "a\nb");
    }

    #[test]
    fn render_joins_program_and_args() {
        let mut c = Command::new("ip");
        c.args(["link", "show"]);
        assert_eq!(render(&c), "ip link show");
    }

    #[test]
    fn sh_is_found() {
        assert!(find_tool("sh").is_some());
        assert!(find_tool("definitely-not-a-tool-xyz").is_none());
    }
}
