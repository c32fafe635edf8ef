//! Test support shared by every Remora crate's tests: private runtime directories with their
//! own daemons ([`harness`]; [`stop`] holds one up), data patterns and checksums ([`data`]), and multi-host
//! clusters on one machine (`remora-netns`, re-exported here, with [`cluster_or_skip!`]).
//!
//! ```no_run
//! #[test]
//! fn two_hosts() {
//!     let cluster = remora_testkit::cluster_or_skip!(2);
//!     let out = cluster.command(1, "my-program").arg("8").output().unwrap();
//!     assert!(out.status.success());
//! }
//! ```

pub mod data;
pub mod harness;
pub mod ports;
pub mod stop;

pub use data::{checksum, pattern};
pub use harness::{child_config, daemon_path, net_config, Harness};
pub use ports::free_port;
pub use remora_netns::*;
pub use stop::{daemon_pid, signal, Stopped, Watched};

/// Start a [`NetCluster`] of `$hosts` hosts with the daemon [`find_daemon`] finds, or print
/// why that is impossible here and `return` from the calling test.
///
/// `cluster_or_skip!(hosts, daemon)` uses the given daemon path instead.
#[macro_export]
macro_rules! cluster_or_skip {
    ($hosts:expr) => {
        match $crate::find_daemon().and_then(|d| $crate::NetCluster::start($hosts, &d)) {
            Ok(c) => c,
            Err(skip) => {
                eprintln!("{skip}");
                return;
            }
        }
    };
    ($hosts:expr, $daemon:expr) => {
        match $crate::NetCluster::start($hosts, ::std::convert::AsRef::<::std::path::Path>::as_ref(&$daemon))
        {
            Ok(c) => c,
            Err(skip) => {
                eprintln!("{skip}");
                return;
            }
        }
    };
}

/// Wait, generously (up to 20 s: a loaded machine's tests must not flake on it), until
/// `what` holds, looking every 2 ms; `false` if it never did.
pub fn wait_until(what: impl Fn() -> bool) -> bool {
    let t = std::time::Instant::now();
    while !what() {
        if t.elapsed() > std::time::Duration::from_secs(20) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    true
}
