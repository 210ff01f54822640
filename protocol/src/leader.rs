//! Finding the leader among several coordinators: the pure half that every client (the SDK,
//! the agent, `parleyctl`) shares; the HTTP stays in each client.
//!
//! A client is given one coordinator URL or several ([`parse_coordinator_urls`]:
//! `http://a:5050,http://b:5050`). In a highly available cluster one of them is the leader; a
//! follower answers every API call `307` with `Location` = the leader's URL (the same path and
//! query) and `{"code":"not_leader","leader":...}`, and `503` `{"code":"no_leader"}` while
//! there is none. The client keeps one [`LeaderTracker`] for its lifetime and makes each call
//! as one [`Attempt`]:
//!
//! - a `307` / `308` answer: [`Attempt::redirected`], which remembers the leader, and the same
//!   request (method, body) is sent again to [`Attempt::url`];
//! - a connection error or `503 no_leader` ([`is_no_leader`]): [`Attempt::unavailable`], which
//!   moves to the next URL of the list (round-robin) and says how long to wait first (100 ms,
//!   doubling, at most 2 s), or to give up;
//! - any other answer: [`Attempt::answered`], which records who answered.
//!
//! [`LeaderTracker::generation`] changes whenever a different coordinator answers than the one
//! before, so a client knows when to register again with a new leader.
//!
//! With one URL and no redirects, this changes nothing: a connection error gives up at once, as
//! before. Nothing here reads a clock; callers pass the time a call has taken.

use std::time::Duration;

use crate::backoff::Backoff;

/// The first wait after a coordinator was unavailable; it doubles up to [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two tries of one call.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// With several coordinators, one try of a call waits at most this long for an answer before
/// the call moves on to the next coordinator (see [`Attempt::try_timeout`]): a coordinator that
/// is stopped (or partitioned) accepts connections and never answers, and must not cost the
/// call's whole budget.
pub const TRY_TIMEOUT: Duration = Duration::from_secs(3);
/// One call follows at most this many redirects in a row (a loop between misconfigured
/// followers ends here).
pub const MAX_REDIRECTS: u32 = 8;

/// A coordinator URL list that cannot be used; the message names the bad entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlListError {
    /// The list names no URL.
    #[error("no coordinator URL given")]
    Empty,
    /// One entry is not an `http://` or `https://` base URL.
    #[error(
        "invalid coordinator URL {0:?}: expected http://HOST:PORT (several separated by commas)"
    )]
    Bad(String),
}

/// Checks one base URL (`http://` or `https://`, a host, no spaces) and removes a trailing `/`.
pub fn parse_coordinator_url(url: &str) -> Result<String, UrlListError> {
    let trimmed = url.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"));
    match rest {
        Some(rest)
            if !rest.is_empty()
                && !rest.starts_with('/')
                && !rest.contains(|c: char| c.is_whitespace() || c == ',') =>
        {
            Ok(trimmed.to_owned())
        }
        _ => Err(UrlListError::Bad(url.trim().to_owned())),
    }
}

/// Parses `http://a:5050,http://b:5050` (one URL is a list of one): each entry checked as
/// [`parse_coordinator_url`] does, duplicates dropped, order kept.
pub fn parse_coordinator_urls(text: &str) -> Result<Vec<String>, UrlListError> {
    let mut urls: Vec<String> = Vec::new();
    for entry in text.split(',') {
        if entry.trim().is_empty() {
            if text.trim().is_empty() {
                return Err(UrlListError::Empty);
            }
            return Err(UrlListError::Bad(entry.to_owned()));
        }
        let url = parse_coordinator_url(entry)?;
        if !urls.contains(&url) {
            urls.push(url);
        }
    }
    Ok(urls)
}

/// True for the statuses a follower redirects with (`307`, and `308` for good measure).
pub fn is_redirect(status: u16) -> bool {
    status == 307 || status == 308
}

/// True when a `503` answer's body says there is no leader (`{"code":"no_leader"}`, or the
/// error-body form `{"error":{"code":"no_leader"}}`), so another coordinator may know one.
pub fn is_no_leader(status: u16, body: &str) -> bool {
    if status != 503 {
        return false;
    }
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
        return false;
    };
    let code = value
        .get("code")
        .or_else(|| value.get("error").and_then(|e| e.get("code")));
    code.and_then(serde_json::Value::as_str) == Some("no_leader")
}

