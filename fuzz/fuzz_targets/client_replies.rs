//! Fuzz target `client_replies`: see `remora_node::fuzzing::client_replies` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::client_replies(data));
