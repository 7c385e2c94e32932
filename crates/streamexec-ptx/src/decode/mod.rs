//! Syntax tree → executable IR ([`ir`](super::ir)): symbol resolution, register allocation,
//! memory layout of variables and parameters, label and call resolution. Per-opcode decoding
//! is in `inst.rs` (arithmetic in `arith.rs`, memory in `mem.rs`, lane-function and
//! modifier tables in `fns.rs`).
//!
//! Every `.entry` becomes one [`Program`] holding the entry's code followed by the code of every
//! `.func` it reaches. Call parameters and return values get fixed per-thread slots; a call
//! made from a function that can re-enter itself (recursion) saves the function's registers,
//! local memory and parameter slots and restores them at return (`frames.rs`).

mod arith;
mod fns;
mod frames;
mod half;
#[cfg(feature = "jit")]
pub(crate) use fns::{cvt_if_to, cvt_ii_to};
mod inst;
mod mem;
mod service;
mod set;
mod sync;

use std::collections::HashMap;
use std::sync::Arc;

use super::ast::{self, Operand, Space as AstSpace, Statement, VarType};
use super::data::{imm_bits, scalar_ty, var_size};
use super::ir::{
    Addr, CallSite, DecodedModule, FUNC_WINDOW, Frame, Inst, LOCAL_WINDOW, LaunchBounds,
    ModuleData, Op, PARAM_WINDOW, ParamCopy, ParamSlot, Program, SHARED_WINDOW, Space, Src, Sreg,
    THREAD_PARAM_BASE, Ty,
};
use crate::error::{PtxError, PtxResult as Result, load_error};

/// Shared-space offset of dynamic (`.extern .shared`) shared memory; static shared memory
/// starts at 0.
pub const DYNAMIC_SHARED_BASE: u64 = 0x0100_0000;

/// What a name stands for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Sym {
    /// A register slot.
    Reg(u32),
    /// Static shared memory at this shared-space offset.
    Shared(u64),
    /// Local memory at this offset of the thread's frame.
    Local(u64),
    /// A kernel parameter at this offset.
    KParam(u64),
    /// A per-thread call parameter at this offset.
    TParam(u64, u32),
    /// Module data at this device address.
    Abs(u64),
    /// A function.
    Func,
}

/// Decodes every `.entry` of `m`; module data lives at device address `data_base`.
pub fn decode_module(m: &ast::Module, data: &ModuleData, data_base: u64) -> Result<DecodedModule> {
    let mut programs = HashMap::new();
    for f in m
        .functions
        .iter()
        .filter(|f| f.is_entry && f.body.is_some())
    {
        let p = ProgramBuilder::new(m, data, data_base, &f.name).build(f)?;
        programs.insert(f.name.clone(), Arc::new(p));
    }
    Ok(DecodedModule { programs })
}

/// Local memory a thread of a program with recursion may hold across its activations (CUDA's
/// default stack is 1 KiB per thread; `cudaLimitStackSize` raises it).
const LOCAL_STACK_BYTES: u64 = 64 << 10;

struct FuncInfo {
    params: Vec<(u64, u32)>,
    rets: Vec<(u64, u32)>,
    start: Option<u32>,
    /// What a call made from this function saves if the function is recursive.
    frame: Option<Frame>,
}

/// Builds one program.
pub(super) struct ProgramBuilder<'m> {
    pub(super) m: &'m ast::Module,
    pub(super) kernel: String,
    pub(super) code: Vec<Inst>,
    pub(super) source: Vec<(u32, String)>,
    regs: u32,
    shared: u64,
    local: u64,
    tparam: u64,
    params: Vec<ParamSlot>,
    param_bytes: u64,
    module_scope: HashMap<String, Sym>,
    scopes: Vec<HashMap<String, Sym>>,
    labels: HashMap<String, u32>,
    label_fixups: Vec<(usize, String, u32, String)>,
    /// Call instructions to point at their callee: (instruction, callee, caller).
    /// (instruction, call site within it, callee, caller) of each call, for its target and
    /// frame once every function is decoded.
    call_fixups: Vec<(usize, usize, String, String)>,
    funcs: HashMap<String, FuncInfo>,
    worklist: Vec<String>,
    edges: Vec<(String, String)>,
    current: String,
    /// Whether the function being decoded is the entry (its `ret` ends the thread).
    pub(super) in_entry: bool,
}

