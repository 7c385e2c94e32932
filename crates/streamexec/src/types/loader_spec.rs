//! `MultiKernelLoaderSpec`: one kernel in every format the platforms load.
//!
//! As in StreamExecutor, a spec carries the same kernel as PTX (several, keyed by compute
//! capability), cubin, OpenCL C text or binary, HSACO and a native host kernel, each in memory
//! or on disk. A platform picks the format it prefers; if the spec holds none it can load, the
//! error lists what the spec does hold. Files on disk are read at load time, so a bad path is an
//! `Error::Io` from `get_kernel`, not from building the spec.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};

use super::args::ParamKind;

/// A kernel compiled into this process (as XLA's in-process symbol): the spec carries it as an
/// opaque object, and the platform that runs such kernels (`host`, whose `HostKernel`
/// implements this) recognises its own type through [`as_any`](Self::as_any).
pub trait InProcessKernel: std::any::Any + Send + Sync + std::fmt::Debug {
    /// The kernel's name.
    fn name(&self) -> &str;
    /// Its parameter list.
    fn signature(&self) -> &[ParamKind];
    /// The concrete kernel, for the platform that runs it.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Where a kernel image lives.
#[derive(Clone, Debug)]
pub enum KernelSource {
    /// Text in memory (PTX, OpenCL C).
    Text(Arc<str>),
    /// Bytes in memory (cubin, OpenCL binary, HSACO).
    Bytes(Arc<[u8]>),
    /// A file, read when the kernel is loaded.
    File(PathBuf),
}

impl KernelSource {
    /// The image as text (`Error::Io` for unreadable files, `KernelLoad` for non-UTF-8).
    pub fn text(&self) -> Result<Cow<'_, str>> {
        match self {
            KernelSource::Text(t) => Ok(Cow::Borrowed(t)),
            KernelSource::Bytes(b) => std::str::from_utf8(b)
                .map(Cow::Borrowed)
                .map_err(|e| Error::invalid("KernelSource::text", format!("not UTF-8: {e}"))),
            KernelSource::File(p) => std::fs::read_to_string(p)
                .map(Cow::Owned)
                .map_err(|e| Error::io(p, e)),
        }
    }

    /// The image as bytes (`Error::Io` for unreadable files).
    pub fn bytes(&self) -> Result<Cow<'_, [u8]>> {
        match self {
            KernelSource::Text(t) => Ok(Cow::Borrowed(t.as_bytes())),
            KernelSource::Bytes(b) => Ok(Cow::Borrowed(b)),
            KernelSource::File(p) => std::fs::read(p)
                .map(Cow::Owned)
                .map_err(|e| Error::io(p, e)),
        }
    }

    fn describe(&self) -> String {
        match self {
            KernelSource::Text(t) => format!("in memory, {} bytes", t.len()),
            KernelSource::Bytes(b) => format!("in memory, {} bytes", b.len()),
            KernelSource::File(p) => format!("on disk at {}", p.display()),
        }
    }
}

/// One kernel image in one format.
#[derive(Clone, Debug)]
pub struct KernelImage {
    /// The image.
    pub source: KernelSource,
    /// Entry point name inside the image.
    pub kernel_name: String,
    /// For PTX: the compute capability it targets (`None`: any).
    pub compute_capability: Option<(u32, u32)>,
}

impl KernelImage {
    fn new(source: KernelSource, name: &str) -> Self {
        KernelImage {
            source,
            kernel_name: name.to_string(),
            compute_capability: None,
        }
    }
}

/// The formats a spec can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelFormat {
    /// CUDA PTX assembly.
    CudaPtx,
    /// CUDA binary.
    CudaCubin,
    /// CUDA C++ source, compiled by NVRTC at load time.
    CudaSource,
    /// OpenCL C source.
    OpenClText,
    /// OpenCL program binary.
    OpenClBinary,
    /// AMD code object.
    Hsaco,
    /// Native Rust host kernel.
    Host,
}

impl std::fmt::Display for KernelFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KernelFormat::CudaPtx => "CUDA PTX",
            KernelFormat::CudaCubin => "CUDA cubin",
            KernelFormat::CudaSource => "CUDA C++ source",
            KernelFormat::OpenClText => "OpenCL C text",
            KernelFormat::OpenClBinary => "OpenCL binary",
            KernelFormat::Hsaco => "HSACO",
            KernelFormat::Host => "host kernel",
        })
    }
}

