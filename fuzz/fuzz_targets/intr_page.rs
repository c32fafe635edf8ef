//! Fuzz target `intr_page`: see `remora_node::fuzzing::intr_page` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::intr_page(data));
