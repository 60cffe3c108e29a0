//! The HTTP endpoints of `pkprof top --listen`: `/metrics` (Prometheus text exposition of the latest
//! frame) and `/stream` (every new frame as one JSON line, chunked, until the client goes away).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread;

use anyhow::{anyhow, Result};
use pkprof_accounting::Interval;
use tiny_http::{Header, Response};

use crate::prometheus::Exposition;

/// Frames a slow `/stream` client may lag behind before it is dropped.
const STREAM_BACKLOG: usize = 16;

struct Shared {
    exposition: Mutex<Exposition>,
    /// Series appended to `/metrics` by the embedding program (the agent's own health).
    extra: Mutex<String>,
    subscribers: Mutex<Vec<SyncSender<Arc<Interval>>>>,
}

pub struct Server {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl Server {
    /// Binds `addr` and serves from a background thread.
    pub fn start(addr: SocketAddr, metrics_top: usize) -> Result<Server> {
        let http =
            tiny_http::Server::http(addr).map_err(|e| anyhow!("cannot listen on {addr}: {e}"))?;
        let local = http.server_addr().to_ip().unwrap_or(addr);
        let shared = Arc::new(Shared {
            exposition: Mutex::new(Exposition::new(metrics_top)),
            extra: Mutex::new(String::new()),
            subscribers: Mutex::new(Vec::new()),
        });
        let s = Arc::clone(&shared);
        thread::Builder::new()
            .name("pkprof-http".into())
            .spawn(move || {
                for req in http.incoming_requests() {
                    handle(&s, req);
                }
            })?;
        Ok(Server {
            shared,
            addr: local,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Series (Prometheus text lines, with their `# TYPE` lines) appended to every `/metrics`
    /// answer from now on, replacing the previous ones (the agent's own health).
    pub fn set_extra(&self, text: String) {
        if let Ok(mut e) = self.shared.extra.lock() {
            *e = text;
        }
    }

    /// Makes `frame` the one `/metrics` shows and sends it to every `/stream` client.
    pub fn publish(&self, frame: &Arc<Interval>) {
        if let Ok(mut e) = self.shared.exposition.lock() {
            e.observe(Arc::clone(frame));
        }
        if let Ok(mut subs) = self.shared.subscribers.lock() {
            subs.retain(|tx| match tx.try_send(Arc::clone(frame)) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    tracing::info!(
                        "dropping a /stream client that fell {STREAM_BACKLOG} frames behind"
                    );
                    false
                }
                Err(TrySendError::Disconnected(_)) => false,
            });
        }
    }
}

fn header(k: &str, v: &str) -> Header {
    Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("static header is valid")
}

fn handle(shared: &Arc<Shared>, req: tiny_http::Request) {
    let path = req.url().split('?').next().unwrap_or("").to_string();
    let result = match path.as_str() {
        "/metrics" => {
            let mut body = shared
                .exposition
                .lock()
                .map(|e| e.text().to_string())
                .unwrap_or_default();
            if let Ok(extra) = shared.extra.lock() {
                body.push_str(&extra);
            }
            req.respond(Response::from_string(body).with_header(header(
                "Content-Type",
                "text/plain; version=0.0.4; charset=utf-8",
            )))
        }
        "/stream" => {
            let (tx, rx) = sync_channel(STREAM_BACKLOG);
            if let Ok(mut subs) = shared.subscribers.lock() {
                subs.push(tx);
            }
            // Each stream blocks its own thread until the client disconnects or we stop.
            let _ = thread::Builder::new()
                .name("pkprof-stream".into())
                .spawn(move || stream(req, &rx));
            Ok(())
        }
        "/" => req.respond(Response::from_string(
            "pkprof top: /metrics (Prometheus), /stream (JSON lines)\n",
        )),
        _ => req.respond(Response::from_string("not found\n").with_status_code(404)),
    };
    if let Err(e) = result {
        tracing::debug!("http client went away: {e}");
    }
}

/// Writes every frame as one JSON line as soon as it arrives, until the client goes away or the
/// server stops. The response is written by hand: tiny_http's own body writer would hold HTTP/1.1
/// output back in 8 KiB chunks (a small frame reached the client several refreshes late) and read
/// an HTTP/1.0 body to its end before sending anything (never, here, while buffering every frame).
/// HTTP/1.1 clients get one chunk per frame; HTTP/1.0 clients a body that ends when the
/// connection closes.
fn stream(req: tiny_http::Request, frames: &Receiver<Arc<Interval>>) {
    let chunked = *req.http_version() > (1, 0);
    let mut w = req.into_writer();
    let head = if chunked {
        "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    } else {
        "HTTP/1.0 200 OK\r\nContent-Type: application/x-ndjson\r\nCache-Control: no-cache\r\n\r\n"
    };
    let mut sent = w.write_all(head.as_bytes()).and_then(|_| w.flush());
    while sent.is_ok() {
        let Ok(frame) = frames.recv() else {
            if chunked {
                let _ = w.write_all(b"0\r\n\r\n").and_then(|_| w.flush());
            }
            return;
        };
        let line = crate::json::render(&frame) + "\n";
        sent = if chunked {
            write!(w, "{:x}\r\n{line}\r\n", line.len())
        } else {
            w.write_all(line.as_bytes())
        }
        .and_then(|_| w.flush());
    }
    if let Err(e) = sent {
        tracing::debug!("/stream client went away: {e}");
    }
}
