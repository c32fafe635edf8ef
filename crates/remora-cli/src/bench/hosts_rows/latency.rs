//! The 8-byte latency rows of `remora bench hosts` (see [`super`]): SCIF's message, the
//! SISCI interrupt and data interrupt, DMA of 8 bytes, each beside raw TCP between the same
//! two processes, and the interrupt again with its threads placed on one CPU and on two.

use super::*;

/// Median one-way time (ns) of `n` 8-byte raw TCP round trips to the peer.
fn tcp_one_way(a: &Active, n: u32) -> Result<f64, String> {
    super::super::tcp::ping_loop(a.data(D_ECHO, 8, n as u64, 0)?, 8, n)
}

/// Median half round trip (ns) of `n` runs of `f`.
fn one_way(n: u32, mut f: impl FnMut(u64) -> Result<(), String>) -> Result<f64, String> {
    let mut v = Vec::with_capacity(n as usize);
    for i in 0..n as u64 {
        let t = Instant::now();
        f(i)?;
        v.push(t.elapsed().as_nanos() as f64 / 2.0);
    }
    Ok(median(&mut v))
}

pub(super) fn rows(a: &mut Active, reps: u32) -> Result<(), String> {
    let scif = remora_scif::Scif::new().map_err(e)?;
    let t0 = Instant::now();
    while !scif.node_ids().map_err(e)?.contains(&PEER) {
        if t0.elapsed() > Duration::from_secs(20) {
            return Err("SCIF does not see the peer's node".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ep = remora_scif::Endpoint::open(&scif).map_err(e)?;
    let mine = Interrupt::create(&a.dev, 0, Some(ACTIVE_INT), true, None).map_err(e)?;
    let mine_data = DataInterrupt::create(&a.dev, 0, Some(ACTIVE_DATA), None).map_err(e)?;
    let theirs = RemoteInterrupt::connect(&a.dev, PEER, 0, PEER_INT, LONG).map_err(e)?;
    let theirs_data = RemoteDataInterrupt::connect(&a.dev, PEER, 0, PEER_DATA, LONG).map_err(e)?;
    const N: u32 = 400;
    let (mut tcp, mut sc, mut it, mut dt, mut dma, mut rtt) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    // Warm-up of every path (connections, first faults), then interleaved batches.
    for r in 0..=reps {
        let keep = r > 0;
        let x = tcp_one_way(a, N)?;
        write_words(&mut a.ctl, &[OP_SCIF, N as u64, 0, 0, 0]).map_err(e)?;
        if r == 0 {
            ep.connect(remora_scif::PortId { node: PEER, port: a.scif_port }).map_err(e)?;
        }
        let s = one_way(N, |i| {
            let mut m = [0u8; 8];
            let sent = ep.send(&i.to_le_bytes(), true).map_err(e)?;
            let got = ep.recv(&mut m, true).map_err(e)?;
            match (sent, got, u64::from_le_bytes(m) == i) {
                (8, 8, true) => Ok(()),
                _ => Err("SCIF echo lost or changed a message".into()),
            }
        })?;
        a.answer()?;
        write_words(&mut a.ctl, &[OP_INTR, N as u64, ME as u64, 0, 0]).map_err(e)?;
        let i = one_way(N, |_| {
            theirs.trigger().map_err(e)?;
            mine.wait_with_spin(LONG, Duration::ZERO).map_err(e)
        })?;
        a.answer()?;
        write_words(&mut a.ctl, &[OP_DATA, N as u64, ME as u64, 0, 0]).map_err(e)?;
        let d = one_way(N, |i| {
            let mut m = [0u8; 64];
            theirs_data.trigger(&i.to_le_bytes()).map_err(e)?;
            match mine_data.wait(&mut m, LONG).map_err(e)? {
                8 if m[..8] == i.to_le_bytes() => Ok(()),
                _ => Err("data interrupt echo lost or changed its data".into()),
            }
        })?;
        a.answer()?;
        let y = tcp_one_way(a, N)?;
        let m = one_way(N, |_| a.q.start(&a.src, &a.remote, 0, 8, 0, W, None).map_err(e))?;
        if keep {
            tcp.push((x + y) / 2.0);
            rtt.push(x + y);
            sc.push(s);
            it.push(i);
            dt.push(d);
            dma.push(2.0 * m);
        }
    }
    // The blocked interrupt again with its two threads placed, beside raw TCP placed the
    // same way: both on one core (the peer's too), then on two (this one on the first CPU it
    // may use, the peer's on the last). The path's own cost in each placement, apart from
    // which one the scheduler picks: on a virtual machine whose idle cores halt, each
    // wake-up sent to the other core costs ~10 µs more, and a placement, once taken, lasts
    // (the unplaced row above compares whichever each side landed in). Where this thread
    // may not be pinned the rows are left out; the two-core row where it has one CPU.
    let two = remora_sys::sched::thread_cpus().is_ok_and(|c| c.count() >= 2);
    let placed: &[(u64, u64)] =
        if two { &[(D_ECHO_ONE_CORE, 1), (D_ECHO_OTHER_CORE, 2)] } else { &[(D_ECHO_ONE_CORE, 1)] };
    let mut pinned: Vec<(Vec<f64>, Vec<f64>)> = vec![];
    if let Ok(_pin) = remora_sys::sync::pin_thread() {
        for &(mode, place) in placed {
            let (mut tcp1, mut it1) = (vec![], vec![]);
            for r in 0..=reps {
                let x = super::super::tcp::ping_loop(a.data(mode, 8, N as u64, 0)?, 8, N)?;
                write_words(&mut a.ctl, &[OP_INTR, N as u64, ME as u64, 0, place]).map_err(e)?;
                let i = one_way(N, |_| {
                    theirs.trigger().map_err(e)?;
                    mine.wait_with_spin(LONG, Duration::ZERO).map_err(e)
                })?;
                a.answer()?;
                if r > 0 {
                    tcp1.push(x);
                    it1.push(i);
                }
            }
            pinned.push((tcp1, it1));
        }
    }
    // The DMA of 8 bytes moved them.
    a.smap.write(0, &[0xa5; 8]).map_err(e)?;
    a.q.start(&a.src, &a.remote, 0, 8, 0, W, None).map_err(e)?;
    a.check(0, 0, 8, 0xa5, "DMA 8 B")?;
    let target = "≤ 1.30 (raw TCP 8 B ping-pong";
    for (name, v) in [
        ("scif_send→recv 8 B one-way", &sc),
        ("interrupt trigger→wake (blocked)", &it),
        ("data interrupt 8 B trigger→wake", &dt),
    ] {
        a.row(name, v, &tcp, us, target);
    }
    for ((tcp1, it1), cores) in pinned.iter().zip(["one core", "two cores"]) {
        a.row(
            &format!("interrupt trigger→wake (blocked), {cores}"),
            it1,
            tcp1,
            us,
            &format!("≤ 1.30 (raw TCP 8 B ping-pong, {cores}"),
        );
    }
    a.row("DMA 8 B post→completion", &dma, &rtt, us, "≤ 1.30 (raw TCP 8 B round trip");
    let _ = ep.close();
    Ok(())
}
