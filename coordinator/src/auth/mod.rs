//! Authentication and authorization: who is calling, and what they may do.
//!
//! With a credentials file (`--credentials FILE`, [`Credentials`]) every endpoint but
//! `/health` needs `Authorization: Bearer <token>`; the token's SHA-256 names a [`Principal`]
//! of kind framework, agent or operator (read or admin). Without one the API is open, as
//! before. The HTTP side (the middleware, ownership checks against the books) is
//! `crate::api::auth`.
//!
//! - [`secret`]: [`SecretHash`], a token's SHA-256, compared in constant time (and why a fast
//!   hash is right for random tokens).
//! - [`pattern`]: [`RolePattern`], `*`, `eng/*` or `eng/batch`: where a framework principal
//!   may register.
//! - [`credentials`]: the file's principals, checked at load; token lookup.
//! - [`policy`]: which kind may call which route; [`Denial`], the reasons counted in metrics.

pub mod credentials;
pub mod pattern;
pub mod policy;
pub mod secret;

pub use credentials::{Access, Credentials, CredentialsError, Kind, Principal};
pub use pattern::RolePattern;
pub use policy::Denial;
pub use secret::SecretHash;
