//! RDMA write on one host after the peer's memory table changed: the writer reaches the
//! target through the peer's regions (its pieces and its table, looked up once and used
//! again while nothing changes), and a change made before the next write (RDMA write
//! taken away from the target's memory, or the memory deregistered) refuses that write
//! with the protection error, nothing written; on one node and on two nodes of one host.
//! (`hosts.rs` checks the same across hosts.)

mod common;
use common::mem;

use remora_testkit::Harness;
use remora_vipl::layout::{control, status};
use remora_vipl::*;

#[derive(Clone, Copy)]
enum Change {
    /// `VipSetMemAttributes` with RDMA write off.
    NoRdmaWrite,
    /// `VipDeregisterMem`.
    Deregistered,
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8).collect()
}

fn an_rdma_write_after_the_peers_change_is_refused(nodes: (u32, u32), change: Change) {
    let h = Harness::new();
    let snic = Nic::open_with_config("remora0", h.config(nodes.0)).unwrap();
    let cnic = Nic::open_with_config("remora0", h.config(nodes.1)).unwrap();
    let (sp, cp) = (snic.create_ptag(), cnic.create_ptag());
    let attrs = |ptag| ViAttributes {
        reliability: RELIABLE_DELIVERY,
        max_transfer: MAX_TRANSFER,
        ptag,
        rdma_write: true,
        rdma_read: true,
    };
    let server = Vi::create(&snic, attrs(sp), None, None).unwrap();
    let client = Vi::create(&cnic, attrs(cp), None, None).unwrap();
    common::connect(&snic, &server, &cnic, &client, b"rdma-change");
    let target = mem(&snic, 64 << 10, sp, true);
    let local = mem(&cnic, 64 << 10, cp, true);
    let cdesc = mem(&cnic, 64, cp, false);
    let remote = DataSegment { addr: target.addr(0) as u64, handle: target.handle, len: 0 };
    let write = |n: usize, seed: u8| {
        local.put(0, &pattern(n, seed));
        let w = Descriptor {
            control: control::OP_RDMAWRITE,
            length: n as u32,
            segments: vec![remote, local.seg(0, n)],
            ..Default::default()
        };
        common::send(&cnic, &client, &cdesc, &w)
    };
    // Several writes: the target's slot is looked up and used again.
    for i in 0..5u8 {
        assert_eq!(write(20_000, i), status::DONE | status::OP_RDMA_WRITE, "write {i}");
    }
    // Let the last write land (a read answers after every store before it).
    let rd = Descriptor {
        control: control::OP_RDMAREAD,
        length: 8,
        segments: vec![remote, local.seg(30_000, 8)],
        ..Default::default()
    };
    assert_eq!(common::send(&cnic, &client, &cdesc, &rd), status::DONE | status::OP_RDMA_READ);
    assert!(target.get(0, 20_000) == pattern(20_000, 4), "the RDMA writes landed");

    match change {
        Change::NoRdmaWrite => snic
            .set_mem_attributes(
                target.addr(0),
                target.handle,
                MemAttributes { ptag: sp, rdma_write: false, rdma_read: true },
            )
            .unwrap(),
        Change::Deregistered => snic.deregister(target.addr(0), target.handle).unwrap(),
    }
    assert_eq!(
        write(100, 9),
        status::DONE | status::OP_RDMA_WRITE | status::RDMA_PROT_ERROR,
        "the write after the change"
    );
    assert!(target.get(0, 100) == pattern(100, 4), "nothing written after the change");
}

#[test]
fn an_rdma_write_after_rdma_write_is_taken_away_is_refused_on_one_node() {
    an_rdma_write_after_the_peers_change_is_refused((1, 1), Change::NoRdmaWrite);
}

#[test]
fn an_rdma_write_after_rdma_write_is_taken_away_is_refused_on_two_nodes_of_one_host() {
    an_rdma_write_after_the_peers_change_is_refused((4, 8), Change::NoRdmaWrite);
}

#[test]
fn an_rdma_write_into_deregistered_memory_is_refused_on_one_node() {
    an_rdma_write_after_the_peers_change_is_refused((1, 1), Change::Deregistered);
}

#[test]
fn an_rdma_write_into_deregistered_memory_is_refused_on_two_nodes_of_one_host() {
    an_rdma_write_after_the_peers_change_is_refused((4, 8), Change::Deregistered);
}
