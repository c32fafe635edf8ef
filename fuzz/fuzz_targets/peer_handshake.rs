//! Fuzz target `peer_handshake`: see `remora_node::fuzzing::peer_handshake` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::peer_handshake(data));
