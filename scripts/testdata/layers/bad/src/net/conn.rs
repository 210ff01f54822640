pub struct Conn;

pub fn frame() -> super::wire::Frame {
    super::wire::Frame
}
