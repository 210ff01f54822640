//! A crate root that declares its modules and re-exports their items: a facade.
pub mod net;
mod shared;
pub mod store;

pub use store::Store;

/// The crate root's own item, which every module may name.
pub struct Version;
