//! Lowering of block barriers: `bar.sync` and `bar.red` suspend the thread (the driver
//! releases it, with the reduction for `bar.red`); `bar.arrive` counts the thread in through
//! the runtime and goes on.

use cranelift_codegen::ir::InstBuilder;
use cranelift_codegen::ir::condcodes::IntCC;

use super::{I32, I64, Lower};
use crate::ir::{BarKind, Src};
use crate::jit::run;

impl Lower<'_, '_> {
    /// Lowers a barrier; true when it ended the block (a suspension).
    pub(super) fn lower_bar(
        &mut self,
        inst: usize,
        pc: u32,
        id: Src,
        count: Option<Src>,
        kind: BarKind,
    ) -> bool {
        let idv = self.val(id);
        let cv = match count {
            Some(c) => self.val(c),
            None => self.imm(0),
        };
        match kind {
            BarKind::Sync => self.suspend(inst, pc, &[idv, cv]),
            BarKind::Red { c, neg, .. } => {
                let v = self.val(c);
                let cc = if neg { IntCC::Equal } else { IntCC::NotEqual };
                let p = self.b.ins().icmp_imm_s(cc, v, 0);
                let p = self.b.ins().uextend(I64, p);
                self.suspend(inst, pc, &[idv, cv, p]);
            }
            BarKind::Arrive => {
                let t = self.b.use_var(self.t);
                let p = self.b.ins().iconst(I32, pc as i64);
                let f = self.imm(run::bar_arrive as *const () as u64);
                self.b
                    .ins()
                    .call_indirect(self.sigs.arrive, f, &[self.u.ctx, idv, cv, t, p]);
                self.check_faulted();
                return false;
            }
        }
        true
    }
}
