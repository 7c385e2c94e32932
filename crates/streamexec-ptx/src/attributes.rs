//! What CUDA's `cuFuncGetAttribute` reports about a kernel, computed from its PTX: the memory
//! it declares, a register count, its launch bounds and the module's versions.
//!
//! The kernel is its `.entry` and every `.func` it reaches through `call`. Memory is laid out
//! as the decoder lays it out (each variable at the next multiple of its alignment):
//!
//! - **static shared**: the `.shared` variables declared in those bodies, and the module-scope
//!   `.shared` variables they name (clang and NVVM put a kernel's `__shared__` arrays at module
//!   scope), without dynamic (`.extern` / unsized) shared memory;
//! - **const**: the module's `.const` variables (CUDA reports the module's constant bank);
//! - **local**: the `.local` variables declared in those bodies and the module-scope ones
//!   they name, per thread;
//! - **registers**: the registers declared in those bodies in 32-bit units (a 64-bit register
//!   counts two, an 8/16/32-bit one, a pair of halves one, a predicate none), at most the
//!   entry's `.maxnreg`, at least 1 and capped at 255 as on NVIDIA's GPUs. PTX registers are virtual, so this is an estimate of
//!   the same order as `ptxas` gives for unoptimised code, not its allocation;
//! - **max threads per block**: `.maxntid`'s product or `.reqntid`'s, else 1024;
//! - **versions**: `.version` as `major * 10 + minor`, `.target sm_XY` as `XY`.

use std::collections::{HashMap, HashSet};

use crate::ast::{self, AddressBase, Operand, Space, Statement, VarType};
use crate::error::{Error, Result};

/// A kernel's attributes as `cuFuncGetAttribute` reports them (see the module docs for how
/// each is computed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelAttributes {
    /// Bytes of static `.shared` memory (`CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`).
    pub shared_bytes: u64,
    /// Bytes of the module's `.const` variables (`CONST_SIZE_BYTES`).
    pub const_bytes: u64,
    /// Bytes of `.local` memory per thread (`LOCAL_SIZE_BYTES`).
    pub local_bytes: u64,
    /// 32-bit registers per thread (`NUM_REGS`), 1 to 255.
    pub registers: u32,
    /// Most threads per block (`MAX_THREADS_PER_BLOCK`).
    pub max_threads_per_block: u64,
    /// `.version` as `major * 10 + minor` (`PTX_VERSION`); 0 without one.
    pub ptx_version: u32,
    /// `.target sm_XY` as `XY` (`BINARY_VERSION`); 0 without one.
    pub target: u32,
}

/// The attributes of `.entry` `kernel` of the PTX `text`.
pub fn kernel_attributes(text: &str, kernel: &str) -> Result<KernelAttributes> {
    let m = crate::parse_module(text)?;
    let by_name: HashMap<&str, &ast::Function> = m
        .functions
        .iter()
        .filter(|f| f.body.is_some())
        .map(|f| (f.name.as_str(), f))
        .collect();
    let entry = by_name
        .get(kernel)
        .filter(|f| f.is_entry)
        .ok_or_else(|| Error::NoEntry {
            kernel: kernel.to_string(),
            have: {
                let mut h: Vec<String> = m
                    .functions
                    .iter()
                    .filter(|f| f.is_entry && f.body.is_some())
                    .map(|f| f.name.clone())
                    .collect();
                h.sort_unstable();
                h
            },
        })?;
    // The entry and every function it reaches; the names their instructions use.
    let mut reached = vec![*entry];
    let mut seen: HashSet<&str> = HashSet::from([entry.name.as_str()]);
    let mut names: HashSet<String> = HashSet::new();
    let mut at = 0;
    while at < reached.len() {
        let f = reached[at];
        at += 1;
        let mut here = HashSet::new();
        operand_names(f.body.as_deref().unwrap_or(&[]), &mut here);
        for n in &here {
            if let Some(g) = by_name.get(n.as_str())
                && !g.is_entry
                && seen.insert(g.name.as_str())
            {
                reached.push(g);
            }
        }
        names.extend(here);
    }
    let mut a = KernelAttributes {
        max_threads_per_block: 1024,
        ..KernelAttributes::default()
    };
    let place = |cursor: &mut u64, v: &ast::Variable| {
        let size = crate::data::var_size(v).unwrap_or(0);
        *cursor = cursor.next_multiple_of(v.alignment().max(1)) + size;
    };
    let dynamic = |v: &ast::Variable| {
        v.linkage == ast::Linkage::Extern || (v.array.first() == Some(&None) && v.init.is_none())
    };
    for v in &m.variables {
        match v.space {
            Space::Shared if !dynamic(v) && names.contains(&v.name) => {
                place(&mut a.shared_bytes, v)
            }
            Space::Local if names.contains(&v.name) => place(&mut a.local_bytes, v),
            Space::Const => place(&mut a.const_bytes, v),
            _ => {}
        }
    }
    let mut regs = 0u64;
    for f in &reached {
        declared(f.body.as_deref().unwrap_or(&[]), &mut |v| match v.space {
            Space::Shared if !dynamic(v) => place(&mut a.shared_bytes, v),
            Space::Local => place(&mut a.local_bytes, v),
            Space::Reg => {
                let units = match v.ty {
                    VarType::Pred => 0,
                    VarType::Scalar(s) => s.size().div_ceil(4),
                };
                regs = regs.saturating_add(units.saturating_mul(v.range.unwrap_or(1) as u64));
            }
            _ => {}
        });
    }
    let count = |d: &[u64]| d.iter().product::<u64>();
    let (mut maxntid, mut reqntid) = (None, None);
    for (name, nums) in &entry.directives {
        match name.as_str() {
            ".maxnreg" if !nums.is_empty() => regs = regs.min(nums[0]),
            ".maxntid" if !nums.is_empty() => maxntid = Some(count(nums)),
            ".reqntid" if !nums.is_empty() => reqntid = Some(count(nums)),
            _ => {}
        }
    }
    a.registers = regs.clamp(1, 255) as u32;
    if let Some(n) = [maxntid, reqntid].into_iter().flatten().min() {
        a.max_threads_per_block = n.min(1024);
    }
    a.ptx_version = m.version.map_or(0, |(major, minor)| major * 10 + minor);
    a.target = m
        .target
        .iter()
        .find_map(|t| t.strip_prefix("sm_"))
        .and_then(|t| {
            t.trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse()
                .ok()
        })
        .unwrap_or(0);
    Ok(a)
}

