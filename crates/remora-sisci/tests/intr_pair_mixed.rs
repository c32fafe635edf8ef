//! Two nodes whose cluster files differ in `intr_pair` (issue 19): each node says its
//! setting in the link handshake, and the pairing is used only when both say yes. A lower
//! node with `false` beside a higher with `true` lost the higher node's triggers before
//! (they went back on a flow the lower daemon did not read); now every trigger is counted
//! exactly once both ways, whichever node says no, and nothing goes back on the other's
//! flow. With three nodes the pairing is per flow: an owner pairs with the node that said
//! yes and not with the one that said no. (Its own test binary: the count of triggers
//! sent back is the process's.)

use remora_sisci::*;
use std::time::Duration;

const LONG: Option<Duration> = Some(Duration::from_secs(10));
const QUIET: Option<Duration> = Some(Duration::from_millis(100));

/// A harness of `nodes` over loopback TCP, each with a cluster file of its own that
/// differs only in `intr_pair` (`pair[i]` for `nodes[i]`), and a library of each node.
fn nodes_saying(nodes: &[u32], pair: &[bool]) -> (remora_testkit::Harness, Vec<Sisci>) {
    let h = remora_testkit::Harness::with_cluster_keys(nodes, "force_tcp = true\n");
    let text = std::fs::read_to_string(h.runtime_dir().join("cluster.toml")).unwrap();
    let sci = nodes
        .iter()
        .zip(pair)
        .map(|(&node, on)| {
            let file = h.runtime_dir().join(format!("node{node}.toml"));
            std::fs::write(&file, format!("intr_pair = {on}\n{text}")).unwrap();
            Sisci::with_config(remora_testkit::child_config(node, h.runtime_dir(), Some(&file), true))
        })
        .collect();
    (h, sci)
}

/// Nodes 4 and 8 (`lower` for node 4, `higher` for node 8).
fn mixed(lower: bool, higher: bool) -> (remora_testkit::Harness, Sisci, Sisci) {
    let (h, mut sci) = nodes_saying(&[4, 8], &[lower, higher]);
    let hi = sci.pop().unwrap();
    (h, sci.pop().unwrap(), hi)
}

/// A ping-pong, a burst each way with nobody waiting, and a disconnect after a burst: all
/// counted exactly once, and nothing went back on the other's flow.
fn every_trigger_counted(lower: bool, higher: bool, lo_no: u32, hi_no: u32) {
    let (h, sa, sb) = mixed(lower, higher);
    let lo = Descriptor::open(&sa).unwrap();
    let hi = Descriptor::open(&sb).unwrap();
    let lo_intr = Interrupt::create(&lo, 0, Some(lo_no), true, None).unwrap();
    let hi_intr = Interrupt::create(&hi, 0, Some(hi_no), true, None).unwrap();
    let to_hi = RemoteInterrupt::connect(&lo, 8, 0, hi_no, LONG).unwrap();
    let to_lo = RemoteInterrupt::connect(&hi, 4, 0, lo_no, LONG).unwrap();
    let before = RemoteInterrupt::triggers_sent_back();
    for i in 0..100 {
        to_hi.trigger().unwrap();
        if let Err(e) = hi_intr.wait_with_spin(LONG, Duration::ZERO) {
            h.show_logs();
            panic!("round {i}: the higher node's interrupt: {e:?}");
        }
        to_lo.trigger().unwrap();
        if let Err(e) = lo_intr.wait_with_spin(LONG, Duration::ZERO) {
            h.show_logs();
            panic!("round {i}: the lower node's interrupt: {e:?}");
        }
    }
    for _ in 0..200 {
        to_lo.trigger().unwrap();
        to_hi.trigger().unwrap();
    }
    for _ in 0..200 {
        lo_intr.wait(LONG).unwrap();
        hi_intr.wait(LONG).unwrap();
    }
    for _ in 0..100 {
        to_lo.trigger().unwrap();
    }
    to_lo.disconnect().unwrap();
    for _ in 0..100 {
        lo_intr.wait(LONG).unwrap();
    }
    assert_eq!(lo_intr.wait(QUIET).unwrap_err(), Error::Timeout, "one too many");
    assert_eq!(hi_intr.wait(QUIET).unwrap_err(), Error::Timeout, "one too many");
    assert_eq!(RemoteInterrupt::triggers_sent_back(), before, "a trigger went back though a node said no");
}

