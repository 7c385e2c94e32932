//! PTX the engines do not run is refused with the feature it needs and its line, one case per
//! family: not a syntax error about operand forms the parser does not read.

use std::sync::Arc;

use streamexec_ptx::{AllocTable, Module, parse_entries, parse_module};

/// A module whose entry runs `inst` on line 7.
fn with_instruction(inst: &str) -> String {
    format!(
        ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 p)\n{{\n\
         .reg .b64 %rd<4>; .reg .b32 %r<8>; .reg .f32 %f<9>; .reg .pred %p<2>;\n{inst}\nret;\n}}\n"
    )
}

/// The parser's error for `ptx`, which must name `family`, `what` and PTX line `line`.
fn assert_refused(ptx: &str, family: &str, what: &str, line: usize) {
    let err = parse_module(ptx)
        .expect_err("unsupported PTX must be refused")
        .to_string();
    assert!(
        err.contains(&format!("PTX line {line}:"))
            && err.contains(&format!(
                "{family} (`{what}`) are not supported by the PTX engine"
            )),
        "expected {family} (`{what}`) refused at line {line}, got: {err}"
    );
}

#[test]
fn unsupported_instruction_families_are_named_with_their_line() {
    let cases: &[(&str, &str, &str)] = &[
        // (instruction, family, mnemonic)
        (
            "tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r1}];",
            "texture instructions",
            "tex.1d.v4.f32.s32",
        ),
        (
            "tld4.r.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5, %f6}];",
            "texture instructions",
            "tld4.r.2d.v4.f32.f32",
        ),
        (
            "txq.width.b32 %r1, [%rd1];",
            "texture instructions",
            "txq.width.b32",
        ),
        (
            "suld.b.1d.v4.b32.trap {%r1, %r2, %r3, %r4}, [%rd1, {%r5}];",
            "surface instructions",
            "suld.b.1d.v4.b32.trap",
        ),
        (
            "sust.b.1d.v4.b32.trap [%rd1, {%r5}], {%r1, %r2, %r3, %r4};",
            "surface instructions",
            "sust.b.1d.v4.b32.trap",
        ),
        (
            "sured.b.add.1d.u32.trap [%rd1, {%r5}], %r1;",
            "surface instructions",
            "sured.b.add.1d.u32.trap",
        ),
        (
            "suq.width.b32 %r1, [%rd1];",
            "surface instructions",
            "suq.width.b32",
        ),
        (
            "istypep.texref %p1, %rd1;",
            "texture, sampler and surface type tests",
            "istypep.texref",
        ),
        (
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, \
             {%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f5, %f6, %f7, %f8};",
            "matrix multiply-accumulate instructions",
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        ),
        (
            "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r0, %r1, %r2, %r3, %r4, %r5, \
             %r6, %r7}, [%rd1], %r1;",
            "warp-level matrix instructions",
            "wmma.load.a.sync.aligned.row.m16n16k16.global.f16",
        ),
        (
            "wgmma.fence.sync.aligned;",
            "warpgroup matrix multiply-accumulate instructions",
            "wgmma.fence.sync.aligned",
        ),
        (
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%rd1];",
            "warp matrix load, store and transpose instructions",
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        ),
        (
            "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%rd1], {%r1, %r2, %r3, %r4};",
            "warp matrix load, store and transpose instructions",
            "stmatrix.sync.aligned.m8n8.x4.shared.b16",
        ),
        (
            "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%rd1], 32;",
            "fifth-generation tensor core instructions",
            "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
        ),
        (
            "setmaxnreg.inc.sync.aligned.u32 240;",
            "warpgroup register reallocation instructions",
            "setmaxnreg.inc.sync.aligned.u32",
        ),
        (
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes \
             [%rd1], [%rd2, {%r1, %r2}], [%rd3];",
            "bulk tensor copies (the tensor memory accelerator)",
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        ),
        (
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%rd1], [%rd2], \
             64, [%rd3];",
            "bulk asynchronous copies",
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
        ),
        (
            "cp.async.ca.shared.global [%rd1], [%rd2], 16;",
            "asynchronous copies",
            "cp.async.ca.shared.global",
        ),
        (
            "tensormap.replace.tile.global_address.global.b1024.b64 [%rd1], %rd2;",
            "tensor-map instructions",
            "tensormap.replace.tile.global_address.global.b1024.b64",
        ),
        (
            "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%rd1], %r1;",
            "transaction barriers",
            "mbarrier.try_wait.parity.shared::cta.b64",
        ),
        (
            "multimem.ld_reduce.relaxed.sys.global.add.u32 %r1, [%rd1];",
            "multimem (multicast memory) instructions",
            "multimem.ld_reduce.relaxed.sys.global.add.u32",
        ),
        (
            "griddepcontrol.wait;",
            "programmatic dependent launch controls",
            "griddepcontrol.wait",
        ),
        (
            "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p1, %rd1;",
            "cluster launch control instructions",
            "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128",
        ),
        (
            "mapa.shared::cluster.u64 %rd1, %rd2, %r1;",
            "distributed shared memory instructions",
            "mapa.shared::cluster.u64",
        ),
        (
            "barrier.cluster.arrive;",
            "cluster barriers",
            "barrier.cluster.arrive",
        ),
        (
            "fence.proxy.async.shared::cta;",
            "proxy fences",
            "fence.proxy.async.shared::cta",
        ),
        (
            "st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%rd1], %r1, [%rd2];",
            "asynchronous remote stores and reductions",
            "st.async.shared::cluster.mbarrier::complete_tx::bytes.u32",
        ),
        (
            "elect.sync %r1|%p1, 0xffffffff;",
            "`elect.sync` instructions",
            "elect.sync",
        ),
        (
            "alloca.u64 %rd1, %rd2;",
            "dynamic stack allocation instructions",
            "alloca.u64",
        ),
        (
            "createpolicy.fractional.L2::evict_last.b64 %rd1, 1.0;",
            "cache eviction policy instructions",
            "createpolicy.fractional.L2::evict_last.b64",
        ),
        (
            "dp4a.u32.u32 %r1, %r2, %r3, %r4;",
            "integer dot-product instructions",
            "dp4a.u32.u32",
        ),
        (
            "vadd.s32.u32.s32.sat %r1, %r2.b0, %r3.h1, %r4;",
            "SIMD video instructions",
            "vadd.s32.u32.s32.sat",
        ),
    ];
    for (inst, family, what) in cases {
        assert_refused(&with_instruction(inst), family, what, 7);
        // Guarded, as compilers emit them.
        assert_refused(&with_instruction(&format!("@%p1 {inst}")), family, what, 7);
    }
}

