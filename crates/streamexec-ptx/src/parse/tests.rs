use super::*;

const CORPUS: &[(&str, &str)] = &[
    (
        "conformance.O0",
        include_str!("../../../../kernels/ptx/conformance.O0.ptx"),
    ),
    (
        "conformance.O3",
        include_str!("../../../../kernels/ptx/conformance.O3.ptx"),
    ),
    (
        "params.O0",
        include_str!("../../../../kernels/ptx/params.O0.ptx"),
    ),
    (
        "params.O3",
        include_str!("../../../../kernels/ptx/params.O3.ptx"),
    ),
    (
        "canned.O0",
        include_str!("../../../streamexec/kernels/ptx/canned.O0.ptx"),
    ),
    (
        "canned.O3",
        include_str!("../../../streamexec/kernels/ptx/canned.O3.ptx"),
    ),
];

fn instructions(body: &[Statement], out: &mut Vec<Instruction>) {
    for s in body {
        match s {
            Statement::Inst(i) => out.push(i.clone()),
            Statement::Block(b) => instructions(b, out),
            _ => {}
        }
    }
}

fn err(ptx: &str) -> String {
    parse_module(ptx).unwrap_err().to_string()
}

/// Every committed PTX file parses, every instruction prints back to text that parses to the
/// same instruction, and the entries agree with `parse_entries`.
#[test]
#[cfg_attr(miri, ignore = "slow under Miri; the fuzz run covers it")]
fn the_kernel_corpus_parses_and_instructions_round_trip() {
    for (name, text) in CORPUS {
        let m = parse_module(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(m.version.map(|v| v.0), Some(7), "{name}");
        assert_eq!(m.target, ["sm_70"], "{name}");
        let entries = super::super::parse_entries(text).unwrap();
        let parsed: Vec<&str> = m
            .functions
            .iter()
            .filter(|f| f.is_entry)
            .map(|f| f.name.as_str())
            .collect();
        let expected: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(parsed, expected, "{name}");
        let mut count = 0;
        for f in &m.functions {
            let mut insts = Vec::new();
            instructions(f.body.as_deref().unwrap_or_default(), &mut insts);
            for i in insts {
                let again = format!(".entry k() {{ {i} }}");
                let m2 = parse_module(&again).unwrap_or_else(|e| panic!("{name}: `{i}`: {e}"));
                let Some(Statement::Inst(j)) = &m2.functions[0].body.as_ref().unwrap().first()
                else {
                    panic!("{name}: `{i}` did not parse back to an instruction");
                };
                assert_eq!(
                    Instruction {
                        line: i.line,
                        ..j.clone()
                    },
                    i,
                    "{name}"
                );
                count += 1;
            }
        }
        assert!(count > 20, "{name}: only {count} instructions");
    }
}

#[test]
fn declarations_directives_and_operands() {
    let m = parse_module(
        r#"
.version 7.0
.target sm_70, debug
.address_size 64
.file 1 "k.cu"
.extern .shared .align 16 .b8 dyn[];
.global .align 4 .u32 table[2][3] = {{1, 2, 3}, {4, 5, -6}};
.global .u64 ptr = generic(table+4);
.const .f32 c = 0f3F800000;
.extern .func (.param .b32 r) ext(.param .b64 p);
.visible .func (.param .b32 ret) helper(.param .b32 a, .reg .f64 b)
{
    ret;
}
.visible .entry k(.param .u64 .ptr .global .align 8 out, .param .align 8 .b8 s[24])
.maxntid 128, 1, 1
{
    .reg .pred %p<3>;
    .reg .b32 %r<5>, %x;
    .local .align 8 .b8 __local_depot0[16];
    .loc 1 4 2
    mov.u32 %r1, %tid.x;
    setp.lt.and.s32 %p1|%p2, %r1, -0x10, !%p0;
    @!%p1 bra $L__BB0_2;
    ld.global.nc.v4.f32 {%r1, %r2, _, %r4}, [%rd1+-16];
    st.shared.u32 [dyn+8], 1.5e-3;
    mov.f64 %fd1, 0d3FF0000000000000;
    ld.param.u64 %rd1, [out];
$L__BB0_2:
    { .param .b32 param0;
      call.uni (retval0), helper, (param0, 0f00000000);
    }
    ld.u32 %r3, [0x100];
    exit;
}
"#,
    )
    .unwrap();
    assert_eq!(m.version, Some((7, 0)));
    assert_eq!(m.target, ["sm_70", "debug"]);
    assert_eq!(m.variables.len(), 4);
    let dyn_ = &m.variables[0];
    assert_eq!(
        (dyn_.linkage, dyn_.space, dyn_.align, dyn_.array.clone()),
        (Linkage::Extern, Space::Shared, Some(16), vec![None])
    );
    let table = &m.variables[1];
    assert_eq!(table.elements(), Some(6));
    let Some(Init::List(rows)) = &table.init else {
        panic!()
    };
    assert_eq!(
        rows[1],
        Init::List(vec![
            Init::Imm(Imm::Int(4)),
            Init::Imm(Imm::Int(5)),
            Init::Imm(Imm::Int(-6))
        ])
    );
    assert_eq!(
        m.variables[2].init,
        Some(Init::Address {
            symbol: "table".into(),
            offset: 4,
            generic: true
        })
    );
    assert_eq!(m.variables[3].init, Some(Init::Imm(Imm::F32(0x3F80_0000))));
    assert_eq!(m.functions.len(), 3);
    assert!(m.functions[0].body.is_none());
    assert_eq!(m.functions[1].returns[0].name, "ret");
    assert_eq!(m.functions[1].params[1].space, Space::Reg);
    let k = &m.functions[2];
    assert!(k.is_entry);
    assert_eq!(
        k.directives,
        vec![(".maxntid".to_string(), vec![128, 1, 1])]
    );
    assert_eq!(k.params[0].ptr_space, Some(Space::Global));
    assert_eq!(
        (k.params[1].align, k.params[1].array.clone()),
        (Some(8), vec![Some(24)])
    );
    let body = k.body.as_ref().unwrap();
    let Statement::Var(p) = &body[0] else {
        panic!()
    };
    assert_eq!((p.ty, p.range), (VarType::Pred, Some(3)));
    let Statement::Var(x) = &body[2] else {
        panic!()
    };
    assert_eq!((x.name.as_str(), x.range), ("%x", None));
    let mut insts = Vec::new();
    instructions(body, &mut insts);
    let text: Vec<String> = insts.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "mov.u32 %r1, %tid.x;",
            "setp.lt.and.s32 %p1|%p2, %r1, -16, !%p0;",
            "@!%p1 bra $L__BB0_2;",
            "ld.global.nc.v4.f32 {%r1, %r2, _, %r4}, [%rd1-16];",
            "st.shared.u32 [dyn+8], 0.0015;",
            "mov.f64 %fd1, 0d3FF0000000000000;",
            "ld.param.u64 %rd1, [out];",
            "call.uni (retval0), helper, (param0, 0f00000000);",
            "ld.u32 %r3, [256];",
            "exit;",
        ]
    );
    assert_eq!(insts[0].line, 22);
    assert!(matches!(
        body.iter().find(|s| matches!(s, Statement::Label { .. })),
        Some(Statement::Label { line: 29, .. })
    ));
}

