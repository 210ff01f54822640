//! Free loopback ports for processes a test starts with a fixed `--listen` address.
//!
//! Binding port 0 and releasing it hands back a port from the kernel's ephemeral range,
//! which every outgoing connection of every test running beside it draws its source port
//! from: between the release and the child's bind another connection may take it, and the
//! child fails with "address already in use". These ports come from below that range (read
//! from `/proc/sys/net/ipv4/ip_local_port_range`), each handed out once per test process,
//! starting at an offset drawn from the process id so that test binaries run side by side
//! rarely meet; each is checked free by binding it before it is handed out.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port handed out (above the well-known and most registered service ports).
const FLOOR: u16 = 10_000;

/// Where the kernel's ephemeral range starts (the Linux default where it cannot be read),
/// read once per process.
fn ephemeral_start() -> u16 {
    static START: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *START.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .filter(|&p: &u16| p > FLOOR + 1_000)
            .unwrap_or(32_768)
    })
}

/// The next candidate port, in `[FLOOR, ephemeral start)`, never the same twice in a
/// process until the span wraps.
fn next_candidate() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let span = u32::from(ephemeral_start() - FLOOR);
    let seed = (std::process::id().wrapping_mul(2_654_435_761)) % span;
    let _ = NEXT.compare_exchange(u32::MAX, seed, Ordering::Relaxed, Ordering::Relaxed);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    FLOOR + (n % span) as u16
}

/// Whether `port` can be bound on loopback now.
fn bindable(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A loopback port nothing listens on, outside the ephemeral range.
///
/// # Panics
///
/// When a thousand candidates in a row are taken.
pub fn free_port() -> u16 {
    (0..1_000)
        .map(|_| next_candidate())
        .find(|&p| bindable(p))
        .expect("no free loopback port below the ephemeral range")
}

/// A loopback port `p` with `p + 1` free too, both outside the ephemeral range.
///
/// # Panics
///
/// When a thousand candidates in a row are taken.
pub fn free_port_pair() -> u16 {
    (0..1_000)
        .map(|_| {
            let p = next_candidate();
            // Skip the second so that the next call does not hand it out again.
            next_candidate();
            p
        })
        .find(|&p| p < ephemeral_start() - 1 && bindable(p) && bindable(p + 1))
        .expect("no two consecutive free loopback ports below the ephemeral range")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_distinct_and_bindable() {
        let start = ephemeral_start();
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        for p in ports {
            assert!(
                (FLOOR..start).contains(&p),
                "{p} outside [{FLOOR}, {start})"
            );
            assert!(bindable(p), "{p} handed out but taken");
        }
        let pair = free_port_pair();
        assert!(bindable(pair) && bindable(pair + 1));
        assert!(pair + 1 < start);
    }
}
