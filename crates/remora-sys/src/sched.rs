//! The scheduling class of a daemon's event-loop thread, and of a process's background
//! helper threads.
//!
//! A node daemon's runtime thread is one hop of every request, of every SCIF message it
//! relays to another host and of every interrupt triggered across hosts. Its work per wake
//! is short, but at the ordinary weight each wake can wait behind the programs that keep a
//! small machine's cores busy (pollers, compilers): measured 20-40 µs per hop on two cores.
//! [`urgent_event_loop`] gives the thread the highest CPU share (nice -20), as
//! [`crate::sync::urgent_thread`] does for the DSM pager, but with `SCHED_RESET_ON_FORK`:
//! the threads it starts later (the DMA engine's workers, which spin; the bulk flows,
//! which stream; the runtime's blocking pool) start at the ordinary weight instead of
//! inheriting its priority.
//!
//! Also [`own_pid`]: this process's id without a system call each time (RMA tickets name
//! their owner by it).

#![allow(unsafe_code)] // this file is part of the unsafe layer: every block has a SAFETY comment

use std::ffi::c_int;

const SCHED_OTHER: c_int = 0;
const SCHED_BATCH: c_int = 3;
const SCHED_RESET_ON_FORK: c_int = 0x4000_0000;

#[repr(C)]
struct SchedParam {
    sched_priority: c_int,
}

unsafe extern "C" {
    fn sched_setscheduler(pid: c_int, policy: c_int, param: *const SchedParam) -> c_int;
    fn sched_getscheduler(pid: c_int) -> c_int;
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> c_int;
}

/// This process's id, 0 until first asked (and again in a child of `fork`).
static PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// This process's id, asked of the kernel once (and once again in each child of `fork`,
/// which a handler registered at the first call tells). `getpid` is a system call in glibc
/// (since 2.25), some 100 ns in a virtual machine, and an RMA takes the id every time.
pub fn own_pid() -> u32 {
    match PID.load(std::sync::atomic::Ordering::Relaxed) {
        0 => ask_pid(),
        p => p,
    }
}

#[cold]
fn ask_pid() -> u32 {
    static ATFORK: std::sync::Once = std::sync::Once::new();
    ATFORK.call_once(|| {
        unsafe extern "C" fn forget() {
            PID.store(0, std::sync::atomic::Ordering::Relaxed);
        }
        // SAFETY: registers a handler the C library runs in the child right after `fork`;
        // it only stores to an atomic, which is safe there (async-signal-safe, no lock).
        unsafe { pthread_atfork(None, None, Some(forget)) };
    });
    let p = rustix::process::getpid().as_raw_nonzero().get() as u32;
    PID.store(p, std::sync::atomic::Ordering::Relaxed);
    p
}

/// Make the calling thread urgent (nice -20) without passing that on to the threads it
/// starts afterwards (`SCHED_RESET_ON_FORK`). Does nothing with `REMORA_URGENT=0`. Returns
/// whether the thread is now urgent (not without the privilege: root, or an `RLIMIT_NICE`
/// that allows it).
///
/// The thread must never spin with `sched_yield` (the scheduler hands the core straight
/// back to it); an event loop that blocks in `epoll_wait` is the intended user.
pub fn urgent_event_loop() -> bool {
    if !remora_config::Config::get().urgent {
        return false;
    }
    let param = SchedParam { sched_priority: 0 };
    // SAFETY: plain libc call on the calling thread (pid 0) with a valid parameter struct
    // that outlives the call; it only changes this thread's scheduling flags.
    let reset = unsafe { sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &param) } == 0;
    if !reset {
        // Without the reset, the engine's spinning workers would inherit -20: stay as is.
        return false;
    }
    let tid = rustix::thread::gettid();
    rustix::process::setpriority_process(Some(tid), -20).is_ok()
}

