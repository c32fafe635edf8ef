//! The receive queue's posted descriptors, oldest first: a ring of slots that a post fills
//! in place. A posted receive is some two hundred bytes (its buffers, where they lie in
//! pieces); built on the stack and moved into a queue it cost a call to `memcpy` on every
//! post and another on every completion, and the first load of the moved bytes waited for
//! the copy's stores.

use crate::cache::Taken;
use crate::few::Few;
use crate::layout::Chunk;
use remora_sisci::UserRegion;

/// A posted receive.
#[derive(Debug, Clone, Default)]
pub(crate) struct Posted {
    pub(crate) addr: usize,
    pub(crate) handle: u32,
    /// The descriptor's control segment, to complete it without looking its memory up.
    pub(crate) ctl: UserRegion,
    /// [`crate::nic::NicInner::mem_epoch`] when `ctl` was found registered.
    pub(crate) epoch: u64,
    pub(crate) total: u32,
    /// Where its buffers lie in the NIC's pieces (described to the peer).
    pub(crate) chunks: Few<Chunk, 2>,
    /// Its buffers, for a payload that arrives inside the completion.
    pub(crate) bufs: Few<UserRegion, 4>,
}

impl Posted {
    /// The receive at `addr` (memory `handle`), read as `t`.
    pub(crate) fn of(addr: usize, handle: u32, t: &Taken) -> Posted {
        let mut p = Posted::default();
        p.fill(addr, handle, t);
        p
    }

    /// Become the receive at `addr` (memory `handle`), read as `t`, in place.
    pub(crate) fn fill(&mut self, addr: usize, handle: u32, t: &Taken) {
        self.addr = addr;
        self.handle = handle;
        self.ctl = t.ctl;
        self.epoch = t.epoch;
        self.total = t.total;
        self.chunks.assign(&t.chunks);
        match &t.local {
            Some(l) => self.bufs.assign(l),
            None => self.bufs.clear(),
        }
    }
}

/// Posted receives, oldest first.
#[derive(Debug, Default)]
pub(crate) struct PostedQ {
    slots: Vec<Posted>,
    head: usize,
    len: usize,
}

impl PostedQ {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th oldest.
    pub(crate) fn get(&self, i: usize) -> Option<&Posted> {
        if i >= self.len {
            return None;
        }
        let n = self.slots.len();
        let at = if self.head + i >= n { self.head + i - n } else { self.head + i };
        self.slots.get(at)
    }

    /// The oldest.
    pub(crate) fn front(&self) -> Option<&Posted> {
        self.get(0)
    }

    /// Forget the oldest.
    pub(crate) fn advance(&mut self) {
        if self.len > 0 {
            self.head += 1;
            if self.head == self.slots.len() {
                self.head = 0;
            }
            self.len -= 1;
        }
    }

    /// Take the oldest out (a copy: for the rare paths that complete it on the spot).
    pub(crate) fn pop_front(&mut self) -> Option<Posted> {
        let p = self.front().cloned();
        self.advance();
        p
    }

    /// Post the descriptor at `addr` (memory `handle`), read as `t`, after the others.
    pub(crate) fn push(&mut self, addr: usize, handle: u32, t: &Taken) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let n = self.slots.len();
        let at = if self.head + self.len >= n { self.head + self.len - n } else { self.head + self.len };
        if let Some(slot) = self.slots.get_mut(at) {
            slot.fill(addr, handle, t);
            self.len += 1;
        }
    }

    /// Room for twice as many, the oldest first again.
    #[cold]
    fn grow(&mut self) {
        let n = self.slots.len();
        self.slots.rotate_left(self.head);
        self.head = 0;
        self.slots.resize_with((n * 2).max(16), Posted::default);
    }
}

#[cfg(test)]
mod tests {
    use super::PostedQ;
    use crate::cache::Taken;

    #[test]
    fn stays_in_order_across_growth_and_wrap() {
        let mut q = PostedQ::default();
        let t = Taken::default();
        let mut next = 0usize;
        let mut oldest = 0usize;
        for round in 0..40 {
            for _ in 0..(round % 7 + 3) {
                q.push(next * 64, 1, &t);
                next += 1;
            }
            for _ in 0..(round % 5 + 1) {
                assert_eq!(q.front().map(|p| p.addr), Some(oldest * 64));
                q.advance();
                oldest += 1;
            }
            for i in 0..q.len() {
                assert_eq!(q.get(i).map(|p| p.addr), Some((oldest + i) * 64));
            }
        }
        while let Some(p) = q.pop_front() {
            assert_eq!(p.addr, oldest * 64);
            oldest += 1;
        }
        assert_eq!(oldest, next);
        assert!(q.is_empty());
    }
}
