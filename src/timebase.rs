//! Time as experiments record it: the wall-clock timestamp of a run's
//! manifest.

use std::time::SystemTime;

/// Now, in UTC, as an RFC 3339 timestamp to the second
/// (`2026-11-25T14:03:07Z`), for experiment manifests.
pub fn utc_now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// `t` in UTC as an RFC 3339 timestamp to the second.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn formats_utc_to_the_second() {
        let t = UNIX_EPOCH + Duration::from_secs(1_764_079_387);
        assert_eq!(rfc3339(t), "2025-11-25T14:03:07Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let now = utc_now_rfc3339();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.ends_with('Z') && now.as_bytes()[10] == b'T', "{now}");
    }

    #[test]
    fn build_commit_is_a_hash_or_unknown() {
        let c = crate::BUILD_COMMIT;
        assert!(
            c == "unknown" || (c.len() == 40 && c.chars().all(|x| x.is_ascii_hexdigit())),
            "{c}"
        );
        // In a checkout, the commit HEAD names (the build re-runs when it moves).
        let head = std::process::Command::new("git")
            .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
            .output();
        if let Some(out) = head.ok().filter(|o| o.status.success()) {
            assert_eq!(c, String::from_utf8_lossy(&out.stdout).trim());
        }
    }
}
