//! The worker's RSM operations. A world is an export of the worker's own memory on node A
//! (created, published under an id the node picks), imported from node B in explicit
//! barrier mode with a barrier; puts and gets from B inside the barrier, checked in the
//! export's memory, and signals both ways. A failure the API reports ends the world; it is
//! made again between another pair of nodes.

use super::ctx::{now_ms, Ctx};
use super::rng::{differing, pattern};
use remora_rsm::{
    Barrier, BarrierMode, BarrierType, Controller, CreateFlags, Error, ExportSegment, ImportSegment,
    Permission,
};
use remora_sys::user_memory::UserRegion;
use std::sync::OnceLock;
use std::time::Duration;

/// The limit of a call that waits for the other node.
const WAIT: Duration = Duration::from_secs(5);
/// The export's size.
const SIZE: usize = 64 << 10;

/// The worker's export memory, made once (an export moves it into shared memory in place;
/// its destroy gives it back, and the next world exports it again).
fn memory() -> UserRegion {
    static M: OnceLock<UserRegion> = OnceLock::new();
    *M.get_or_init(|| {
        let v = Box::leak(vec![0u8; SIZE + 4096].into_boxed_slice());
        let start = (4096 - (v.as_ptr() as usize % 4096)) % 4096;
        UserRegion::from_static(&mut v[start..start + SIZE])
    })
}

/// One RSM world: `export` on node A, `import` of it (with `bar`) on node B.
pub(crate) struct RsmWorld {
    bar: Barrier,
    import: ImportSegment,
    export: ExportSegment,
    mem: UserRegion,
}

