//! No import cycle between the files of `src/`.

#[test]
fn the_crate_has_no_import_cycle() {
    let g = streamexec_test_support::imports::graph(env!("CARGO_MANIFEST_DIR").as_ref());
    let cycles = streamexec_test_support::imports::cycles(&g);
    assert!(cycles.is_empty(), "import cycles: {cycles:?}");
    assert!(g.files.len() > 8, "{} files read", g.files.len());
}
