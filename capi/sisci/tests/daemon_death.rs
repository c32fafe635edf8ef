//! `SCIWaitForInterrupt` and `SCIWaitForDataInterrupt` with `SCI_INFINITE_TIMEOUT` end
//! with `SCI_ERR_SYSTEM` when the node daemon is killed under them (issue 18.5): the C
//! library waits in 100 ms slices (cancellation points), and each slice must notice the
//! daemon gone, not only a wait longer than one slice.
//!
//! Its own test binary: it kills its node's daemon, which no other test may share.

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment
use sisci::consts::*;
use sisci::*;
use std::ffi::c_uint;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

const NODE: u32 = 14;

fn daemon_pid(h: &remora_testkit::Harness) -> u32 {
    let s = remora_client::Session::open_control(&h.config(NODE)).unwrap();
    match s.request(remora_proto::Request::Status, &[]).unwrap().0 {
        remora_proto::Reply::Status(st) => st.pid,
        other => panic!("{other:?}"),
    }
}

#[test]
fn infinite_waits_answer_system_error_when_the_daemon_dies() {
    let h = remora_testkit::Harness::new();
    std::env::set_var("REMORA_RUNTIME_DIR", h.runtime_dir());
    std::env::set_var("REMORA_DAEMON", remora_testkit::daemon_path());
    std::env::set_var("REMORA_NODE", NODE.to_string());
    let mut err: sci_error_t = 0;
    let mut sd: sci_desc_t = null_mut();
    let mut intr: sci_local_interrupt_t = null_mut();
    let mut dintr: sci_local_data_interrupt_t = null_mut();
    let (mut no, mut dno): (c_uint, c_uint) = (0, 0);
    // SAFETY: every pointer is a live local; the callbacks are none.
    unsafe {
        SCIInitialize(0, &mut err);
        assert_eq!(err, SCI_ERR_OK);
        SCIOpen(&mut sd, 0, &mut err);
        assert_eq!(err, SCI_ERR_OK);
        SCICreateInterrupt(sd, &mut intr, 0, &mut no, None, null_mut(), 0, &mut err);
        assert_eq!(err, SCI_ERR_OK);
        SCICreateDataInterrupt(sd, &mut dintr, 0, &mut dno, None, null_mut(), 0, &mut err);
        assert_eq!(err, SCI_ERR_OK);
    }
    // Handles are plain addresses the library hands out: carried to the waiting threads.
    let (i, d) = (intr as usize, dintr as usize);
    let t1 = std::thread::spawn(move || {
        let mut err: sci_error_t = 0;
        // SAFETY: `i` is the live interrupt handle made above; `err` a live local.
        unsafe { SCIWaitForInterrupt(i as sci_local_interrupt_t, SCI_INFINITE_TIMEOUT, 0, &mut err) };
        err
    });
    let t2 = std::thread::spawn(move || {
        let mut err: sci_error_t = 0;
        let mut buf = [0u8; 64];
        let mut len = buf.len() as c_uint;
        // SAFETY: `d` is the live data-interrupt handle made above; `buf` holds `len` bytes.
        unsafe {
            SCIWaitForDataInterrupt(
                d as sci_local_data_interrupt_t,
                buf.as_mut_ptr().cast(),
                &mut len,
                SCI_INFINITE_TIMEOUT,
                0,
                &mut err,
            )
        };
        err
    });
    std::thread::sleep(Duration::from_millis(300));
    let pid = daemon_pid(&h);
    assert!(std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap().success());
    let t = Instant::now();
    let deadline = Duration::from_secs(5);
    while !(t1.is_finished() && t2.is_finished()) {
        assert!(t.elapsed() < deadline, "the infinite waits still block {deadline:?} after the daemon died");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(t1.join().unwrap(), SCI_ERR_SYSTEM, "SCIWaitForInterrupt");
    assert_eq!(t2.join().unwrap(), SCI_ERR_SYSTEM, "SCIWaitForDataInterrupt");
}
