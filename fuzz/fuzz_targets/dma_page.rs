//! Fuzz target `dma_page`: see `remora_node::fuzzing::dma_page` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::dma_page(data));
