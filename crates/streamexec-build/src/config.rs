//! The builder's settings, as plain data the pipeline reads.

use std::path::{Path, PathBuf};

/// What [`Kernels`](crate::Kernels) was told.
#[derive(Clone, Debug, Default)]
pub(crate) struct Config {
    /// CUDA sources, each with the template instantiations asked of it.
    pub cuda: Vec<(PathBuf, Vec<String>)>,
    pub opencl: Vec<PathBuf>,
    pub cuda_archs: Vec<String>,
    pub hip_archs: Vec<String>,
    pub includes: Vec<PathBuf>,
    pub defines: Vec<(String, Option<String>)>,
    pub flags: Vec<String>,
    pub no_prelude: bool,
    pub prebuilt: Option<PathBuf>,
    pub root: Option<PathBuf>,
    pub out_dir: Option<PathBuf>,
    pub clang: Option<PathBuf>,
    pub quiet: bool,
    pub update_prebuilt: bool,
}

impl Config {
    /// The CUDA architectures, `sm_70` when none were given.
    pub fn archs(&self) -> Vec<String> {
        if self.cuda_archs.is_empty() {
            vec!["sm_70".to_string()]
        } else {
            self.cuda_archs.clone()
        }
    }
}

/// A path as `/`-separated text.
pub(crate) fn slash(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "/")
}