/// Owner C (node 12, pairing on) with flows from A (node 4, on) and M (node 8, off): the
/// pairing is per flow, so C's triggers of A's interrupt go back on A's flow, every one,
/// and none of its triggers of M's go back on M's; every trigger counted once.
fn pairing_is_per_flow_at_an_owner_of_three() {
    let (h, sci) = nodes_saying(&[4, 8, 12], &[true, false, true]);
    let [a, m, c] = [0, 1, 2].map(|i| Descriptor::open(&sci[i]).unwrap());
    let c_intr = Interrupt::create(&c, 0, Some(75), true, None).unwrap();
    let a_intr = Interrupt::create(&a, 0, Some(76), true, None).unwrap();
    let m_intr = Interrupt::create(&m, 0, Some(77), true, None).unwrap();
    let a_to_c = RemoteInterrupt::connect(&a, 12, 0, 75, LONG).unwrap();
    let m_to_c = RemoteInterrupt::connect(&m, 12, 0, 75, LONG).unwrap();
    let c_to_a = RemoteInterrupt::connect(&c, 4, 0, 76, LONG).unwrap();
    let c_to_m = RemoteInterrupt::connect(&c, 8, 0, 77, LONG).unwrap();
    let waited = |i: &Interrupt, what: &str| {
        if let Err(e) = i.wait_with_spin(LONG, Duration::ZERO) {
            h.show_logs();
            panic!("{what}: {e:?}");
        }
    };
    // Both of C's flows are in its wait's set once a trigger came on each.
    m_to_c.trigger().unwrap();
    waited(&c_intr, "M's first trigger");
    // A ping-pong with A until C's triggers go back on A's flow (C learns the flow at a wait).
    let mut engaged = false;
    for _ in 0..50 {
        a_to_c.trigger().unwrap();
        waited(&c_intr, "A's trigger");
        let before = RemoteInterrupt::triggers_sent_back();
        c_to_a.trigger().unwrap();
        waited(&a_intr, "C's trigger of A");
        if RemoteInterrupt::triggers_sent_back() > before {
            engaged = true;
            break;
        }
    }
    assert!(engaged, "C's triggers never went back on A's flow though both said yes");
    const ROUNDS: u64 = 100;
    let before = RemoteInterrupt::triggers_sent_back();
    for i in 0..ROUNDS {
        a_to_c.trigger().unwrap();
        waited(&c_intr, &format!("round {i}: A's trigger"));
        c_to_a.trigger().unwrap();
        waited(&a_intr, &format!("round {i}: C's trigger of A"));
    }
    assert_eq!(RemoteInterrupt::triggers_sent_back() - before, ROUNDS, "each of C's triggers of A went back");
    // With M, which said no: nothing goes back, and nothing is lost.
    let before = RemoteInterrupt::triggers_sent_back();
    for i in 0..ROUNDS {
        m_to_c.trigger().unwrap();
        waited(&c_intr, &format!("round {i}: M's trigger"));
        c_to_m.trigger().unwrap();
        waited(&m_intr, &format!("round {i}: C's trigger of M"));
    }
    assert_eq!(RemoteInterrupt::triggers_sent_back(), before, "a trigger went back on M's flow");
    // Both at once, nobody waiting: only A's go back, all counted once.
    let before = RemoteInterrupt::triggers_sent_back();
    for _ in 0..ROUNDS {
        a_to_c.trigger().unwrap();
        m_to_c.trigger().unwrap();
        c_to_a.trigger().unwrap();
        c_to_m.trigger().unwrap();
    }
    for i in 0..ROUNDS {
        waited(&a_intr, &format!("burst {i}: C's trigger of A"));
        waited(&m_intr, &format!("burst {i}: C's trigger of M"));
        waited(&c_intr, &format!("burst {i}: a trigger of C"));
        waited(&c_intr, &format!("burst {i}: the other trigger of C"));
    }
    assert!(RemoteInterrupt::triggers_sent_back() - before <= ROUNDS, "more went back than C sent to A");
    for (i, who) in [(&a_intr, "A"), (&m_intr, "M"), (&c_intr, "C")] {
        assert_eq!(i.wait(QUIET).unwrap_err(), Error::Timeout, "one too many at {who}");
    }
}

/// Both mixes and the owner of three, one after the other (one test: the count of
/// triggers sent back is the process's, and a test beside it that pairs would add to it).
#[test]
fn nodes_that_differ_in_the_pairing_lose_nothing() {
    // Lost the higher node's triggers before the nodes said their settings.
    every_trigger_counted(false, true, 71, 72);
    every_trigger_counted(true, false, 73, 74);
    // Before 770cf0b, C sent its triggers of M back on M's flow, which M's daemon did not
    // read: lost.
    pairing_is_per_flow_at_an_owner_of_three();
}
