use super::Conn;
use crate::shared::Limit;

pub struct Frame(pub Limit);

pub fn encode(_conn: &Conn) -> Frame {
    // crate::store::Store is named in a comment only
    let _ = "crate::store::Store";
    Frame(Limit)
}
