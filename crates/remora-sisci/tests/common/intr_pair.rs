//! Two processes' plain interrupts, each connected to by the other (the interrupt pairing
//! of issue 19: the higher node's process sends its triggers back on the flow the lower
//! node's process dialed to it).

use remora_sisci::*;
use std::time::Duration;

const LONG: Option<Duration> = Some(Duration::from_secs(10));

/// The lower node's process's interrupt and the higher's, and each one's connection to
/// the other's.
pub struct IntrPair {
    pub lo_intr: Interrupt,
    pub hi_intr: Interrupt,
    /// The lower node's process's connection to the higher's interrupt (its flow is the
    /// one both directions share when paired).
    pub to_hi: RemoteInterrupt,
    pub to_lo: RemoteInterrupt,
}

impl IntrPair {
    /// Interrupt `lo_no` of `lo` and `hi_no` of `hi`, descriptors of the nodes `nodes`
    /// (lower first), each connected to by the other.
    pub fn connect(lo: &Descriptor, hi: &Descriptor, nodes: (u32, u32), lo_no: u32, hi_no: u32) -> IntrPair {
        let lo_intr = Interrupt::create(lo, 0, Some(lo_no), true, None).unwrap();
        let hi_intr = Interrupt::create(hi, 0, Some(hi_no), true, None).unwrap();
        let to_hi = RemoteInterrupt::connect(lo, nodes.1, 0, hi_no, LONG).unwrap();
        let to_lo = RemoteInterrupt::connect(hi, nodes.0, 0, lo_no, LONG).unwrap();
        IntrPair { lo_intr, hi_intr, to_hi, to_lo }
    }

    /// One ping-pong, each owner waiting for the other's trigger; whether the higher
    /// node's trigger went back on the lower's flow.
    pub fn ping_pong(&self) -> bool {
        self.to_hi.trigger().unwrap();
        self.hi_intr.wait_with_spin(LONG, Duration::ZERO).unwrap();
        let before = RemoteInterrupt::triggers_sent_back();
        self.to_lo.trigger().unwrap();
        self.lo_intr.wait_with_spin(LONG, Duration::ZERO).unwrap();
        RemoteInterrupt::triggers_sent_back() > before
    }

    /// Ping-pong until a trigger of the higher node's process went back on the lower's
    /// flow; panics if none did in 50 rounds.
    pub fn engage(&self) {
        if !(0..50).any(|_| self.ping_pong()) {
            panic!("the higher node's triggers never went back on the lower's flow");
        }
    }
}
