//! Compile errors the API promises (trybuild; expected output in tests/ui/*.stderr): wrong
//! kernel arguments, host memory borrowed during a copy, FFT plans and buffers of element types
//! that are no transform, and every way safe code used to forge a device address or pointer
//! argument (tests/ui/forge_*.rs: the sealed backend contract).

#[test]
fn wrong_kernel_arguments_do_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
