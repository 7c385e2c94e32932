//! `cuFuncGetAttribute` computed from the module (sizes of the PTX written here), and
//! `cuFuncSetAttribute` of the dynamic shared memory limit against the static part.

use super::*;

use CUfunction_attribute as A;

/// `k` uses 52 bytes of static shared memory (`used_by_k`, 40, then the callee's 12 at 40),
/// the module has 104 bytes of `.const` (100, then 4 at 100), 40 bytes of `.local` per thread
/// (10, then the callee's 24 at 16), 29 registers in 32-bit units (10 + 5·2 + 2 halves + 3 +
/// 2·2; predicates none), `.maxntid 64, 2, 1`; `other` uses `used_by_other` (4096) and
/// `.reqntid 32`.
const ATTR_PTX: &str = r#"
.version 7.8
.target sm_61
.address_size 64
.const .align 8 .b8 table[100];
.const .align 4 .u32 scale;
.shared .align 4 .b8 used_by_k[40];
.shared .align 16 .b8 used_by_other[4096];
.extern .shared .align 16 .b8 dyn[];
.func (.param .b32 r) helper(.param .b32 a)
{
    .reg .b32 %h<3>;
    .reg .b64 %hd<2>;
    .local .align 8 .b8 frame[24];
    .shared .align 8 .b8 helper_shared[12];
    ld.param.b32 %h1, [a];
    st.param.b32 [r], %h1;
    ret;
}
.visible .entry k(.param .u64 p) .maxntid 64, 2, 1
{
    .reg .pred %p<4>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<5>;
    .reg .f16 %s<2>;
    .local .align 4 .b8 mine[10];
    mov.u64 %rd1, used_by_k;
    {
        .param .b32 a0;
        .param .b32 r0;
        st.param.b32 [a0], %r1;
        call.uni (r0), helper, (a0);
    }
    ret;
}
.visible .entry other() .reqntid 32
{
    .reg .b32 %o<2>;
    mov.u32 %o1, used_by_other;
    ret;
}
"#;

fn attr(f: CUfunction, a: CUfunction_attribute) -> i32 {
    let mut v = -7;
    ok!(cuFuncGetAttribute(&mut v, a, f));
    v
}

#[test]
fn function_attributes_come_from_the_ptx() {
    let Some(_drv) = setup("function_attributes_come_from_the_ptx") else {
        return;
    };
    let m = load(ATTR_PTX);
    let (k, other) = (function(m, c"k"), function(m, c"other"));
    let got: Vec<i32> = [
        A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
        A::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
        A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
        A::CU_FUNC_ATTRIBUTE_NUM_REGS,
        A::CU_FUNC_ATTRIBUTE_PTX_VERSION,
        A::CU_FUNC_ATTRIBUTE_BINARY_VERSION,
        A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
    ]
    .into_iter()
    .map(|a| attr(k, a))
    .collect();
    assert_eq!(got, vec![128, 52, 104, 40, 29, 78, 61, 48 * 1024 - 52]);
    assert_eq!(attr(other, A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 32);
    assert_eq!(attr(other, A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES), 4096);
    assert_eq!(attr(other, A::CU_FUNC_ATTRIBUTE_NUM_REGS), 2);
    // The dynamic limit and the static part share the device's 48 KiB.
    let dyn_limit = A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuFuncSetAttribute(other, dyn_limit, 48 * 1024 - 4096 + 1)
    );
    ok!(cuFuncSetAttribute(other, dyn_limit, 48 * 1024 - 4096));
    ok!(cuFuncSetAttribute(other, dyn_limit, 100));
    assert_eq!(attr(other, dyn_limit), 100);
    ok!(cuModuleUnload(m));
}
