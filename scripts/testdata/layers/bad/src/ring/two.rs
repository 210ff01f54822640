use super::*;

pub struct Two(pub Box<Three>);