impl<'m> ProgramBuilder<'m> {
    fn new(m: &'m ast::Module, data: &ModuleData, data_base: u64, kernel: &str) -> Self {
        let mut b = ProgramBuilder {
            m,
            kernel: kernel.to_string(),
            code: Vec::new(),
            source: Vec::new(),
            regs: 0,
            shared: 0,
            local: 0,
            tparam: 0,
            params: Vec::new(),
            param_bytes: 0,
            module_scope: HashMap::new(),
            scopes: Vec::new(),
            labels: HashMap::new(),
            label_fixups: Vec::new(),
            call_fixups: Vec::new(),
            funcs: HashMap::new(),
            worklist: Vec::new(),
            edges: Vec::new(),
            current: String::new(),
            in_entry: true,
        };
        for (name, off) in &data.symbols {
            b.module_scope
                .insert(name.clone(), Sym::Abs(data_base.wrapping_add(*off)));
        }
        for f in &m.functions {
            b.module_scope.insert(f.name.clone(), Sym::Func);
        }
        b
    }

    pub(super) fn err(&self, line: u32, msg: impl std::fmt::Display) -> PtxError {
        load_error(Some(&self.kernel), Some(line), msg)
    }

    /// `i` does `what`, which the engines do not run.
    pub(super) fn unsupported(&self, i: &ast::Instruction, what: &str) -> PtxError {
        self.err(
            i.line,
            format!("`{i}`: {what} is not supported by the host platform's PTX engine"),
        )
    }

    fn alloc(cursor: &mut u64, size: u64, align: u64) -> u64 {
        let off = cursor.next_multiple_of(align.max(1));
        *cursor = off + size;
        off
    }

    /// Declares a variable in the innermost scope (or the module scope with `module`).
    fn declare(&mut self, v: &ast::Variable, module: bool) -> Result<()> {
        let align = v.alignment().max(1);
        if !align.is_power_of_two() || align > 4096 {
            return Err(self.err(v.line, format!("bad alignment {align} of `{}`", v.name)));
        }
        let sym = match v.space {
            AstSpace::Reg => {
                // Registers are untyped 64-bit slots: a half (or a pair) takes one like any
                // 16-bit (32-bit) value.
                let half = |s: ast::PtxScalar| {
                    matches!(
                        s,
                        ast::PtxScalar::Float(2)
                            | ast::PtxScalar::BFloat16
                            | ast::PtxScalar::Half2 { .. }
                    )
                };
                if matches!(v.ty, VarType::Scalar(s) if scalar_ty(s).is_none() && !half(s)) {
                    return Err(self.err(
                        v.line,
                        format!("register `{}` has an unsupported type ({})", v.name, v.ty),
                    ));
                }
                let scope = self.scopes.last_mut().unwrap_or(&mut self.module_scope);
                match v.range {
                    Some(n) => {
                        if n > 1 << 20 {
                            return Err(self.err(v.line, "too many registers"));
                        }
                        for i in 0..n {
                            scope.insert(format!("{}{i}", v.name), Sym::Reg(self.regs));
                            self.regs += 1;
                        }
                    }
                    None => {
                        scope.insert(v.name.clone(), Sym::Reg(self.regs));
                        self.regs += 1;
                    }
                }
                return Ok(());
            }
            AstSpace::Shared
                if v.linkage == ast::Linkage::Extern
                    || (v.array.first() == Some(&None) && v.init.is_none()) =>
            {
                Sym::Shared(DYNAMIC_SHARED_BASE)
            }
            space => {
                let size = var_size(v).filter(|s| *s <= 1 << 30).ok_or_else(|| {
                    self.err(v.line, format!("variable `{}` has no usable size", v.name))
                })?;
                if v.init.is_some() && space != AstSpace::Global && space != AstSpace::Const {
                    return Err(self.err(
                        v.line,
                        format!(
                            "initializer on {} variable `{}` is not supported",
                            space.directive(),
                            v.name
                        ),
                    ));
                }
                match space {
                    AstSpace::Shared => Sym::Shared(Self::alloc(&mut self.shared, size, align)),
                    AstSpace::Local => Sym::Local(Self::alloc(&mut self.local, size, align)),
                    AstSpace::Param if !module => {
                        let off = Self::alloc(&mut self.tparam, size, align);
                        Sym::TParam(off, size as u32)
                    }
                    _ => {
                        return Err(self.err(
                            v.line,
                            format!(
                                "{} variable `{}` inside a function is not supported",
                                space.directive(),
                                v.name
                            ),
                        ));
                    }
                }
            }
        };
        let scope = if module {
            &mut self.module_scope
        } else {
            self.scopes.last_mut().unwrap_or(&mut self.module_scope)
        };
        scope.insert(v.name.clone(), sym);
        Ok(())
    }

