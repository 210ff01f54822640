//! The per-client request rate limit: a token bucket per client key, refilled at
//! `rate_limit_per_s` up to `rate_limit_burst`; a request finding its bucket empty is answered
//! 429 `rate_limited` with `Retry-After` (whole seconds) and counted in metrics.
//!
//! The key is a string ([`client_key`]): the bearer token when the request has one, else the
//! peer address, so it can become the authenticated principal without changing the buckets.
//! The table is bounded ([`MAX_CLIENTS`]): when full, buckets that have refilled completely
//! (idle clients) are dropped, and if it is still full the request is keyed by its address
//! (one bucket per real peer), so a flood of made-up tokens cannot grow the table. `/health` is never limited. With the rate
//! set to 0 (the default) the layer is not installed at all.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::runtime::Coordinator;

/// The most client buckets kept.
pub const MAX_CLIENTS: usize = 10_000;

/// One client's bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets by client key.
#[derive(Debug)]
pub struct RateLimiter {
    per_s: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    /// A limiter of `per_s` requests per second with bursts of `burst` (`per_s > 0`).
    pub fn new(per_s: f64, burst: u32) -> Self {
        Self {
            per_s,
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token of `key`'s bucket at `now`: `Ok` when there was one, else how long until
    /// there is.
    pub fn take(&self, key: &str, fallback: &str, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !buckets.contains_key(key) && buckets.len() >= MAX_CLIENTS {
            let (per_s, burst) = (self.per_s, self.burst);
            buckets.retain(|_, b| refilled(b, per_s, burst, now) < burst);
        }
        let key = if buckets.contains_key(key) || buckets.len() < MAX_CLIENTS {
            key
        } else {
            fallback
        };
        let full = Bucket {
            tokens: self.burst,
            at: now,
        };
        let bucket = buckets.entry(key.to_owned()).or_insert(full);
        bucket.tokens = refilled(bucket, self.per_s, self.burst, now);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / self.per_s))
        }
    }
}

/// The bucket's tokens at `now`.
fn refilled(b: &Bucket, per_s: f64, burst: f64, now: Instant) -> f64 {
    let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
    (b.tokens + elapsed * per_s).min(burst)
}

/// The client's key: its bearer token if it sends one, else its address.
pub fn client_key(req: &Request) -> (String, String) {
    let addr = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or_else(|| "unknown".to_owned(), |c| c.0.ip().to_string());
    let token = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| format!("token:{t}"));
    let addr = format!("addr:{addr}");
    (token.unwrap_or_else(|| addr.clone()), addr)
}

/// The middleware: 429 with `Retry-After` when the client's bucket is empty.
pub async fn limit(
    State((coordinator, limiter)): State<(Coordinator, std::sync::Arc<RateLimiter>)>,
    req: Request,
    next: Next,
) -> Response {
    if req.uri().path() == "/health" {
        return next.run(req).await;
    }
    let (key, fallback) = client_key(&req);
    match limiter.take(&key, &fallback, Instant::now()) {
        Ok(()) => next.run(req).await,
        Err(wait) => {
            coordinator.metrics().count_rate_limited();
            ApiError::RateLimited {
                retry_after_s: wait.as_secs().saturating_add(1),
            }
            .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refills_at_the_rate() {
        let l = RateLimiter::new(2.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.take("a", "x", t0), Ok(()), "within the burst");
        }
        let wait = l.take("a", "x", t0).err();
        assert!(wait.is_some_and(|w| w > Duration::ZERO), "{wait:?}");
        assert_eq!(
            l.take("b", "x", t0),
            Ok(()),
            "another client has its own bucket"
        );
        // Half a second at 2/s is one token, exactly.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(l.take("a", "x", t1), Ok(()));
        assert!(l.take("a", "x", t1).is_err());
    }

    #[test]
    fn the_table_is_bounded_and_falls_back_to_the_address() {
        let l = RateLimiter::new(1.0, 1);
        let t0 = Instant::now();
        for i in 0..MAX_CLIENTS {
            assert_eq!(l.take(&format!("k{i}"), "addr", t0), Ok(()));
        }
        // Full, and no bucket has refilled: a new token shares the address's bucket.
        assert_eq!(l.take("new1", "addr", t0), Ok(()));
        assert!(l.take("new2", "addr", t0).is_err(), "same bucket as new1");
        let len = l.buckets.lock().map(|b| b.len()).unwrap_or(0);
        assert_eq!(
            len,
            MAX_CLIENTS + 1,
            "the address's bucket beside the full table"
        );
        // Once they refilled (idle), they are dropped for new clients.
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(l.take("new3", "addr", t1), Ok(()));
        let len = l.buckets.lock().map(|b| b.len()).unwrap_or(0);
        assert!(len < 10, "{len}");
    }
}