/// Which coordinator a client talks to, kept for the client's lifetime (share it between
/// calls, behind a lock).
#[derive(Debug, Clone)]
pub struct LeaderTracker {
    urls: Vec<String>,
    /// Index in `urls` of the last URL tried from the list.
    index: usize,
    /// Where calls go now: an entry of `urls`, or a leader learned from a redirect.
    current: String,
    /// The coordinator that last answered.
    answered_by: Option<String>,
    generation: u64,
}

impl LeaderTracker {
    /// A tracker over `urls`, checked with [`parse_coordinator_url`]; calls go to the first.
    pub fn new<I, S>(urls: I) -> Result<Self, UrlListError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut list: Vec<String> = Vec::new();
        for url in urls {
            let url = parse_coordinator_url(url.as_ref())?;
            if !list.contains(&url) {
                list.push(url);
            }
        }
        let current = list.first().cloned().ok_or(UrlListError::Empty)?;
        Ok(Self {
            urls: list,
            index: 0,
            current,
            answered_by: None,
            generation: 0,
        })
    }

    /// A tracker over a comma-separated list ([`parse_coordinator_urls`]).
    pub fn parse(text: &str) -> Result<Self, UrlListError> {
        Self::new(parse_coordinator_urls(text)?)
    }

    /// The base URL calls go to now.
    pub fn current(&self) -> &str {
        &self.current
    }

    /// The URLs the client was given.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// The coordinator that answered last (`None` before any answer).
    pub fn answered_by(&self) -> Option<&str> {
        self.answered_by.as_deref()
    }

    /// Changes each time a coordinator answers that is not the one that answered before
    /// (the first answer counts as a change from none).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// True with one URL and no leader learned from a redirect: nowhere else to go.
    fn alone(&self) -> bool {
        self.urls.len() == 1 && self.current == self.urls[0]
    }

    /// Moves to the next URL of the list, unless another call already moved away from
    /// `failed` (calls in flight at once fail together; each must not move on again).
    fn rotate_from(&mut self, failed: &str) {
        if self.current == failed {
            self.index = (self.index + 1) % self.urls.len();
            self.current.clone_from(&self.urls[self.index]);
        }
    }
}

/// What to do after a failed try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Wait this long, then send the request again to [`Attempt::url`].
    Retry(Duration),
    /// Stop: return the last answer or error to the caller.
    GiveUp,
}

/// One call (one request, sent again as often as needed): its path and query, and how it went.
#[derive(Debug, Clone)]
pub struct Attempt {
    path_and_query: String,
    /// The coordinator the last try went to.
    tried: String,
    /// The URL of the next try when a redirect named it exactly.
    redirected_to: Option<String>,
    redirects: u32,
    /// Counts the unavailable answers: the wait after each.
    unavailable: Backoff,
    budget: Duration,
}

impl Attempt {
    /// A call of `path_and_query` (e.g. `/api/v1/agents?x=1`, starting with `/`) that may keep
    /// trying other coordinators for `budget` of its time.
    pub fn new(path_and_query: impl Into<String>, budget: Duration) -> Self {
        Self {
            path_and_query: path_and_query.into(),
            tried: String::new(),
            redirected_to: None,
            redirects: 0,
            unavailable: Backoff::new(MIN_BACKOFF, MAX_BACKOFF),
            budget,
        }
    }

    /// The full URL of the next try.
    pub fn url(&mut self, tracker: &LeaderTracker) -> String {
        self.tried.clone_from(&tracker.current);
        match &self.redirected_to {
            Some(url) => url.clone(),
            None => format!("{}{}", tracker.current, self.path_and_query),
        }
    }

    /// The coordinator answered `307` / `308` with `location`: the next try goes there, at
    /// once, and later calls go to the leader it names. Gives up after [`MAX_REDIRECTS`] in
    /// a row, or on a `Location` that is not an `http(s)://` URL or a path.
    pub fn redirected(&mut self, tracker: &mut LeaderTracker, location: &str) -> Step {
        self.redirects += 1;
        if self.redirects > MAX_REDIRECTS {
            return Step::GiveUp;
        }
        let location = location.trim();
        if location.starts_with('/') {
            self.redirected_to = Some(format!("{}{location}", tracker.current));
            return Step::Retry(Duration::ZERO);
        }
        let Some(base) = base_of(location, &self.path_and_query) else {
            return Step::GiveUp;
        };
        tracker.current = base;
        self.redirected_to = Some(location.to_owned());
        Step::Retry(Duration::ZERO)
    }

