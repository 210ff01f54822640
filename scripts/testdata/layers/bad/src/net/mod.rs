mod conn;
mod wire;

pub use conn::Conn;
