//! Two sides of a VI pair across hosts (nodes 4 and 8 of a harness, joined over TCP), each
//! with its receive slots posted: what the pair-stream tests share.

use super::{mem, Mem};
use remora_testkit::Harness;
use remora_vipl::layout::{control, status};
use remora_vipl::*;
use std::time::Duration;

/// How long a wait of these tests lasts at most.
pub const T: Option<Duration> = Some(Duration::from_secs(20));
/// Receive slots of each side, and their size.
pub const SLOTS: usize = 48;
pub const SLOT: usize = 64 << 10;
/// A watch period ([`Side::watched`]) no test lasts: the NIC's watcher never looks (it
/// sends no count of posted receives that waited for it).
pub const NO_WATCH: Option<Duration> = Some(Duration::from_secs(3600));

/// One side: its NIC, its VI, its descriptors and its buffers.
pub struct Side {
    pub nic: Nic,
    pub vi: Vi,
    pub desc: Mem,
    pub buf: Mem,
}

impl Side {
    pub fn new(h: &Harness, node: u32) -> Side {
        Side::with(h, node, RELIABLE_DELIVERY)
    }

    /// [`Side::new`] of a VI of the given reliability level (no RDMA read when unreliable).
    pub fn with(h: &Harness, node: u32, reliability: u16) -> Side {
        Side::watched(h, node, reliability, None)
    }

    /// [`Side::with`], the NIC's watcher looking every `watch` when given (set before the
    /// VI is made, so from its first look on: [`NO_WATCH`] for one that never looks within
    /// a test).
    pub fn watched(h: &Harness, node: u32, reliability: u16, watch: Option<Duration>) -> Side {
        let nic = Nic::open_with_config("remora0", h.config(node)).unwrap();
        if let Some(period) = watch {
            nic.set_watch_period(period);
        }
        let ptag = nic.create_ptag();
        let attrs = ViAttributes {
            reliability,
            max_transfer: MAX_TRANSFER,
            ptag,
            rdma_write: true,
            rdma_read: reliability != UNRELIABLE,
        };
        let vi = Vi::create(&nic, attrs, None, None).unwrap();
        // Descriptors: one per receive slot, then the sends'.
        let desc = mem(&nic, 64 * (SLOTS + 64), ptag, true);
        let buf = mem(&nic, SLOT * (SLOTS + 2), ptag, true);
        Side { nic, vi, desc, buf }
    }

    /// Post receive `i` (slot `i`, a whole slot long).
    pub fn post(&self, i: usize) {
        let d = Descriptor {
            length: SLOT as u32,
            segments: vec![self.buf.seg(i * SLOT, SLOT)],
            ..Default::default()
        };
        self.nic.write_descriptor(self.desc.addr(64 * i), self.desc.handle, &d).unwrap();
        self.vi.post_recv(self.desc.addr(64 * i), self.desc.handle).unwrap();
    }

    /// Post send number `n` (its own descriptor) of `data` from the slot after the
    /// receives', with immediate data `imm`, as an RDMA write into `rdma` when given.
    pub fn send(&self, n: usize, data: &[u8], imm: Option<u32>, rdma: Option<DataSegment>) {
        let src = SLOTS * SLOT + (n % 2) * SLOT;
        self.buf.put(src, data);
        let mut control = if imm.is_some() { control::IMMEDIATE } else { 0 };
        let mut segments = vec![];
        if let Some(r) = rdma {
            control |= control::OP_RDMAWRITE;
            segments.push(r);
        }
        if !data.is_empty() {
            segments.push(self.buf.seg(src, data.len()));
        }
        let d = Descriptor {
            control,
            length: data.len() as u32,
            immediate: imm.unwrap_or(0),
            segments,
            ..Default::default()
        };
        let at = 64 * (SLOTS + n % 64);
        self.nic.write_descriptor(self.desc.addr(at), self.desc.handle, &d).unwrap();
        self.vi.post_send(self.desc.addr(at), self.desc.handle).unwrap();
        let (addr, _) = self.vi.send_wait(T).unwrap();
        assert_eq!(addr, self.desc.addr(at));
        assert_eq!(self.nic.read_descriptor(addr, self.desc.handle).unwrap().status & status::ERROR_MASK, 0);
    }

    /// Wait for the next receive (expected in slot `i`) and check it holds `data` with
    /// `imm`, then post it again.
    pub fn expect(&self, i: usize, data: &[u8], imm: Option<u32>, what: &str) {
        self.take(i, data, imm, what);
        self.post(i);
    }

    /// [`Side::expect`] without posting the receive again.
    pub fn take(&self, i: usize, data: &[u8], imm: Option<u32>, what: &str) {
        let (addr, _) = self.vi.recv_wait(T).unwrap_or_else(|e| panic!("{what}: {e:?}"));
        assert_eq!(addr, self.desc.addr(64 * i), "{what}: the receives complete in order");
        let d = self.nic.read_descriptor(addr, self.desc.handle).unwrap();
        let mut st = status::DONE | status::OP_RECEIVE;
        if imm.is_some() {
            st |= status::IMMEDIATE;
        }
        assert_eq!(d.status, st, "{what}: status");
        assert_eq!(d.length as usize, data.len(), "{what}: length");
        if let Some(imm) = imm {
            assert_eq!(d.immediate, imm, "{what}: immediate data");
        }
        assert!(self.buf.get(i * SLOT, data.len()) == data, "{what}: bytes");
    }
}

pub fn bytes(n: usize, seed: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + seed * 13 + 1) as u8).collect()
}

/// Two connected sides: the server on node 4, the client on node 8, every receive posted.
pub fn pair(h: &Harness, disc: &[u8]) -> (Side, Side) {
    pair_watched(h, disc, [None, None])
}

/// [`pair`], the server's NIC's watcher and the client's looking every `watch[0]` and
/// `watch[1]` when given ([`Side::watched`]).
pub fn pair_watched(h: &Harness, disc: &[u8], watch: [Option<Duration>; 2]) -> (Side, Side) {
    let s = Side::watched(h, 4, RELIABLE_DELIVERY, watch[0]);
    let c = Side::watched(h, 8, RELIABLE_DELIVERY, watch[1]);
    for i in 0..SLOTS {
        s.post(i);
        c.post(i);
    }
    super::connect(&s.nic, &s.vi, &c.nic, &c.vi, disc);
    (s, c)
}
