//! Re-exports only: never part of a circle.
pub use crate::a::A;
pub use crate::b::B;
