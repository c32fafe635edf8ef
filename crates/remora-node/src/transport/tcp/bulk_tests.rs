//! The link's bulk lanes: a lane that is stuck (its frame half there, or its peer not
//! reading) holds up no other lane, whichever threads serve them (a thread per lane and
//! direction now; one per link for all lanes was tried, see `bulk.rs`).

use super::bulk::start_bulk;
use super::peer::TcpPeer;
use crate::transport::{BoxFuture, Inbound, LinkState, PeerMemory};
use remora_proto::link::{BulkFrame, BulkHeader, BulkOp, PeerReply, PeerRequest, RangeRef, BULK_FRAME};
use remora_proto::Error;
use remora_sys::{AsFd, Mapping, Memfd};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

const CONN: u64 = 5;
const MEM: usize = 8 << 20;
/// Far longer than any answer takes, even on a loaded machine: a lane held up by another
/// never answers at all.
const PATIENCE: Duration = Duration::from_secs(30);

fn mapping(len: usize) -> Arc<Mapping> {
    let fd = Memfd::create("bulk-tests", len as u64).unwrap();
    Arc::new(Mapping::new(fd.as_fd(), 0, len, Default::default()).unwrap())
}

/// This node's connection `CONN`: one mapping.
struct Mem(Arc<Mapping>);

struct Whole(Arc<Mapping>);

impl PeerMemory for Whole {
    fn resolve(&self, offset: u64, len: u64, _write: bool) -> Option<Vec<(Arc<Mapping>, usize, usize)>> {
        let end = offset.checked_add(len)?;
        (end <= self.0.len() as u64).then(|| vec![(self.0.clone(), offset as usize, len as usize)])
    }
}

impl Inbound for Mem {
    fn request(&self, _: u32, _: u64, _: PeerRequest) -> BoxFuture<'static, Result<PeerReply, Error>> {
        Box::pin(async { Err(Error::NotConnected) })
    }
    fn session_end(&self, _: u32, _: u64) {}
    fn event(&self, _: u32, _: u64, _: remora_proto::Event) {}
    fn link_changed(&self, _: u32, _: LinkState) {}
    fn route_lost(&self, _: u32, _: u64) {}
    fn memory(&self, _: u32, target: RangeRef) -> Option<Arc<dyn PeerMemory>> {
        (target == RangeRef::connection(CONN)).then(|| Arc::new(Whole(self.0.clone())) as Arc<dyn PeerMemory>)
    }
}

/// A peer whose lanes 0 and 1 are up, the far ends of those lanes, and its memory.
fn two_lanes() -> (Arc<TcpPeer>, [TcpStream; 2], Arc<Mapping>) {
    let mem = mapping(MEM);
    let peer = Arc::new(TcpPeer::new(Arc::new(Mem(mem.clone())), 8, "nowhere:1".into()));
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let far = [0, 1].map(|lane| {
        let near = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (far, _) = l.accept().unwrap();
        start_bulk(&peer, near, lane).unwrap();
        far.set_read_timeout(Some(PATIENCE)).unwrap();
        far
    });
    (peer, far, mem)
}

fn frame(op: BulkOp, tag: u64, offset: u64, len: u64) -> Vec<u8> {
    let f = BulkFrame::from_header(&BulkHeader { op, tag, conn: CONN, offset, len, ok: true });
    zerocopy::IntoBytes::as_bytes(&f).to_vec()
}

fn answer(s: &mut TcpStream) -> BulkHeader {
    let mut raw = [0u8; BULK_FRAME];
    s.read_exact(&mut raw).expect("an answer");
    BulkFrame::parse(&raw).unwrap()
}

fn close(peer: &TcpPeer) {
    for tx in peer.bulk.lock().unwrap().iter_mut().flatten() {
        tx.close();
    }
}

#[test]
fn a_lane_whose_frame_is_half_there_holds_up_no_other_lane() {
    let (peer, [mut zero, mut one], mem) = two_lanes();
    let first: Vec<u8> = (0..1 << 20).map(|i| (i * 7 + (i >> 9)) as u8).collect();
    let second: Vec<u8> = (0..64 << 10).map(|i| (i * 13 + 5) as u8).collect();
    // Lane 0: a write of 1 MiB whose second half has not come yet.
    zero.write_all(&frame(BulkOp::Write, 1, 0, first.len() as u64)).unwrap();
    zero.write_all(&first[..first.len() / 2]).unwrap();
    // Lane 1: a whole write, answered and stored meanwhile.
    one.write_all(&frame(BulkOp::Write, 2, 4 << 20, second.len() as u64)).unwrap();
    one.write_all(&second).unwrap();
    let a = answer(&mut one);
    assert_eq!((a.op, a.tag, a.ok), (BulkOp::Ack, 2, true));
    let mut got = vec![0u8; second.len()];
    mem.read(4 << 20, &mut got).unwrap();
    assert!(got == second, "lane 1's write is stored");
    // Lane 0's rest: its write is whole, stored, then answered.
    zero.write_all(&first[first.len() / 2..]).unwrap();
    let a = answer(&mut zero);
    assert_eq!((a.op, a.tag, a.ok), (BulkOp::Ack, 1, true));
    let mut got = vec![0u8; first.len()];
    mem.read(0, &mut got).unwrap();
    assert!(got == first, "lane 0's write is stored");
    // A read request on lane 1 is answered on lane 1 with the bytes.
    one.write_all(&frame(BulkOp::Read, 3, 4 << 20, second.len() as u64)).unwrap();
    let a = answer(&mut one);
    assert_eq!((a.op, a.tag, a.ok, a.len), (BulkOp::Data, 3, true, second.len() as u64));
    let mut back = vec![0u8; second.len()];
    one.read_exact(&mut back).unwrap();
    assert!(back == second, "the read's data");
    close(&peer);
}

#[test]
fn a_lane_whose_peer_does_not_read_holds_up_no_other_lane() {
    let (peer, [zero, mut one], _) = two_lanes();
    let payload = mapping(4 << 20);
    payload.write(0, &vec![0x5a; 4 << 20]).unwrap();
    let write = |lane: usize, tag: u64, len: u64| {
        let hdr = BulkHeader { op: BulkOp::Write, tag, conn: CONN, offset: 0, len, ok: true };
        peer.bulk_send(lane, hdr, Some((payload.clone(), 0)), None).unwrap();
    };
    // Far more than lane 0's socket buffers hold: most of it waits for the sending thread,
    // which never gets lane 0's peer to take it.
    for tag in 0..32 {
        write(0, tag, 4 << 20);
    }
    // Lane 1's frames still leave, whole and in order.
    for tag in 100..104 {
        write(1, tag, 64 << 10);
    }
    for tag in 100..104 {
        let h = answer(&mut one);
        assert_eq!((h.op, h.tag, h.len), (BulkOp::Write, tag, 64 << 10));
        let mut body = vec![0u8; 64 << 10];
        one.read_exact(&mut body).unwrap();
        assert!(body.iter().all(|&b| b == 0x5a), "frame {tag}'s payload");
    }
    drop(zero);
    close(&peer);
}