    pub(super) fn lookup(&self, name: &str) -> Option<Sym> {
        self.scopes
            .iter()
            .rev()
            .find_map(|s| s.get(name).copied())
            .or_else(|| self.module_scope.get(name).copied())
    }

    fn build(mut self, entry: &'m ast::Function) -> Result<Program> {
        for v in &self.m.variables {
            if matches!(v.space, AstSpace::Shared | AstSpace::Local) {
                self.declare(v, true)?;
            }
        }
        // Kernel parameters.
        let mut scope = HashMap::new();
        for p in &entry.params {
            let size = var_size(p).ok_or_else(|| self.err(p.line, "parameter without a size"))?;
            let off = Self::alloc(&mut self.param_bytes, size, p.alignment().max(1));
            scope.insert(p.name.clone(), Sym::KParam(off));
            self.params.push(ParamSlot {
                name: p.name.clone(),
                offset: off as u32,
                size: size as u32,
            });
        }
        if self.param_bytes > 4096 {
            return Err(self.err(entry.line, "more than 4 KiB of kernel parameters"));
        }
        let bounds = self.launch_bounds(entry)?;
        self.current = entry.name.clone();
        self.body(entry, scope)?;
        self.in_entry = false;
        while let Some(name) = self.worklist.pop() {
            let f = self.find_func(&name).ok_or_else(|| {
                load_error(Some(&self.kernel), None, format!("function `{name}` is declared but has no body in this module (the engines serve only vprintf, malloc, free and __assertfail from outside a module)"))
            })?;
            let info = &self.funcs[&name];
            let mut scope = HashMap::new();
            for (p, (off, size)) in f.params.iter().zip(&info.params) {
                scope.insert(p.name.clone(), Sym::TParam(*off, *size));
            }
            for (p, (off, size)) in f.returns.iter().zip(&info.rets) {
                scope.insert(p.name.clone(), Sym::TParam(*off, *size));
            }
            let start = self.code.len() as u32;
            if let Some(fi) = self.funcs.get_mut(&name) {
                fi.start = Some(start);
            }
            self.current = name.clone();
            let before = (self.regs, self.tparam);
            self.body(f, scope)?;
            let frame = self.frame_of(&name, before);
            if let Some(fi) = self.funcs.get_mut(&name) {
                fi.frame = Some(frame);
            }
        }
        let recursive = self.recursive();
        for (at, k, callee, caller) in std::mem::take(&mut self.call_fixups) {
            let start = self.funcs[&callee].start.unwrap_or(0);
            let save = if recursive.contains(&caller) {
                self.funcs[&caller].frame.clone().map(std::sync::Arc::new)
            } else {
                None
            };
            let site = match &mut self.code[at].op {
                Op::Call(c) => Some(&mut **c),
                Op::CallIndirect { sites, .. } => sites.get_mut(k).map(|(_, c)| c),
                _ => None,
            };
            if let Some(c) = site {
                c.target = start;
                c.save = save;
            }
        }
        if self.shared > 48 * 1024 {
            return Err(load_error(
                Some(&self.kernel),
                None,
                format!(
                    "{} bytes of static shared memory exceed the 48 KiB per block",
                    self.shared
                ),
            ));
        }
        if self.local > 64 << 10 || self.tparam > 64 << 10 {
            return Err(load_error(
                Some(&self.kernel),
                None,
                "more than 64 KiB of local or call-parameter memory per thread",
            ));
        }
        if self.regs > 1 << 14 {
            return Err(load_error(
                Some(&self.kernel),
                None,
                format!(
                    "{} registers per thread; the engine allows 16384",
                    self.regs
                ),
            ));
        }
        // A recursive function's activations each have their own local memory (a local
        // address may be passed down to a callee, as numba does for return values): the
        // thread's local memory holds a stack of frames, up to LOCAL_STACK_BYTES.
        let local_frames = if recursive.is_empty() {
            1
        } else {
            (LOCAL_STACK_BYTES / self.local.max(1)).clamp(2, 1024) as u32
        };
        let carry_reg = self.regs;
        Ok(Program {
            name: self.kernel.clone(),
            code: self.code,
            source: self.source,
            regs: carry_reg + 1,
            carry_reg,
            params: self.params,
            param_bytes: self.param_bytes as u32,
            thread_param_bytes: self.tparam as u32,
            local_bytes: self.local as u32,
            local_frames,
            static_shared_bytes: self.shared as u32,
            bounds,
        })
    }