/// The same kernel in several formats, for whichever platform loads it.
#[derive(Clone, Debug)]
pub struct MultiKernelLoaderSpec {
    arity: usize,
    ptx: Vec<KernelImage>,
    cubin: Vec<KernelImage>,
    cuda_source: Option<KernelImage>,
    opencl_text: Option<KernelImage>,
    opencl_binary: Option<KernelImage>,
    hsaco: Option<KernelImage>,
    host: Option<Arc<dyn InProcessKernel>>,
    opencl_build_options: String,
    rpc: bool,
    foreign_rpc_client: bool,
    mpi: bool,
}

impl MultiKernelLoaderSpec {
    /// A spec for a kernel of `arity` parameters, holding no format yet. Every load checks
    /// `arity` against the kernel's own parameter count where its format carries one (and a
    /// `TypedKernel`'s `Args`): a mismatch is `Error::SignatureMismatch` on every platform.
    pub fn new(arity: usize) -> Self {
        MultiKernelLoaderSpec {
            arity,
            ptx: Vec::new(),
            cubin: Vec::new(),
            cuda_source: None,
            opencl_text: None,
            opencl_binary: None,
            hsaco: None,
            host: None,
            opencl_build_options: String::new(),
            rpc: false,
            foreign_rpc_client: false,
            mpi: false,
        }
    }

    /// Number of kernel parameters; checked against the kernel and `Args` when it is loaded.
    pub fn arity(&self) -> usize {
        self.arity
    }

