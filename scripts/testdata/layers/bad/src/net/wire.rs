use super::Conn;

pub struct Frame;

pub fn open(_c: Conn) {}
