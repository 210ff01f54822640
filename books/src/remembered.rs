//! [`Remembered`]: a bounded memory of ids, the oldest forgotten first. The books remember how
//! recent offers ended (to answer a reused offer id with 409, not 404) and which frameworks were
//! removed (to refuse their ids and drop their tasks' late updates), each up to a cap.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Up to `cap` keys with a value each; past it the key remembered first is forgotten.
#[derive(Debug)]
pub(crate) struct Remembered<K, V> {
    values: HashMap<K, V>,
    order: VecDeque<K>,
    cap: usize,
}

impl<K: Copy + Eq + Hash, V> Remembered<K, V> {
    /// An empty memory of at most `cap` keys (at least one).
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            values: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    /// Remembers `key` with `value`; a key already remembered keeps its value and its place.
    pub(crate) fn remember(&mut self, key: K, value: V) {
        if self.values.contains_key(&key) {
            return;
        }
        self.values.insert(key, value);
        self.order.push_back(key);
        while self.order.len() > self.cap {
            if let Some(old) = self.order.pop_front() {
                self.values.remove(&old);
            }
        }
    }

    /// The value remembered for `key`.
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.values.get(key)
    }

    /// Whether `key` is remembered.
    pub(crate) fn contains(&self, key: &K) -> bool {
        self.values.contains_key(key)
    }

    /// How many keys are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_key_is_forgotten_past_the_cap_and_a_repeat_keeps_its_place() {
        let mut m = Remembered::new(2);
        m.remember(1, "a");
        m.remember(2, "b");
        m.remember(1, "again");
        assert_eq!(m.get(&1), Some(&"a"));
        m.remember(3, "c");
        assert!(!m.contains(&1), "the first remembered is forgotten first");
        assert_eq!((m.get(&2), m.get(&3), m.len()), (Some(&"b"), Some(&"c"), 2));
    }
}
