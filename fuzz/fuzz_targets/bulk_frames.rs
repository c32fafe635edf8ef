//! Fuzz target `bulk_frames`: see `remora_node::fuzzing::bulk_frames` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::bulk_frames(data));
