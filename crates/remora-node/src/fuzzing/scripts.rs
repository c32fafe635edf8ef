//! The seeds of the shared-memory targets: scripts of real use of a SCIF region, a DMA
//! queue page and an interrupt page (see `shm.rs` for the script's form), and a SCIF
//! region's bytes after real traffic, offered as a foreign memfd.

use super::shm::{ASK, END, FLAG, FOREIGN, GET, ON, PATCH, PUT, REOPEN, SIDE};
use super::{CONN, SEG};
use remora_sys::msgring::{size_for, MsgRegion};
use remora_sys::{AsFd, Mapping};

/// A script's patches that write the non-zero parts of `m` (a region after real use).
fn snapshot(m: &Mapping, script: &mut Vec<u8>) {
    let mut chunk = [0u8; 64];
    for off in (0..m.len()).step_by(64) {
        let n = 64.min(m.len() - off);
        if m.read(off, &mut chunk[..n]).is_ok() && chunk[..n].iter().any(|b| *b != 0) {
            script.push(PATCH);
            script.extend_from_slice(&(off as u32).to_le_bytes());
            script.push(n as u8);
            script.extend_from_slice(&chunk[..n]);
        }
    }
}

fn op16(script: &mut Vec<u8>, op: u8, n: u16) {
    script.push(op);
    script.extend_from_slice(&n.to_le_bytes());
}

pub(super) fn rings() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    // Messages both ways, a full ring, watches; on each queue size.
    for (i, queue) in [256u16, 4096, 5000].into_iter().enumerate() {
        let mut s = vec![i as u8];
        for n in [1u16, 52, 53, 700] {
            op16(&mut s, PUT, n);
            op16(&mut s, PUT | SIDE, n);
        }
        op16(&mut s, GET, 60);
        op16(&mut s, GET | ON | SIDE, 9000);
        s.extend_from_slice(&[FLAG | ON, 0, ASK]);
        op16(&mut s, PUT, queue.saturating_mul(2));
        s.extend_from_slice(&[ASK, FLAG, 0, REOPEN, 0]);
        op16(&mut s, GET, 65535);
        out.push((format!("traffic_{queue}"), s));
    }
    // A region after real traffic, offered as a foreign memfd of its size (open, then use).
    if let Ok(fd) = MsgRegion::create(4096) {
        if let (Ok(r), Ok(m)) =
            (MsgRegion::open(fd.as_fd()), Mapping::new(fd.as_fd(), 0, size_for(4096), Default::default()))
        {
            let _ = r.push(0, b"hello over scif");
            let _ = r.push(1, &[0x42; 300]);
            let mut b = [0u8; 5];
            let _ = r.pop(0, &mut b);
            r.watch(1, true);
            let mut s = vec![FOREIGN | 1];
            s.extend_from_slice(&(size_for(4096) as u32).to_le_bytes());
            snapshot(&m, &mut s);
            s.extend_from_slice(&[REOPEN, 0]);
            op16(&mut s, GET, 100);
            op16(&mut s, GET | SIDE, 400);
            op16(&mut s, PUT, 64);
            out.push(("snapshot_4096".into(), s));
        }
    }
    out
}

pub(super) fn dma() -> Vec<(String, Vec<u8>)> {
    let desc = |s: &mut Vec<u8>, v: [u64; 5], flags: u32| {
        v.iter().for_each(|x| s.extend_from_slice(&x.to_le_bytes()));
        s.extend_from_slice(&flags.to_le_bytes());
    };
    let mut post = vec![15u8];
    op16(&mut post, PUT, 2);
    desc(&mut post, [SEG, CONN, 0, 0, 1 << 20], 0);
    desc(
        &mut post,
        [0x7f00_dead_0000, CONN, 0, 1 << 20, 65536],
        remora_sys::dma::DMA_F_READ | remora_sys::dma::DMA_F_USER_MEM,
    );
    op16(&mut post, GET, 0);
    post.extend_from_slice(&[END, 2, 0, 0, 0, 0, ASK, FLAG, 2]);
    let mut abort = post.clone();
    abort.extend_from_slice(&[FLAG, 0, FLAG | ON, 1, END, 4, 0, 0, 0, 0, REOPEN, 3, END | ON, 0, 0, 0, 0, 0]);
    let mut error = vec![0u8];
    op16(&mut error, PUT, 1);
    desc(&mut error, [SEG, CONN, 1 << 20, 0, 4096], 0);
    error.extend_from_slice(&[END, 3, 1, 0, 0, 0]);
    let mut patched = post.clone();
    patched.extend_from_slice(&[PATCH, 20, 0, 0, 0, 4, 0xff, 0xff, 0, 0]);
    op16(&mut patched, GET, 0);
    vec![
        ("post_take_complete".into(), post),
        ("abort_close".into(), abort),
        ("error".into(), error),
        ("count_patched".into(), patched),
    ]
}

pub(super) fn intr() -> Vec<(String, Vec<u8>)> {
    let mut data = vec![0u8];
    for n in [0u16, 8, 1024, 1025] {
        op16(&mut data, PUT, n);
    }
    op16(&mut data, GET, 4);
    op16(&mut data, GET, 2000);
    data.extend_from_slice(&[ASK]);
    op16(&mut data, GET, 100);
    let mut full = vec![0u8];
    for _ in 0..66 {
        op16(&mut full, PUT, 16);
    }
    op16(&mut full, GET, 16);
    full.extend_from_slice(&[END | ON]);
    op16(&mut full, PUT, 16);
    let plain = vec![0u8, FLAG | ON, 0, FLAG, 1, FLAG, 2, FLAG, 3, FLAG, 1, ASK, FLAG, 3, FLAG, 3];
    vec![("data".into(), data), ("full_then_removed".into(), full), ("plain_and_signals".into(), plain)]
}
