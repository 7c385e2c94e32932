//! No import cycle between the files of this crate's `src`: the check of the CPU libcuda's
//! `tests/layering.rs`, run on this crate (it reads `CARGO_MANIFEST_DIR`).

#[path = "../../streamexec-libcuda/tests/layering.rs"]
mod layering;
