//! The worker's SCIF operations. A world is a connection between an endpoint of node A
//! (accepted from a listener) and one of node B, each with a 64 KiB window; messages go
//! both ways and RMA (`scif_writeto`, `scif_readfrom`, `scif_vwriteto`, `scif_vreadfrom`)
//! runs from B, every byte checked where it lands. A failure the API reports ends the
//! world; it is made again between another pair of nodes.

use super::ctx::{now_ms, Ctx};
use super::rng::{differing, pattern};
use remora_scif::{Endpoint, PortId, Prot, RmaFlags, Scif, UserRegion};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The limit of a call that waits for the other side.
const WAIT: Duration = Duration::from_secs(5);
/// The windows' size.
const WIN: usize = 64 << 10;
/// Where each side registers its window.
const WIN_OFF: u64 = 1 << 20;

/// The worker's two window buffers, made once (registration moves them into shared
/// memory in place; a new connection registers the same memory again).
fn buffers() -> (UserRegion, UserRegion) {
    static B: OnceLock<(UserRegion, UserRegion)> = OnceLock::new();
    *B.get_or_init(|| {
        let leak = || {
            let v = Box::leak(vec![0u8; WIN + 4096].into_boxed_slice());
            let start = (4096 - (v.as_ptr() as usize % 4096)) % 4096;
            UserRegion::from_static(&mut v[start..start + WIN])
        };
        (leak(), leak())
    })
}

/// One SCIF world: `ea` on node A, `eb` on node B, connected, windows registered.
pub(crate) struct ScifWorld {
    ea: Endpoint,
    eb: Endpoint,
    listener: Endpoint,
    wa: UserRegion,
    wb: UserRegion,
}

