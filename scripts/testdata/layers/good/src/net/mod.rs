//! A parent that uses its child: allowed, and the child reaches back up (also allowed).
mod wire;

pub use wire::Frame;

pub struct Conn;

impl Conn {
    pub fn send(&self) -> wire::Frame {
        wire::encode(self)
    }
}
