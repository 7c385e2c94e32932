//! The builder: [`Kernels`], its settings, and [`Kernels::compile`].

use std::path::{Path, PathBuf};

use crate::clang::Clang;
use crate::codegen;
use crate::config::{Config, slash};
use crate::error::{Error, Result, io};
use crate::{pipeline, prebuilt};

/// The builder: which sources, for which targets, where the output goes.
#[derive(Clone, Debug, Default)]
pub struct Kernels {
    cfg: Config,
}

/// What [`Kernels::compile`] produced.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The written `kernels.rs`.
    pub path: PathBuf,
    /// Its text.
    pub code: String,
    /// The generated modules, one per kernel.
    pub modules: Vec<String>,
    /// Every file the output depends on (printed as `cargo:rerun-if-changed`).
    pub rerun_if_changed: Vec<PathBuf>,
    /// True when the output is the committed prebuilt one (no clang ran).
    pub from_prebuilt: bool,
}

impl Kernels {
    /// An empty builder (CUDA architecture `sm_70` unless [`cuda_archs`](Self::cuda_archs)
    /// says otherwise).
    pub fn new() -> Self {
        Kernels::default()
    }

    /// Adds a CUDA C++ source (relative to the package root): PTX for each CUDA architecture.
    pub fn cuda(mut self, path: impl AsRef<Path>) -> Self {
        self.cfg
            .cuda
            .push((path.as_ref().to_path_buf(), Vec::new()));
        self
    }

    /// Asks for a template kernel's instantiation, written as in C++ (`"scale<float>"`), from
    /// the CUDA source added last. It becomes the module `scale_float`; the PTX entry is the
    /// mangled name clang gives it.
    pub fn instantiate(mut self, instantiation: impl Into<String>) -> Self {
        let inst = instantiation.into();
        match self.cfg.cuda.last_mut() {
            Some((_, list)) => list.push(inst),
            // Reported by `compile`: no source to instantiate it from.
            None => self.cfg.cuda.push((PathBuf::new(), vec![inst])),
        }
        self
    }

    /// Adds an OpenCL C source: checked by clang now (`-cl-std=CL1.2`), embedded as text.
    pub fn opencl(mut self, path: impl AsRef<Path>) -> Self {
        self.cfg.opencl.push(path.as_ref().to_path_buf());
        self
    }

    /// The CUDA architectures (`sm_70`, `sm_80`, ...); one PTX each, keyed by compute
    /// capability in the loader spec.
    pub fn cuda_archs<S: Into<String>>(mut self, archs: impl IntoIterator<Item = S>) -> Self {
        self.cfg.cuda_archs = archs.into_iter().map(Into::into).collect();
        self
    }

    /// AMD architectures (`gfx90a`, ...): the CUDA sources compiled as HIP to HSACO (needs
    /// `lld`; the first architecture's code object is the one in `spec()`).
    pub fn hip_archs<S: Into<String>>(mut self, archs: impl IntoIterator<Item = S>) -> Self {
        self.cfg.hip_archs = archs.into_iter().map(Into::into).collect();
        self
    }

