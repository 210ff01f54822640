//! Requests counted by route: how many each route answered and how long they took, served on
//! `/metrics` as `parley_http_requests_total{route}` and `parley_http_request_seconds_total{route}`
//! (`route` is the method and axum's path pattern, such as `POST /api/v1/agents/{id}/status`),
//! and those refused for their size (`413`) as `parley_http_requests_too_large_total{route}`.
//! The counters live here, below [`crate::metrics`]; the middleware that feeds them is
//! `web::requests::count`.
//!
//! The routes come from the one route table ([`crate::router::routes`]), so every counter is
//! made once, when the router is built, and counting a request is a map lookup of its matched
//! path and two atomic additions: no lock, no allocation. A request no route matched counts
//! under `other`. The time is from the request reaching the route to its response's head, so an
//! event stream counts its setup, not its life.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::http::Method;

/// The label of requests no route matched.
pub const OTHER: &str = "other";

/// One route's figures.
#[derive(Debug)]
struct Counter {
    label: String,
    requests: AtomicU64,
    micros: AtomicU64,
    too_large: AtomicU64,
}

impl Counter {
    fn new(label: String) -> Self {
        Self {
            label,
            requests: AtomicU64::new(0),
            micros: AtomicU64::new(0),
            too_large: AtomicU64::new(0),
        }
    }
}

/// The counters of every route of the table, and of the requests no route matched.
#[derive(Debug)]
pub struct RouteCounters {
    /// Per path pattern, its methods and their counters' indexes.
    index: HashMap<&'static str, Vec<(Method, usize)>>,
    /// The counters; the last is [`OTHER`]'s.
    counters: Vec<Counter>,
}

impl RouteCounters {
    /// Counters for `routes` (method and path pattern); a route listed twice has one counter.
    pub fn new(routes: impl IntoIterator<Item = (Method, &'static str)>) -> Self {
        let mut index: HashMap<&'static str, Vec<(Method, usize)>> = HashMap::new();
        let mut counters = Vec::new();
        for (method, path) in routes {
            let methods = index.entry(path).or_default();
            if methods.iter().any(|(m, _)| *m == method) {
                continue;
            }
            methods.push((method.clone(), counters.len()));
            counters.push(Counter::new(format!("{method} {path}")));
        }
        counters.push(Counter::new(OTHER.to_owned()));
        Self { index, counters }
    }

    /// The counter of a request of `method` that matched `path` (none: no route matched).
    /// `HEAD` counts under the route's `GET`.
    pub fn slot(&self, method: &Method, path: Option<&str>) -> usize {
        let method = if *method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        path.and_then(|p| self.index.get(p))
            .and_then(|methods| methods.iter().find(|(m, _)| m == method))
            .map_or(self.counters.len() - 1, |(_, i)| *i)
    }

    /// Counts one request of counter `slot` that took `took`, and was refused for its size
    /// when `too_large`.
    pub fn count(&self, slot: usize, took: Duration, too_large: bool) {
        if let Some(c) = self.counters.get(slot) {
            c.requests.fetch_add(1, Ordering::Relaxed);
            let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
            c.micros.fetch_add(micros, Ordering::Relaxed);
            if too_large {
                c.too_large.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Each route that answered a request, in table order.
    pub fn figures(&self) -> Vec<RouteFigures<'_>> {
        self.counters
            .iter()
            .map(|c| RouteFigures {
                route: c.label.as_str(),
                requests: c.requests.load(Ordering::Relaxed),
                seconds: c.micros.load(Ordering::Relaxed) as f64 / 1e6,
                too_large: c.too_large.load(Ordering::Relaxed),
            })
            .filter(|f| f.requests > 0)
            .collect()
    }
}

/// One route's figures, as `/metrics` serves them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RouteFigures<'a> {
    /// The method and path pattern, or [`OTHER`].
    pub route: &'a str,
    /// Requests answered.
    pub requests: u64,
    /// Seconds spent answering them.
    pub seconds: f64,
    /// Of those, the ones refused for their size (`413`).
    pub too_large: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> RouteCounters {
        RouteCounters::new([
            (Method::GET, "/api/v1/agents"),
            (Method::POST, "/api/v1/agents"),
            (Method::POST, "/api/v1/agents/{id}/status"),
            (Method::POST, "/api/v1/agents"),
        ])
    }

    #[test]
    fn requests_count_under_their_route_head_as_get_and_the_rest_as_other() {
        let r = table();
        let ms = Duration::from_millis;
        r.count(
            r.slot(&Method::POST, Some("/api/v1/agents/{id}/status")),
            ms(2),
            false,
        );
        r.count(
            r.slot(&Method::POST, Some("/api/v1/agents/{id}/status")),
            ms(3),
            true,
        );
        r.count(r.slot(&Method::HEAD, Some("/api/v1/agents")), ms(1), false);
        r.count(
            r.slot(&Method::DELETE, Some("/api/v1/agents")),
            ms(1),
            false,
        );
        r.count(r.slot(&Method::GET, None), ms(4), false);
        let f = |route, requests, seconds, too_large| RouteFigures {
            route,
            requests,
            seconds,
            too_large,
        };
        assert_eq!(
            r.figures(),
            vec![
                f("GET /api/v1/agents", 1, 0.001, 0),
                f("POST /api/v1/agents/{id}/status", 2, 0.005, 1),
                f("other", 2, 0.005, 0),
            ]
        );
    }

    #[test]
    fn a_route_listed_twice_has_one_counter() {
        let r = table();
        // GET, POST, the status route, and other.
        assert_eq!(r.counters.len(), 4);
        assert_eq!(r.slot(&Method::POST, Some("/api/v1/agents")), 1);
    }
}
