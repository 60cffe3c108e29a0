//! kgmon-style control of a running agent (`pkprof ctl`) over a unix stream socket that only root
//! can open: the socket is mode 0600 in a directory of mode 0700, and the agent checks each
//! client's credentials (SO_PEERCRED) too.
//!
//! Protocol: the client sends one request line (`status`, `stop`, `start`, `reset`, `flush`,
//! `dump SINCE_NS`); the agent answers `ok LEN\n` and LEN bytes (text, or a profile for `dump`),
//! or `err MESSAGE\n`. One request per connection.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

/// A control request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    Status,
    /// Sampling off (the exact accounting goes on).
    Stop,
    Start,
    /// Drop the open window's samples and the windows kept in memory.
    Reset,
    /// Close the open window now.
    Flush,
    /// The windows since this wall-clock time (Unix ns), the open one closed first, merged.
    Dump {
        since_ns: u64,
    },
}

impl Request {
    pub fn line(&self) -> String {
        match self {
            Request::Status => "status".into(),
            Request::Stop => "stop".into(),
            Request::Start => "start".into(),
            Request::Reset => "reset".into(),
            Request::Flush => "flush".into(),
            Request::Dump { since_ns } => format!("dump {since_ns}"),
        }
    }

    pub fn parse(line: &str) -> Option<Request> {
        let mut w = line.split_whitespace();
        let r = match w.next()? {
            "status" => Request::Status,
            "stop" => Request::Stop,
            "start" => Request::Start,
            "reset" => Request::Reset,
            "flush" => Request::Flush,
            "dump" => Request::Dump {
                since_ns: w.next()?.parse().ok()?,
            },
            _ => return None,
        };
        w.next().is_none().then_some(r)
    }
}

/// The agent's answer.
pub type Reply = Result<Vec<u8>, String>;

/// A request from a client, with where its answer goes.
pub struct Incoming {
    pub request: Request,
    pub reply: Sender<Reply>,
}

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("another agent is running on {0} (stop it first: systemctl stop pkprof-agent, or pkprof ctl status)")]
    InUse(PathBuf),
    #[error("cannot create the control socket {path}: {source}")]
    Bind { path: PathBuf, source: io::Error },
    #[error("no agent is listening on {path} ({source})")]
    NoAgent { path: PathBuf, source: io::Error },
    #[error("permission denied on {0}: only root may control the agent")]
    NotRoot(PathBuf),
    #[error("the agent refused: {0}")]
    Refused(String),
    #[error("talking to the agent on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// The listening socket; removed when dropped.
pub struct CtlServer {
    path: PathBuf,
    /// Requests, for the agent's loop to answer between steps.
    pub requests: Receiver<Incoming>,
}

/// The uid of the peer of a unix stream.
fn peer_uid(s: &UnixStream) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket fd and a ucred-sized buffer with its length.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(cred.uid)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn write_reply(s: &mut UnixStream, reply: &Reply) -> io::Result<()> {
    match reply {
        Ok(body) => {
            s.write_all(format!("ok {}\n", body.len()).as_bytes())?;
            s.write_all(body)
        }
        Err(msg) => s.write_all(format!("err {}\n", msg.replace('\n', " ")).as_bytes()),
    }
}

fn serve(mut s: UnixStream, tx: &Sender<Incoming>) -> io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let uid = peer_uid(&s)?;
    if uid != 0 && uid != me {
        return write_reply(
            &mut s,
            &Err("permission denied: only root may control the agent".into()),
        );
    }
    let mut line = String::new();
    BufReader::new((&s).take(256)).read_line(&mut line)?;
    let Some(request) = Request::parse(line.trim()) else {
        let msg = format!("unknown request {:?}", line.trim());
        return write_reply(&mut s, &Err(msg));
    };
    let (reply, answer) = mpsc::channel();
    if tx.send(Incoming { request, reply }).is_err() {
        return write_reply(&mut s, &Err("the agent is stopping".into()));
    }
    let r = answer
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| Err("the agent did not answer in 60 s".into()));
    write_reply(&mut s, &r)
}