    /// An include folder (`-I`), relative to the package root.
    pub fn include_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cfg.includes.push(dir.as_ref().to_path_buf());
        self
    }

    /// A preprocessor definition (`-DNAME` or `-DNAME=VALUE`) for every source.
    pub fn define(mut self, name: &str, value: Option<&str>) -> Self {
        self.cfg
            .defines
            .push((name.to_string(), value.map(str::to_string)));
        self
    }

    /// An extra clang flag for the CUDA compiles (`-O2`, `-ffast-math`, ...).
    pub fn flag(mut self, flag: impl Into<String>) -> Self {
        self.cfg.flags.push(flag.into());
        self
    }

    /// Whether CUDA sources get the built-in prelude (`__global__` and friends, `threadIdx`):
    /// on by default; turn it off when the sources bring their own.
    pub fn cuda_prelude(mut self, on: bool) -> Self {
        self.cfg.no_prelude = !on;
        self
    }

    /// Prebuilt mode: `dir` (relative to the package root) holds committed outputs, used when
    /// clang is missing or `STREAMEXEC_BUILD_PREBUILT=1`, after checking by hash that they
    /// match the sources and options (see [`prebuilt`]). With clang, the build runs from the
    /// sources and warns when `dir` is stale; `STREAMEXEC_BUILD_UPDATE_PREBUILT=1` rewrites it.
    pub fn prebuilt(mut self, dir: impl AsRef<Path>) -> Self {
        self.cfg.prebuilt = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Whether a build with clang rewrites the prebuilt folder (default: only when
    /// `STREAMEXEC_BUILD_UPDATE_PREBUILT=1`).
    pub fn update_prebuilt(mut self, on: bool) -> Self {
        self.cfg.update_prebuilt = on;
        self
    }

    /// The folder relative paths are taken from (default: `CARGO_MANIFEST_DIR`).
    pub fn root(mut self, dir: impl AsRef<Path>) -> Self {
        self.cfg.root = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Where `kernels.rs` is written (default: `OUT_DIR`).
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cfg.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The clang binary (default: `STREAMEXEC_CLANG`, else `clang++-19`).
    pub fn clang(mut self, path: impl AsRef<Path>) -> Self {
        self.cfg.clang = Some(path.as_ref().to_path_buf());
        self
    }

    /// Whether to print `cargo:` lines (default true; tests turn it off).
    pub fn cargo_metadata(mut self, on: bool) -> Self {
        self.cfg.quiet = !on;
        self
    }

    fn root_dir(&self) -> PathBuf {
        self.cfg
            .root
            .clone()
            .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("."))
    }

    /// The options that decide the output, as text (hashed into the prebuilt manifest).
    fn options_text(&self) -> String {
        let mut s = String::from("streamexec-build 1\n");
        for (cu, insts) in &self.cfg.cuda {
            s += &format!("cuda {}\n", slash(cu));
            for i in insts {
                s += &format!("instantiate {i}\n");
            }
        }
        for cl in &self.cfg.opencl {
            s += &format!("opencl {}\n", slash(cl));
        }
        s += &format!(
            "cuda_archs {}\nhip_archs {}\n",
            self.cfg.archs().join(" "),
            self.cfg.hip_archs.join(" ")
        );
        for i in &self.cfg.includes {
            s += &format!("include {}\n", slash(i));
        }
        for (k, v) in &self.cfg.defines {
            s += &format!("define {k}={}\n", v.as_deref().unwrap_or(""));
        }
        s += &format!(
            "flags {}\nprelude {}\n",
            self.cfg.flags.join(" "),
            !self.cfg.no_prelude
        );
        s
    }

    fn check_config(&self) -> Result<()> {
        if self.cfg.cuda.is_empty() && self.cfg.opencl.is_empty() {
            return Err(Error::Config(
                "no kernel sources: add some with .cuda(path) or .opencl(path)".into(),
            ));
        }
        if let Some((path, insts)) = self.cfg.cuda.iter().find(|(p, _)| p.as_os_str().is_empty()) {
            return Err(Error::Config(format!(
                "instantiate({:?}) comes before any .cuda(path); call it after the CUDA source \
                 that defines the template ({})",
                insts.first().map_or("", String::as_str),
                path.display()
            )));
        }
        for arch in self.cfg.archs() {
            if codegen::compute_capability(&arch).is_none() {
                return Err(Error::Config(format!(
                    "`{arch}` is not a CUDA architecture; write it as clang does: sm_70, sm_80, ..."
                )));
            }
        }
        Ok(())
    }

    /// Builds every kernel and writes `kernels.rs` into the output folder; prints the
    /// `cargo:rerun-if-changed` lines. See the crate docs.
    pub fn compile(&self) -> Result<Generated> {
        self.check_config()?;
        let root = self.root_dir();
        let out_dir = match &self.cfg.out_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or_else(|| {
                    Error::Config(
                        "OUT_DIR is not set: call compile() from a build script, or set out_dir()"
                            .into(),
                    )
                })?,
        };
        std::fs::create_dir_all(&out_dir).map_err(io("create", &out_dir))?;
        self.cargo("rerun-if-env-changed=STREAMEXEC_CLANG");
        self.cargo("rerun-if-env-changed=STREAMEXEC_BUILD_PREBUILT");
        self.cargo("rerun-if-env-changed=STREAMEXEC_BUILD_UPDATE_PREBUILT");
        let options = self.options_text();
        let sources: Vec<String> = self
            .cfg
            .cuda
            .iter()
            .map(|(p, _)| slash(p))
            .chain(self.cfg.opencl.iter().map(|p| slash(p)))
            .collect();
        let forced = std::env::var("STREAMEXEC_BUILD_PREBUILT").is_ok_and(|v| v == "1");
        let clang = if forced {
            Err("STREAMEXEC_BUILD_PREBUILT=1 is set".to_string())
        } else {
            match Clang::find(self.cfg.clang.as_deref()) {
                Ok(c) => Ok(c),
                Err(e) if self.cfg.prebuilt.is_some() => Err(format!("clang is missing ({e})")),
                Err(e) => return Err(e),
            }
        };
        let (code, rerun, from_prebuilt) = match clang {
            Err(why) => {
                let dir = self.cfg.prebuilt.as_ref().ok_or_else(|| {
                    Error::Config(format!(
                        "{why}, but no prebuilt folder is configured (Kernels::prebuilt)"
                    ))
                })?;
                let (code, inputs) =
                    prebuilt::load(&root.join(dir), &root, &options, &sources, &why)?;
                (code, inputs, true)
            }
            Ok(clang) => {
                let work = out_dir.join("streamexec-build");
                let built = pipeline::build(&self.cfg, &clang, &root, &work)?;
                let mut rerun = built.deps.clone();
                if let Some(dir) = &self.cfg.prebuilt {
                    rerun.extend(self.refresh_prebuilt(&root, dir, &options, &built)?);
                }
                (built.code, rerun, false)
            }
        };
        let path = out_dir.join(prebuilt::KERNELS_RS);
        std::fs::write(&path, &code).map_err(io("write", &path))?;
        for dep in &rerun {
            self.cargo(&format!("rerun-if-changed={}", dep.display()));
        }
        let modules = code
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(" {"))
            .map(str::to_string)
            .collect();
        Ok(Generated {
            path,
            code,
            modules,
            rerun_if_changed: rerun,
            from_prebuilt,
        })
    }

    /// With clang: compares the prebuilt folder with what was just built; rewrites it under
    /// `STREAMEXEC_BUILD_UPDATE_PREBUILT=1`, else warns when it is stale.
    fn refresh_prebuilt(
        &self,
        root: &Path,
        dir: &Path,
        options: &str,
        built: &pipeline::Built,
    ) -> Result<Vec<PathBuf>> {
        let full = root.join(dir);
        let inputs: Vec<String> = built
            .deps
            .iter()
            .filter_map(|d| d.strip_prefix(root).ok().map(slash))
            .collect();
        let manifest = prebuilt::Manifest::compute(root, options, &inputs)?;
        if self.cfg.update_prebuilt
            || std::env::var("STREAMEXEC_BUILD_UPDATE_PREBUILT").is_ok_and(|v| v == "1")
        {
            prebuilt::store(&full, &built.code, &manifest)?;
            return Ok(Vec::new());
        }
        let current = std::fs::read_to_string(full.join(prebuilt::MANIFEST)).ok();
        if current.as_deref() != Some(manifest.render().as_str()) {
            self.cargo(&format!(
                "warning=the prebuilt kernels in {} are stale (they do not match the sources); \
                 regenerate them with STREAMEXEC_BUILD_UPDATE_PREBUILT=1 cargo build and commit them",
                full.display()
            ));
        }
        Ok(vec![full.join(prebuilt::MANIFEST)])
    }

    fn cargo(&self, line: &str) {
        if !self.cfg.quiet {
            println!("cargo:{line}");
        }
    }
}