/// Put the calling thread in the batch class (`SCHED_BATCH`, same weight): its wake-ups
/// never preempt the thread running on the core it is woken to. For a helper thread
/// that a call wakes to do work in the background (the DSM's flow requests): at the
/// ordinary class, on a busy core it took the core from the thread that woke it at
/// once, and the whole background job (its request, the daemons' dial) ran before the
/// call could return. In the batch class it runs on an idle core at once, else once the
/// core is given up (the calling thread blocks) or at the next tick. Only a thread of the
/// ordinary class moves: one that inherited a real-time class from a real-time program
/// keeps it (in the batch class it would wait for the program's pollers to block, and a
/// fault may wait for it). Returns whether the class was changed (any thread of the
/// ordinary class may move itself to it).
pub fn background_thread() -> bool {
    // SAFETY: plain libc call on the calling thread; it only reads its scheduling class.
    if unsafe { sched_getscheduler(0) } & !SCHED_RESET_ON_FORK != SCHED_OTHER {
        return false;
    }
    let param = SchedParam { sched_priority: 0 };
    // SAFETY: plain libc call on the calling thread (pid 0) with a valid parameter struct
    // that outlives the call; it only changes this thread's scheduling class.
    unsafe { sched_setscheduler(0, SCHED_BATCH, &param) == 0 }
}

/// The most CPUs a [`Cpus`] set names.
pub const MAX_CPUS: usize = rustix::thread::CpuSet::MAX_CPU;

/// A set of CPUs a thread may run on.
#[derive(Clone, Debug)]
pub struct Cpus(rustix::thread::CpuSet);

impl Cpus {
    /// How many CPUs the set names.
    pub fn count(&self) -> u32 {
        self.0.count()
    }

    /// Whether CPU `cpu` is in the set.
    pub fn has(&self, cpu: usize) -> bool {
        cpu < MAX_CPUS && self.0.is_set(cpu)
    }
}

/// The CPUs the calling thread may run on (`sched_getaffinity`).
///
/// # Errors
/// The errno of `sched_getaffinity`.
pub fn thread_cpus() -> std::io::Result<Cpus> {
    Ok(Cpus(rustix::thread::sched_getaffinity(None)?))
}

/// Keep the calling thread on CPU `cpu` alone (`sched_setaffinity`).
///
/// # Errors
/// `EINVAL` for a CPU past [`MAX_CPUS`]; the errno of `sched_setaffinity` (a CPU outside
/// the thread's cpuset).
pub fn hold_thread_to(cpu: usize) -> std::io::Result<()> {
    if cpu >= MAX_CPUS {
        return Err(std::io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
    }
    let mut one = rustix::thread::CpuSet::new();
    one.set(cpu);
    Ok(rustix::thread::sched_setaffinity(None, &one)?)
}

/// Let the calling thread run on the CPUs of `cpus` again (`sched_setaffinity`).
///
/// # Errors
/// The errno of `sched_setaffinity`.
pub fn let_thread_run_on(cpus: &Cpus) -> std::io::Result<()> {
    Ok(rustix::thread::sched_setaffinity(None, &cpus.0)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_moves_itself_to_the_batch_class() {
        std::thread::spawn(|| {
            assert!(background_thread());
            // SAFETY: plain libc call on the calling thread.
            assert_eq!(unsafe { sched_getscheduler(0) }, SCHED_BATCH);
        })
        .join()
        .unwrap();
        // SAFETY: plain libc call on the calling thread.
        assert_eq!(unsafe { sched_getscheduler(0) }, SCHED_OTHER, "only the calling thread moved");
    }

    #[test]
    fn a_real_time_thread_keeps_its_class() {
        const SCHED_FIFO: c_int = 1;
        std::thread::spawn(|| {
            let param = SchedParam { sched_priority: 1 };
            // SAFETY: plain libc call on the calling thread with a valid parameter struct.
            if unsafe { sched_setscheduler(0, SCHED_FIFO, &param) } != 0 {
                return eprintln!("skipped: this process may not use SCHED_FIFO");
            }
            assert!(!background_thread());
            // SAFETY: plain libc call on the calling thread.
            assert_eq!(unsafe { sched_getscheduler(0) }, SCHED_FIFO);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn threads_started_later_do_not_inherit_the_priority() {
        // Run in a thread of its own: the test harness's thread keeps its weight.
        std::thread::spawn(|| {
            let tid = rustix::thread::gettid();
            if !urgent_event_loop() {
                eprintln!("SKIP: no privilege to raise a thread's priority");
                return;
            }
            assert_eq!(rustix::process::getpriority_process(Some(tid)).unwrap(), -20);
            let child = std::thread::spawn(|| {
                rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
            })
            .join()
            .unwrap();
            assert_eq!(child, 0, "a thread started later runs at the ordinary weight");
        })
        .join()
        .unwrap();
    }
}