impl CtlServer {
    /// Binds `path` (its directory created 0700, the socket 0600); a live agent already there is
    /// refused, a stale socket replaced. Connections are served from a background thread.
    pub fn bind(path: &Path) -> Result<CtlServer, CtlError> {
        let bind_err = |source| CtlError::Bind {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            if !dir.exists() {
                std::fs::create_dir_all(dir).map_err(bind_err)?;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(bind_err)?;
            }
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(CtlError::InUse(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(bind_err)?;
        }
        // Created with no access for others from the start (no window before the chmod).
        // SAFETY: umask only changes this process's file creation mask.
        let old = unsafe { libc::umask(0o177) };
        let bound = UnixListener::bind(path);
        // SAFETY: as above, restoring the previous mask.
        unsafe { libc::umask(old) };
        let listener = bound.map_err(bind_err)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(bind_err)?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("pkprof-ctl".into())
            .spawn(move || {
                for s in listener.incoming().flatten() {
                    if let Err(e) = serve(s, &tx) {
                        tracing::info!("control client: {e}");
                    }
                }
            })
            .map_err(bind_err)?;
        Ok(CtlServer {
            path: path.to_path_buf(),
            requests: rx,
        })
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Sends `request` to the agent at `path` and returns its answer's body.
pub fn request(path: &Path, request: Request) -> Result<Vec<u8>, CtlError> {
    let io_err = |source| CtlError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut s = UnixStream::connect(path).map_err(|source| match source.kind() {
        io::ErrorKind::PermissionDenied => CtlError::NotRoot(path.to_path_buf()),
        _ => CtlError::NoAgent {
            path: path.to_path_buf(),
            source,
        },
    })?;
    s.write_all(format!("{}\n", request.line()).as_bytes())
        .map_err(io_err)?;
    let mut r = BufReader::new(s);
    let mut head = String::new();
    r.read_line(&mut head).map_err(io_err)?;
    let head = head.trim_end();
    if let Some(msg) = head.strip_prefix("err ") {
        return Err(if msg.starts_with("permission denied") {
            CtlError::NotRoot(path.to_path_buf())
        } else {
            CtlError::Refused(msg.to_string())
        });
    }
    let len: usize = head
        .strip_prefix("ok ")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| io_err(io::Error::other(format!("unexpected answer {head:?}"))))?;
    let mut body = Vec::with_capacity(len.min(1 << 30));
    r.take(len as u64).read_to_end(&mut body).map_err(io_err)?;
    if body.len() < len {
        return Err(io_err(io::Error::from(io::ErrorKind::UnexpectedEof)));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::Status,
            Request::Stop,
            Request::Start,
            Request::Reset,
            Request::Flush,
            Request::Dump { since_ns: 42 },
        ] {
            assert_eq!(Request::parse(&r.line()), Some(r));
        }
        for bad in ["", "dump", "dump x", "status now", "rm -rf"] {
            assert_eq!(Request::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_server_answers_and_a_second_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/agent.sock");
        let server = CtlServer::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dmode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dmode & 0o777, 0o700);
        assert!(matches!(CtlServer::bind(&path), Err(CtlError::InUse(_))));
        let t = std::thread::spawn(move || {
            let inc = server.requests.recv().unwrap();
            assert_eq!(inc.request, Request::Dump { since_ns: 7 });
            inc.reply.send(Ok(b"bytes".to_vec())).unwrap();
            let inc = server.requests.recv().unwrap();
            inc.reply.send(Err("nope".into())).unwrap();
            server
        });
        assert_eq!(
            request(&path, Request::Dump { since_ns: 7 }).unwrap(),
            b"bytes"
        );
        let e = request(&path, Request::Status).unwrap_err();
        assert_eq!(e.to_string(), "the agent refused: nope");
        let server = t.join().unwrap();
        drop(server);
        assert!(!path.exists());
        // A stale socket (its agent killed) is replaced.
        let stale = UnixListener::bind(&path).unwrap();
        drop(stale);
        assert!(path.exists());
        let _again = CtlServer::bind(&path).unwrap();
        assert!(matches!(
            request(&dir.path().join("none.sock"), Request::Status),
            Err(CtlError::NoAgent { .. })
        ));
    }
}
