//! PTX the engines do not run, recognised by name (the parser asks before it reads the
//! operands), so that a kernel using it is refused with the feature it needs ("texture
//! instructions (`tex.1d...`) are not supported by the PTX engine") rather than with a syntax
//! error about operand forms the parser never learnt (`[%rd1, {%r1}]`, `.shared::cluster`).
//! The parser (`parse.rs`) and the parameter-list reader (`params.rs`) both use it.
//!
//! Opcodes the decoder does not know and whose syntax parses are refused by the decoder
//! ("opcode `X` is not supported"); this table names the families of the PTX ISA that need
//! hardware units or state the engines do not model: textures, surfaces, tensor cores, the
//! tensor memory accelerator, asynchronous copies and their transaction barriers, clusters,
//! cache policies, video instructions.

/// The feature an instruction belongs to when the engines do not run it: `opcode` and its
/// `modifiers` (the mnemonic split at `.`). A plural noun phrase ("texture instructions").
fn instruction_family(opcode: &str, modifiers: &[String]) -> Option<&'static str> {
    let has = |m: &str| modifiers.iter().any(|x| x == m);
    Some(match opcode {
        "tex" | "tld4" | "txq" => "texture instructions",
        "suld" | "sust" | "sured" | "suq" => "surface instructions",
        "istypep" => "texture, sampler and surface type tests",
        "mma" => "matrix multiply-accumulate instructions",
        "wmma" => "warp-level matrix instructions",
        "wgmma" => "warpgroup matrix multiply-accumulate instructions",
        "ldmatrix" | "stmatrix" | "movmatrix" => {
            "warp matrix load, store and transpose instructions"
        }
        "tcgen05" => "fifth-generation tensor core instructions",
        "setmaxnreg" => "warpgroup register reallocation instructions",
        "cp" if has("tensor") => "bulk tensor copies (the tensor memory accelerator)",
        "cp" if has("bulk") => "bulk asynchronous copies",
        "cp" => "asynchronous copies",
        "tensormap" => "tensor-map instructions",
        "mbarrier" => "transaction barriers",
        "multimem" => "multimem (multicast memory) instructions",
        "griddepcontrol" => "programmatic dependent launch controls",
        "clusterlaunchcontrol" => "cluster launch control instructions",
        "mapa" | "getctarank" => "distributed shared memory instructions",
        "barrier" if has("cluster") => "cluster barriers",
        "fence" if has("proxy") || has("mbarrier_init") => "proxy fences",
        "st" | "red" if has("async") => "asynchronous remote stores and reductions",
        "st" if has("bulk") => "bulk stores",
        "elect" => "`elect.sync` instructions",
        "alloca" | "stacksave" | "stackrestore" => "dynamic stack allocation instructions",
        "applypriority" | "discard" | "createpolicy" => "cache eviction policy instructions",
        "dp4a" | "dp2a" => "integer dot-product instructions",
        "vadd" | "vsub" | "vabsdiff" | "vmin" | "vmax" | "vshl" | "vshr" | "vmad" | "vset"
        | "vadd2" | "vsub2" | "vavrg2" | "vabsdiff2" | "vmin2" | "vmax2" | "vset2" | "vadd4"
        | "vsub4" | "vavrg4" | "vabsdiff4" | "vmin4" | "vmax4" | "vset4" => {
            "SIMD video instructions"
        }
        _ => return None,
    })
}

/// The feature a declaration directive belongs to when the engines do not run it: the opaque
/// types (`.texref`, `.samplerref`, `.surfref`) and the `.tex` state space.
fn declaration_family(directive: &str) -> Option<&'static str> {
    Some(match directive {
        ".texref" => "texture references",
        ".samplerref" => "sampler references",
        ".surfref" => "surface references",
        ".tex" => "texture variables",
        _ => return None,
    })
}

/// The refusal's text: "`family` (`what`) are not supported by the PTX engine".
fn refusal(family: &str, what: &str) -> String {
    format!("{family} (`{what}`) are not supported by the PTX engine; a GPU runs this kernel")
}

/// The refusal of an instruction of a family the engines do not run, read before its operands:
/// the mnemonic is `word` with the `::` qualifiers that follow it (`.shared::cluster`), which
/// `following(k)` gives as the tokens after the word.
pub(crate) fn instruction<'a>(
    word: &str,
    opcode: &str,
    modifiers: &[String],
    following: impl Fn(usize) -> Option<&'a str>,
) -> Option<String> {
    let family = instruction_family(opcode, modifiers)?;
    let mut mnemonic = word.to_string();
    let mut k = 0;
    while following(k) == Some(":") && following(k + 1) == Some(":") {
        match following(k + 2) {
            Some(q)
                if q.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._".contains(c)) =>
            {
                mnemonic.push_str("::");
                mnemonic.push_str(q);
                k += 3;
            }
            _ => break,
        }
    }
    Some(refusal(family, &mnemonic))
}

/// The refusal of a declaration directive the engines do not run (`.texref`, `.tex`).
pub(crate) fn declaration(directive: &str) -> Option<String> {
    declaration_family(directive).map(|family| refusal(family, directive))
}
