//! Sends each text frame as one UDP datagram, so `nc -l -u PORT` on another machine shows the live
//! view (as the original tracepoint cpu-time monitor did).

use std::net::{ToSocketAddrs, UdpSocket};

use anyhow::{Context, Result};
use pkprof_accounting::Interval;

/// Largest payload sent; longer frames are cut at a line boundary.
const MAX_DATAGRAM: usize = 65_000;

pub struct UdpSink {
    socket: UdpSocket,
    max_rows: Option<usize>,
}

impl UdpSink {
    /// `dest` is `HOST:PORT`; the host is resolved once, now.
    pub fn connect(dest: &str, max_rows: Option<usize>) -> Result<UdpSink> {
        let addr = dest
            .to_socket_addrs()
            .with_context(|| format!("resolving {dest:?} (expected HOST:PORT)"))?
            .next()
            .with_context(|| format!("{dest:?} resolves to no address"))?;
        let local = if addr.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        };
        let socket = UdpSocket::bind(local).context("opening a UDP socket")?;
        socket
            .connect(addr)
            .with_context(|| format!("connecting to {addr}"))?;
        Ok(UdpSink { socket, max_rows })
    }

    /// Best effort, like any datagram: a refused or dropped packet is only logged.
    pub fn send(&self, frame: &Interval) {
        let mut text = crate::text::render(frame, self.max_rows);
        text.push('\n');
        if text.len() > MAX_DATAGRAM {
            let cut = text[..MAX_DATAGRAM].rfind('\n').unwrap_or(MAX_DATAGRAM);
            text.truncate(cut + 1);
        }
        if let Err(e) = self.socket.send(text.as_bytes()) {
            tracing::debug!("udp frame not sent: {e}");
        }
    }
}
