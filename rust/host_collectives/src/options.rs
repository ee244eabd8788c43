//! How a rank joins: how long it waits for the others, and whether threads of one process talk over
//! the loopback transport too. `Options::from_env` reads what the CPU build's users set.
use std::time::Duration;

/// Seconds a rank waits for the others to join unless told otherwise.
pub const DEFAULT_TIMEOUT_S: f64 = 120.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// How long joining may take (every rank arriving and connecting); no data operation has a
    /// timeout of its own.
    pub timeout: Duration,
    /// Connect over loopback TCP even when every rank is a thread of this process (tests and
    /// benchmarks of the transport).
    pub force_tcp: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout: Duration::from_secs_f64(DEFAULT_TIMEOUT_S),
            force_tcp: false,
        }
    }
}

impl Options {
    /// `MONARCH_HOST_COMM_TIMEOUT` (seconds, a positive number; default 120) and
    /// `MONARCH_HOST_COMM_TRANSPORT` (`tcp` forces the loopback transport).
    pub fn from_env() -> Options {
        Options::from_values(
            std::env::var("MONARCH_HOST_COMM_TIMEOUT").ok().as_deref(),
            std::env::var("MONARCH_HOST_COMM_TRANSPORT").ok().as_deref(),
        )
    }

    fn from_values(timeout: Option<&str>, transport: Option<&str>) -> Options {
        let seconds = timeout
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v > 0.0)
            .unwrap_or(DEFAULT_TIMEOUT_S);
        Options {
            timeout: Duration::from_secs_f64(seconds),
            force_tcp: transport.is_some_and(|v| v.trim() == "tcp"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_that_are_not_positive_seconds_mean_the_default() {
        let default = Duration::from_secs_f64(DEFAULT_TIMEOUT_S);
        for bad in [
            None,
            Some(""),
            Some("x"),
            Some("-1"),
            Some("0"),
            Some("inf"),
            Some("nan"),
        ] {
            assert_eq!(Options::from_values(bad, None).timeout, default, "{bad:?}");
        }
        let o = Options::from_values(Some(" 0.25 "), Some("tcp"));
        assert_eq!(o.timeout, Duration::from_millis(250));
        assert!(o.force_tcp);
        assert!(!Options::from_values(None, Some("threads")).force_tcp);
    }
}