    /// PTX text in memory, for any compute capability.
    pub fn add_cuda_ptx_in_memory(mut self, ptx: &str, kernel_name: &str) -> Self {
        self.ptx.push(KernelImage::new(
            KernelSource::Text(ptx.into()),
            kernel_name,
        ));
        self
    }
    /// PTX text in memory, built for compute capability `cc` (major, minor). The loader picks
    /// the highest capability that the device supports.
    pub fn add_cuda_ptx_in_memory_for(
        mut self,
        ptx: &str,
        kernel_name: &str,
        cc: (u32, u32),
    ) -> Self {
        let mut img = KernelImage::new(KernelSource::Text(ptx.into()), kernel_name);
        img.compute_capability = Some(cc);
        self.ptx.push(img);
        self
    }
    /// A PTX file, for any compute capability.
    pub fn add_cuda_ptx_on_disk(mut self, path: impl Into<PathBuf>, kernel_name: &str) -> Self {
        self.ptx.push(KernelImage::new(
            KernelSource::File(path.into()),
            kernel_name,
        ));
        self
    }
    /// A PTX file built for compute capability `cc`.
    pub fn add_cuda_ptx_on_disk_for(
        mut self,
        path: impl Into<PathBuf>,
        kernel_name: &str,
        cc: (u32, u32),
    ) -> Self {
        let mut img = KernelImage::new(KernelSource::File(path.into()), kernel_name);
        img.compute_capability = Some(cc);
        self.ptx.push(img);
        self
    }
    /// A cubin in memory.
    pub fn add_cuda_cubin_in_memory(mut self, cubin: &[u8], kernel_name: &str) -> Self {
        self.cubin.push(KernelImage::new(
            KernelSource::Bytes(cubin.into()),
            kernel_name,
        ));
        self
    }
    /// A cubin file.
    pub fn add_cuda_cubin_on_disk(mut self, path: impl Into<PathBuf>, kernel_name: &str) -> Self {
        self.cubin.push(KernelImage::new(
            KernelSource::File(path.into()),
            kernel_name,
        ));
        self
    }
    /// CUDA C++ source, compiled at load time by NVRTC for the device's compute capability
    /// (used when the spec holds no PTX or cubin). Mark the kernel `extern "C"` so that
    /// `kernel_name` is its symbol.
    pub fn add_cuda_source_in_memory(mut self, source: &str, kernel_name: &str) -> Self {
        self.cuda_source = Some(KernelImage::new(
            KernelSource::Text(source.into()),
            kernel_name,
        ));
        self
    }
    /// OpenCL C source in memory.
    pub fn add_opencl_text_in_memory(mut self, source: &str, kernel_name: &str) -> Self {
        self.opencl_text = Some(KernelImage::new(
            KernelSource::Text(source.into()),
            kernel_name,
        ));
        self
    }
    /// An OpenCL C source file.
    pub fn add_opencl_text_on_disk(mut self, path: impl Into<PathBuf>, kernel_name: &str) -> Self {
        self.opencl_text = Some(KernelImage::new(
            KernelSource::File(path.into()),
            kernel_name,
        ));
        self
    }
    /// An OpenCL program binary in memory.
    pub fn add_opencl_binary_in_memory(mut self, binary: &[u8], kernel_name: &str) -> Self {
        self.opencl_binary = Some(KernelImage::new(
            KernelSource::Bytes(binary.into()),
            kernel_name,
        ));
        self
    }
    /// An OpenCL program binary file.
    pub fn add_opencl_binary_on_disk(
        mut self,
        path: impl Into<PathBuf>,
        kernel_name: &str,
    ) -> Self {
        self.opencl_binary = Some(KernelImage::new(
            KernelSource::File(path.into()),
            kernel_name,
        ));
        self
    }
    /// Options passed to the OpenCL compiler (`-cl-fast-relaxed-math`, `-D N=4`, ...).
    pub fn with_opencl_build_options(mut self, options: &str) -> Self {
        self.opencl_build_options = options.to_string();
        self
    }
    /// The kernel calls the executor's RPC server: the OpenCL loader puts the OpenCL C client
    /// ([`rpc::OPENCL_CLIENT_SOURCE`](crate::rpc::OPENCL_CLIENT_SOURCE): `se_rpc_puts`,
    /// `se_rpc_printf`, `se_rpc_open`/`send`/`recv`/`close`, ...) in front of the OpenCL C text.
    /// The kernel takes the block as a `__global void *rpc` parameter, passed
    /// [`ExecutorRpc::block`](crate::ExecutorRpc::block), and is launched with
    /// `then_launch_with_rpc`.
    pub fn with_rpc(mut self) -> Self {
        self.rpc = true;
        self
    }
    /// Whether the kernel calls the RPC server ([`with_rpc`](Self::with_rpc)).
    pub fn rpc(&self) -> bool {
        self.rpc
    }
    /// The module's `__llvm_rpc_client` is someone else's to fill in: the executor neither
    /// writes its client image there nor starts its server for it, and the kernels are plain
    /// launches. For a driver built on this executor that serves its own callers' RPC (the CPU
    /// libcuda runs PTX on the host platform's engine; the cuda executor above it owns the
    /// server), and where a module's `__llvm_rpc_client` is not LLVM libc's.
    pub fn with_foreign_rpc_client(mut self) -> Self {
        self.foreign_rpc_client = true;
        self
    }
    /// Whether the module's `__llvm_rpc_client` is left alone
    /// ([`with_foreign_rpc_client`](Self::with_foreign_rpc_client)).
    pub fn foreign_rpc_client(&self) -> bool {
        self.foreign_rpc_client
    }
    /// The kernel calls MPI through the executor's RPC server (implies
    /// [`with_rpc`](Self::with_rpc)): the OpenCL loader also puts the Emissary client
    /// ([`rpc::OPENCL_EMISSARY_SOURCE`](crate::rpc::OPENCL_EMISSARY_SOURCE)) and the MPI stubs
    /// ([`rpc::OPENCL_MPI_SOURCE`](crate::rpc::OPENCL_MPI_SOURCE): `MPI_Send(rpc, ...)`, ...)
    /// in front of the OpenCL C text. CUDA C kernels include `include/streamexec_mpi.h`
    /// instead. Buffers the kernel passes to MPI should be unified memory
    /// ([`allocate_unified`](crate::StreamExecutor::allocate_unified)).
    pub fn with_mpi(mut self) -> Self {
        self.rpc = true;
        self.mpi = true;
        self
    }
    /// Whether the kernel calls MPI ([`with_mpi`](Self::with_mpi)).
    pub fn mpi(&self) -> bool {
        self.mpi
    }
    /// An AMD HSACO code object in memory.
    pub fn add_hsaco_in_memory(mut self, hsaco: &[u8], kernel_name: &str) -> Self {
        self.hsaco = Some(KernelImage::new(
            KernelSource::Bytes(hsaco.into()),
            kernel_name,
        ));
        self
    }
    /// An AMD HSACO code object file.
    pub fn add_hsaco_on_disk(mut self, path: impl Into<PathBuf>, kernel_name: &str) -> Self {
        self.hsaco = Some(KernelImage::new(
            KernelSource::File(path.into()),
            kernel_name,
        ));
        self
    }
    /// A native Rust kernel for the host platform (a `HostKernel`).
    pub fn add_host_kernel(mut self, kernel: impl InProcessKernel) -> Self {
        self.host = Some(Arc::new(kernel));
        self
    }