    /// The entry's `.maxntid` / `.reqntid` (1 to 3 extents, each at least 1) and
    /// `.minnctapersm` (one count).
    fn launch_bounds(&self, entry: &ast::Function) -> Result<LaunchBounds> {
        let mut b = LaunchBounds::default();
        for (name, nums) in &entry.directives {
            let bad = || {
                self.err(
                    entry.line,
                    format!(
                        "`{name} {}` is not a valid launch bound",
                        nums.iter()
                            .map(u64::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            };
            let dims = || -> Result<[u32; 3]> {
                if nums.is_empty() || nums.len() > 3 || nums.iter().any(|&n| n == 0 || n > 1 << 20)
                {
                    return Err(bad());
                }
                let mut d = [1u32; 3];
                for (k, &n) in nums.iter().enumerate() {
                    d[k] = n as u32;
                }
                Ok(d)
            };
            match name.as_str() {
                ".maxntid" => b.maxntid = Some(dims()?),
                ".reqntid" => b.reqntid = Some(dims()?),
                ".minnctapersm" => match nums[..] {
                    [n] if n <= u32::MAX as u64 => b.minnctapersm = Some(n as u32),
                    _ => return Err(bad()),
                },
                _ => {}
            }
        }
        Ok(b)
    }

    /// The index of `.func` `name` among the module's functions (its address is
    /// `FUNC_WINDOW` plus it).
    fn func_index(&self, name: &str) -> Option<u64> {
        self.m
            .functions
            .iter()
            .position(|f| f.name == name && !f.is_entry)
            .map(|k| k as u64)
    }

    /// A call through the function address in register `reg`: a site for every function
    /// with a body whose parameter and return counts fit the call.
    pub(super) fn call_indirect(
        &mut self,
        i: &ast::Instruction,
        reg: u32,
        rets: &[Operand],
        args: &[Operand],
    ) -> Result<Op> {
        let fits: Vec<String> = self
            .m
            .functions
            .iter()
            .filter(|f| f.body.is_some() && !f.is_entry && f.params.len() == args.len())
            .filter(|f| f.returns.len() == rets.len() || (f.returns.is_empty() && rets.len() == 1))
            .map(|f| f.name.clone())
            .collect();
        let mut sites = Vec::with_capacity(fits.len());
        for (k, name) in fits.iter().enumerate() {
            let addr = FUNC_WINDOW + self.func_index(name).unwrap_or(0);
            match self.call(i, name, rets, args)? {
                Op::Call(site) => {
                    if let Some(f) = self.call_fixups.last_mut() {
                        f.1 = k;
                    }
                    sites.push((addr, *site));
                }
                _ => return Err(self.unsupported(i, "an indirect call to a served function")),
            }
        }
        Ok(Op::CallIndirect {
            reg,
            sites: sites.into_boxed_slice(),
        })
    }

    fn find_func(&self, name: &str) -> Option<&'m ast::Function> {
        self.m
            .functions
            .iter()
            .find(|f| f.name == name && f.body.is_some() && !f.is_entry)
    }

    fn body(&mut self, f: &'m ast::Function, scope: HashMap<String, Sym>) -> Result<()> {
        self.scopes.push(scope);
        self.labels.clear();
        let first = self.code.len();
        let body = f.body.as_deref().unwrap_or(&[]);
        self.statements(body)?;
        // A body that falls off its end returns.
        self.push(
            f.line,
            "ret; (implicit)".into(),
            Inst {
                op: if self.in_entry { Op::Exit } else { Op::Ret },
                guard: None,
            },
        );
        for (at, label, line, text) in std::mem::take(&mut self.label_fixups) {
            let target = *self.labels.get(&label).ok_or_else(|| {
                self.err(
                    line,
                    format!("`{text}`: label `{label}` is not defined in this function"),
                )
            })?;
            if let Op::Bra { target: t } = &mut self.code[at].op {
                *t = target;
            }
        }
        let _ = first;
        self.scopes.pop();
        Ok(())
    }

    fn statements(&mut self, body: &'m [Statement]) -> Result<()> {
        for s in body {
            match s {
                Statement::Label { name, line } => {
                    if self
                        .labels
                        .insert(name.clone(), self.code.len() as u32)
                        .is_some()
                    {
                        return Err(self.err(*line, format!("label `{name}` defined twice")));
                    }
                }
                Statement::Var(v) => self.declare(v, false)?,
                Statement::Inst(i) => self.inst(i)?,
                Statement::Block(b) => {
                    self.scopes.push(HashMap::new());
                    self.statements(b)?;
                    self.scopes.pop();
                }
            }
        }
        Ok(())
    }

    pub(super) fn push(&mut self, line: u32, text: String, inst: Inst) {
        self.code.push(inst);
        self.source.push((line, text));
    }

    /// Records that instruction `at` branches to `label`.
    pub(super) fn branch_fixup(&mut self, at: usize, label: &str, i: &ast::Instruction) {
        self.label_fixups
            .push((at, label.to_string(), i.line, i.to_string()));
    }

    /// Builds a call site to `callee` with argument and return parameter names.
    pub(super) fn call(
        &mut self,
        i: &ast::Instruction,
        callee: &str,
        rets: &[Operand],
        args: &[Operand],
    ) -> Result<Op> {
        if let Some(op) = self.service_call(i, callee, rets, args)? {
            return Ok(op);
        }
        let Some(f) = self.find_func(callee) else {
            return Err(self.err(i.line, format!("`{i}`: `{callee}` has no body in this module (the engines serve only vprintf, malloc, free and __assertfail from outside a module)")));
        };
        if !self.funcs.contains_key(callee) {
            let mut params = Vec::new();
            for p in &f.params {
                if p.space != AstSpace::Param {
                    return Err(self.err(
                        p.line,
                        format!(
                            "parameter `{}` of `{callee}` is not in .param space",
                            p.name
                        ),
                    ));
                }
                let size =
                    var_size(p).ok_or_else(|| self.err(p.line, "parameter without a size"))?;
                params.push((
                    Self::alloc(&mut self.tparam, size, p.alignment().max(1)),
                    size as u32,
                ));
            }
            let mut r = Vec::new();
            for p in &f.returns {
                let size =
                    var_size(p).ok_or_else(|| self.err(p.line, "return value without a size"))?;
                r.push((
                    Self::alloc(&mut self.tparam, size, p.alignment().max(1)),
                    size as u32,
                ));
            }
            self.funcs.insert(
                callee.to_string(),
                FuncInfo {
                    params,
                    rets: r,
                    start: None,
                    frame: None,
                },
            );
            self.worklist.push(callee.to_string());
        }
        self.edges.push((self.current.clone(), callee.to_string()));
        let info = &self.funcs[callee];
        // A call that takes a return value from a function that returns none (numba declares
        // a C `void` function this way) leaves the value undefined, as the driver's linker
        // allows; any other mismatch is refused.
        let void_callee = info.rets.is_empty() && rets.len() == 1;
        if args.len() != info.params.len() || (rets.len() != info.rets.len() && !void_callee) {
            return Err(self.err(
                i.line,
                format!(
                    "`{i}`: `{callee}` takes {} argument(s) and {} return value(s)",
                    info.params.len(),
                    info.rets.len()
                ),
            ));
        }
        let (pp, rr) = (info.params.clone(), info.rets.clone());
        let slot = |o: &Operand| -> Result<(u64, u32)> {
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
                Some(Sym::TParam(off, size)) => Ok((off, size)),
                _ => Err(self.err(
                    i.line,
                    format!("`{i}`: call operand `{name}` is not a .param variable in scope"),
                )),
            }
        };
        let mut site = CallSite {
            target: 0,
            args: Vec::new(),
            rets: Vec::new(),
            save: None,
        };
        for (a, (off, size)) in args.iter().zip(&pp) {
            let (from, fsize) = slot(a)?;
            site.args.push(ParamCopy {
                from: from as u32,
                to: *off as u32,
                len: fsize.min(*size),
            });
        }
        for (r, (off, size)) in rets.iter().zip(&rr) {
            let (to, tsize) = slot(r)?;
            site.rets.push(ParamCopy {
                from: *off as u32,
                to: to as u32,
                len: tsize.min(*size),
            });
        }
        self.call_fixups
            .push((self.code.len(), 0, callee.to_string(), self.current.clone()));
        Ok(Op::Call(Box::new(site)))
    }

    /// The address of a variable symbol as seen from `space` (`None`: its own space).
    pub(super) fn symbol_address(
        &self,
        i: &ast::Instruction,
        name: &str,
        offset: i64,
        space: Option<Space>,
    ) -> Result<i64> {
        let sym = self
            .lookup(name)
            .ok_or_else(|| self.err(i.line, format!("`{i}`: unknown symbol `{name}`")))?;
        let bad = || {
            self.err(
                i.line,
                format!("`{i}`: `{name}` cannot be addressed in this state space"),
            )
        };
        let (own, base): (Space, u64) = match sym {
            Sym::Shared(o) => (Space::Shared, o),
            Sym::Local(o) => (Space::Local, o),
            Sym::KParam(o) => (Space::Param, o),
            Sym::TParam(o, _) => (Space::Param, THREAD_PARAM_BASE + o),
            Sym::Abs(a) => (Space::Global, a),
            Sym::Func => match self.func_index(name) {
                Some(k) if space.is_none() || space == Some(Space::Generic) => {
                    return Ok(((FUNC_WINDOW + k) as i64).wrapping_add(offset));
                }
                _ => return Err(bad()),
            },
            Sym::Reg(_) => return Err(bad()),
        };
        let addr = match (space, own) {
            (None, _) => base,
            (Some(s), o) if s == o => base,
            (Some(Space::Generic), Space::Shared) => SHARED_WINDOW + base,
            (Some(Space::Generic), Space::Local) => LOCAL_WINDOW + base,
            (Some(Space::Generic), Space::Param) => PARAM_WINDOW + base,
            (Some(Space::Generic), Space::Global) => base,
            _ => return Err(bad()),
        };
        Ok((addr as i64).wrapping_add(offset))
    }

    /// A register operand (destination or source).
    pub(super) fn reg(&self, i: &ast::Instruction, o: &Operand) -> Result<u32> {
        match o {
            Operand::Reg(name) | Operand::Symbol { name, offset: 0 } => match self.lookup(name) {
                Some(Sym::Reg(r)) => Ok(r),
                _ => Err(self.err(
                    i.line,
                    format!("`{i}`: `{name}` is not a declared register"),
                )),
            },
            _ => Err(self.err(i.line, format!("`{i}`: operand `{o}` must be a register"))),
        }
    }

    /// A source operand of type `ty`.
    pub(super) fn src(&self, i: &ast::Instruction, o: &Operand, ty: Ty) -> Result<Src> {
        match o {
            Operand::Reg(name) if name.starts_with('%') && self.lookup(name).is_none() => {
                fns::sreg(name)
                    .map(Src::Sreg)
                    .ok_or_else(|| self.err(i.line, format!("`{i}`: unknown register `{name}`")))
            }
            Operand::Reg(name) => match self.lookup(name) {
                Some(Sym::Reg(r)) => Ok(Src::Reg(r)),
                Some(Sym::Local(_)) => Ok(Src::Sreg(Sreg::LocalAddr(
                    self.symbol_address(i, name, 0, None)? as u64,
                ))),
                Some(_) => Ok(Src::Imm(self.symbol_address(i, name, 0, None)? as u64)),
                None => Err(self.err(i.line, format!("`{i}`: unknown name `{name}`"))),
            },
            Operand::Imm(imm) => imm_bits(*imm, ty).map(Src::Imm).ok_or_else(|| {
                self.err(
                    i.line,
                    format!("`{i}`: immediate {imm} does not fit type {ty:?}"),
                )
            }),
            Operand::Symbol { name, offset: 0 }
                if matches!(self.lookup(name), Some(Sym::Reg(_))) =>
            {
                Ok(Src::Reg(self.reg(i, o)?))
            }
            // PTX's predefined constant (LLVM writes `llvm.nvvm.read.ptx.sreg.warpsize` so).
            Operand::Symbol { name, offset: 0 }
                if name == "WARP_SZ" && self.lookup(name).is_none() =>
            {
                self.src(i, &Operand::Imm(ast::Imm::Int(crate::ir::WARP as i64)), ty)
            }
            Operand::Symbol { name, offset } => {
                let a = self.symbol_address(i, name, *offset, None)? as u64;
                Ok(match self.lookup(name) {
                    Some(Sym::Local(_)) => Src::Sreg(Sreg::LocalAddr(a)),
                    _ => Src::Imm(a),
                })
            }
            _ => Err(self.err(i.line, format!("`{i}`: operand `{o}` is not a value"))),
        }
    }

    /// A memory operand in `space`.
    pub(super) fn addr(&self, i: &ast::Instruction, o: &Operand, space: Space) -> Result<Addr> {
        let Operand::Address(a) = o else {
            return Err(self.err(i.line, format!("`{i}`: `{o}` is not an address [..]")));
        };
        Ok(match &a.base {
            ast::AddressBase::Reg(name) => match self.lookup(name) {
                Some(Sym::Reg(r)) => Addr {
                    base: Some(r),
                    offset: a.offset,
                },
                Some(_) => Addr {
                    base: None,
                    offset: self.symbol_address(i, name, a.offset, Some(space))?,
                },
                None => return Err(self.err(i.line, format!("`{i}`: unknown name `{name}`"))),
            },
            ast::AddressBase::Symbol(name) => Addr {
                base: None,
                offset: self.symbol_address(i, name, a.offset, Some(space))?,
            },
            ast::AddressBase::Absolute => Addr {
                base: None,
                offset: a.offset,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediates_convert_to_the_instruction_type() {
        use ast::Imm;
        assert_eq!(imm_bits(Imm::F32(0x42F6_0000), Ty::F32), Some(0x42F6_0000));
        assert_eq!(
            imm_bits(Imm::F32(0x3F80_0000), Ty::F64),
            Some(1.0f64.to_bits())
        );
        assert_eq!(
            imm_bits(Imm::Float(0.5), Ty::F32),
            Some(0.5f32.to_bits() as u64)
        );
        assert_eq!(imm_bits(Imm::Int(-1), Ty::U32), Some(u64::MAX));
        assert_eq!(imm_bits(Imm::Float(0.5), Ty::U32), None);
    }
}
