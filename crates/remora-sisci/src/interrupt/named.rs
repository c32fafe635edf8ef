//! Named interrupts (`SCICreateNamedInterrupt`, whose prototype Dolphin does not publish):
//! a name stands for a fixed interrupt number, computed the same way everywhere, so that a
//! process of any node connects to it with `SCIConnectInterrupt` and that number.

use super::{Interrupt, InterruptCallback};
use crate::{Descriptor, Error, Result};

/// The first number of the range names map to: a named interrupt's number is
/// `NAMED_INTNO_BASE | (FNV-1a-32(name) & 0x1fff_ffff)`, below the numbers the node
/// chooses itself (from `0x4000_0000`).
pub const NAMED_INTNO_BASE: u32 = 0x2000_0000;

/// The interrupt number of `name` (the bytes of the name, without a terminating NUL):
/// the 32-bit FNV-1a hash of the bytes, its low 29 bits, ORed with [`NAMED_INTNO_BASE`].
/// Two names may map to one number; the second to be created then gets
/// [`Error::IntnoUsed`].
pub fn named_interrupt_number(name: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    NAMED_INTNO_BASE | (h & 0x1fff_ffff)
}

impl Interrupt {
    /// `SCICreateNamedInterrupt` (Remora's choice of signature: Dolphin publishes only the
    /// name): [`Interrupt::create_with`] with the number [`named_interrupt_number`] gives
    /// `name`. Others connect with [`crate::RemoteInterrupt::connect`] and that number;
    /// `shared` lets several processes of the node create the same name.
    ///
    /// # Errors
    /// `SCICreateNamedInterrupt`: [`Error::IllegalParameter`] for an empty name or one with
    /// a NUL byte; [`Error::IntnoUsed`] when the name's number is taken (by the same name
    /// created without `shared`, or by another name or a fixed number that maps to it);
    /// [`Error::NoSuchAdapter`].
    pub fn create_named(
        desc: &Descriptor,
        adapter: u32,
        name: &[u8],
        counting: bool,
        shared: bool,
        callback: Option<InterruptCallback>,
    ) -> Result<Interrupt> {
        if name.is_empty() || name.contains(&0) {
            return Err(Error::IllegalParameter("an interrupt name is non-empty and has no NUL byte".into()));
        }
        Interrupt::create_with(desc, adapter, Some(named_interrupt_number(name)), counting, shared, callback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_fixed_numbers_in_their_range() {
        // FNV-1a-32 of "a" is 0xe40c292c; of "" the offset basis 0x811c9dc5.
        assert_eq!(named_interrupt_number(b"a"), NAMED_INTNO_BASE | (0xe40c_292c & 0x1fff_ffff));
        assert_eq!(named_interrupt_number(b""), NAMED_INTNO_BASE | (0x811c_9dc5 & 0x1fff_ffff));
        let n = named_interrupt_number(b"gpu-doorbell");
        assert_eq!(n, named_interrupt_number(b"gpu-doorbell"));
        assert!((NAMED_INTNO_BASE..0x4000_0000).contains(&n));
        assert_ne!(n, named_interrupt_number(b"gpu-doorbelm"));
    }
}
