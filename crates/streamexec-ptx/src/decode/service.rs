//! Calls of the functions the launcher serves (`vprintf`, `malloc`, `free`, `__assertfail`;
//! `services.rs`): declared `.extern .func` without a body, decoded to one `Op::Service` that
//! reads the caller's `.param` arguments in place.

use super::{ProgramBuilder, Sym};
use crate::ast::{self, Operand};
use crate::error::PtxResult as Result;
use crate::ir::{Op, Service, ServiceCall};

impl ProgramBuilder<'_> {
    /// The call `i` of served function `callee`, or `None` if `callee` is not one (or the
    /// module defines it).
    pub(super) fn service_call(
        &self,
        i: &ast::Instruction,
        callee: &str,
        rets: &[Operand],
        args: &[Operand],
    ) -> Result<Option<Op>> {
        let Some((service, params, ret)) = Service::named(callee) else {
            return Ok(None);
        };
        let declared = self
            .m
            .functions
            .iter()
            .any(|f| f.name == callee && !f.is_entry);
        let defined = self
            .m
            .functions
            .iter()
            .any(|f| f.name == callee && !f.is_entry && f.body.is_some());
        if !declared || defined {
            return Ok(None);
        }
        if args.len() != params.len() || rets.len() != usize::from(ret.is_some()) {
            return Err(self.err(
                i.line,
                format!(
                    "`{i}`: `{callee}` takes {} argument(s) and {} return value(s)",
                    params.len(),
                    usize::from(ret.is_some())
                ),
            ));
        }
        let slot = |o: &Operand, want: u32| -> Result<(u32, u32)> {
            let name = match o {
                Operand::Symbol { name, offset: 0 } | Operand::Reg(name) => name,
                _ => {
                    return Err(self.err(
                        i.line,
                        format!("`{i}`: call operand `{o}` must name a .param variable"),
                    ));
                }
            };
            match self.lookup(name) {
                Some(Sym::TParam(off, size)) if size >= want => Ok((off as u32, want)),
                Some(Sym::TParam(_, size)) => Err(self.err(
                    i.line,
                    format!("`{i}`: `{name}` has {size} bytes; `{callee}` takes {want} there"),
                )),
                _ => Err(self.err(
                    i.line,
                    format!("`{i}`: call operand `{name}` is not a .param variable in scope"),
                )),
            }
        };
        let args = args
            .iter()
            .zip(params)
            .map(|(o, &w)| slot(o, w))
            .collect::<Result<Vec<_>>>()?;
        let ret = match (rets.first(), ret) {
            (Some(o), Some(w)) => Some(slot(o, w)?),
            _ => None,
        };
        Ok(Some(Op::Service(Box::new(ServiceCall {
            service,
            args,
            ret,
        }))))
    }
}
