pub struct Three(pub Option<crate::ring::One>);
