//! No import cycle between the files of `src/` (the JIT's driver, the interpreter and the fault
//! texts used to import each other; `fault.rs` and `grid.rs` cut that).

#[test]
fn the_crate_has_no_import_cycle() {
    let g = streamexec_test_support::imports::graph(env!("CARGO_MANIFEST_DIR").as_ref());
    let cycles = streamexec_test_support::imports::cycles(&g);
    assert!(cycles.is_empty(), "import cycles: {cycles:?}");
    assert!(g.files.len() > 20, "{} files read", g.files.len());
}
