//! Fuzz target `ofi_messages`: see `remora_node::fuzzing::ofi_messages` for the decoder it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_node::fuzzing::ofi_messages(data));
