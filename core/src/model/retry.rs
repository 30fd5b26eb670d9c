//! Retries with exponential backoff and jitter on 408, 409, 429, 5xx and connection failures, honouring
//! `retry-after`; which errors are worth another attempt is [`retryable`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How a wire retries a request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts after the first.
    pub max_retries: u32,
    /// The wait before the first retry (doubled each time, with jitter).
    pub initial_backoff: Duration,
    /// The longest wait between retries.
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

/// What a server says in a 5xx answer when the request itself is at fault, so the same request fails
/// the same way every time. llama.cpp answers HTTP 500 when it cannot read a request's history (tool
/// call arguments that are not JSON) or when the model's output does not parse as its chat format.
const REPEATABLE_SERVER_ERRORS: [&str; 3] =
    ["Failed to parse tool call arguments", "does not match the expected format", "Failed to parse input"];

/// Whether a failed request is worth another attempt, by its HTTP status and the error's message: the
/// one rule for every wire, streamed or not (an error event in a stream is read as the status it
/// carries). 408, 409, 429 and 5xx are, unless the message is one a server repeats for the same request
/// (`REPEATABLE_SERVER_ERRORS`); every other status (400, 401, 403, 404, 413, 422, …) is not.
pub fn retryable(status: u16, message: &str) -> bool {
    match status {
        408 | 409 | 429 => true,
        500.. => !REPEATABLE_SERVER_ERRORS.iter().any(|m| message.contains(m)),
        _ => false,
    }
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
    fn statuses_and_messages() {
        for status in [408, 409, 429, 500, 502, 503, 529] {
            assert!(retryable(status, "overloaded"), "{status}");
        }
        for status in [400, 401, 403, 404, 413, 422] {
            assert!(!retryable(status, "bad request"), "{status}");
        }
        // llama.cpp's 500s about the request itself are repeatable, not transient.
        let history = "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error";
        assert!(!retryable(500, history));
        assert!(!retryable(500, "The model output does not match the expected format"));
        // Negative control: the same status with another message is retried.
        assert!(retryable(500, "internal error"));
    }
}
