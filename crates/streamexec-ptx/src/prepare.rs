//! Launching a kernel: arguments checked against the entry's parameters and packed, shared
//! memory checked against the limit, the engine chosen (compiling on first use), and the grid
//! run.

use std::time::Instant;

use parking_lot::Mutex;

use crate::PtxEngine;
use crate::dim::Dim3;
use crate::error::{Error, Result};
use crate::interp::race::RaceGrid;
use crate::launch::{Launch, next_launch_id};
use crate::memory::Pinned;
use crate::module::Kernel;

/// One argument of a launch, in the order of the kernel's parameters.
#[derive(Clone)]
pub enum Arg<'a> {
    /// A by-value parameter: its bytes (their count must be the parameter's size).
    Scalar(&'a [u8]),
    /// A pointer parameter: the range it points to, pinned for the launch (the parameter gets
    /// its device address).
    Pointer(Pinned),
    /// Dynamic shared memory (`extern .shared`): not a parameter; the bytes add up over every
    /// such argument, each rounded up to 16.
    SharedMemory(u64),
}

/// How to run a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks per grid.
    pub grid: Dim3,
    /// Threads per block.
    pub block: Dim3,
    /// The engine ([`PtxEngine::Auto`] by default).
    pub engine: PtxEngine,
    /// Record every global and shared access between barriers and fail the launch on a data
    /// race (interpreter only, so it implies the interpreter).
    pub race_check: bool,
    /// Static plus dynamic shared memory a block may use, in bytes.
    pub shared_memory_limit: u64,
    /// A cooperative launch (`cuLaunchCooperativeKernel`): every block runs at once, each on
    /// a thread of its own, so blocks may wait for each other (a grid-wide barrier spinning
    /// on global memory with `nanosleep`); when a block fails, the others' `nanosleep` ends
    /// their wait with a fault instead of a hang. Runs on the interpreter.
    pub cooperative: bool,
}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig {
            grid: Dim3::default(),
            block: Dim3::default(),
            engine: PtxEngine::Auto,
            race_check: false,
            shared_memory_limit: 48 * 1024,
            cooperative: false,
        }
    }
}

/// A launch checked and packed, ready to run ([`run`](Self::run)) once.
pub struct PreparedLaunch {
    launch: Launch,
    /// Keeps the module (its data, its compiled code) alive until the launch has run.
    _module: std::sync::Arc<crate::Module>,
    #[cfg(feature = "jit")]
    jit: Option<std::sync::Arc<crate::jit::JitKernel>>,
}

