//! Fuzz target `peer_frames`: see `remora_node::fuzzing::peer_frames` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::peer_frames(data));
