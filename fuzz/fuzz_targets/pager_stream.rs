//! Fuzz target `pager_stream`: see `remora_node::fuzzing::pager_stream` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::pager_stream(data));
