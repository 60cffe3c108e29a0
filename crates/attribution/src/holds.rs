//! Held samples: the served-event tag life cycle (hash, pass, attribute, expire) applied to stack
//! samples. Items wait under a hold key (a tag segment, a socket, an skb handed to another CPU);
//! link events move them from key to key until they reach a thread or KERNEL.

use std::collections::HashMap;

use crate::events::{LinkEvent, LinkTarget, Served};

/// What became of a held item.
#[derive(Clone, Debug, PartialEq)]
pub enum Resolution {
    Thread(Served),
    Kernel,
    /// Nobody consumed it in time (or the recording ended first): KERNEL, counted.
    Expired,
}

/// Items of type `T` waiting for their beneficiary, by hold key.
pub struct Holds<T> {
    waiting: HashMap<u64, Vec<(u64, T)>>,
    expire_ns: u64,
    expired: u64,
}

impl<T> Holds<T> {
    /// Items held longer than `expire_ns` (by their own time stamps) expire at the next sweep.
    pub fn new(expire_ns: u64) -> Self {
        Holds {
            waiting: HashMap::new(),
            expire_ns,
            expired: 0,
        }
    }

    /// Holds `item`, taken at `time_ns`, on `key`.
    pub fn hold(&mut self, key: u64, time_ns: u64, item: T) {
        self.waiting.entry(key).or_default().push((time_ns, item));
    }

    /// Applies a link; returns the items it resolved.
    pub fn link(&mut self, ev: &LinkEvent) -> Vec<(T, Resolution)> {
        let Some(items) = self.waiting.remove(&ev.from) else {
            return Vec::new();
        };
        let resolution = match &ev.to {
            LinkTarget::Hold(next) => {
                self.waiting.entry(*next).or_default().extend(items);
                return Vec::new();
            }
            LinkTarget::Thread(s) => Resolution::Thread(s.clone()),
            LinkTarget::Kernel => Resolution::Kernel,
            LinkTarget::Expired => {
                self.expired += items.len() as u64;
                Resolution::Expired
            }
        };
        items
            .into_iter()
            .map(|(_, item)| (item, resolution.clone()))
            .collect()
    }

    /// Expires items held since before `now_ns - expire_ns`.
    pub fn sweep(&mut self, now_ns: u64) -> Vec<(T, Resolution)> {
        let cutoff = now_ns.saturating_sub(self.expire_ns);
        let mut out = Vec::new();
        self.waiting.retain(|_, items| {
            let (old, young): (Vec<_>, Vec<_>) = items.drain(..).partition(|(t, _)| *t < cutoff);
            out.extend(old.into_iter().map(|(_, item)| (item, Resolution::Expired)));
            *items = young;
            !items.is_empty()
        });
        self.expired += out.len() as u64;
        out
    }

    /// The recording ends: everything still held expires.
    pub fn drain(&mut self) -> Vec<(T, Resolution)> {
        let out: Vec<_> = self
            .waiting
            .drain()
            .flat_map(|(_, items)| items)
            .map(|(_, item)| (item, Resolution::Expired))
            .collect();
        self.expired += out.len() as u64;
        out
    }

    /// Items held right now.
    pub fn len(&self) -> usize {
        self.waiting.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Items that expired so far.
    pub fn expired(&self) -> u64 {
        self.expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(pid: u32) -> Served {
        Served {
            pid,
            tid: pid,
            comm: format!("p{pid}"),
            ..Served::default()
        }
    }

    fn link(from: u64, to: LinkTarget) -> LinkEvent {
        LinkEvent {
            time_ns: 0,
            from,
            to,
        }
    }

    #[test]
    fn segment_to_socket_to_reader() {
        let mut h = Holds::new(1_000);
        h.hold(1, 10, "a");
        h.hold(1, 11, "b");
        h.hold(2, 12, "c");
        assert!(h.link(&link(1, LinkTarget::Hold(100))).is_empty());
        assert!(h.link(&link(2, LinkTarget::Hold(100))).is_empty());
        let got = h.link(&link(100, LinkTarget::Thread(served(7))));
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|(_, r)| *r == Resolution::Thread(served(7))));
        assert!(h.is_empty());
    }

    #[test]
    fn link_from_unknown_key_resolves_nothing() {
        let mut h: Holds<&str> = Holds::new(1_000);
        assert!(h.link(&link(5, LinkTarget::Kernel)).is_empty());
    }

    #[test]
    fn expiry_by_sweep_and_at_end() {
        let mut h = Holds::new(100);
        h.hold(1, 10, "old");
        h.hold(1, 500, "young");
        h.hold(2, 20, "old2");
        let swept = h.sweep(550);
        assert_eq!(swept.len(), 2);
        assert!(swept.iter().all(|(_, r)| *r == Resolution::Expired));
        assert_eq!(h.len(), 1);
        assert_eq!(h.drain().len(), 1);
        assert_eq!(h.expired(), 3);
    }

    #[test]
    fn explicit_expiry_and_kernel() {
        let mut h = Holds::new(1_000);
        h.hold(1, 0, 1);
        h.hold(2, 0, 2);
        assert_eq!(
            h.link(&link(1, LinkTarget::Expired)),
            vec![(1, Resolution::Expired)]
        );
        assert_eq!(
            h.link(&link(2, LinkTarget::Kernel)),
            vec![(2, Resolution::Kernel)]
        );
        assert_eq!(h.expired(), 1);
    }
}
