//! The HTTP endpoints of `pkprof top --listen`: `/metrics` (Prometheus text exposition of the latest
//! frame) and `/stream` (every new frame as one JSON line, chunked, until the client goes away).

use std::io::Read;
use std::net::SocketAddr;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread;

use anyhow::{anyhow, Result};
use pkprof_accounting::Frame;
use tiny_http::{Header, Response, StatusCode};

use crate::prometheus::Exposition;

/// Frames a slow `/stream` client may lag behind before it is dropped.
const STREAM_BACKLOG: usize = 16;

struct Shared {
    exposition: Mutex<Exposition>,
    subscribers: Mutex<Vec<SyncSender<Arc<Frame>>>>,
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

    /// Makes `frame` the one `/metrics` shows and sends it to every `/stream` client.
    pub fn publish(&self, frame: &Arc<Frame>) {
        if let Ok(mut e) = self.shared.exposition.lock() {
            e.update(frame);
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
            let body = shared
                .exposition
                .lock()
                .map(|e| e.text().to_string())
                .unwrap_or_default();
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
                .spawn(move || {
                    let body = JsonLines {
                        rx,
                        buf: Vec::new(),
                        pos: 0,
                    };
                    let resp = Response::new(
                        StatusCode(200),
                        vec![header("Content-Type", "application/x-ndjson")],
                        body,
                        None,
                        None,
                    );
                    let _ = req.respond(resp);
                });
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

/// A `Read` over frames arriving on a channel, one JSON line each; ends when the sender is gone.
struct JsonLines {
    rx: Receiver<Arc<Frame>>,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for JsonLines {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.buf.len() {
            let Ok(frame) = self.rx.recv() else {
                return Ok(0);
            };
            self.buf = (crate::json::render(&frame) + "\n").into_bytes();
            self.pos = 0;
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
