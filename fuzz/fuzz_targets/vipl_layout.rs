//! Fuzz target `vipl_layout`: see `remora_vipl::fuzzing::vipl_layout` for the layouts it drives.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| remora_vipl::fuzzing::vipl_layout(data));
