//! A large DMA transfer waited for, to another node's segment, whose pager flow another
//! queue of the process is using at that moment goes to the node daemon's engine instead
//! of waiting for the flow (`dma/direct.rs`): queues side by side move side by side, and a
//! transfer never waits behind another thread's use of the flow (up to the flow's 10 s
//! patience, when that is a fetch from a home gone silent). Two nodes over loopback TCP.

mod common;

use common::Sci;
use remora_sisci::*;
use std::time::{Duration, Instant};

const LONG: Option<Duration> = Some(Duration::from_secs(10));
/// Long enough over loopback TCP (hundreds of ms) that the second queue's post comes
/// while it moves.
const BIG: usize = 192 << 20;
const MIB: usize = 1 << 20;
const WAIT: DmaFlags = DmaFlags { read: false, wait: true };

fn engine_jobs(h: &common::Harness, node: u32) -> u64 {
    let s = remora_client::Session::open_control(&h.config(node)).unwrap();
    match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.dma_jobs,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_large_transfer_whose_flow_is_busy_goes_to_the_engine() {
    let h = common::Harness::with_cluster(&[4, 8], true);
    let a = Descriptor::open(&h.sci(4)).unwrap();
    let b = Descriptor::open(&h.sci(8)).unwrap();
    let home = LocalSegment::create(&a, Some(24), BIG + MIB, CreateFlags::default()).unwrap();
    home.prepare(0).unwrap();
    home.set_available(0).unwrap();
    let hm = home.map(0, BIG + MIB, None, MapFlags::default()).unwrap();
    let remote = common::retried(|| RemoteSegment::connect(&b, 4, 24, 0, LONG));
    let src = LocalSegment::create(&b, Some(25), MIB, CreateFlags::default()).unwrap();
    src.prepare(0).unwrap();
    let sm = src.map(0, MIB, None, MapFlags::default()).unwrap();
    let qa = DmaQueue::create(&b, 0, 4).unwrap();
    let qb = DmaQueue::create(&b, 0, 4).unwrap();
    // Both queues' flows opened (one flow of the process, shared).
    qb.start(&src, &remote, 0, MIB, BIG, WAIT, None).unwrap();
    let small: &'static mut [u8] = Box::leak(vec![1u8; 64].into_boxed_slice());
    qa.start_mem(UserRegion::from_static(small), &remote, 0, WAIT, None).unwrap();
    let before = engine_jobs(&h, 8);
    let big: &'static mut [u8] = Box::leak(vec![7u8; BIG].into_boxed_slice());
    let qa2 = qa.clone();
    let remote2 = remote.clone();
    let mover =
        std::thread::spawn(move || qa2.start_mem(UserRegion::from_static(big), &remote2, 0, WAIT, None));
    // Queue A's transfer under way over the flow, then queue B's.
    let t = Instant::now();
    while qa.state() != DmaState::Posted && t.elapsed() < Duration::from_secs(10) {
        std::hint::spin_loop();
    }
    // Its first bytes home: its thread holds the flow (review 105: a fixed 20 ms sleep
    // could end before that thread took the flow's lock).
    let mut first = [0u8; 1];
    while t.elapsed() < Duration::from_secs(10) {
        hm.read(0, &mut first).unwrap();
        if first[0] == 7 {
            break;
        }
        std::hint::spin_loop();
    }
    sm.write(0, &vec![9u8; MIB]).unwrap();
    qb.start(&src, &remote, 0, MIB, BIG, WAIT, None).unwrap();
    let after = engine_jobs(&h, 8);
    mover.join().unwrap().unwrap();
    assert_eq!(after, before + 1, "queue B's 1 MiB went to the engine while A's used the flow");
    let mut got = vec![0u8; MIB];
    hm.read(BIG, &mut got).unwrap();
    assert!(got.iter().all(|&x| x == 9), "B's bytes landed");
    hm.read(0, &mut got).unwrap();
    assert!(got.iter().all(|&x| x == 7), "A's bytes landed");
}
