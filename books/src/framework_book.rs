//! The frameworks in the books, as a sub-book with private fields: each framework's record
//! (with its pending updates and completed tasks), and the ids of removed frameworks. It owns
//! two rules: a removed framework's id is remembered (the oldest forgotten past
//! `max_removed_frameworks`), and a placeholder framework (made for adopted tasks) is not a
//! live one until its framework re-registers.

use std::collections::BTreeMap;

use protocol::FrameworkId;

use crate::remembered::Remembered;
use crate::{FrameworkRecord, StateError};

/// The frameworks in the books. See the module docs.
#[derive(Debug)]
pub(crate) struct FrameworkBook {
    frameworks: BTreeMap<FrameworkId, FrameworkRecord>,
    /// Frameworks removed; their ids are not adopted again and their tasks' late updates
    /// dropped. The oldest is forgotten past `max_removed_frameworks`.
    removed: Remembered<FrameworkId, ()>,
}

impl FrameworkBook {
    /// No framework; up to `max_removed` removed ids remembered.
    pub(crate) fn new(max_removed: usize) -> Self {
        Self {
            frameworks: BTreeMap::new(),
            removed: Remembered::new(max_removed),
        }
    }

    /// How many frameworks the books hold (placeholders included).
    pub(crate) fn len(&self) -> usize {
        self.frameworks.len()
    }

    /// Whether the books hold framework `id` (a placeholder or not).
    pub(crate) fn contains(&self, id: FrameworkId) -> bool {
        self.frameworks.contains_key(&id)
    }

    /// Framework `id`'s record.
    pub(crate) fn get(&self, id: FrameworkId) -> Option<&FrameworkRecord> {
        self.frameworks.get(&id)
    }

    /// Framework `id`'s record, to change it.
    pub(crate) fn get_mut(&mut self, id: FrameworkId) -> Option<&mut FrameworkRecord> {
        self.frameworks.get_mut(&id)
    }

    /// A registered (non-placeholder) framework, to change it.
    pub(crate) fn live_mut(&mut self, id: FrameworkId) -> Result<&mut FrameworkRecord, StateError> {
        match self.frameworks.get_mut(&id) {
            Some(fw) if !fw.placeholder => Ok(fw),
            _ => Err(StateError::UnknownFramework(id)),
        }
    }

    /// Every framework, in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&FrameworkId, &FrameworkRecord)> + '_ {
        self.frameworks.iter()
    }

    /// Every framework, in id order, to change them.
    pub(crate) fn iter_mut(
        &mut self,
    ) -> impl Iterator<Item = (&FrameworkId, &mut FrameworkRecord)> + '_ {
        self.frameworks.iter_mut()
    }

    /// Every framework's record, in id order.
    pub(crate) fn records(&self) -> impl Iterator<Item = &FrameworkRecord> + '_ {
        self.frameworks.values()
    }

    /// How many placeholder frameworks the books hold (counted: asked for rarely).
    pub(crate) fn placeholders(&self) -> usize {
        self.frameworks.values().filter(|f| f.placeholder).count()
    }

    /// Adds a framework record (replacing any under `id`); returns it.
    pub(crate) fn add(&mut self, id: FrameworkId, record: FrameworkRecord) -> &mut FrameworkRecord {
        match self.frameworks.entry(id) {
            std::collections::btree_map::Entry::Occupied(mut e) => {
                e.insert(record);
                e.into_mut()
            }
            std::collections::btree_map::Entry::Vacant(e) => e.insert(record),
        }
    }

    /// Removes framework `id` and remembers its id as removed.
    pub(crate) fn remove(&mut self, id: FrameworkId) {
        self.frameworks.remove(&id);
        self.remember_removed(id);
    }

    /// Remembers a removed framework id, forgetting the oldest past `max_removed_frameworks`.
    pub(crate) fn remember_removed(&mut self, id: FrameworkId) {
        self.removed.remember(id, ());
    }

    /// How many removed ids are remembered.
    #[cfg(test)]
    pub(crate) fn removed_len(&self) -> usize {
        self.removed.len()
    }

    /// Whether framework `id` was removed (and is still remembered).
    pub(crate) fn was_removed(&self, id: FrameworkId) -> bool {
        self.removed.contains(&id)
    }
}

#[cfg(test)]
impl std::ops::Index<&FrameworkId> for FrameworkBook {
    type Output = FrameworkRecord;
    fn index(&self, id: &FrameworkId) -> &FrameworkRecord {
        &self.frameworks[id]
    }
}
