//! `call` and `ret` of one lane: parameter copies, the return stack, and the frames of
//! recursive functions (saved at a call they make, restored at its return; see
//! `decode/frames.rs`).

use super::warp::{Env, Warp};
use crate::fault::Fault;
use crate::ir::{CallSite, Frame, Op, WARP};

/// Calls a lane may have pending.
pub(crate) const MAX_CALL_DEPTH: usize = 1024;
/// Bytes of saved frames of recursive functions a thread may hold (CUDA's default stack is
/// 1 KiB per thread; `cudaLimitStackSize` raises it).
pub(crate) const MAX_FRAME_BYTES: usize = 64 << 10;

impl Warp {
    /// Lane `l` calls `site` from instruction `pc`.
    pub(super) fn call_lane(
        &mut self,
        env: &Env<'_>,
        l: usize,
        pc: u32,
        site: &CallSite,
    ) -> Result<(), Fault> {
        self.call_lane_at(env, l, pc, 0, site)
    }

    /// Lane `l` calls `site`, call site `k` of instruction `pc` (an indirect call has one per
    /// function it may reach).
    pub(super) fn call_lane_at(
        &mut self,
        env: &Env<'_>,
        l: usize,
        pc: u32,
        k: u32,
        site: &CallSite,
    ) -> Result<(), Fault> {
        if self.stacks.is_empty() {
            self.stacks = vec![Vec::new(); WARP];
        }
        if self.stacks[l].len() >= MAX_CALL_DEPTH {
            return Err(self.fault(
                l,
                format!("call stack overflow: calls nested deeper than {MAX_CALL_DEPTH}"),
            ));
        }
        if let Some(f) = &site.save {
            if self.frames.is_empty() {
                self.frames = vec![Vec::new(); WARP];
            }
            if self.frames[l].len() + f.bytes() > MAX_FRAME_BYTES {
                return Err(self.fault(
                    l,
                    format!(
                        "stack overflow: recursion {} calls deep holds more than the {} KiB \
                         of frames a thread may keep",
                        self.stacks[l].len(),
                        MAX_FRAME_BYTES >> 10
                    ),
                ));
            }
            // The callee's activation gets local memory of its own, one frame further on.
            let lb = env.prog.local_bytes;
            let next = self.lbase[l] as usize + lb as usize;
            if next + lb as usize > env.prog.thread_local_bytes() {
                return Err(self.fault(
                    l,
                    format!(
                        "stack overflow: recursion {} calls deep needs more than the {} \
                         frames of {lb} bytes of local memory a thread may hold",
                        self.stacks[l].len(),
                        env.prog.local_frames
                    ),
                ));
            }
            self.save_frame(env, l, f);
            self.lbase[l] = next as u32;
        }
        let tb = env.prog.thread_param_bytes as usize;
        for c in &site.args {
            let (f, t) = (l * tb + c.from as usize, l * tb + c.to as usize);
            self.tparam.copy_within(f..f + c.len as usize, t);
        }
        self.stacks[l].push((pc, k));
        Ok(())
    }

    /// Lane `l` returns: the instruction it goes on at.
    pub(super) fn ret_lane(&mut self, env: &Env<'_>, l: usize) -> Result<u32, Fault> {
        let Some((call, k)) = self.stacks.get_mut(l).and_then(|s| s.pop()) else {
            return Err(self.fault(l, "ret with no pending call".into()));
        };
        let site = match env.code.get(call as usize).map(|i| &i.op) {
            Some(Op::Call(site)) => Some(&**site),
            Some(Op::CallIndirect { sites, .. }) => sites.get(k as usize).map(|(_, s)| s),
            _ => None,
        };
        if let Some(site) = site {
            let tb = env.prog.thread_param_bytes as usize;
            let row = l * tb;
            // The values are read before the caller's frame comes back (it may hold the
            // callee's return slots), and written after.
            let vals: Vec<Vec<u8>> = site
                .rets
                .iter()
                .map(|c| self.tparam[row + c.from as usize..][..c.len as usize].to_vec())
                .collect();
            if let Some(f) = &site.save {
                self.restore_frame(env, l, f);
                self.lbase[l] = self.lbase[l].saturating_sub(env.prog.local_bytes);
            }
            for (c, v) in site.rets.iter().zip(vals) {
                self.tparam[row + c.to as usize..][..v.len()].copy_from_slice(&v);
            }
        }
        Ok(call + 1)
    }

    fn save_frame(&mut self, env: &Env<'_>, l: usize, f: &Frame) {
        let out = &mut self.frames[l];
        for r in f.regs.0..f.regs.1 {
            out.extend_from_slice(&self.regs[r as usize * WARP + l].to_le_bytes());
        }
        let tb = env.prog.thread_param_bytes as usize;
        for &(a, b) in &f.tparam {
            out.extend_from_slice(&self.tparam[l * tb..][a as usize..b as usize]);
        }
    }

    fn restore_frame(&mut self, env: &Env<'_>, l: usize, f: &Frame) {
        let Some(stack) = self.frames.get_mut(l) else {
            return;
        };
        let mut at = stack.len() - f.bytes().min(stack.len());
        let saved = stack.split_off(at);
        at = 0;
        let mut take = |n: usize| {
            let s = &saved[at.min(saved.len())..(at + n).min(saved.len())];
            at += n;
            s
        };
        for r in f.regs.0..f.regs.1 {
            let mut b = [0u8; 8];
            let s = take(8);
            b[..s.len()].copy_from_slice(s);
            self.regs[r as usize * WARP + l] = u64::from_le_bytes(b);
        }
        let tb = env.prog.thread_param_bytes as usize;
        for &(a, b) in &f.tparam {
            let s = take((b - a) as usize);
            self.tparam[l * tb..][a as usize..][..s.len()].copy_from_slice(s);
        }
    }
}