type Step = Result<(), (&'static str, String)>;

fn at<T, E: std::fmt::Debug>(api: &'static str, r: Result<T, E>) -> Result<T, (&'static str, String)> {
    r.map_err(|e| (api, format!("{e:?}")))
}

impl RsmWorld {
    /// Release everything, the import first; errors (a dead node) are expected and ignored.
    pub(crate) fn teardown(self) {
        let _ = self.bar.destroy();
        let _ = self.import.disconnect();
        let _ = self.export.unpublish();
        let _ = self.export.destroy();
    }
}

fn build(cx: &mut Ctx) -> Result<RsmWorld, (&'static str, String)> {
    let (a, b) = cx.pair();
    let (ca, cb) = (cx.cfg(a), cx.cfg(b));
    let ctl_a =
        at("rsm_get_controller", cx.call("rsm.controller", WAIT, || Controller::with_config("remora0", ca)))?;
    let ctl_b =
        at("rsm_get_controller", cx.call("rsm.controller", WAIT, || Controller::with_config("remora0", cb)))?;
    let mem = memory();
    let export = at(
        "rsm_memseg_export_create",
        cx.call("rsm.export_create", WAIT, || {
            ExportSegment::create_region(&ctl_a, mem, CreateFlags::default())
        }),
    )?;
    let id = match cx.call("rsm.publish", WAIT, || export.publish(0, None)) {
        Ok(id) => id,
        Err(e) => {
            let _ = export.destroy();
            return Err(("rsm_memseg_export_publish", format!("{e:?}")));
        }
    };
    let import = match cx
        .call("rsm.import_connect", WAIT, || ImportSegment::connect(&ctl_b, a, id, Permission::READ_WRITE))
    {
        Ok(i) => i,
        Err(e) => {
            let _ = export.destroy();
            return Err(("rsm_memseg_import_connect", format!("{e:?}")));
        }
    };
    let made = import.set_mode(BarrierMode::Explicit).and_then(|_| import.init_barrier(BarrierType::Node));
    match made {
        Ok(bar) => Ok(RsmWorld { bar, import, export, mem }),
        Err(e) => {
            let _ = import.disconnect();
            let _ = export.destroy();
            Err(("rsm_memseg_import_init_barrier", format!("{e:?}")))
        }
    }
}

fn check(cx: &mut Ctx, op: &str, from: u64, got: &[u8], want: &[u8], off: usize) {
    let bad = differing(got, want);
    if bad > 0 {
        let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
        cx.corrupt(op, from, bad, format!("offset={off} len={} first_bad_at={first}", want.len()));
    }
}

/// A random range of the export: up to 8 KiB.
fn range(cx: &mut Ctx) -> (usize, usize) {
    let off = cx.rng.urange(0, SIZE - 1);
    let len = cx.rng.urange(1, (SIZE - off).min(8192) + 1);
    (off, len)
}

/// B puts a pattern inside its barrier; once the close says every access completed, the
/// export's memory holds it.
fn put(cx: &mut Ctx, w: &RsmWorld) -> Step {
    let (off, len) = range(cx);
    let data = pattern(cx.next_key(), off, len);
    let from = now_ms();
    at("rsm_memseg_import_open_barrier", cx.call("rsm.open_barrier", WAIT, || w.bar.open()))?;
    let put = cx.call("rsm.put", WAIT, || w.import.put(off, &data));
    let closed = cx.call("rsm.close_barrier", WAIT, || w.bar.close());
    at("rsm_memseg_import_put", put)?;
    at("rsm_memseg_import_close_barrier", closed)?;
    let mut got = vec![0u8; len];
    at("export.read", w.mem.read(off, &mut got))?;
    check(cx, "rsm.put", from, &got, &data, off);
    cx.count("rsm.put");
    Ok(())
}

/// A writes its export's memory; B gets it inside its barrier.
fn get(cx: &mut Ctx, w: &RsmWorld) -> Step {
    let (off, len) = range(cx);
    let data = pattern(cx.next_key(), off, len);
    let from = now_ms();
    at("export.write", w.mem.write(off, &data))?;
    let mut got = vec![0u8; len];
    at("rsm_memseg_import_open_barrier", cx.call("rsm.open_barrier", WAIT, || w.bar.open()))?;
    let r = cx.call("rsm.get", WAIT, || w.import.get(off, &mut got));
    let closed = cx.call("rsm.close_barrier", WAIT, || w.bar.close());
    at("rsm_memseg_import_get", r)?;
    at("rsm_memseg_import_close_barrier", closed)?;
    check(cx, "rsm.get", from, &got, &data, off);
    cx.count("rsm.get");
    Ok(())
}

/// A signal one way (B to A, or A to B): the post succeeded, so the wait must see it.
fn signal(cx: &mut Ctx, w: &RsmWorld, to_export: bool) -> Step {
    let from = now_ms();
    let (op, waited) = if to_export {
        at("rsm_intr_signal_post", cx.call("rsm.signal_post", WAIT, || w.import.signal_post(false)))?;
        ("rsm.signal_to_export", cx.call("rsm.signal_wait", WAIT, || w.export.signal_wait(Some(WAIT))))
    } else {
        at("rsm_intr_signal_post", cx.call("rsm.signal_post", WAIT, || w.export.signal_post(false)))?;
        ("rsm.signal_to_import", cx.call("rsm.signal_wait", WAIT, || w.import.signal_wait(Some(WAIT))))
    };
    match waited {
        Ok(()) => cx.count(op),
        Err(Error::Timeout) => {
            cx.lost(op, from, String::new());
            return Err(("rsm_intr_signal_wait", "Timeout".into()));
        }
        Err(e) => return Err(("rsm_intr_signal_wait", format!("{e:?}"))),
    }
    Ok(())
}

/// One RSM operation: (re)make the world when there is none (now and then anyway), then
/// one random operation on it.
pub(crate) fn step(cx: &mut Ctx, world: &mut Option<RsmWorld>) {
    if world.is_some() && cx.rng.chance(3) {
        if let Some(w) = world.take() {
            cx.call("rsm.teardown", Duration::from_secs(10), || w.teardown());
            cx.count("rsm.remake");
        }
    }
    if world.is_none() {
        match build(cx) {
            Ok(w) => {
                *world = Some(w);
                cx.count("rsm.build");
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
        0 | 1 => put(cx, w),
        2 | 3 => get(cx, w),
        4 => signal(cx, w, true),
        _ => signal(cx, w, false),
    };
    if let Err((api, e)) = r {
        cx.failed(api, &e);
        if let Some(w) = world.take() {
            cx.call("rsm.teardown", Duration::from_secs(10), || w.teardown());
        }
    }
}