type Step = Result<(), (&'static str, String)>;

fn at<T, E: std::fmt::Debug>(api: &'static str, r: Result<T, E>) -> Result<T, (&'static str, String)> {
    r.map_err(|e| (api, format!("{e:?}")))
}

impl ScifWorld {
    /// Close the endpoints; errors (a dead node) are expected and ignored.
    pub(crate) fn teardown(self) {
        let _ = self.eb.close();
        let _ = self.ea.close();
        let _ = self.listener.close();
    }
}

fn build(cx: &mut Ctx) -> Result<ScifWorld, (&'static str, String)> {
    let (a, b) = cx.pair();
    let sa = Scif::with_config(cx.cfg(a));
    let sb = Scif::with_config(cx.cfg(b));
    let listener = at("scif_open", cx.call("scif.open", WAIT, || Endpoint::open(&sa)))?;
    let port = at("scif_bind", cx.call("scif.bind", WAIT, || listener.bind(0)))?;
    at("scif_listen", cx.call("scif.listen", WAIT, || listener.listen(4)))?;
    let eb = at("scif_open", cx.call("scif.open", WAIT, || Endpoint::open(&sb)))?;
    let connecting = std::thread::spawn(move || eb.connect(PortId { node: a, port }).map(|_| eb));
    let t = Instant::now();
    let accepted = cx.call("scif.accept", WAIT, || loop {
        match listener.accept(false) {
            Err(remora_scif::Error::Again) if t.elapsed() < WAIT && !connecting.is_finished() => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(remora_scif::Error::Again) if t.elapsed() < WAIT => {
                // The connect ended: one more look, then its answer decides.
                std::thread::sleep(Duration::from_millis(20));
                break listener.accept(false);
            }
            other => break other,
        }
    });
    let eb = match cx.call("scif.connect", WAIT, || connecting.join()) {
        Ok(r) => r.map_err(|e| ("scif_connect", format!("{e:?}"))),
        Err(_) => Err(("scif_connect", "Panicked".to_string())),
    };
    let (ea, eb) = match (accepted, eb) {
        (Ok((ea, _)), Ok(eb)) => (ea, eb),
        (acc, con) => {
            let _ = listener.close();
            if let Ok((ea, _)) = acc {
                let _ = ea.close();
            }
            return Err(match con {
                Ok(eb) => {
                    let _ = eb.close();
                    ("scif_accept", "no connection came".into())
                }
                Err(e) => e,
            });
        }
    };
    let (wa, wb) = buffers();
    let w = ScifWorld { ea, eb, listener, wa, wb };
    let reg = cx.call("scif.register", WAIT, || {
        w.ea.register(wa, WIN_OFF, Prot::RW, true).and_then(|_| w.eb.register(wb, WIN_OFF, Prot::RW, true))
    });
    if let Err(e) = reg {
        w.teardown();
        return Err(("scif_register", format!("{e:?}")));
    }
    Ok(w)
}

fn check(cx: &mut Ctx, op: &str, from: u64, got: &[u8], want: &[u8], off: usize) {
    let bad = differing(got, want);
    if bad > 0 {
        let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
        cx.corrupt(op, from, bad, format!("offset={off} len={} first_bad_at={first}", want.len()));
    }
}

/// Send `len` bytes from `tx` and take them at `rx` (non-blocking takes until a deadline:
/// the message must come whole on a live connection).
fn message(cx: &mut Ctx, tx: &Endpoint, rx: &Endpoint, op: &'static str) -> Step {
    let len = cx.rng.urange(1, 2049);
    let data = pattern(cx.next_key(), 0, len);
    let from = now_ms();
    let sent = at("scif_send", cx.call("scif.send", WAIT, || tx.send(&data, true)))?;
    let mut got = vec![0u8; sent];
    let mut have = 0;
    let t = Instant::now();
    cx.call("scif.recv", WAIT, || {
        while have < sent && t.elapsed() < WAIT {
            match rx.recv(&mut got[have..], false) {
                Ok(0) => std::thread::sleep(Duration::from_micros(200)),
                Ok(n) => have += n,
                Err(e) => return Err(("scif_recv", format!("{e:?}"))),
            }
        }
        Ok(())
    })?;
    if have < sent {
        cx.lost(op, from, format!("got {have} of {sent} bytes"));
        return Err(("scif_recv", "NothingCame".into()));
    }
    check(cx, op, from, &got, &data[..sent], 0);
    cx.count(op);
    Ok(())
}

/// One RMA from B, checked in the window where it lands.
fn rma(cx: &mut Ctx, w: &ScifWorld, kind: u64) -> Step {
    let len = cx.rng.urange(1, 16 << 10);
    let (ra, rb) = (cx.rng.urange(0, WIN - len), cx.rng.urange(0, WIN - len));
    let data = pattern(cx.next_key(), ra, len);
    let from = now_ms();
    let (a_off, b_off) = (WIN_OFF + ra as u64, WIN_OFF + rb as u64);
    let mut got = vec![0u8; len];
    let flags = RmaFlags::default();
    let op = match kind {
        0 => {
            at("window.write", w.wb.write(rb, &data))?;
            at("scif_writeto", cx.call("scif.writeto", WAIT, || w.eb.write_to(b_off, len, a_off, flags)))?;
            at("window.read", w.wa.read(ra, &mut got))?;
            "scif.writeto"
        }
        1 => {
            at("window.write", w.wa.write(ra, &data))?;
            at("scif_readfrom", cx.call("scif.readfrom", WAIT, || w.eb.read_from(b_off, len, a_off, flags)))?;
            at("window.read", w.wb.read(rb, &mut got))?;
            "scif.readfrom"
        }
        2 => {
            at("scif_vwriteto", cx.call("scif.vwriteto", WAIT, || w.eb.vwrite_to(&data, a_off, flags)))?;
            at("window.read", w.wa.read(ra, &mut got))?;
            "scif.vwriteto"
        }
        _ => {
            at("window.write", w.wa.write(ra, &data))?;
            at(
                "scif_vreadfrom",
                cx.call("scif.vreadfrom", WAIT, || w.eb.vread_from(&mut got, a_off, flags)),
            )?;
            "scif.vreadfrom"
        }
    };
    check(cx, op, from, &got, &data, ra);
    cx.count(op);
    Ok(())
}

/// One SCIF operation: (re)make the world when there is none (now and then anyway), then
/// one random operation on it.
pub(crate) fn step(cx: &mut Ctx, world: &mut Option<ScifWorld>) {
    if world.is_some() && cx.rng.chance(3) {
        if let Some(w) = world.take() {
            cx.call("scif.teardown", Duration::from_secs(10), || w.teardown());
            cx.count("scif.remake");
        }
    }
    if world.is_none() {
        match build(cx) {
            Ok(w) => {
                *world = Some(w);
                cx.count("scif.build");
            }
            Err((api, e)) => {
                cx.failed(api, &e);
                std::thread::sleep(Duration::from_millis(50));
                return;
            }
        }
    }
    let Some(w) = world.as_ref() else { return };
    let r = match cx.rng.range(0, 6) {
        0 => message(cx, &w.eb, &w.ea, "scif.msg_b_to_a"),
        1 => message(cx, &w.ea, &w.eb, "scif.msg_a_to_b"),
        k => rma(cx, w, k - 2),
    };
    if let Err((api, e)) = r {
        cx.failed(api, &e);
        if let Some(w) = world.take() {
            cx.call("scif.teardown", Duration::from_secs(10), || w.teardown());
        }
    }
}
