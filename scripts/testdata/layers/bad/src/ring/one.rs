use super::two::Two;

pub struct One(pub Two);
