pub struct Limit;

#[cfg(test)]
mod tests {
    use crate::store::Store;
}

#[cfg(test)]
fn only_in_tests(_s: crate::net::Conn) {}