    /// The coordinator could not be reached, or answered `503 no_leader` (`no_leader` true):
    /// move to the next URL and wait the returned time. `elapsed` is how long the call has
    /// taken so far. Gives up once that passes the budget, and at once on a connection error
    /// when there is only one URL and no leader learned from a redirect (a single coordinator,
    /// as before); `no_leader` is retried even then, since it says "wait".
    pub fn unavailable(
        &mut self,
        tracker: &mut LeaderTracker,
        no_leader: bool,
        elapsed: Duration,
    ) -> Step {
        if elapsed >= self.budget || (tracker.alone() && !no_leader) {
            return Step::GiveUp;
        }
        self.redirected_to = None;
        self.redirects = 0;
        if !tracker.alone() {
            tracker.rotate_from(&self.tried);
        }
        let delay = self.unavailable.fail();
        Step::Retry(delay.min(self.budget.saturating_sub(elapsed)))
    }

    /// How long the next try may wait for an answer, `elapsed` into the call: what is left of
    /// the budget, and at most [`TRY_TIMEOUT`] when there are other coordinators to try (a
    /// try that times out then is [`Attempt::unavailable`] for calls that are safe to send
    /// again, [`Attempt::abandoned`] for the others). Never zero.
    pub fn try_timeout(&self, tracker: &LeaderTracker, elapsed: Duration) -> Duration {
        let left = self
            .budget
            .saturating_sub(elapsed)
            .max(Duration::from_millis(1));
        if tracker.urls.len() > 1 {
            left.min(TRY_TIMEOUT)
        } else {
            left
        }
    }

    /// The try failed in a way that is not retried (it timed out or broke mid-call, so it may
    /// have been carried out): the next call goes to the next URL. With one URL and no leader
    /// learned from a redirect, nothing changes.
    pub fn abandoned(&mut self, tracker: &mut LeaderTracker) {
        if !tracker.alone() {
            tracker.rotate_from(&self.tried);
        }
    }

    /// A coordinator answered (anything but a redirect or an unavailable): it is the one calls
    /// go to, and [`LeaderTracker::generation`] moves on when it differs from the last one.
    pub fn answered(&mut self, tracker: &mut LeaderTracker) {
        if let Some(url) = self.redirected_to.take() {
            if let Some(base) = base_of(&url, &self.path_and_query) {
                tracker.current = base;
            }
        }
        if tracker.answered_by.as_deref() != Some(tracker.current.as_str()) {
            tracker.answered_by = Some(tracker.current.clone());
            tracker.generation += 1;
        }
    }
}

