mod a;
mod b;
pub mod facade;
pub mod net;
pub mod ring;