    /// Every PTX image, in the order added.
    pub fn cuda_ptx(&self) -> &[KernelImage] {
        &self.ptx
    }
    /// The PTX image for a device of capability `cc`: the highest keyed capability not above
    /// `cc`, else an unkeyed image. With `cc == None` (no CUDA device), an unkeyed image, else
    /// the highest keyed one.
    pub fn select_cuda_ptx(&self, cc: Option<(u32, u32)>) -> Option<&KernelImage> {
        let keyed = self.ptx.iter().filter(|i| i.compute_capability.is_some());
        let unkeyed = self.ptx.iter().find(|i| i.compute_capability.is_none());
        match cc {
            Some(cc) => keyed
                .filter(|i| i.compute_capability.is_some_and(|c| c <= cc))
                .max_by_key(|i| i.compute_capability)
                .or(unkeyed),
            None => unkeyed.or_else(|| keyed.max_by_key(|i| i.compute_capability)),
        }
    }
    /// Every cubin image.
    pub fn cuda_cubin(&self) -> &[KernelImage] {
        &self.cubin
    }
    /// The CUDA C++ source for NVRTC, if any.
    pub fn cuda_source(&self) -> Option<&KernelImage> {
        self.cuda_source.as_ref()
    }
    /// The OpenCL C source, if any.
    pub fn opencl_text(&self) -> Option<&KernelImage> {
        self.opencl_text.as_ref()
    }
    /// The OpenCL binary, if any.
    pub fn opencl_binary(&self) -> Option<&KernelImage> {
        self.opencl_binary.as_ref()
    }
    /// OpenCL compiler options.
    pub fn opencl_build_options(&self) -> &str {
        &self.opencl_build_options
    }
    /// The HSACO image, if any.
    pub fn hsaco(&self) -> Option<&KernelImage> {
        self.hsaco.as_ref()
    }
    /// The in-process (host) kernel, if any.
    pub fn host_kernel(&self) -> Option<&dyn InProcessKernel> {
        self.host.as_deref()
    }

    /// Which formats the spec holds.
    pub fn formats(&self) -> Vec<KernelFormat> {
        let mut f = Vec::new();
        if !self.ptx.is_empty() {
            f.push(KernelFormat::CudaPtx);
        }
        if !self.cubin.is_empty() {
            f.push(KernelFormat::CudaCubin);
        }
        if self.cuda_source.is_some() {
            f.push(KernelFormat::CudaSource);
        }
        if self.opencl_text.is_some() {
            f.push(KernelFormat::OpenClText);
        }
        if self.opencl_binary.is_some() {
            f.push(KernelFormat::OpenClBinary);
        }
        if self.hsaco.is_some() {
            f.push(KernelFormat::Hsaco);
        }
        if self.host.is_some() {
            f.push(KernelFormat::Host);
        }
        f
    }

    /// A kernel name for messages: the first one the spec holds.
    pub fn kernel_name(&self) -> &str {
        self.ptx
            .iter()
            .chain(&self.cubin)
            .chain(&self.cuda_source)
            .chain(&self.opencl_text)
            .chain(&self.opencl_binary)
            .chain(&self.hsaco)
            .map(|i| i.kernel_name.as_str())
            .next()
            .or(self.host.as_ref().map(|h| h.name()))
            .unwrap_or("<empty spec>")
    }