#[test]
fn literals() {
    assert_eq!(literal("0xFFFFFFFFFFFFFFFF"), Some(Imm::Int(-1)));
    assert_eq!(literal("017"), Some(Imm::Int(15)));
    assert_eq!(literal("0b101U"), Some(Imm::Int(5)));
    assert_eq!(literal("0"), Some(Imm::Int(0)));
    assert_eq!(literal("0f7FC00000"), Some(Imm::F32(0x7FC0_0000)));
    assert_eq!(literal("0f7FC0000"), None);
    assert_eq!(literal("1e5"), Some(Imm::Float(1e5)));
    assert_eq!(literal("18446744073709551616"), None);
    assert_eq!(literal("09"), None);
}

#[test]
fn errors_name_the_line_and_the_construct() {
    let cases = [
        (
            ".entry k() {\n add.s32 %r1, %r2 %r3;\n}",
            "PTX line 2",
            "expected `,` or `;`",
        ),
        (
            ".entry k() {\n mov.u32 %r1, 1;\n",
            "PTX line 1",
            "never closed",
        ),
        (".version 7\n", "PTX line 1", "major.minor"),
        (
            ".entry k(.param .q32 a) {}",
            "PTX line 1",
            "`.q32` is not a type",
        ),
        (
            "\n\n.entry k() { ld.u32 %r1, [%r2+]; }",
            "PTX line 3",
            "integer offset",
        ),
        (
            ".entry k() { .reg .b32 %r<0>; }",
            "PTX line 1",
            "out of range",
        ),
        ("garbage", "PTX line 1", "module scope"),
        (".entry k() { 5; }", "PTX line 1", "expected an instruction"),
        (
            ".entry k() { mov.u32 %r1, -%r2; }",
            "PTX line 1",
            "`-` must precede a number",
        ),
        ("/* open", "PTX line 1", "never closed"),
        (".entry k() { @ ; }", "PTX line 1", "predicate register"),
        (".visible", "PTX line 1", "ends after a linkage"),
    ];
    for (src, line, what) in cases {
        let e = err(src);
        assert!(e.contains(line) && e.contains(what), "{src:?}: {e}");
    }
    assert!(
        err(".entry k() { add.s32 %r1, %r2 %r3; }").contains("`k`"),
        "names the function"
    );
}

#[test]
#[cfg_attr(miri, ignore = "slow under Miri; the fuzz run covers it")]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let deep = format!(".entry k() {}{}", "{".repeat(100_000), "}".repeat(100_000));
    assert!(err(&deep).contains("nesting deeper"));
    let init = format!(
        ".global .u32 x[1] = {}1{};",
        "{".repeat(100_000),
        "}".repeat(100_000)
    );
    assert!(err(&init).contains("nesting deeper"));
    let vec = format!(
        ".entry k() {{ mov.u32 {}%r1{}; }}",
        "{".repeat(100_000),
        "}".repeat(100_000)
    );
    assert!(err(&vec).contains("nesting deeper"));
}

/// Every prefix of a real module either parses or is an error: never a panic.
#[test]
#[cfg_attr(miri, ignore = "slow under Miri; the fuzz run covers it")]
fn truncated_modules_never_panic() {
    let text = CORPUS[0].1;
    let mut cut = 0;
    while cut < text.len() {
        if text.is_char_boundary(cut) {
            let _ = parse_module(&text[..cut]);
        }
        cut += 97;
    }
}

/// Directives written together (`.reg.b16`, as NVRTC's inline PTX in cuda_fp16.hpp has them)
/// parse as the spaced form does, and the lines stay right.
#[test]
fn joined_directives_parse_as_spaced_ones() {
    let body = |decl: &str| {
        let text = format!(
            ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k()\n{{\n\
             {{ {decl} %h;\n mov.b16 %h, 1;\n }}\n ret;\n}}\n"
        );
        let m = parse_module(&text).unwrap_or_else(|e| panic!("{decl}: {e}"));
        format!("{:?}", m.functions)
    };
    assert_eq!(body(".reg.b16"), body(".reg .b16"));
    assert_eq!(body(".reg.f32"), body(".reg .f32"));
}
