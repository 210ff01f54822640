//! A network of namespaces made by the test itself (as root, with iproute2's `ip`): a router
//! namespace, joined to the test's own namespace by one link and to each *host* (a namespace
//! for one process: a coordinator, an agent, etcd) by a link of its own, all on addresses from
//! 198.18.0.0/15 (the benchmarking range: nothing is routed outside; no namespace has a default
//! route). [`Net::cut`] takes a host's link down (a partition between it and everything else:
//! packets are dropped, not refused); [`Net::cut_between`] drops what two hosts send each
//! other and nothing else.
//!
//! Addresses, for net number `n` (one per test, so tests can run side by side):
//! - test ↔ router: `198.19.n.1` (test) and `198.19.n.2` (router), a /30;
//! - router ↔ host `k`: `198.18.n.(4k+1)` (router) and `198.18.n.(4k+2)` (host), a /30 each.
//!
//! Everything is deleted on drop (the namespaces, and with them their links; the test's end
//! of its link; its route).

#![allow(clippy::unwrap_used, dead_code)]

use std::process::{Command, Stdio};

/// The namespaces of one test.
pub struct Net {
    n: u8,
    tag: String,
    hosts: Vec<String>,
    made: Vec<String>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Whether this test can make namespaces: root and `ip`. Prints why not (and fails under
/// `PARLEY_CI=1`, where root is given).
pub fn can_make_namespaces(test: &str) -> bool {
    let root = super::is_root();
    let ip_ok = Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !(root && ip_ok) {
        assert!(
            std::env::var("PARLEY_CI").as_deref() != Ok("1"),
            "{test}: needs root and iproute2 to make network namespaces, and PARLEY_CI=1"
        );
        eprintln!("{test}: skipped: needs root and iproute2 (network namespaces)");
    }
    root && ip_ok
}

impl Net {
    /// Makes the router's namespace and one namespace per host (named by `hosts`, e.g.
    /// `["c0", "a0"]`), for net number `n` (1 to 250, distinct per concurrent test).
    pub fn create(n: u8, hosts: &[&str]) -> Result<Net, String> {
        assert!(hosts.len() <= 60 && (1..=250).contains(&n));
        let mut net = Net {
            n,
            tag: format!("p{}n{n}", std::process::id() % 100_000),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            made: Vec::new(),
        };
        net.build()?;
        Ok(net)
    }

    fn build(&mut self) -> Result<(), String> {
        let n = self.n;
        let r = format!("{}r", self.tag);
        ip(&["netns", "add", &r])?;
        self.made.push(r.clone());
        ip(&["-n", &r, "link", "set", "lo", "up"])?;
        let sysctl = Command::new("ip")
            .args([
                "netns",
                "exec",
                &r,
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ])
            .status()
            .map_err(|e| e.to_string())?;
        if !sysctl.success() {
            return Err("sysctl net.ipv4.ip_forward=1 in the router's namespace".into());
        }
        let (outer, inner) = (format!("{}h", self.tag), format!("{}t", self.tag));
        ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ])?;
        ip(&["link", "set", &inner, "netns", &r])?;
        ip(&["addr", "add", &format!("198.19.{n}.1/30"), "dev", &outer])?;
        ip(&["link", "set", &outer, "up"])?;
        ip(&[
            "-n",
            &r,
            "addr",
            "add",
            &format!("198.19.{n}.2/30"),
            "dev",
            &inner,
        ])?;
        ip(&["-n", &r, "link", "set", &inner, "up"])?;
        let net = format!("198.18.{n}.0/24");
        ip(&["route", "add", &net, "via", &format!("198.19.{n}.2")])?;
        for k in 0..self.hosts.len() {
            let ns = self.ns_of(k);
            ip(&["netns", "add", &ns])?;
            self.made.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            let (outer, inner) = (self.link_of(k), format!("{}b{k}", self.tag));
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ])?;
            ip(&["link", "set", &outer, "netns", &r])?;
            ip(&["link", "set", &inner, "netns", &ns])?;
            let (rside, hside) = (4 * k + 1, 4 * k + 2);
            ip(&[
                "-n",
                &r,
                "addr",
                "add",
                &format!("198.18.{n}.{rside}/30"),
                "dev",
                &outer,
            ])?;
            ip(&["-n", &r, "link", "set", &outer, "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("198.18.{n}.{hside}/30"),
                "dev",
                &inner,
            ])?;
            ip(&["-n", &ns, "link", "set", &inner, "up"])?;
            let via = format!("198.18.{n}.{rside}");
            ip(&["-n", &ns, "route", "add", &net, "via", &via])?;
            ip(&[
                "-n",
                &ns,
                "route",
                "add",
                &format!("198.19.{n}.0/30"),
                "via",
                &via,
            ])?;
        }
        Ok(())
    }

    fn index(&self, host: &str) -> usize {
        self.hosts
            .iter()
            .position(|h| h == host)
            .unwrap_or_else(|| panic!("no host {host}"))
    }

    fn ns_of(&self, k: usize) -> String {
        format!("{}{}", self.tag, self.hosts[k])
    }

    /// The router's end of host `k`'s link (in the router's namespace).
    fn link_of(&self, k: usize) -> String {
        format!("{}x{k}", self.tag)
    }

    fn router_ns(&self) -> String {
        format!("{}r", self.tag)
    }

    /// The namespace of `host`.
    pub fn ns(&self, host: &str) -> String {
        self.ns_of(self.index(host))
    }

    /// The address of `host`, from everywhere (the test included).
    pub fn addr(&self, host: &str) -> String {
        format!("198.18.{}.{}", self.n, 4 * self.index(host) + 2)
    }

    /// `ip netns exec NS PROGRAM`: a command that runs `program` in namespace `ns`.
    pub fn command_in(ns: &str, program: &std::path::Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns]).arg(program);
        cmd
    }

    /// Partitions `host` from everything: its link goes down (packets dropped both ways).
    pub fn cut(&self, host: &str) {
        let link = self.link_of(self.index(host));
        ip(&["-n", &self.router_ns(), "link", "set", &link, "down"]).unwrap();
    }

    /// Ends `host`'s partition.
    pub fn heal(&self, host: &str) {
        let link = self.link_of(self.index(host));
        ip(&["-n", &self.router_ns(), "link", "set", &link, "up"]).unwrap();
    }

    /// Partitions `a` and `b` from each other only: each drops what it sends the other.
    pub fn cut_between(&self, a: &str, b: &str) {
        for (from, to) in [(a, b), (b, a)] {
            let to = format!("{}/32", self.addr(to));
            ip(&["-n", &self.ns(from), "route", "add", "blackhole", &to]).unwrap();
        }
    }

    /// Ends [`Net::cut_between`].
    pub fn heal_between(&self, a: &str, b: &str) {
        for (from, to) in [(a, b), (b, a)] {
            let to = format!("{}/32", self.addr(to));
            ip(&["-n", &self.ns(from), "route", "del", "blackhole", &to]).unwrap();
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = ip(&["route", "del", &format!("198.18.{}.0/24", self.n)]);
        let _ = ip(&["link", "del", &format!("{}h", self.tag)]);
        for ns in self.made.drain(..).rev() {
            let _ = ip(&["netns", "del", &ns]);
        }
    }
}