    /// What the spec holds, for error messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for i in &self.ptx {
            let cc = i
                .compute_capability
                .map(|(a, b)| format!(" sm_{a}{b}"))
                .unwrap_or_default();
            parts.push(format!(
                "CUDA PTX{cc} `{}` ({})",
                i.kernel_name,
                i.source.describe()
            ));
        }
        for i in &self.cubin {
            parts.push(format!(
                "CUDA cubin `{}` ({})",
                i.kernel_name,
                i.source.describe()
            ));
        }
        for (what, img) in [
            ("CUDA C++ source", &self.cuda_source),
            ("OpenCL C text", &self.opencl_text),
            ("OpenCL binary", &self.opencl_binary),
            ("HSACO", &self.hsaco),
        ] {
            if let Some(i) = img {
                parts.push(format!(
                    "{what} `{}` ({})",
                    i.kernel_name,
                    i.source.describe()
                ));
            }
        }
        if let Some(h) = &self.host {
            parts.push(format!("host kernel `{}`", h.name()));
        }
        if parts.is_empty() {
            "nothing".to_string()
        } else {
            parts.join(", ")
        }
    }

    /// `NoSuitableFormat` for `platform`, which would have loaded `wanted`.
    pub(crate) fn no_suitable_format(&self, platform: &'static str, wanted: &str) -> Error {
        Error::NoSuitableFormat {
            platform,
            kernel: self.kernel_name().to_string(),
            available: self.describe(),
            wanted: wanted.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptx_for(spec: &MultiKernelLoaderSpec, cc: Option<(u32, u32)>) -> Option<String> {
        spec.select_cuda_ptx(cc)
            .map(|i| i.source.text().unwrap().into_owned())
    }

    #[test]
    fn ptx_is_picked_by_compute_capability() {
        let spec = MultiKernelLoaderSpec::new(0)
            .add_cuda_ptx_in_memory_for("sm70", "k", (7, 0))
            .add_cuda_ptx_in_memory_for("sm80", "k", (8, 0))
            .add_cuda_ptx_in_memory_for("sm52", "k", (5, 2));
        assert_eq!(ptx_for(&spec, Some((9, 0))).as_deref(), Some("sm80"));
        assert_eq!(ptx_for(&spec, Some((8, 6))).as_deref(), Some("sm80"));
        assert_eq!(ptx_for(&spec, Some((7, 5))).as_deref(), Some("sm70"));
        assert_eq!(ptx_for(&spec, Some((5, 2))).as_deref(), Some("sm52"));
        assert_eq!(ptx_for(&spec, Some((3, 5))), None);
        assert_eq!(ptx_for(&spec, None).as_deref(), Some("sm80"));
        let spec = spec.add_cuda_ptx_in_memory("any", "k");
        assert_eq!(ptx_for(&spec, Some((3, 5))).as_deref(), Some("any"));
        assert_eq!(ptx_for(&spec, None).as_deref(), Some("any"));
        assert_eq!(ptx_for(&spec, Some((7, 2))).as_deref(), Some("sm70"));
    }

    #[test]
    fn formats_and_description_list_everything() {
        let spec = MultiKernelLoaderSpec::new(1)
            .add_cuda_cubin_in_memory(&[1, 2], "a")
            .add_opencl_binary_on_disk("/tmp/x.bin", "b")
            .add_hsaco_in_memory(&[0; 8], "c")
            .with_opencl_build_options("-D N=4");
        assert_eq!(
            spec.formats(),
            vec![
                KernelFormat::CudaCubin,
                KernelFormat::OpenClBinary,
                KernelFormat::Hsaco
            ]
        );
        let d = spec.describe();
        assert!(d.contains("CUDA cubin `a` (in memory, 2 bytes)"), "{d}");
        assert!(
            d.contains("OpenCL binary `b` (on disk at /tmp/x.bin)"),
            "{d}"
        );
        assert!(d.contains("HSACO `c`"), "{d}");
        assert_eq!(spec.opencl_build_options(), "-D N=4");
        assert_eq!(spec.kernel_name(), "a");
        assert_eq!(MultiKernelLoaderSpec::new(0).describe(), "nothing");
    }

    #[test]
    #[cfg_attr(miri, ignore = "file system access")]
    fn files_are_read_at_load_time_with_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("streamexec-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k.cl");
        std::fs::write(&path, "__kernel void k() {}").unwrap();
        let spec = MultiKernelLoaderSpec::new(0).add_opencl_text_on_disk(&path, "k");
        assert_eq!(
            spec.opencl_text().unwrap().source.text().unwrap(),
            "__kernel void k() {}"
        );
        std::fs::remove_file(&path).unwrap();
        let err = spec.opencl_text().unwrap().source.bytes().unwrap_err();
        assert!(
            matches!(&err, Error::Io { path: p, source } if p.ends_with("k.cl")
                && source.kind() == std::io::ErrorKind::NotFound),
            "{err:?}"
        );
        // The OS error is the source, not part of the message.
        assert_eq!(err.to_string(), format!("cannot read `{}`", path.display()));
        let os = std::error::Error::source(&err).expect("the OS error is the source");
        let os = os.downcast_ref::<crate::IoError>().expect("an IoError");
        assert_eq!(os.get_ref().kind(), std::io::ErrorKind::NotFound);
    }
}
