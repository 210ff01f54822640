pub struct A;

pub fn make() -> crate::facade::B {
    crate::b::B
}