impl Kernel {
    /// Checks `args` against the entry's parameters and `config`'s limits, packs them, and
    /// chooses the engine (compiling the kernel at its first JIT launch).
    pub fn prepare(&self, config: &LaunchConfig, args: &[Arg<'_>]) -> Result<PreparedLaunch> {
        let prog = &self.prog;
        let mismatch = |detail: String| Error::Signature {
            kernel: self.name.clone(),
            detail,
        };
        let mut params = vec![0u8; prog.param_bytes as usize];
        let mut pins = Vec::new();
        let mut dynamic = 0u64;
        let mut requested = 0u64;
        let mut slot = 0;
        for (i, a) in args.iter().enumerate() {
            if let Arg::SharedMemory(bytes) = a {
                dynamic = dynamic.saturating_add(bytes.saturating_add(15) & !15);
                requested = requested.saturating_add(*bytes);
                continue;
            }
            let p = prog.params.get(slot).ok_or_else(|| {
                mismatch(format!(
                    "the launch passes more than the {} parameter(s) the PTX entry declares",
                    prog.params.len()
                ))
            })?;
            slot += 1;
            let at = p.offset as usize;
            match a {
                Arg::Scalar(bytes) => {
                    if bytes.len() != p.size as usize {
                        return Err(mismatch(format!(
                            "argument {i}: {} bytes passed for PTX parameter `{}` of {} bytes",
                            bytes.len(),
                            p.name,
                            p.size
                        )));
                    }
                    params[at..at + bytes.len()].copy_from_slice(bytes);
                }
                Arg::Pointer(pinned) => {
                    if p.size != 8 {
                        return Err(mismatch(format!(
                            "argument {i}: a pointer passed for PTX parameter `{}` of {} bytes",
                            p.name, p.size
                        )));
                    }
                    params[at..at + 8].copy_from_slice(&pinned.address().to_le_bytes());
                    pins.push(pinned.clone());
                }
                Arg::SharedMemory(_) => {}
            }
        }
        if slot != prog.params.len() {
            return Err(mismatch(format!(
                "the launch passes {slot} parameter(s), the PTX entry declares {}",
                prog.params.len()
            )));
        }
        let limit = config.shared_memory_limit;
        let total_shared = (prog.static_shared_bytes as u64).saturating_add(dynamic);
        if total_shared > limit {
            return Err(Error::Launch {
                kernel: self.name.clone(),
                detail: format!(
                    "{} bytes of static and {dynamic} bytes of dynamic shared memory exceed the \
                     {limit} bytes per block",
                    prog.static_shared_bytes
                ),
            });
        }
        self.check_block(config.block)?;
        if let Some(p) = self.module.data_pin() {
            pins.push(p.clone());
        }
        #[cfg(feature = "jit")]
        let jit = self.choose_engine(config)?;
        #[cfg(not(feature = "jit"))]
        self.choose_engine(config)?;
        Ok(PreparedLaunch {
            launch: Launch {
                prog: prog.clone(),
                kernel: self.name.clone(),
                params,
                grid: config.grid,
                block: config.block,
                dynamic_bytes: dynamic as usize,
                dynamic_requested: requested as usize,
                pins,
                table: self.module.table().clone(),
                extra: Mutex::new(Vec::new()),
                race: config.race_check.then(RaceGrid::default),
                start: Instant::now(),
                id: next_launch_id(),
                nsm: 1,
                services: None,
                assertion: Mutex::new(None),
                cooperative: config.cooperative,
                abandoned: std::sync::atomic::AtomicBool::new(false),
            },
            _module: self.module.clone(),
            #[cfg(feature = "jit")]
            jit,
        })
    }

    /// The entry's `.maxntid` / `.reqntid` against the launch's block shape (CUDA refuses such
    /// a launch with `CUDA_ERROR_INVALID_VALUE`).
    fn check_block(&self, block: Dim3) -> Result<()> {
        let b = &self.prog.bounds;
        let err = |detail: String| Error::Launch {
            kernel: self.name.clone(),
            detail,
        };
        let shape = |d: [u32; 3]| format!("{}, {}, {}", d[0], d[1], d[2]);
        if let Some(m) = b.maxntid {
            let most = m.iter().map(|&v| v as u64).product::<u64>();
            if block.count() > most {
                return Err(err(format!(
                    "a block of {} threads ({}, {}, {}) exceeds the entry's `.maxntid {}` \
                     ({most} threads)",
                    block.count(),
                    block.x,
                    block.y,
                    block.z,
                    shape(m)
                )));
            }
        }
        if let Some(r) = b.reqntid
            && [block.x, block.y, block.z] != r
        {
            return Err(err(format!(
                "the block ({}, {}, {}) differs from the entry's `.reqntid {}`",
                block.x,
                block.y,
                block.z,
                shape(r)
            )));
        }
        Ok(())
    }

    /// [`prepare`](Self::prepare), then [`run`](PreparedLaunch::run) on `pool`.
    pub fn launch(
        &self,
        pool: &rayon::ThreadPool,
        config: &LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<()> {
        self.prepare(config, args)?.run(pool)
    }

    /// The engine for a launch: the compiled kernel, or `None` for the interpreter. Compiles
    /// on first use and keeps the result in the module.
    #[cfg(feature = "jit")]
    fn choose_engine(
        &self,
        config: &LaunchConfig,
    ) -> Result<Option<std::sync::Arc<crate::jit::JitKernel>>> {
        let engine = config.engine;
        if engine == PtxEngine::Interpreter || config.race_check || config.cooperative || cfg!(miri)
        {
            // The race checker and the cooperative grid's abandon check live in the
            // interpreter; Miri cannot run generated code.
            return Ok(None);
        }
        let outcome = self
            .module
            .jit
            .lock()
            .entry(self.name.clone())
            .or_insert_with(|| {
                let tier = crate::jit::Tier::policy().0;
                let r = crate::jit::compile(&self.prog, tier).map(std::sync::Arc::new);
                crate::jit::log_compile(&self.name, &self.prog, &r);
                r
            })
            .clone();
        let chosen = match (outcome, engine) {
            (Ok(c), PtxEngine::Jit) => Some(c),
            (Ok(c), _) if !c.prefers_interpreter => Some(c),
            (Ok(_), _) => None,
            (Err(why), PtxEngine::Jit) => return Err(self.jit_refused(&why)),
            (Err(_), _) => None,
        };
        if chosen.as_ref().is_some_and(|c| c.launched()) {
            self.optimize_in_background();
        }
        Ok(chosen)
    }

    /// Compiles this kernel `Optimized` on a thread of its own and, if that succeeds while the
    /// module lives, puts it in the module for later launches (launches under way keep the
    /// quick code they chose). Where no thread can be started the quick code stays.
    #[cfg(feature = "jit")]
    fn optimize_in_background(&self) {
        let module = std::sync::Arc::downgrade(&self.module);
        let (name, prog) = (self.name.clone(), self.prog.clone());
        let job = move || {
            let r =
                crate::jit::compile(&prog, crate::jit::Tier::Optimized).map(std::sync::Arc::new);
            // In the module before it is logged: whoever sees the log finds it there.
            if let (Ok(k), Some(m)) = (&r, module.upgrade()) {
                m.jit.lock().insert(name.clone(), Ok(k.clone()));
            }
            crate::jit::log_compile(&name, &prog, &r);
        };
        let _ = std::thread::Builder::new()
            .name("ptx-jit-optimize".into())
            .spawn(job);
    }

    /// Without the JIT every launch is interpreted; `PtxEngine::Jit` is refused.
    #[cfg(not(feature = "jit"))]
    fn choose_engine(&self, config: &LaunchConfig) -> Result<()> {
        match config.engine {
            PtxEngine::Jit if !config.race_check => Err(self.jit_refused(
                "this build has no PTX JIT (the `jit` feature of streamexec-ptx is off)",
            )),
            _ => Ok(()),
        }
    }

    fn jit_refused(&self, why: &str) -> Error {
        Error::JitUnsupported {
            kernel: self.name.clone(),
            detail: format!(
                "kernel `{}`: {why}; the interpreter runs it (PtxEngine::Auto or Interpreter)",
                self.name
            ),
        }
    }
}

impl PreparedLaunch {
    /// Serves the kernel's `vprintf`, `malloc` and `free` calls with `services` (without,
    /// `vprintf` returns -1 and `malloc` NULL; see [`crate::services`]).
    pub fn with_services(mut self, services: std::sync::Arc<dyn crate::DeviceServices>) -> Self {
        self.launch.services = Some(services);
        self
    }

    /// Runs every block on `pool` (a one-block grid on the calling thread); the failure of the
    /// lowest-numbered failing block, as [`Error::Fault`].
    pub fn run(self, pool: &rayon::ThreadPool) -> Result<()> {
        let mut launch = self.launch;
        launch.start = Instant::now();
        launch.nsm = pool.current_num_threads() as u32;
        #[cfg(feature = "jit")]
        let compiled = self.jit.as_deref();
        #[cfg(not(feature = "jit"))]
        let compiled = None;
        crate::grid::run_grid(pool, &launch, compiled).map_err(|detail| {
            match launch.assertion.lock().take() {
                Some(failure) => Error::Assert {
                    kernel: launch.kernel.clone(),
                    failure: Box::new(failure),
                },
                None => Error::Fault {
                    kernel: launch.kernel.clone(),
                    detail,
                },
            }
        })
    }
}
