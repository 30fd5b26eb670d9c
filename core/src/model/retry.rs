//! Retries with exponential backoff and jitter on 429, 5xx and connection failures, honouring
//! `retry-after`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How a wire retries a request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts after the first.
    pub max_retries: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// Whether an HTTP status is worth another attempt.
pub fn retryable_status(status: u16) -> bool {
    status == 408 || status == 409 || status == 429 || status >= 500
}

/// The wait before retry number `attempt` (0-based): the server's `retry-after` when it gave one (capped
/// by `max_backoff`), else exponential backoff with up to 25 % jitter.
pub fn backoff(policy: &RetryPolicy, attempt: u32, retry_after: Option<&str>) -> Duration {
    if let Some(secs) = retry_after.and_then(|v| v.trim().parse::<f64>().ok()).filter(|s| s.is_finite() && *s >= 0.0) {
        // `try_`: a huge value (`1e30`) is past what a Duration holds, and the plain form panics.
        return Duration::try_from_secs_f64(secs).map_or(policy.max_backoff, |d| d.min(policy.max_backoff));
    }
    let base = policy.initial_backoff.saturating_mul(1u32 << attempt.min(16)).min(policy.max_backoff);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let jitter = base.mul_f64(f64::from(nanos % 1000) / 4000.0);
    base.saturating_add(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_wins_and_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(backoff(&p, 0, Some("2")), Duration::from_secs(2));
        assert_eq!(backoff(&p, 0, Some("3600")), p.max_backoff);
        // A server's number past what a Duration holds is capped too, not a panic.
        assert_eq!(backoff(&p, 0, Some("1e30")), p.max_backoff);
        assert_eq!(backoff(&p, 0, Some("18446744073709551616")), p.max_backoff);
    }

    #[test]
    fn backoff_doubles_with_bounded_jitter() {
        let p = RetryPolicy::default();
        for attempt in 0..4 {
            let base = p.initial_backoff * (1 << attempt);
            let got = backoff(&p, attempt, None);
            assert!(got >= base && got <= base + base / 4, "attempt {attempt}: {got:?}");
        }
    }

    #[test]
    fn statuses() {
        assert!(retryable_status(429) && retryable_status(503) && !retryable_status(400) && !retryable_status(404));
    }
}
