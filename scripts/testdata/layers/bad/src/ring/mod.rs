mod one;
mod three;
mod two;

pub use one::One;
pub use three::Three;
