//! The allocator (being written).
