//! What the VIPL test binaries share: registered memory that lives for the rest of the
//! test process, and a client/server connection made through the node.

#![allow(dead_code)]

use remora_vipl::*;
use std::time::Duration;

pub mod pair;

/// How long a connection set-up of these helpers waits.
const CONNECT_WAIT: Option<Duration> = Some(Duration::from_secs(20));

/// Memory registered on a NIC, 64-byte aligned (descriptors must be).
pub struct Mem {
    pub region: UserRegion,
    pub handle: MemHandle,
}

/// `len` bytes of fresh memory registered on `nic` with `ptag`, RDMA allowed or not.
pub fn mem(nic: &Nic, len: usize, ptag: ProtectionTag, rdma: bool) -> Mem {
    let buf: &'static mut [u8] = Box::leak(vec![0u8; len + 64].into_boxed_slice());
    let skip = (64 - buf.as_ptr() as usize % 64) % 64;
    let region = UserRegion::from_static(&mut buf[skip..skip + len]);
    let handle = nic.register(region, MemAttributes { ptag, rdma_write: rdma, rdma_read: rdma }).unwrap();
    Mem { region, handle }
}

impl Mem {
    pub fn addr(&self, off: usize) -> usize {
        self.region.addr() + off
    }
    pub fn seg(&self, off: usize, len: usize) -> DataSegment {
        DataSegment { addr: self.addr(off) as u64, handle: self.handle, len: len as u32 }
    }
    pub fn put(&self, off: usize, b: &[u8]) {
        self.region.write(off, b).unwrap();
    }
    pub fn get(&self, off: usize, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.region.read(off, &mut v).unwrap();
        v
    }
}

/// Connect `client` (on `cnic`) to `server` (on `snic`) through the node, the server
/// waiting on `disc`; the client asks again while no waiter is there yet (`NoMatch`).
pub fn connect(snic: &Nic, server: &Vi, cnic: &Nic, client: &Vi, disc: &[u8]) {
    let addr = NetAddress::new(snic.node(), disc);
    let (s, a) = (server.clone(), addr.clone());
    let nic = snic.clone();
    let waiter = std::thread::spawn(move || nic.connect_wait(&a, CONNECT_WAIT).unwrap().accept(&s));
    loop {
        match client.connect_request(&NetAddress::new(cnic.node(), b"client"), &addr, CONNECT_WAIT) {
            Err(Error::NoMatch) => std::thread::sleep(Duration::from_millis(2)),
            other => {
                other.unwrap();
                break;
            }
        }
    }
    waiter.join().unwrap().unwrap();
}

/// Write the send descriptor `d` at the start of `desc`, post it to `vi` (on `nic`), wait
/// (10 s at most) for its completion and return its status bits.
pub fn send(nic: &Nic, vi: &Vi, desc: &Mem, d: &Descriptor) -> u32 {
    nic.write_descriptor(desc.addr(0), desc.handle, d).unwrap();
    vi.post_send(desc.addr(0), desc.handle).unwrap();
    assert_eq!(vi.send_wait(Some(Duration::from_secs(10))).unwrap(), (desc.addr(0), desc.handle));
    nic.read_descriptor(desc.addr(0), desc.handle).unwrap().status
}

/// Two nodes of the harness `h` (4 and 8), a NIC on each and a reliable VI on each (not
/// connected yet): the harness (kept alive by the caller), the server's NIC and the
/// client's, their protection tags, the server's VI and the client's.
#[allow(dead_code)] // not every test binary that includes this module calls it
pub fn reliable_vis(
    h: remora_testkit::Harness,
) -> (remora_testkit::Harness, Nic, Nic, ProtectionTag, ProtectionTag, Vi, Vi) {
    vis(h, RELIABLE_DELIVERY)
}

/// [`reliable_vis`] with VIs of the reliability level `reliability`.
pub fn vis(
    h: remora_testkit::Harness,
    reliability: u16,
) -> (remora_testkit::Harness, Nic, Nic, ProtectionTag, ProtectionTag, Vi, Vi) {
    let (snic, cnic, sp, cp, server, client) = vis_on(&h, (4, 8), reliability);
    (h, snic, cnic, sp, cp, server, client)
}

/// Two VIs of the level `reliability` on nodes `nodes` of `h` (server, client), with their
/// NICs and protection tags.
pub fn vis_on(
    h: &remora_testkit::Harness,
    nodes: (u32, u32),
    reliability: u16,
) -> (Nic, Nic, ProtectionTag, ProtectionTag, Vi, Vi) {
    vis_with((h.config(nodes.0), h.config(nodes.1)), reliability)
}

/// Two VIs of the level `reliability` on NICs opened with `configs` (server, client),
/// with their NICs and protection tags.
pub fn vis_with(
    configs: (remora_client::Config, remora_client::Config),
    reliability: u16,
) -> (Nic, Nic, ProtectionTag, ProtectionTag, Vi, Vi) {
    let snic = Nic::open_with_config("remora0", configs.0).unwrap();
    let cnic = Nic::open_with_config("remora0", configs.1).unwrap();
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let attrs = |ptag| ViAttributes {
        reliability,
        max_transfer: MAX_TRANSFER,
        ptag,
        rdma_write: false,
        rdma_read: false,
    };
    let server = Vi::create(&snic, attrs(sp), None, None).unwrap();
    let client = Vi::create(&cnic, attrs(cp), None, None).unwrap();
    (snic, cnic, sp, cp, server, client)
}
