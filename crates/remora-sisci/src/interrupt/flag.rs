//! Flag interrupts (`SCIRegisterInterruptFlag`) and conditional interrupts
//! (`SCIEnableConditionalInterrupt`, `SCIDisableConditionalInterrupt`,
//! `SCIGetConditionalInterruptTrigCounter`).
//!
//! On Dolphin's hardware the adapter traps a store to the flag word. A Remora segment is
//! memory of this host that peers store to through ordinary maps, and no kernel mechanism
//! reports another process's store to a shared page. So a watcher thread of this process
//! looks at the word: while the interrupt is enabled it spins for `REMORA_SPIN_US` after
//! enabling and after every trigger, then sleeps on the word (a shared futex wait, woken
//! at once by a `FUTEX_WAKE` on the word and otherwise after a timeout that grows from
//! 50 µs to 1 ms), so it never spins without end; while disabled it sleeps on a condition
//! variable and costs nothing. A store that changes the word's value is one trigger;
//! stores between two looks count as one, and a store of the value the word already holds
//! is not seen. The calls that read the state (disable, the counter) look at the word
//! themselves first, so a store that landed before them is never missed.

use super::{Interrupt, InterruptCallback, LocalIntr};
use crate::{check_adapter, DepToken, Error, LocalSegment, Result};
use remora_sys::sync::{futex_wait, futex_wake_all};
use remora_sys::{AsFd, MapOptions, Mapping};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// The first and the longest sleep between two looks at the word while enabled.
const FIRST_SLEEP: Duration = Duration::from_micros(50);
const LONGEST_SLEEP: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct State {
    /// Stores trigger (always, for a flag interrupt that is not conditional).
    enabled: bool,
    /// The word's value last accounted for.
    base: u32,
    /// Triggers since the last enable or disable.
    count: u64,
    /// The watcher should spin again (just enabled).
    kicked: bool,
    /// The interrupt is gone: the watcher ends.
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    map: Mapping,
    off: usize,
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn word(&self) -> &AtomicU32 {
        self.map.atomic_u32(self.off).expect("the flag word lies inside its mapping")
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Account for a store seen now, if enabled: one trigger of `intr`.
    fn observe(&self, st: &mut State, intr: &LocalIntr) -> bool {
        let now = self.word().load(Ordering::SeqCst);
        if !st.enabled || now == st.base {
            return false;
        }
        st.base = now;
        st.count += 1;
        // A removed interrupt's trigger fails, which is what its waiters expect.
        let _ = intr.core.page().trigger();
        true
    }
}

/// What makes an interrupt a flag interrupt: the watched word, its state, the watcher.
#[derive(Debug)]
pub(super) struct FlagWatch {
    shared: Arc<Shared>,
    conditional: bool,
    /// Keeps the segment from being removed until the interrupt is.
    segment: Mutex<Option<DepToken>>,
}

impl FlagWatch {
    /// Stop the watcher (the interrupt is removed or dropped; it ends at its next look)
    /// and release the segment.
    pub(super) fn stop(&self) {
        self.segment.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        futex_wake_all(self.shared.word());
    }
}

/// The watcher thread: block while disabled; while enabled, spin, then sleep on the word.
fn watch(shared: Arc<Shared>, intr: Weak<LocalIntr>, spin: Duration) {
    let mut spin_until = Instant::now() + spin;
    let mut sleep = FIRST_SLEEP;
    loop {
        {
            let mut st = shared.lock();
            while !st.enabled && !st.stop {
                st = shared.wake.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.stop {
                return;
            }
            if std::mem::take(&mut st.kicked) {
                spin_until = Instant::now() + spin;
                sleep = FIRST_SLEEP;
            }
        }
        // Held only for this look (never while blocked, so that dropping the last handle
        // ends the watcher), and released after the lock: its drop takes the lock.
        let Some(inner) = intr.upgrade() else { return };
        if inner.core.page().is_removed() {
            return;
        }
        let base = {
            let mut st = shared.lock();
            if shared.observe(&mut st, &inner) {
                spin_until = Instant::now() + spin;
                sleep = FIRST_SLEEP;
            }
            st.base
        };
        drop(inner);
        let word = shared.word();
        if Instant::now() < spin_until {
            let mut n = 0u32;
            while word.load(Ordering::Relaxed) == base {
                n = n.wrapping_add(1);
                if n.is_multiple_of(64) && Instant::now() >= spin_until {
                    break;
                }
                std::hint::spin_loop();
            }
        } else {
            // Returns at once if the word no longer holds `base`.
            futex_wait(word, base, Some(sleep));
            sleep = (sleep * 2).min(LONGEST_SLEEP);
        }
    }
}

impl Interrupt {
    /// `SCIRegisterInterruptFlag`: an interrupt (auto-numbered, of `segment`'s descriptor)
    /// triggered by stores to the 32-bit word at `offset` of `segment`, which peers write
    /// through their ordinary maps of it. With `conditional` (`SCI_FLAG_CONDITIONAL_INTERRUPT`)
    /// it starts disabled and stores trigger only between
    /// [`Interrupt::enable_conditional`] and [`Interrupt::disable_conditional`]; without, every
    /// store triggers. Waits, callbacks and `counting` work as for [`Interrupt::create`]. A
    /// store that changes the word's value is one trigger (see the module documentation);
    /// a store from another host triggers once the DSM brings it here (within its flush
    /// bound, at once after the writer's flush). The segment stays busy (its remove gives [`Error::Busy`])
    /// until the interrupt is removed.
    ///
    /// # Errors
    /// `SCIRegisterInterruptFlag`: [`Error::OffsetAlignment`] when `offset` is not a
    /// multiple of 4; [`Error::OutOfRange`] when the word is not inside the segment;
    /// [`Error::IllegalOperation`] for a segment without memory;
    /// [`Error::IllegalParameter`] for a removed segment; [`Error::NoSuchAdapter`].
    pub fn register_flag(
        segment: &LocalSegment,
        adapter: u32,
        offset: usize,
        conditional: bool,
        counting: bool,
        callback: Option<InterruptCallback>,
    ) -> Result<Interrupt> {
        check_adapter(adapter)?;
        let seg = segment.live()?;
        if !offset.is_multiple_of(4) {
            return Err(Error::OffsetAlignment);
        }
        if offset.checked_add(4).is_none_or(|end| end > segment.size()) {
            return Err(Error::OutOfRange);
        }
        let map = {
            let memfd = seg.memfd.read().unwrap_or_else(|p| p.into_inner());
            let memfd = memfd.as_ref().ok_or(Error::IllegalOperation)?;
            let page = remora_sys::page_size();
            let start = offset - offset % page;
            Mapping::new(memfd.as_fd(), start as u64, page, MapOptions::default())?
        };
        let off = offset % remora_sys::page_size();
        let base = map.atomic_u32(off).ok_or(Error::OutOfRange)?.load(Ordering::SeqCst);
        let intr = Interrupt::create_with(&seg.desc, adapter, None, counting, false, callback)?;
        let shared = Arc::new(Shared {
            map,
            off,
            state: Mutex::new(State {
                enabled: !conditional,
                base,
                count: 0,
                kicked: !conditional,
                stop: false,
            }),
            wake: Condvar::new(),
        });
        let watch_shared = shared.clone();
        let weak = Arc::downgrade(&intr.inner);
        let spin = crate::spin();
        std::thread::Builder::new()
            .name("remora-flag-intr".into())
            .spawn(move || watch(watch_shared, weak, spin))
            .map_err(Error::from)?;
        let flag = FlagWatch { shared, conditional, segment: Mutex::new(Some(seg.deps.token())) };
        if let Err(unused) = intr.inner.flag.set(flag) {
            unused.stop();
        }
        Ok(intr)
    }

    fn flag(&self) -> Result<&FlagWatch> {
        self.inner.core.live()?;
        self.inner.flag.get().ok_or(Error::IllegalOperation)
    }

    fn conditional_flag(&self) -> Result<&FlagWatch> {
        let f = self.flag()?;
        if !f.conditional {
            return Err(Error::IllegalOperation);
        }
        Ok(f)
    }

    /// `SCIEnableConditionalInterrupt`: stores to the flag word trigger from now on; the
    /// trigger counter restarts at 0. When the word changed since the interrupt was
    /// registered or last disabled (a store came while disabled, which no trigger
    /// reported), the interrupt stays disabled, the change counts as seen (so the next
    /// call succeeds unless another store comes) and the call fails with
    /// [`Error::CondIntRace`]: look at the word, then enable again. Enabling an enabled
    /// interrupt restarts its counter.
    ///
    /// # Errors
    /// `SCIEnableConditionalInterrupt`: [`Error::CondIntRace`] (above);
    /// [`Error::IllegalOperation`] for an interrupt that is not a conditional flag
    /// interrupt; [`Error::IllegalParameter`] for a removed one.
    pub fn enable_conditional(&self) -> Result<()> {
        let f = self.conditional_flag()?;
        let sh = &f.shared;
        let mut st = sh.lock();
        if st.enabled {
            sh.observe(&mut st, &self.inner);
        } else {
            let now = sh.word().load(Ordering::SeqCst);
            if now != st.base {
                st.base = now;
                return Err(Error::CondIntRace);
            }
        }
        st.enabled = true;
        st.count = 0;
        st.kicked = true;
        drop(st);
        sh.wake.notify_all();
        Ok(())
    }

    /// `SCIDisableConditionalInterrupt`: a store that landed before the call still
    /// triggers (the call looks at the word first); later ones do not. The trigger counter
    /// restarts at 0.
    ///
    /// # Errors
    /// `SCIDisableConditionalInterrupt`: [`Error::IllegalOperation`] for an interrupt that
    /// is not a conditional flag interrupt; [`Error::IllegalParameter`] for a removed one.
    pub fn disable_conditional(&self) -> Result<()> {
        let f = self.conditional_flag()?;
        let sh = &f.shared;
        let mut st = sh.lock();
        sh.observe(&mut st, &self.inner);
        st.base = sh.word().load(Ordering::SeqCst);
        st.enabled = false;
        st.count = 0;
        Ok(())
    }

    /// `SCIGetConditionalInterruptTrigCounter`: the triggers since the last enable or
    /// disable (since registration for a flag interrupt that is not conditional),
    /// including a store that landed before the call.
    ///
    /// # Errors
    /// `SCIGetConditionalInterruptTrigCounter`: [`Error::Overflow`] when the count does not
    /// fit 32 bits; [`Error::IllegalOperation`] for an interrupt that is not a flag
    /// interrupt; [`Error::IllegalParameter`] for a removed one.
    pub fn trigger_counter(&self) -> Result<u32> {
        let f = self.flag()?;
        let mut st = f.shared.lock();
        f.shared.observe(&mut st, &self.inner);
        counter_value(st.count)
    }

    /// Whether stores to the flag word trigger now (`None` for an interrupt that is not a
    /// flag interrupt).
    pub fn flag_enabled(&self) -> Option<bool> {
        self.inner.flag.get().map(|f| f.shared.lock().enabled)
    }
}

/// The counter as the C call reports it.
fn counter_value(count: u64) -> Result<u32> {
    u32::try_from(count).map_err(|_| Error::Overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_past_32_bits_overflow() {
        assert_eq!(counter_value(7), Ok(7));
        assert_eq!(counter_value(u64::from(u32::MAX)), Ok(u32::MAX));
        assert_eq!(counter_value(u64::from(u32::MAX) + 1), Err(Error::Overflow));
    }
}
