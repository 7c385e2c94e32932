//! Module-scope `.global` / `.const` data: layout, sizes and initializers.

use super::ast::{self, Init, Space as AstSpace, VarType};
use super::ir::{ModuleData, Ty};
use crate::error::{PtxResult as Result, load_error};

fn ty_of(v: &ast::Variable) -> Option<u64> {
    let n = v.elements()?;
    v.element_size().checked_mul(n)
}

/// Bytes of a variable, taking `[]` sizes from the initializer.
pub(super) fn var_size(v: &ast::Variable) -> Option<u64> {
    if let Some(s) = ty_of(v) {
        return Some(s);
    }
    // `[]` with an initializer list: count leaves.
    fn leaves(i: &Init) -> u64 {
        match i {
            Init::List(l) => l.iter().map(leaves).sum(),
            _ => 1,
        }
    }
    let inner: u64 = v
        .array
        .iter()
        .skip(1)
        .try_fold(1u64, |n, d| d.and_then(|d| n.checked_mul(d)))?;
    let count = leaves(v.init.as_ref()?);
    Some(count.div_ceil(inner.max(1)) * inner * v.element_size())
}

/// Lays out module-scope `.global` / `.const` variables into one image.
pub fn module_data(m: &ast::Module) -> Result<ModuleData> {
    let mut d = ModuleData {
        align: 16,
        ..Default::default()
    };
    let data_vars: Vec<&ast::Variable> = m
        .variables
        .iter()
        .filter(|v| matches!(v.space, AstSpace::Global | AstSpace::Const))
        .collect();
    for v in &data_vars {
        if v.linkage == ast::Linkage::Extern {
            return Err(load_error(
                None,
                Some(v.line),
                format!(
                    "`.extern` {} variable `{}` is defined in another module; the host \
                     platform loads one module at a time",
                    v.space.directive(),
                    v.name
                ),
            ));
        }
        let size = var_size(v).ok_or_else(|| {
            load_error(
                None,
                Some(v.line),
                format!("variable `{}` has no size", v.name),
            )
        })?;
        let align = v.alignment().max(1);
        if !align.is_power_of_two() || align > 4096 {
            return Err(load_error(
                None,
                Some(v.line),
                format!("bad alignment {align} of `{}`", v.name),
            ));
        }
        d.align = d.align.max(align);
        let off = (d.image.len() as u64).next_multiple_of(align);
        if off + size > (1 << 30) {
            return Err(load_error(
                None,
                Some(v.line),
                format!("module data past 1 GiB at `{}`", v.name),
            ));
        }
        d.image.resize((off + size) as usize, 0);
        d.symbols.insert(v.name.clone(), off);
        d.sizes.insert(v.name.clone(), size);
    }
    for v in &data_vars {
        let Some(init) = &v.init else { continue };
        let off = d.symbols[&v.name] as usize;
        let size = var_size(v).unwrap_or(0) as usize; // ok: sized above
        let esize = match v.ty {
            VarType::Scalar(s) => s.size() as usize,
            VarType::Pred => 1,
        };
        let ty = match v.ty {
            VarType::Scalar(s) => scalar_ty(s),
            VarType::Pred => Some(Ty::U8),
        }
        .ok_or_else(|| load_error(None, Some(v.line), "unsupported type"))?;
        let mut flat = Vec::new();
        flatten(init, &mut flat);
        for (i, item) in flat.iter().enumerate() {
            let at = off + i * esize;
            if at + esize > off + size {
                return Err(load_error(
                    None,
                    Some(v.line),
                    format!("too many initializers for `{}`", v.name),
                ));
            }
            let bits = match item {
                Init::Imm(imm) => imm_bits(*imm, ty).ok_or_else(|| {
                    load_error(None, Some(v.line), format!("bad initializer {imm}"))
                })?,
                Init::Address { symbol, offset, .. } => {
                    let Some(t) = d.symbols.get(symbol) else {
                        return Err(load_error(
                            None,
                            Some(v.line),
                            format!(
                                "initializer takes the address of `{symbol}`, which is \
                                 not module data (function pointers are not supported)"
                            ),
                        ));
                    };
                    if esize != 8 {
                        return Err(load_error(
                            None,
                            Some(v.line),
                            "an address initializer needs 64-bit elements",
                        ));
                    }
                    d.relocs.push(at);
                    t.wrapping_add(*offset as u64)
                }
                Init::List(_) => 0,
            };
            d.image[at..at + esize].copy_from_slice(&bits.to_le_bytes()[..esize]);
        }
    }
    Ok(d)
}

fn flatten<'a>(i: &'a Init, out: &mut Vec<&'a Init>) {
    match i {
        Init::List(l) => l.iter().for_each(|x| flatten(x, out)),
        x => out.push(x),
    }
}

/// The IR type of a scalar (`None` for f16).
pub(super) fn scalar_ty(s: ast::PtxScalar) -> Option<Ty> {
    use ast::PtxScalar::*;
    Some(match s {
        Bits(1) | Unsigned(1) => Ty::U8,
        Bits(2) | Unsigned(2) => Ty::U16,
        Bits(4) | Unsigned(4) => Ty::U32,
        Bits(8) | Unsigned(8) => Ty::U64,
        Signed(1) => Ty::S8,
        Signed(2) => Ty::S16,
        Signed(4) => Ty::S32,
        Signed(8) => Ty::S64,
        Float(4) => Ty::F32,
        Float(8) => Ty::F64,
        _ => return None,
    })
}

/// Bits of an immediate as an operand of type `ty`.
pub(super) fn imm_bits(imm: ast::Imm, ty: Ty) -> Option<u64> {
    use ast::Imm;
    Some(match (imm, ty) {
        (Imm::Int(v), Ty::F32) => (v as f32).to_bits() as u64,
        (Imm::Int(v), Ty::F64) => (v as f64).to_bits(),
        (Imm::Int(v), Ty::Pred) => (v != 0) as u64,
        (Imm::Int(v), _) => v as u64,
        (Imm::F32(b), Ty::F64) => (f32::from_bits(b) as f64).to_bits(),
        (Imm::F32(b), _) => b as u64,
        (Imm::F64(b), Ty::F32) => (f64::from_bits(b) as f32).to_bits() as u64,
        (Imm::F64(b), _) => b,
        (Imm::Float(v), Ty::F32) => (v as f32).to_bits() as u64,
        (Imm::Float(v), Ty::F64) => v.to_bits(),
        (Imm::Float(_), _) => return None,
    })
}