/// Every name an operand of `body` uses (registers, symbols, address bases, callees).
fn operand_names(body: &[Statement], out: &mut HashSet<String>) {
    fn operand(o: &Operand, out: &mut HashSet<String>) {
        match o {
            Operand::Reg(n) | Operand::Not(n) => {
                out.insert(n.clone());
            }
            Operand::Symbol { name, .. } => {
                out.insert(name.clone());
            }
            Operand::Address(a) => match &a.base {
                AddressBase::Reg(n) | AddressBase::Symbol(n) => {
                    out.insert(n.clone());
                }
                AddressBase::Absolute => {}
            },
            Operand::Vector(l) | Operand::List(l) => l.iter().for_each(|o| operand(o, out)),
            Operand::Pair(a, b) => {
                out.insert(a.clone());
                out.insert(b.clone());
            }
            Operand::Imm(_) | Operand::Sink => {}
        }
    }
    for s in body {
        match s {
            Statement::Inst(i) => i.operands.iter().for_each(|o| operand(o, out)),
            Statement::Block(b) => operand_names(b, out),
            Statement::Var(v) => {
                // An address initializer names a variable too.
                if v.init.is_some() {
                    out.insert(v.name.clone());
                }
            }
            Statement::Label { .. } => {}
        }
    }
}

/// Calls `f` on every variable `body` declares (nested blocks included).
fn declared<'a>(body: &'a [Statement], f: &mut impl FnMut(&'a ast::Variable)) {
    for s in body {
        match s {
            Statement::Var(v) => f(v),
            Statement::Block(b) => declared(b, f),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"
.version 7.8
.target sm_75
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
.visible .entry other() .reqntid 32 .maxnreg 1
{
    .reg .b32 %o<2>;
    mov.u32 %o1, used_by_other;
    ret;
}
"#;

    #[test]
    fn attributes_follow_the_kernels_declarations() {
        let a = kernel_attributes(PTX, "k").unwrap();
        assert_eq!(
            a,
            KernelAttributes {
                // used_by_k (40), then helper_shared at 40 (align 8): 52; not used_by_other,
                // not dynamic shared memory.
                shared_bytes: 52,
                // table (100), scale at 100: 104.
                const_bytes: 104,
                // mine (10), then frame at 16 (align 8): 40.
                local_bytes: 40,
                // %r 10 + %rd 5*2 + %s 2 + %h 3 + %hd 2*2 = 29; predicates none.
                registers: 29,
                max_threads_per_block: 128,
                ptx_version: 78,
                target: 75,
            }
        );
        let o = kernel_attributes(PTX, "other").unwrap();
        assert_eq!(
            (
                o.shared_bytes,
                o.local_bytes,
                o.registers,
                o.max_threads_per_block
            ),
            (4096, 0, 1, 32)
        );
        assert!(matches!(
            kernel_attributes(PTX, "helper"),
            Err(Error::NoEntry { .. })
        ));
    }
}
