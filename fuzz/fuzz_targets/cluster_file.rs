//! Fuzz target `cluster_file`: see `remora_node::fuzzing::cluster_file` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::cluster_file(data));
