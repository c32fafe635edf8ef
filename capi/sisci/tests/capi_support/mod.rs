//! The parts of the C-ABI scenario, one file per area.

mod dma_intr;
mod handles;

pub(crate) use super::*;
pub(crate) use dma_intr::*;
pub(crate) use handles::*;
