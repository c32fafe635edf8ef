//! SISCI across two network-namespace hosts whose daemons talk over libfabric (the `ofi`
//! transport) instead of TCP: the whole across-hosts conformance (connect, the DSM's rules
//! through a map, DMA push, pull, vector and from user memory with checksums, out-of-range
//! refusal, interrupts and data interrupts, disconnect), over `ofi+tcp` and over `ofi+shm`
//! (namespace hosts share `/dev/shm`); and the link's faults over `ofi+tcp`. Needs root,
//! iproute2 and libfabric; elsewhere each test says why it skips.

mod common;

use remora_sisci::*;
use remora_testkit::NetCluster;

fn cluster(transport: &str) -> Option<NetCluster> {
    if !remora_ofi_sys::installed() {
        eprintln!(
            "skipping the ofi test: libfabric is not installed (apt-get install libfabric-dev libfabric1)"
        );
        return None;
    }
    let daemon = match remora_testkit::find_daemon() {
        Ok(d) => d,
        Err(s) => {
            eprintln!("skipping multi-host test: {}", s.0);
            return None;
        }
    };
    match NetCluster::start_with(2, &daemon, &format!("transport = \"{transport}\"\n")) {
        Ok(c) => Some(c),
        Err(s) => {
            eprintln!("skipping multi-host test: {}", s.0);
            None
        }
    }
}

fn across(transport: &str) {
    let Some(c) = cluster(transport) else { return };
    let (a, b) = (common::net_sci(&c, 1), common::net_sci(&c, 2));
    common::conformance(&a, &b, common::Route::Hosts);
    for k in 1..=2 {
        let log = c.daemon_log(k);
        assert!(log.contains("ofi transport: provider"), "host {k} runs the ofi transport:\n{log}");
    }
    // Both daemons report the link to the other as up, and moved bytes over it.
    let d = Descriptor::open(&b).unwrap();
    assert_eq!(d.probe_node(0, 4), Ok(true));
}

#[test]
fn conformance_over_ofi_tcp() {
    across("ofi+tcp");
}

/// Link faults over ofi+tcp: a pulled cable, the peer daemon killed during a transfer, and
/// restarted (the checks of the tcp transport's test in multihost.rs).
#[test]
fn link_down_up_kill_and_restart_over_ofi_tcp() {
    let Some(mut c) = cluster("ofi+tcp") else { return };
    common::link_faults(&mut c);
}

#[test]
fn conformance_over_ofi_shm() {
    across("ofi+shm");
}
