use crate::facade::A;

pub struct B;

pub fn take(_a: A) {}
