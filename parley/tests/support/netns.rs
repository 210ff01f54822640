//! A network of namespaces made by the test itself (as root, with iproute2's `ip`): a
//! coordinator's namespace joined to the test's own by one link, and each agent's namespace
//! joined to the coordinator's by a link of its own, all on addresses from 198.18.0.0/15 (the
//! benchmarking range: nothing routed outside; no namespace has a default route). Cutting an
//! agent's link ([`Net::cut`]) is a partition between that agent and everything else: packets
//! are dropped, not refused.
//!
//! Addresses, for net number `n` (one per test, so tests can run side by side):
//! - test ↔ coordinator: `198.19.n.1` (test) and `198.19.n.2` (coordinator), a /30;
//! - coordinator ↔ agent `k`: `198.18.n.(4k+1)` (coordinator) and `198.18.n.(4k+2)` (agent),
//!   a /30 each; the coordinator's namespace forwards between them.
//!
//! Everything is deleted on drop (the namespaces, and with them their links; the test's end
//! of its link; its route).

#![allow(clippy::unwrap_used, dead_code)]

use std::process::{Command, Stdio};

/// The namespaces of one test.
pub struct Net {
    n: u8,
    tag: String,
    agents: usize,
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
    /// Makes the coordinator's namespace and `agents` agents' ones, for net number `n`
    /// (1 to 250, distinct per concurrent test).
    pub fn create(n: u8, agents: usize) -> Result<Net, String> {
        assert!(agents <= 60 && (1..=250).contains(&n));
        let tag = format!("p{}n{n}", std::process::id() % 100_000);
        let mut net = Net {
            n,
            tag,
            agents,
            made: Vec::new(),
        };
        net.build()?;
        Ok(net)
    }

    fn build(&mut self) -> Result<(), String> {
        let n = self.n;
        let c = self.coordinator_ns();
        ip(&["netns", "add", &c])?;
        self.made.push(c.clone());
        ip(&["-n", &c, "link", "set", "lo", "up"])?;
        // The coordinator's namespace forwards between the test and the agents.
        let sysctl = Command::new("ip")
            .args([
                "netns",
                "exec",
                &c,
                "sysctl",
                "-qw",
                "net.ipv4.ip_forward=1",
            ])
            .status()
            .map_err(|e| e.to_string())?;
        if !sysctl.success() {
            return Err("sysctl net.ipv4.ip_forward=1 in the coordinator's namespace".into());
        }
        // The test's link.
        let (host, inner) = (format!("{}h", self.tag), format!("{}c", self.tag));
        ip(&["link", "add", &host, "type", "veth", "peer", "name", &inner])?;
        ip(&["link", "set", &inner, "netns", &c])?;
        ip(&["addr", "add", &format!("198.19.{n}.1/30"), "dev", &host])?;
        ip(&["link", "set", &host, "up"])?;
        ip(&[
            "-n",
            &c,
            "addr",
            "add",
            &format!("198.19.{n}.2/30"),
            "dev",
            &inner,
        ])?;
        ip(&["-n", &c, "link", "set", &inner, "up"])?;
        ip(&[
            "route",
            "add",
            &format!("198.18.{n}.0/24"),
            "via",
            &format!("198.19.{n}.2"),
        ])?;
        for k in 0..self.agents {
            let a = self.agent_ns(k);
            ip(&["netns", "add", &a])?;
            self.made.push(a.clone());
            ip(&["-n", &a, "link", "set", "lo", "up"])?;
            let (outer, inner) = (self.agent_link(k), format!("{}b{k}", self.tag));
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ])?;
            ip(&["link", "set", &outer, "netns", &c])?;
            ip(&["link", "set", &inner, "netns", &a])?;
            let (cside, aside) = (4 * k + 1, 4 * k + 2);
            ip(&[
                "-n",
                &c,
                "addr",
                "add",
                &format!("198.18.{n}.{cside}/30"),
                "dev",
                &outer,
            ])?;
            ip(&["-n", &c, "link", "set", &outer, "up"])?;
            ip(&[
                "-n",
                &a,
                "addr",
                "add",
                &format!("198.18.{n}.{aside}/30"),
                "dev",
                &inner,
            ])?;
            ip(&["-n", &a, "link", "set", &inner, "up"])?;
            // Back to the test's link, through the coordinator's namespace.
            ip(&[
                "-n",
                &a,
                "route",
                "add",
                &format!("198.19.{n}.0/30"),
                "via",
                &format!("198.18.{n}.{cside}"),
            ])?;
        }
        Ok(())
    }

    /// The coordinator's namespace.
    pub fn coordinator_ns(&self) -> String {
        format!("{}c", self.tag)
    }

    /// Agent `k`'s namespace.
    pub fn agent_ns(&self, k: usize) -> String {
        format!("{}a{k}", self.tag)
    }

    /// The coordinator's end of agent `k`'s link (in the coordinator's namespace).
    fn agent_link(&self, k: usize) -> String {
        format!("{}x{k}", self.tag)
    }

    /// The coordinator's address as the test reaches it.
    pub fn coordinator_addr(&self) -> String {
        format!("198.19.{}.2", self.n)
    }

    /// The coordinator's address as agent `k` reaches it.
    pub fn coordinator_addr_for(&self, k: usize) -> String {
        format!("198.18.{}.{}", self.n, 4 * k + 1)
    }

    /// Agent `k`'s address.
    pub fn agent_addr(&self, k: usize) -> String {
        format!("198.18.{}.{}", self.n, 4 * k + 2)
    }

    /// `ip netns exec NS PROGRAM`: a command that runs `program` in namespace `ns`.
    pub fn command_in(ns: &str, program: &std::path::Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns]).arg(program);
        cmd
    }

    /// Partitions agent `k` from everything: its link goes down (packets dropped both ways).
    pub fn cut(&self, k: usize) {
        ip(&[
            "-n",
            &self.coordinator_ns(),
            "link",
            "set",
            &self.agent_link(k),
            "down",
        ])
        .unwrap();
    }

    /// Ends agent `k`'s partition.
    pub fn heal(&self, k: usize) {
        ip(&[
            "-n",
            &self.coordinator_ns(),
            "link",
            "set",
            &self.agent_link(k),
            "up",
        ])
        .unwrap();
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
