use crate::net::Frame;
use crate::Version;

pub struct Store(pub Vec<Frame>, pub Version);