/// The base URL of an absolute `location`: without the call's own path and query when it ends
/// with them, else its scheme and authority.
fn base_of(location: &str, path_and_query: &str) -> Option<String> {
    let after_scheme = location
        .strip_prefix("http://")
        .or_else(|| location.strip_prefix("https://"))?;
    let scheme_len = location.len() - after_scheme.len();
    let base = match location.strip_suffix(path_and_query) {
        Some(base) if base.len() > scheme_len && !path_and_query.is_empty() => base,
        _ => {
            let end = after_scheme
                .find(['/', '?', '#'])
                .map_or(location.len(), |i| scheme_len + i);
            &location[..end]
        }
    };
    parse_coordinator_url(base).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const BUDGET: Duration = Duration::from_secs(10);

    #[test]
    fn one_try_waits_at_most_try_timeout_only_when_there_is_another_coordinator() {
        let one = LeaderTracker::parse("http://a:1").unwrap();
        let two = LeaderTracker::parse("http://a:1,http://b:1").unwrap();
        let attempt = Attempt::new("/x", BUDGET);
        assert_eq!(attempt.try_timeout(&one, Duration::ZERO), BUDGET);
        assert_eq!(attempt.try_timeout(&two, Duration::ZERO), TRY_TIMEOUT);
        // Near the end of the budget, what is left (never zero).
        let late = BUDGET - Duration::from_secs(1);
        assert_eq!(attempt.try_timeout(&two, late), Duration::from_secs(1));
        assert_eq!(
            attempt.try_timeout(&one, BUDGET * 2),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn lists_are_checked_and_name_the_bad_entry() {
        assert_eq!(
            parse_coordinator_urls("http://a:1/, https://b:2").unwrap(),
            ["http://a:1", "https://b:2"]
        );
        assert_eq!(
            parse_coordinator_urls("http://a:1,http://a:1/").unwrap(),
            ["http://a:1"]
        );
        assert_eq!(parse_coordinator_urls(" "), Err(UrlListError::Empty));
        for (text, bad) in [
            ("http://a:1,b:2", "b:2"),
            ("http://a:1,ftp://c", "ftp://c"),
            ("http://", "http://"),
            ("http://a b", "http://a b"),
            ("http:///x", "http:///x"),
        ] {
            let err = parse_coordinator_urls(text).unwrap_err();
            assert_eq!(err, UrlListError::Bad(bad.into()), "{text}");
            assert!(err.to_string().contains(bad), "{err}");
        }
        assert!(matches!(
            parse_coordinator_urls("http://a:1,,http://b:2"),
            Err(UrlListError::Bad(_))
        ));
        assert!(LeaderTracker::new(Vec::<String>::new()).is_err());
    }

    #[test]
    fn no_leader_bodies_in_both_forms() {
        assert!(is_no_leader(503, r#"{"code":"no_leader","message":"x"}"#));
        assert!(is_no_leader(
            503,
            r#"{"error":{"code":"no_leader","message":"x"}}"#
        ));
        assert!(!is_no_leader(
            503,
            r#"{"error":{"code":"registry_unavailable"}}"#
        ));
        assert!(!is_no_leader(500, r#"{"code":"no_leader"}"#));
        assert!(!is_no_leader(503, "not json"));
        assert!(is_redirect(307) && is_redirect(308) && !is_redirect(302));
    }

    #[test]
    fn a_redirect_is_followed_and_remembered() {
        let mut t = LeaderTracker::parse("http://f:1,http://g:2").unwrap();
        let mut a = Attempt::new("/api/v1/agents?x=1", BUDGET);
        assert_eq!(a.url(&t), "http://f:1/api/v1/agents?x=1");
        let step = a.redirected(&mut t, "http://leader:9/api/v1/agents?x=1");
        assert_eq!(step, Step::Retry(Duration::ZERO));
        assert_eq!(a.url(&t), "http://leader:9/api/v1/agents?x=1");
        assert_eq!(t.current(), "http://leader:9");
        a.answered(&mut t);
        assert_eq!(t.answered_by(), Some("http://leader:9"));
        assert_eq!(t.generation(), 1);
        // The next call goes straight to the leader; the same leader answering is no change.
        let mut b = Attempt::new("/api/v1/frameworks", BUDGET);
        assert_eq!(b.url(&t), "http://leader:9/api/v1/frameworks");
        b.answered(&mut t);
        assert_eq!(t.generation(), 1);
        // A Location that is not the same path: its scheme and authority are the base.
        let mut c = Attempt::new("/api/v1/x", BUDGET);
        c.redirected(&mut t, "https://other:7/somewhere/else");
        assert_eq!(t.current(), "https://other:7");
        assert_eq!(c.url(&t), "https://other:7/somewhere/else");
        // A relative Location stays on the same coordinator.
        let mut d = Attempt::new("/a", BUDGET);
        d.redirected(&mut t, "/b");
        assert_eq!(d.url(&t), "https://other:7/b");
        // Garbage gives up.
        assert_eq!(d.redirected(&mut t, "ftp://x/a"), Step::GiveUp);
    }

    #[test]
    fn redirect_loops_end() {
        let mut t = LeaderTracker::parse("http://f:1").unwrap();
        let mut a = Attempt::new("/p", BUDGET);
        for _ in 0..MAX_REDIRECTS {
            assert_eq!(
                a.redirected(&mut t, "http://g:2/p"),
                Step::Retry(Duration::ZERO)
            );
        }
        assert_eq!(a.redirected(&mut t, "http://f:1/p"), Step::GiveUp);
    }

    #[test]
    fn unavailable_rotates_with_a_bounded_backoff() {
        let mut t = LeaderTracker::parse("http://a:1,http://b:2,http://c:3").unwrap();
        let mut a = Attempt::new("/p", BUDGET);
        let mut waits = Vec::new();
        let mut seen = Vec::new();
        a.url(&t);
        for _ in 0..7 {
            match a.unavailable(&mut t, false, Duration::ZERO) {
                Step::Retry(d) => waits.push(d.as_millis()),
                Step::GiveUp => panic!("gave up early"),
            }
            seen.push(a.url(&t));
        }
        assert_eq!(waits, [100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(
            seen[..4],
            [
                "http://b:2/p",
                "http://c:3/p",
                "http://a:1/p",
                "http://b:2/p"
            ]
        );
        // Past the budget: give up.
        assert_eq!(a.unavailable(&mut t, true, BUDGET), Step::GiveUp);
        // The wait never runs past the budget.
        let mut b = Attempt::new("/p", BUDGET);
        assert_eq!(
            b.unavailable(&mut t, false, BUDGET - Duration::from_millis(30)),
            Step::Retry(Duration::from_millis(30))
        );
    }

    #[test]
    fn one_url_behaves_as_before_but_waits_out_an_election() {
        let mut t = LeaderTracker::parse("http://a:1").unwrap();
        let mut a = Attempt::new("/p", BUDGET);
        assert_eq!(a.unavailable(&mut t, false, Duration::ZERO), Step::GiveUp);
        assert_eq!(
            a.unavailable(&mut t, true, Duration::ZERO),
            Step::Retry(MIN_BACKOFF)
        );
        assert_eq!(t.current(), "http://a:1");
        // A leader learned from a redirect that goes away: back to the list.
        let mut b = Attempt::new("/p", BUDGET);
        b.redirected(&mut t, "http://leader:2/p");
        b.answered(&mut t);
        let mut c = Attempt::new("/p", BUDGET);
        assert_eq!(c.url(&t), "http://leader:2/p");
        assert!(matches!(
            c.unavailable(&mut t, false, Duration::ZERO),
            Step::Retry(_)
        ));
        assert_eq!(c.url(&t), "http://a:1/p");
        c.abandoned(&mut t);
        assert_eq!(t.current(), "http://a:1");
        let mut two = LeaderTracker::parse("http://a:1,http://b:2").unwrap();
        let mut d = Attempt::new("/p", BUDGET);
        d.url(&two);
        d.abandoned(&mut two);
        assert_eq!(two.current(), "http://b:2");
    }

    #[test]
    fn calls_failing_together_move_on_once() {
        let mut t = LeaderTracker::parse("http://a:1,http://b:2").unwrap();
        let (mut one, mut two) = (Attempt::new("/p", BUDGET), Attempt::new("/q", BUDGET));
        assert_eq!(one.url(&t), "http://a:1/p");
        assert_eq!(two.url(&t), "http://a:1/q");
        one.unavailable(&mut t, false, Duration::ZERO);
        two.unavailable(&mut t, false, Duration::ZERO);
        assert_eq!(t.current(), "http://b:2");
        assert_eq!(two.url(&t), "http://b:2/q");
    }

    #[test]
    fn the_generation_moves_when_another_coordinator_answers() {
        let mut t = LeaderTracker::parse("http://a:1,http://b:2").unwrap();
        let mut a = Attempt::new("/p", BUDGET);
        a.answered(&mut t);
        assert_eq!((t.generation(), t.answered_by()), (1, Some("http://a:1")));
        let mut b = Attempt::new("/p", BUDGET);
        b.url(&t);
        b.unavailable(&mut t, false, Duration::ZERO);
        b.answered(&mut t);
        assert_eq!((t.generation(), t.answered_by()), (2, Some("http://b:2")));
        // Tries that come back to the same coordinator are no change.
        let mut c = Attempt::new("/p", BUDGET);
        for _ in 0..2 {
            c.url(&t);
            c.unavailable(&mut t, false, Duration::ZERO);
        }
        c.answered(&mut t);
        assert_eq!(t.generation(), 2);
    }
}
