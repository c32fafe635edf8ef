//! With `intr_pair = false` in the cluster file, two processes of two nodes that trigger
//! each other's plain interrupts over TCP each take a flow of their own:
//! nothing goes back on the other's flow, and every trigger is counted exactly once both
//! ways, also across a burst and a disconnect. (Its own test binary: the count of triggers
//! sent back is the process's.)

mod common;

use common::Sci;
use remora_sisci::*;
use std::time::Duration;

const LONG: Option<Duration> = Some(Duration::from_secs(10));
const QUIET: Option<Duration> = Some(Duration::from_millis(100));

#[test]
fn with_the_pairing_off_each_direction_takes_its_own_flow() {
    let h = remora_testkit::Harness::with_cluster_keys(&[4, 8], "force_tcp = true\nintr_pair = false\n");
    let lo = Descriptor::open(&h.sci(4)).unwrap();
    let hi = Descriptor::open(&h.sci(8)).unwrap();
    let lo_intr = Interrupt::create(&lo, 0, Some(91), true, None).unwrap();
    let hi_intr = Interrupt::create(&hi, 0, Some(92), true, None).unwrap();
    let to_hi = RemoteInterrupt::connect(&lo, 8, 0, 92, LONG).unwrap();
    let to_lo = RemoteInterrupt::connect(&hi, 4, 0, 91, LONG).unwrap();
    for _ in 0..100 {
        to_hi.trigger().unwrap();
        hi_intr.wait_with_spin(LONG, Duration::ZERO).unwrap();
        to_lo.trigger().unwrap();
        lo_intr.wait_with_spin(LONG, Duration::ZERO).unwrap();
    }
    assert_eq!(RemoteInterrupt::triggers_sent_back(), 0, "a trigger went back on the other's flow");
    for _ in 0..200 {
        to_lo.trigger().unwrap();
    }
    to_lo.disconnect().unwrap();
    for _ in 0..200 {
        lo_intr.wait(LONG).unwrap();
    }
    assert_eq!(lo_intr.wait(QUIET).unwrap_err(), Error::Timeout, "one too many");
    assert_eq!(hi_intr.wait(QUIET).unwrap_err(), Error::Timeout, "one too many");
    assert_eq!(RemoteInterrupt::triggers_sent_back(), 0);
}
