//! Fuzz target `client_requests`: see `remora_node::fuzzing::client_requests` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::client_requests(data));
