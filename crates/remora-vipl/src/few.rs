//! A short list kept inline: descriptors name one or two segments almost always, and the
//! data path must not allocate for them.

/// Up to `N` values inline, more on the heap.
#[derive(Debug)]
pub(crate) struct Few<T: Copy + Default, const N: usize> {
    inline: [T; N],
    len: usize,
    spill: Vec<T>,
}

impl<T: Copy + Default, const N: usize> Default for Few<T, N> {
    fn default() -> Self {
        Few { inline: [T::default(); N], len: 0, spill: Vec::new() }
    }
}

impl<T: Copy + Default, const N: usize> Clone for Few<T, N> {
    fn clone(&self) -> Self {
        // The inline values as they are; the heap only when something spilled there.
        let spill = if self.spill.is_empty() { Vec::new() } else { self.spill.clone() };
        Few { inline: self.inline, len: self.len, spill }
    }
}

impl<T: Copy + Default, const N: usize> Few<T, N> {
    /// Become a copy of `other`, in place (the heap only when `other` spilled there).
    pub(crate) fn assign(&mut self, other: &Few<T, N>) {
        self.inline = other.inline;
        self.len = other.len;
        self.spill.clear();
        if !other.spill.is_empty() {
            self.spill.extend_from_slice(&other.spill);
        }
    }

    /// Empty it (keeping what it allocated).
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.spill.clear();
    }

    /// Add `v` at the end.
    pub(crate) fn push(&mut self, v: T) {
        if self.spill.is_empty() {
            if self.len < N {
                self.inline[self.len] = v;
                self.len += 1;
                return;
            }
            self.spill.extend_from_slice(&self.inline[..self.len]);
        }
        self.spill.push(v);
    }

    /// The values, in order (inlined into its callers: the short send and receive look
    /// at a descriptor's one buffer through it, and a call cost them its saves and loads).
    #[inline(always)]
    pub(crate) fn as_slice(&self) -> &[T] {
        if self.spill.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }
}

impl<T: Copy + Default, const N: usize> std::ops::Deref for Few<T, N> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::Few;

    #[test]
    fn values_stay_in_order_past_the_inline_room() {
        let mut f: Few<u32, 2> = Few::default();
        assert!(f.is_empty());
        for i in 0..5 {
            f.push(i);
        }
        assert_eq!(&f[..], &[0, 1, 2, 3, 4]);
    }
}