#[test]
fn opaque_types_and_the_tex_space_are_named_with_their_line() {
    let header = ".version 8.0\n.target sm_90\n.address_size 64\n";
    let body = "{\nret;\n}\n";
    for (decl, family, what) in [
        (".global .texref tex0;", "texture references", ".texref"),
        (
            ".global .samplerref smp0 = { filter_mode = nearest };",
            "sampler references",
            ".samplerref",
        ),
        (".global .surfref surf0;", "surface references", ".surfref"),
        (".tex .u32 legacy_tex;", "texture variables", ".tex"),
    ] {
        let ptx = format!("{header}{decl}\n.visible .entry k()\n{body}");
        assert_refused(&ptx, family, what, 4);
    }
    // As kernel parameters: the parser and the parameter-list reader (what loaders check
    // arguments against) say the same.
    for (ty, family) in [
        (".texref", "texture references"),
        (".samplerref", "sampler references"),
        (".surfref", "surface references"),
    ] {
        let ptx = format!("{header}.visible .entry k(\n.param .u64 p,\n.param {ty} t\n)\n{body}");
        assert_refused(&ptx, family, ty, 6);
        let err = parse_entries(&ptx).unwrap_err().to_string();
        assert!(
            err.contains("PTX line 6:") && err.contains(&format!("{family} (`{ty}`)")),
            "{err}"
        );
    }
}

#[test]
fn loading_a_module_reports_the_refusal() {
    let ptx = with_instruction("tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%rd1}];");
    let err = Module::load(&ptx, &Arc::new(AllocTable::default()))
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("PTX line 7")
            && err.contains("texture instructions (`tex.1d.v4.f32.s32`) are not supported")
            && !err.contains("expected"),
        "{err}"
    );
}
