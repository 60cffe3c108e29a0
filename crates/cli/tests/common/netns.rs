//! Network namespaces joined by a veth, for tests that need real receive traffic.
#![allow(dead_code)]

use std::process::Command;

/// Runs a command, panicking with its stderr when it fails.
pub fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("spawn");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {err}");
}

/// A network namespace, deleted on drop (with the veth end inside it).
pub struct Netns(pub String);

impl Netns {
    pub fn new(name: String) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run(&["ip", "netns", "add", &name]);
        let ns = Netns(name);
        run(&["ip", "-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// Two namespaces joined by a veth, receive work steered by RPS: rx end to CPU 1, tx end to CPU 0.
pub struct Link {
    pub tx: Netns,
    pub rx: Netns,
    pub rx_addr: &'static str,
}

impl Link {
    pub fn new(tag: &str, v6: bool) -> Link {
        let id = std::process::id();
        let tx = Netns::new(format!("pkprof-{tag}-{id}-tx"));
        let rx = Netns::new(format!("pkprof-{tag}-{id}-rx"));
        let (a, b) = ("pkn0", "pkn1"); // names private to the namespaces: no clash with anyone
        let veth = ["ip", "link", "add", a, "netns", &tx.0, "type", "veth"];
        run(&[&veth[..], &["peer", "name", b, "netns", &rx.0]].concat());
        let (tx_addr, rx_addr, bits) = match v6 {
            true => ("fd00::1", "fd00::2", "64"),
            false => ("10.200.0.1", "10.200.0.2", "24"),
        };
        for (ns, dev, addr, cpus) in [(&tx, a, tx_addr, "1"), (&rx, b, rx_addr, "2")] {
            let addr = format!("{addr}/{bits}");
            let mut args = vec!["ip", "-n", &ns.0, "addr", "add", &addr, "dev", dev];
            if v6 {
                args.push("nodad");
            }
            run(&args);
            run(&["ip", "-n", &ns.0, "link", "set", dev, "up"]);
            let rps = format!("echo {cpus} > /sys/class/net/{dev}/queues/rx-0/rps_cpus");
            run(&["ip", "netns", "exec", &ns.0, "sh", "-c", &rps]);
        }
        Link { tx, rx, rx_addr }
    }
}
