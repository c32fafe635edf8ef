//! What the crate's unit tests that need a connected pair share: registered memory
//! (`Mem`), posting a receive and sending a message (`post_recv`, `send`), two ends of a
//! reliable connection on nodes 4 and 8 (`two`) and connecting them (`connect`). Used by
//! `late_stores`, `later`, `deliver/learn`, `deliver/reap`, `describe`, `short`,
//! `short/long`, `link/told/missed` and `nic/watcher_end`.

use crate::{
    DataSegment, Descriptor, Error, MemAttributes, MemHandle, NetAddress, Nic, ProtectionTag, Vi,
    ViAttributes, MAX_TRANSFER, RELIABLE_DELIVERY,
};
use remora_sys::user_memory::UserRegion;
use remora_testkit::Harness;
use std::time::Duration;

/// How long a test waits for a completion or a connection.
pub(crate) const T: Option<Duration> = Some(Duration::from_secs(20));

/// A buffer registered with a NIC (leaked: it lives as long as the test process).
#[derive(Clone, Copy)]
pub(crate) struct Mem {
    region: UserRegion,
    pub(crate) handle: MemHandle,
}

impl Mem {
    pub(crate) fn new(nic: &Nic, len: usize, ptag: ProtectionTag) -> Mem {
        Mem::with(nic, len, MemAttributes { ptag, rdma_write: false, rdma_read: false })
    }
    /// Registered with `attrs`.
    pub(crate) fn with(nic: &Nic, len: usize, attrs: MemAttributes) -> Mem {
        let buf: &'static mut [u8] = Box::leak(vec![0u8; len + 64].into_boxed_slice());
        let skip = (64 - buf.as_ptr() as usize % 64) % 64;
        let region = UserRegion::from_static(&mut buf[skip..skip + len]);
        Mem { region, handle: nic.register(region, attrs).unwrap() }
    }
    /// `len` bytes (a multiple of the page size) of whole pages of their own: no other
    /// region shares their piece, so deregistering them removes it.
    pub(crate) fn own_pages(nic: &Nic, len: usize, ptag: ProtectionTag) -> Mem {
        let page = 4096;
        let buf: &'static mut [u8] = Box::leak(vec![0u8; len + page].into_boxed_slice());
        let skip = (page - buf.as_ptr() as usize % page) % page;
        let region = UserRegion::from_static(&mut buf[skip..skip + len]);
        let attrs = MemAttributes { ptag, rdma_write: false, rdma_read: false };
        Mem { region, handle: nic.register(region, attrs).unwrap() }
    }
    pub(crate) fn region(&self) -> UserRegion {
        self.region
    }
    pub(crate) fn addr(&self, off: usize) -> usize {
        self.region.addr() + off
    }
    pub(crate) fn get(&self, off: usize, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.region.read(off, &mut v).unwrap();
        v
    }
}

/// Post a receive of `len` bytes at `buf[off..]`, its descriptor at `desc + at`.
pub(crate) fn post_recv(nic: &Nic, vi: &Vi, desc: &Mem, at: usize, buf: &Mem, off: usize, len: usize) {
    let seg = DataSegment { addr: buf.addr(off) as u64, handle: buf.handle, len: len as u32 };
    let d = Descriptor { length: len as u32, segments: vec![seg], ..Default::default() };
    nic.write_descriptor(desc.addr(at), desc.handle, &d).unwrap();
    vi.post_recv(desc.addr(at), desc.handle).unwrap();
}

/// Send `data` (put at `buf[off..]`), its descriptor at `desc + at`; its status bits.
pub(crate) fn send(nic: &Nic, vi: &Vi, desc: &Mem, at: usize, buf: &Mem, off: usize, data: &[u8]) -> u32 {
    post_send(nic, vi, desc, at, buf, off, data);
    assert_eq!(vi.send_wait(T).unwrap(), (desc.addr(at), desc.handle));
    nic.read_descriptor(desc.addr(at), desc.handle).unwrap().status
}

/// Post the send of `data` (put at `buf[off..]`), its descriptor at `desc + at`, without
/// waiting for it.
pub(crate) fn post_send(nic: &Nic, vi: &Vi, desc: &Mem, at: usize, buf: &Mem, off: usize, data: &[u8]) {
    buf.region.write(off, data).unwrap();
    let seg = DataSegment { addr: buf.addr(off) as u64, handle: buf.handle, len: data.len() as u32 };
    let d = Descriptor { length: data.len() as u32, segments: vec![seg], ..Default::default() };
    nic.write_descriptor(desc.addr(at), desc.handle, &d).unwrap();
    vi.post_send(desc.addr(at), desc.handle).unwrap();
}

/// Two ends of a reliable connection to be made: the NICs of nodes 4 and 8 of `h`, a
/// protection tag and a VI (no RDMA) on each, the server's NIC watching every `watch`
/// when given (set before its first VI starts the watcher).
pub(crate) struct Two {
    pub(crate) snic: Nic,
    pub(crate) cnic: Nic,
    pub(crate) sp: ProtectionTag,
    pub(crate) cp: ProtectionTag,
    pub(crate) server: Vi,
    pub(crate) client: Vi,
}

/// The NICs, protection tags and VIs of [`Two`].
pub(crate) fn two(h: &Harness, watch: Option<Duration>) -> Two {
    two_with(h, watch, false)
}

/// [`two`], both VIs allowing RDMA write when `rdma_write`.
pub(crate) fn two_with(h: &Harness, watch: Option<Duration>, rdma_write: bool) -> Two {
    let (snic, cnic) = nics(h);
    if let Some(w) = watch {
        snic.set_watch_period(w);
    }
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let server = Vi::create(&snic, reliable(sp, rdma_write), None, None).unwrap();
    let client = Vi::create(&cnic, reliable(cp, rdma_write), None, None).unwrap();
    Two { snic, cnic, sp, cp, server, client }
}

/// The NICs of nodes 4 and 8 of `h`.
pub(crate) fn nics(h: &Harness) -> (Nic, Nic) {
    let snic = Nic::open_with_config("remora0", h.config(4)).unwrap();
    (snic, Nic::open_with_config("remora0", h.config(8)).unwrap())
}

/// A reliable VI's attributes under `ptag` (no RDMA read; RDMA write when `rdma_write`).
pub(crate) fn reliable(ptag: ProtectionTag, rdma_write: bool) -> ViAttributes {
    ViAttributes {
        reliability: RELIABLE_DELIVERY,
        max_transfer: MAX_TRANSFER,
        ptag,
        rdma_write,
        rdma_read: false,
    }
}

/// Connect `client` to `server` under discriminator `disc` (retried until the server
/// waits for it).
pub(crate) fn connect(snic: &Nic, server: &Vi, cnic: &Nic, client: &Vi, disc: &[u8]) {
    let addr = NetAddress::new(snic.node(), disc);
    let (s, a, nic) = (server.clone(), addr.clone(), snic.clone());
    let waiter = std::thread::spawn(move || nic.connect_wait(&a, T).unwrap().accept(&s));
    loop {
        match client.connect_request(&NetAddress::new(cnic.node(), b"client"), &addr, T) {
            Err(Error::NoMatch) => std::thread::sleep(Duration::from_millis(2)),
            other => {
                other.unwrap();
                break;
            }
        }
    }
    waiter.join().unwrap().unwrap();
}
