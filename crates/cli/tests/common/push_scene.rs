//! The workload scene of the push tests (`push.rs`, `agent_push.rs`): a CPU-bound process with
//! a known hot function, a UDP receiver in a network namespace, and a hog pinned to CPU 1, where
//! the receive work of a flood is steered (RPS): Linux bills that work to the hog, pkprof to the
//! receiver.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use super::netns::Link;
use super::{build_workload, cmd, Proc};

pub struct PushScene {
    pub hot_bin: PathBuf,
    send_bin: PathBuf,
    pub link: Link,
    port: &'static str,
    pub hog: Proc,
    pub recv: Proc,
    pub hot: Proc,
}

const WAIT: Duration = Duration::from_secs(20);

impl PushScene {
    /// Starts the hog, the receiver on `port` (in a link named `name`) and the hot process for
    /// `hot_secs` seconds.
    pub fn start(name: &str, port: &'static str, hot_secs: u32) -> PushScene {
        let (hot_bin, send_bin, recv_bin, hog_bin) = (
            build_workload("hot_split"),
            build_workload("net_send"),
            build_workload("net_recv"),
            build_workload("net_hog"),
        );
        let link = Link::new(name, false);
        let mut hog = Proc::spawn(cmd(&hog_bin, &["1"]));
        hog.expect("hog", WAIT);
        let mut recv = Proc::spawn(cmd(
            &recv_bin,
            &[&link.rx.0, "udp", link.rx_addr, port, "0"],
        ));
        recv.expect("ready", WAIT);
        let hot = Proc::spawn(cmd(&hot_bin, &[&hot_secs.to_string()]));
        PushScene {
            hot_bin,
            send_bin,
            link,
            port,
            hog,
            recv,
            hot,
        }
    }

    /// Floods the receiver with 64-byte datagrams for `secs` seconds, as fast as the sender
    /// (pinned to CPU 0) can.
    pub fn flood(&self, secs: &str) {
        let to = format!("{}:1", self.port);
        let args = [
            &self.link.tx.0[..],
            "udp",
            self.link.rx_addr,
            &to,
            "0",
            secs,
            "64",
            "0",
        ];
        let mut sender = Proc::spawn(cmd(&self.send_bin, &args));
        sender.expect("sent", WAIT);
        sender.wait(WAIT);
    }

    /// Ends the receiver and the hog (each says it is done); the hot process is killed.
    pub fn finish(mut self) {
        drop(self.hot);
        self.recv.close_stdin();
        self.recv.expect("received", WAIT);
        self.hog.close_stdin();
        self.hog.expect("spun", WAIT);
    }
}
