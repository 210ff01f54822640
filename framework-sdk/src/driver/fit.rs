//! Requests that fit: batches split so that no call carries more than the coordinator accepts
//! ([`RequestLimits`], told at registration), measured as the JSON the call will send.
//!
//! Pure: the driver packs with these, and when a call is refused all the same (`413`, a
//! coordinator whose limit is lower than it said, a proxy in between) it halves what it sent
//! ([`halve`]) and sends both halves again.

use protocol::messages::{AcceptRequest, RequestLimits};
use serde::Serialize;

/// Room kept in every body for the envelope around the list (field names, brackets,
/// `pending_tasks`) and for an id or two more than measured.
const ENVELOPE_BYTES: usize = 512;

/// The most bytes of list items one call may carry under `limits`.
pub(crate) fn item_budget(limits: &RequestLimits) -> usize {
    usize::try_from(limits.max_body_bytes)
        .unwrap_or(usize::MAX)
        .saturating_sub(ENVELOPE_BYTES)
        .max(1)
}

/// Counts the bytes written to it, so an item's JSON is measured without being kept.
#[derive(Default)]
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The size of `item` as a JSON list element (its text and a comma).
pub(crate) fn json_len<T: Serialize>(item: &T) -> usize {
    let mut counter = Counter::default();
    // Writing to a counter cannot fail; a value that cannot be serialised fails when sent.
    let _ = serde_json::to_writer(&mut counter, item);
    counter.0 + 1
}

/// `items` in order, in pieces of at most `max_items` items and `budget` bytes of JSON each;
/// an item alone over the budget goes alone (the caller decides what to do with it).
pub(crate) fn pieces<T: Serialize>(items: Vec<T>, max_items: usize, budget: usize) -> Vec<Vec<T>> {
    let sized = items.into_iter().map(|item| (json_len(&item), item));
    sized_pieces(sized, max_items, budget)
}

/// As [`pieces`], for items whose JSON size is already known (`(size, item)`).
pub(crate) fn sized_pieces<T>(
    items: impl IntoIterator<Item = (usize, T)>,
    max_items: usize,
    budget: usize,
) -> Vec<Vec<T>> {
    let max_items = max_items.max(1);
    let mut out: Vec<Vec<T>> = Vec::new();
    let mut used = 0;
    for (len, item) in items {
        match out.last_mut() {
            Some(last) if last.len() < max_items && used + len <= budget => {
                used += len;
                last.push(item);
            }
            _ => {
                used = len;
                out.push(vec![item]);
            }
        }
    }
    out
}

/// An accept cut to fit `budget` bytes: the accept with as many of its tasks, in order, as
/// fit, its JSON size, and the tasks left over (empty when it fit whole). One accept uses its
/// offers once, so what does not fit cannot follow in another call: it goes back to the
/// scheduler.
pub(crate) fn trim_accept(
    mut accept: AcceptRequest,
    budget: usize,
) -> (AcceptRequest, usize, Vec<protocol::TaskSpec>) {
    let whole = json_len(&accept);
    if whole <= budget {
        return (accept, whole, Vec::new());
    }
    let tasks = std::mem::take(&mut accept.tasks);
    // The accept with no task, then each task with a comma, but for the first.
    let mut used = json_len(&accept);
    let mut keep = 0;
    for task in &tasks {
        let len = json_len(task) - usize::from(keep == 0);
        if used + len > budget {
            break;
        }
        used += len;
        keep += 1;
    }
    let mut tasks = tasks;
    let rest = tasks.split_off(keep);
    accept.tasks = tasks;
    (accept, used, rest)
}

/// What to send instead of a call refused as too large: its items in two halves (the first
/// the larger), or the items as they were when there are fewer than two.
pub(crate) fn halve<T>(mut items: Vec<T>) -> Result<(Vec<T>, Vec<T>), Vec<T>> {
    if items.len() < 2 {
        return Err(items);
    }
    let back = items.split_off(items.len().div_ceil(2));
    Ok((items, back))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use protocol::{AgentId, CommandSpec, OfferId, TaskId, TaskSpec};

    use super::*;

    fn task(i: usize) -> TaskSpec {
        TaskSpec {
            task_id: TaskId::new(format!("task-{i}")).unwrap(),
            name: "t".into(),
            agent_id: AgentId::new(),
            resources: "cpus=0.1,mem=32".parse().unwrap(),
            command: CommandSpec::Shell("echo hi".into()),
            env: Default::default(),
            duration_s: None,
            isolation: None,
            health_check: None,
            priority: None,
        }
    }

    fn accept(tasks: usize) -> AcceptRequest {
        AcceptRequest {
            offer_ids: vec![OfferId::new()],
            tasks: (0..tasks).map(task).collect(),
            refuse_seconds: Some(5.0),
        }
    }

    #[test]
    fn pieces_keep_order_and_respect_both_bounds() {
        let items: Vec<String> = (0..100).map(|i| format!("item-{i:03}")).collect();
        let one = json_len(&items[0]);
        let split = pieces(items.clone(), 7, one * 5);
        assert!(split.iter().all(|p| p.len() <= 5), "the byte budget binds");
        assert_eq!(split.concat(), items, "nothing lost, nothing reordered");
        let split = pieces(items.clone(), 3, usize::MAX);
        assert!(split.iter().all(|p| p.len() <= 3), "the count binds");
        assert_eq!(split.len(), 34);
        let big = pieces(vec!["x".repeat(100), "y".into()], 10, 20);
        assert_eq!(big.len(), 2, "an item over the budget goes alone");
        assert!(pieces(Vec::<u8>::new(), 5, 5).is_empty());
    }

    #[test]
    fn every_piece_serialises_within_the_limit() {
        let limits = RequestLimits {
            max_body_bytes: 64 * 1024,
            ..RequestLimits::DEFAULT
        };
        let accepts: Vec<AcceptRequest> = (0..50).map(|_| accept(40)).collect();
        for piece in pieces(accepts, 1000, item_budget(&limits)) {
            let body = serde_json::to_vec(&protocol::messages::AcceptBatch {
                accepts: piece,
                pending_tasks: Some(u32::MAX),
            })
            .unwrap();
            assert!(body.len() as u64 <= limits.max_body_bytes, "{}", body.len());
        }
    }

    #[test]
    fn an_accept_too_large_alone_keeps_the_tasks_that_fit() {
        let whole = accept(100);
        let budget = json_len(&whole);
        assert_eq!(budget, serde_json::to_vec(&whole).unwrap().len() + 1);
        let (same, size, rest) = trim_accept(whole.clone(), budget);
        assert_eq!(
            (same, size, rest.len()),
            (whole.clone(), budget, 0),
            "it fit"
        );
        let (cut, size, rest) = trim_accept(whole.clone(), budget / 2);
        assert_eq!(size, json_len(&cut), "its size is the trimmed accept's");
        assert!(size <= budget / 2);
        assert!(!cut.tasks.is_empty() && !rest.is_empty());
        assert_eq!(
            [cut.tasks, rest].concat(),
            whole.tasks,
            "in order, none lost"
        );
    }

    #[test]
    fn halving_splits_until_one_is_left() {
        assert_eq!(halve(vec![1, 2, 3]), Ok((vec![1, 2], vec![3])));
        assert_eq!(halve(vec![1, 2]), Ok((vec![1], vec![2])));
        assert_eq!(halve(vec![1]), Err(vec![1]), "nothing is lost");
        assert_eq!(halve(Vec::<u8>::new()), Err(vec![]));
    }
}
