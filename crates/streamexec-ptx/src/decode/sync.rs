//! Decoding of block barriers (`bar`/`barrier` `.sync`, `.arrive`, `.red`, `bar.warp.sync`)
//! and `match.sync`.

use super::ProgramBuilder;
use super::fns::Mods;
use crate::ast::{self, Operand};
use crate::error::PtxResult as Result;
use crate::ir::{BarKind, BarRed, MatchMode, Op, ReduxOp, Ty};

impl ProgramBuilder<'_> {
    /// `bar{.cta}` / `barrier{.cta}` `.sync{.aligned} a{, b}`, `.arrive{.aligned} a, b`,
    /// `.red.popc{.aligned}.u32 d, a{, b}, {!}c`, `.red.{and,or}{.aligned}.pred p, a{, b}, {!}c`,
    /// and `bar.warp.sync mask`.
    pub(super) fn barrier(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
        let ops = &i.operands;
        let unsupported = |what: &str| self.unsupported(i, what);
        if m.has("warp") {
            m.has("sync");
            self.done(i, m)?;
            if ops.len() != 1 {
                return Err(unsupported("this bar.warp.sync operand list"));
            }
            return Ok(Op::WarpSync {
                mask: self.src(i, &ops[0], Ty::U32)?,
            });
        }
        m.drop_ignorable();
        let form = m.one_of(&["sync", "arrive", "red"]);
        let red = if form == Some("red") {
            let op = match m.one_of(&["popc", "and", "or"]) {
                Some("popc") => BarRed::Popc,
                Some("and") => BarRed::And,
                Some("or") => BarRed::Or,
                _ => return Err(unsupported("bar.red without .popc, .and or .or")),
            };
            let want = if op == BarRed::Popc {
                Ty::U32
            } else {
                Ty::Pred
            };
            if m.types() != [want] {
                return Err(unsupported(
                    "this bar.red type (.popc takes .u32, .and/.or take .pred)",
                ));
            }
            Some(op)
        } else {
            None
        };
        self.done(i, m)?;
        // The operands after the destination of `bar.red`, up to its predicate.
        let (ids, pred) = match red {
            Some(_) if (3..=4).contains(&ops.len()) => (&ops[1..ops.len() - 1], ops.last()),
            None if (1..=2).contains(&ops.len()) => (&ops[..], None),
            _ => return Err(unsupported("this barrier operand list")),
        };
        let id = self.src(i, &ids[0], Ty::U32)?;
        let count = match ids.get(1) {
            Some(o) => Some(self.src(i, o, Ty::U32)?),
            None => None,
        };
        let kind = match (form, red, pred) {
            (Some("sync"), _, _) => BarKind::Sync,
            (Some("arrive"), _, _) if count.is_some() => BarKind::Arrive,
            (Some("arrive"), _, _) => {
                return Err(self.err(
                    i.line,
                    format!("`{i}`: bar.arrive needs a thread count (`bar.arrive a, b`)"),
                ));
            }
            (_, Some(op), Some(c)) => {
                let (c, neg) = match c {
                    Operand::Not(p) => (self.src(i, &Operand::Reg(p.clone()), Ty::Pred)?, true),
                    o => (self.src(i, o, Ty::Pred)?, false),
                };
                BarKind::Red {
                    op,
                    d: self.reg(i, &ops[0])?,
                    c,
                    neg,
                }
            }
            _ => {
                return Err(unsupported(
                    "this barrier form (bar.sync, bar.arrive, bar.red, bar.warp.sync)",
                ));
            }
        };
        Ok(Op::Bar { id, count, kind })
    }

    /// `match.any.sync.b32 d, a, mask`, `match.all.sync.b64 d[|p], a, mask` (b32 or b64).
    pub(super) fn match_sync(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
        let ops = &i.operands;
        let unsupported = |what: &str| self.unsupported(i, what);
        m.has("sync");
        let mode = match m.one_of(&["any", "all"]) {
            Some("any") => MatchMode::Any,
            Some(_) => MatchMode::All,
            None => return Err(unsupported("match without .any or .all")),
        };
        let ty = match m.types()[..] {
            [t @ (Ty::U32 | Ty::U64)] => t,
            _ => return Err(unsupported("this match type (only .b32 and .b64)")),
        };
        self.done(i, m)?;
        if ops.len() != 3 {
            return Err(unsupported("this match operand list (d, a, membermask)"));
        }
        let (d, p) = match &ops[0] {
            Operand::Pair(d, p) if mode == MatchMode::All => (
                self.reg(i, &Operand::Reg(d.clone()))?,
                Some(self.reg(i, &Operand::Reg(p.clone()))?),
            ),
            Operand::Pair(..) => return Err(unsupported("a predicate output of match.any")),
            o => (self.reg(i, o)?, None),
        };
        Ok(Op::Match {
            mode,
            d,
            p,
            a: self.src(i, &ops[1], ty)?,
            mask: self.src(i, &ops[2], Ty::U32)?,
            wide: ty == Ty::U64,
        })
    }

    /// `redux.sync.{add,min,max}.{u32,s32} d, a, mask` and `redux.sync.{and,or,xor}.b32`.
    pub(super) fn redux(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
        let ops = &i.operands;
        let unsupported = |what: &str| self.unsupported(i, what);
        m.has("sync");
        let which = m.one_of(&["add", "min", "max", "and", "or", "xor"]);
        let signed = m.list.contains(&"s32");
        let bits = m.list.contains(&"b32");
        let ty = m.types();
        self.done(i, m)?;
        let op = match (which, &ty[..]) {
            (Some("add"), [Ty::U32 | Ty::S32]) if !bits => ReduxOp::Add,
            (Some("min"), [Ty::U32 | Ty::S32]) if !bits => ReduxOp::Min { signed },
            (Some("max"), [Ty::U32 | Ty::S32]) if !bits => ReduxOp::Max { signed },
            (Some("and"), [Ty::U32]) if bits => ReduxOp::And,
            (Some("or"), [Ty::U32]) if bits => ReduxOp::Or,
            (Some("xor"), [Ty::U32]) if bits => ReduxOp::Xor,
            _ => {
                return Err(unsupported(
                    "this redux form (integer .add/.min/.max, .and/.or/.xor.b32)",
                ));
            }
        };
        if ops.len() != 3 {
            return Err(unsupported("this redux operand list (d, a, membermask)"));
        }
        Ok(Op::Redux {
            op,
            d: self.reg(i, &ops[0])?,
            a: self.src(i, &ops[1], Ty::U32)?,
            mask: self.src(i, &ops[2], Ty::U32)?,
        })
    }
}
