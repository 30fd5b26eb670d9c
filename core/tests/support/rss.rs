//! This process's peak resident memory, for the tests that bound what a hostile input may cost.

/// Peak resident memory (VmHWM from /proc/self/status), in KiB; 0 where it cannot be read.
pub fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
