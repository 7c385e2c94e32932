//! Wrong kernel arguments are compile errors (trybuild; expected output in tests/ui/*.stderr).

#[test]
fn wrong_kernel_arguments_do_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
