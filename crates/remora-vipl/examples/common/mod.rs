//! What the examples share: two NICs of two nodes of this host (the bench's pair), each
//! with a VI, a descriptor area and buffers of 64 KiB slots registered, connected to each
//! other. `DEPTH` receive slots, then `SOURCES` send slots.

use remora_sisci::Sisci;
use remora_vipl::{
    DataSegment, Error, MemAttributes, MemHandle, NetAddress, Nic, UserRegion, Vi, ViAttributes,
    RELIABLE_DELIVERY,
};
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

/// Receive slots (and descriptors) of a side.
pub const DEPTH: usize = 64;
/// Send slots after them, each filled with its own byte.
pub const SOURCES: usize = 3;
/// A slot's size.
pub const SLOT: usize = 64 << 10;

/// One end: its NIC, VI, descriptors (`dh`) and buffers (`bh`); `sent` counts sends.
#[repr(align(128))]
pub struct Side {
    pub nic: Nic,
    pub vi: Vi,
    pub desc: UserRegion,
    pub dh: MemHandle,
    pub buf: UserRegion,
    pub bh: MemHandle,
    pub sent: AtomicUsize,
}

/// `len` bytes of page-aligned memory that live as long as the program.
fn leak(len: usize) -> UserRegion {
    let m: &'static mut [u8] = Box::leak(vec![0u8; len + 4096].into_boxed_slice());
    let skip = (4096 - m.as_ptr() as usize % 4096) % 4096;
    UserRegion::from_static(&mut m[skip..skip + len])
}

fn side(nic: Nic) -> Side {
    let ptag = nic.create_ptag();
    let attrs = ViAttributes {
        reliability: RELIABLE_DELIVERY,
        max_transfer: 1 << 20,
        ptag,
        rdma_write: true,
        rdma_read: true,
    };
    let vi = Vi::create(&nic, attrs, None, None).unwrap();
    let (desc, buf) = (leak((DEPTH + SOURCES) * 64), leak((DEPTH + SOURCES) * SLOT));
    for s in 0..SOURCES {
        buf.write((DEPTH + s) * SLOT, &vec![0x11 * (s as u8 + 1); SLOT]).unwrap();
    }
    let m = MemAttributes { ptag, rdma_write: true, rdma_read: true };
    let dh = nic.register(desc, m).unwrap();
    let bh = nic.register(buf, m).unwrap();
    Side { nic, vi, desc, dh, buf, bh, sent: AtomicUsize::new(0) }
}

impl Side {
    /// The address of descriptor `i`.
    pub fn d(&self, i: usize) -> usize {
        self.desc.addr() + i * 64
    }

    /// `len` bytes of slot `slot`.
    pub fn seg(&self, slot: usize, len: usize) -> DataSegment {
        DataSegment { addr: (self.buf.addr() + slot * SLOT) as u64, handle: self.bh, len: len as u32 }
    }
}

/// Two sides on two nodes of this host (the second node's id 4 past the first's); `ready`
/// runs on both before they connect (receives to post).
pub fn pair(ready: impl Fn(&Side)) -> (Side, Side) {
    let a = Sisci::initialize().unwrap();
    let mut cfg = a.config().clone();
    cfg.node = a.local_node_id() + 4;
    let b = Sisci::with_config(cfg);
    let sa = side(Nic::open_with_config("remora0", a.config().clone()).unwrap());
    let sb = side(Nic::open_with_config("remora0", b.config().clone()).unwrap());
    ready(&sa);
    ready(&sb);
    let addr = NetAddress::new(sb.nic.node(), b"bench");
    std::thread::scope(|sc| {
        let w = sc.spawn(|| {
            sb.nic.connect_wait(&addr, Some(Duration::from_secs(10))).and_then(|r| r.accept(&sb.vi))
        });
        loop {
            match sa.vi.connect_request(
                &NetAddress::new(sa.nic.node(), b"c"),
                &addr,
                Some(Duration::from_secs(10)),
            ) {
                Err(Error::NoMatch) => std::thread::sleep(Duration::from_millis(2)),
                r => {
                    r.unwrap();
                    break;
                }
            }
        }
        w.join().unwrap().unwrap();
    });
    (sa, sb)
}
