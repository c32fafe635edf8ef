//! Fuzz target `scif_ring`: see `remora_node::fuzzing::scif_ring` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::scif_ring(data));
