//! The build with clang: per CUDA source a wrapper (the source, the requested template
//! instantiations, clang-checked layout assertions), its AST, PTX per architecture, HSACO;
//! per OpenCL source its AST and the checked text; then the models and the Rust text.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::ast::{self, KernelDecl, MARKER, Unit};
use crate::clang::{Clang, read_depfile};
use crate::codegen::{self, Blob, BlobData, KernelModel, Param, StructModel};
use crate::config::{Config, slash};
use crate::ctype::{self, CType, Scalar, Space, TypeEnv};
use crate::error::{Error, Result, io};

/// What a build produced.
pub struct Built {
    /// The text of `kernels.rs`.
    pub code: String,
    /// Every input file (sources, included headers), absolute, clang's own headers left out.
    pub deps: Vec<PathBuf>,
}

/// The prelude for CUDA sources compiled without the CUDA SDK: the execution-space attributes,
/// and `threadIdx`, `blockIdx`, `blockDim`, `gridDim` (clang's own header for NVPTX; for HIP,
/// the same properties over the AMDGPU builtins).
const PRELUDE: &str = r#"// streamexec-build's CUDA prelude (no CUDA SDK or HIP headers needed)
#pragma once
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __host__
#define __host__ __attribute__((host))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#ifndef __constant__
#define __constant__ __attribute__((constant))
#endif
#if !defined(__HIP__)
#include <__clang_cuda_builtin_vars.h>
#else
#define __SE_DIM3(name, fx, fy, fz)                                                        \
    struct __se_##name##_t {                                                                \
        __declspec(property(get = __x)) unsigned int x;                                     \
        __declspec(property(get = __y)) unsigned int y;                                     \
        __declspec(property(get = __z)) unsigned int z;                                     \
        static inline __attribute__((always_inline)) __device__ unsigned int __x() { return fx; } \
        static inline __attribute__((always_inline)) __device__ unsigned int __y() { return fy; } \
        static inline __attribute__((always_inline)) __device__ unsigned int __z() { return fz; } \
    };                                                                                      \
    extern const __device__ __attribute__((weak)) __se_##name##_t name;
__SE_DIM3(threadIdx, __builtin_amdgcn_workitem_id_x(), __builtin_amdgcn_workitem_id_y(),
          __builtin_amdgcn_workitem_id_z())
__SE_DIM3(blockIdx, __builtin_amdgcn_workgroup_id_x(), __builtin_amdgcn_workgroup_id_y(),
          __builtin_amdgcn_workgroup_id_z())
__SE_DIM3(blockDim, __builtin_amdgcn_workgroup_size_x(), __builtin_amdgcn_workgroup_size_y(),
          __builtin_amdgcn_workgroup_size_z())
__SE_DIM3(gridDim, __builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x(),
          __builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y(),
          __builtin_amdgcn_grid_size_z() / __builtin_amdgcn_workgroup_size_z())
#undef __SE_DIM3
#endif
"#;

struct Ctx<'a> {
    k: &'a Config,
    clang: &'a Clang,
    root: &'a Path,
    work: &'a Path,
    resource_dir: PathBuf,
    deps: BTreeSet<PathBuf>,
    kernels: Vec<KernelModel>,
    structs: BTreeMap<String, StructModel>,
    blobs: Vec<Blob>,
}

/// Runs the whole build.
pub fn build(k: &Config, clang: &Clang, root: &Path, work: &Path) -> Result<Built> {
    std::fs::create_dir_all(work).map_err(io("create", work))?;
    let prelude = work.join("streamexec_cuda_prelude.h");
    std::fs::write(&prelude, PRELUDE).map_err(io("write", &prelude))?;
    let rd = clang.run(
        "print its resource folder",
        root,
        &["-print-resource-dir".into()],
    )?;
    let mut cx = Ctx {
        k,
        clang,
        root,
        work,
        resource_dir: PathBuf::from(String::from_utf8_lossy(&rd).trim()),
        deps: BTreeSet::new(),
        kernels: Vec::new(),
        structs: BTreeMap::new(),
        blobs: Vec::new(),
    };
    for (i, (src, insts)) in k.cuda.iter().enumerate() {
        cx.cuda(i, src, insts, &prelude)?;
    }
    for (i, src) in k.opencl.iter().enumerate() {
        cx.opencl(i, src)?;
    }
    let kernels = merge(std::mem::take(&mut cx.kernels))?;
    let structs: Vec<StructModel> = std::mem::take(&mut cx.structs).into_values().collect();
    Ok(Built {
        code: codegen::generate(&kernels, &structs, &cx.blobs),
        deps: cx.deps.into_iter().collect(),
    })
}

/// One module per kernel: a CUDA and an OpenCL kernel of one name become one, if their Rust
/// signatures agree.
fn merge(kernels: Vec<KernelModel>) -> Result<Vec<KernelModel>> {
    let mut by_module: BTreeMap<String, KernelModel> = BTreeMap::new();
    for k in kernels {
        let Some(prev) = by_module.get_mut(&k.module) else {
            by_module.insert(k.module.clone(), k);
            continue;
        };
        let pods = |m: &KernelModel| m.params.iter().map(|p| p.pod.clone()).collect::<Vec<_>>();
        let both_formats = (prev.opencl.is_none() && k.opencl.is_some() && k.ptx.is_empty())
            || (prev.ptx.is_empty() && k.opencl.is_none());
        if !both_formats || pods(prev) != pods(&k) {
            return Err(Error::Conflict {
                kernel: k.module.clone(),
                detail: format!(
                    "defined as `{}` ({}) with parameters ({}) and as `{}` ({}) with parameters \
                     ({}); one module needs one CUDA and/or one OpenCL kernel with the same \
                     Rust types (rename one, or make overloads `extern \"C\"` with distinct names)",
                    prev.c_name,
                    prev.sources.join(", "),
                    pods(prev).join(", "),
                    k.c_name,
                    k.sources.join(", "),
                    pods(&k).join(", ")
                ),
            });
        }
        if prev.ptx.is_empty() {
            prev.ptx = k.ptx;
            prev.hsaco = k.hsaco;
            prev.symbol = k.symbol;
            prev.params = k.params;
        } else {
            prev.opencl = k.opencl;
        }
        prev.sources.extend(k.sources);
    }
    Ok(by_module.into_values().collect())
}

fn os(args: &[String]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

impl Ctx<'_> {
    /// A device compile's command line: `head` (language and target flags), then the CUDA
    /// prelude unless turned off, the include directories and defines, and the user's flags.
    fn device_args(&self, head: &[&str], prelude: &Path) -> Vec<String> {
        let mut args: Vec<String> = head.iter().map(|a| a.to_string()).collect();
        if !self.k.no_prelude {
            args.extend(["-include".to_string(), prelude.display().to_string()]);
        }
        args.extend(self.common());
        args.extend(self.k.flags.iter().cloned());
        args
    }

    fn common(&self) -> Vec<String> {
        let mut args = Vec::new();
        for dir in &self.k.includes {
            args.push(format!("-I{}", self.root.join(dir).display()));
        }
        for (name, value) in &self.k.defines {
            args.push(match value {
                Some(v) => format!("-D{name}={v}"),
                None => format!("-D{name}"),
            });
        }
        args
    }

    fn add_deps(&mut self, depfile: &Path, skip: &[&Path]) -> Result<Vec<PathBuf>> {
        let mut user_headers = Vec::new();
        for d in read_depfile(depfile)? {
            let d = if d.is_relative() {
                self.root.join(&d)
            } else {
                d
            };
            if d.starts_with(&self.resource_dir)
                || d.starts_with(self.work)
                || skip.contains(&d.as_path())
            {
                continue;
            }
            user_headers.push(d.clone());
            self.deps.insert(d);
        }
        Ok(user_headers)
    }

    fn parse_ast(&self, json: &[u8], file: &Path, opencl: bool) -> Result<Unit> {
        let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| Error::Ast {
            file: file.to_path_buf(),
            detail: format!("clang's output is not JSON: {e}"),
        })?;
        ast::read(&value, opencl).map_err(|detail| Error::Ast {
            file: file.to_path_buf(),
            detail,
        })
    }

    fn cuda(&mut self, i: usize, src: &Path, insts: &[String], prelude: &Path) -> Result<()> {
        let abs = self.root.join(src);
        let rel = PathBuf::from(slash(src));
        self.deps.insert(abs.clone());
        let stem = format!(
            "{i}_{}",
            src.file_stem().map_or("k".into(), |s| s.to_string_lossy())
        );
        let mut wrapper = format!("#include \"{}\"\n", c_path(&abs));
        for (n, inst) in insts.iter().enumerate() {
            wrapper += &format!(
                "template __global__ decltype({inst}) {inst};\n\
                 static void {MARKER}{n}() {{ (void)&{inst}; }}\n"
            );
        }
        let wrap_path = self.work.join(format!("{stem}.cu"));
        std::fs::write(&wrap_path, &wrapper).map_err(io("write", &wrap_path))?;
        let archs = self.k.archs();
        let base = self.device_args(
            &[
                "-x",
                "cuda",
                "--cuda-device-only",
                "-nocudainc",
                "-nocudalib",
            ],
            prelude,
        );
        let mut args = base.clone();
        args.extend([
            format!("--cuda-gpu-arch={}", archs[0]),
            "-fsyntax-only".into(),
            "-Xclang".into(),
            "-ast-dump=json".into(),
            wrap_path.display().to_string(),
        ]);
        let json = self.clang.run("check the CUDA source", &rel, &os(&args))?;
        let unit = self.parse_ast(&json, &rel, false)?;
        for (n, inst) in insts.iter().enumerate() {
            let found = unit.instantiations.get(&n);
            if found.is_none_or(|id| !unit.kernels.iter().any(|k| k.id == *id)) {
                return Err(Error::Instantiation {
                    request: inst.clone(),
                    file: rel.clone(),
                    detail: "it does not name a __global__ function template of this source".into(),
                });
            }
        }
        let mut asserts = String::new();
        let mut models = Vec::new();
        for decl in &unit.kernels {
            let request = unit
                .instantiations
                .iter()
                .find(|(_, id)| **id == decl.id)
                .and_then(|(n, _)| insts.get(*n).cloned());
            let c_name = request.clone().unwrap_or_else(|| decl.name.clone());
            let mut model = self.model(decl, &unit.env, &c_name, &rel, false, &mut asserts)?;
            model.symbol = Some(decl.symbol.clone());
            models.push(model);
        }
        // The layout assertions go after the source, so clang checks what Rust asserts.
        let checked = self.work.join(format!("{stem}.checked.cu"));
        std::fs::write(&checked, format!("{wrapper}{asserts}")).map_err(io("write", &checked))?;
        let depfile = self.work.join(format!("{stem}.d"));
        let mut ptx = Vec::new();
        for (n, arch) in archs.iter().enumerate() {
            let out = self.work.join(format!("{stem}.{arch}.ptx"));
            let mut args = base.clone();
            args.extend([format!("--cuda-gpu-arch={arch}"), "-O3".into(), "-S".into()]);
            if n == 0 {
                args.extend(["-MD".into(), "-MF".into(), depfile.display().to_string()]);
            }
            args.extend([
                "-o".into(),
                out.display().to_string(),
                checked.display().to_string(),
            ]);
            self.clang
                .run(&format!("compile to PTX for {arch}"), &rel, &os(&args))?;
            let text = std::fs::read_to_string(&out).map_err(io("read", &out))?;
            // The identity line names the clang build; the PTX must not depend on it.
            let text: String = text
                .lines()
                .filter(|l| !l.starts_with("// Generated by"))
                .map(|l| format!("{l}\n"))
                .collect();
            let blob = format!("__STREAMEXEC_PTX_{i}_{}", const_part(arch));
            self.blobs.push(Blob {
                name: blob.clone(),
                what: format!("PTX for {arch} of {}.", slash(&rel)),
                data: BlobData::Text(text),
            });
            ptx.push((arch.clone(), blob));
        }
        let _ = self.add_deps(&depfile, &[&checked, &wrap_path])?;
        let mut hsaco = Vec::new();
        for arch in &self.k.hip_archs {
            let out = self.work.join(format!("{stem}.{arch}.hsaco"));
            let offload = format!("--offload-arch={arch}");
            let mut args = self.device_args(
                &[
                    "-x",
                    "hip",
                    &offload,
                    "--cuda-device-only",
                    "-nogpulib",
                    "-nogpuinc",
                ],
                prelude,
            );
            args.extend([
                "-O3".into(),
                "-c".into(),
                "-o".into(),
                out.display().to_string(),
            ]);
            args.push(checked.display().to_string());
            self.clang
                .run(&format!("compile to HSACO for {arch}"), &rel, &os(&args))?;
            let blob = format!("__STREAMEXEC_HSACO_{i}_{}", const_part(arch));
            self.blobs.push(Blob {
                name: blob.clone(),
                what: format!("HSACO for {arch} of {}.", slash(&rel)),
                data: BlobData::Bytes(std::fs::read(&out).map_err(io("read", &out))?),
            });
            hsaco.push((arch.clone(), blob));
        }
        for mut m in models {
            m.ptx = ptx.clone();
            m.hsaco = hsaco.clone();
            self.kernels.push(m);
        }
        Ok(())
    }

    fn opencl(&mut self, i: usize, src: &Path) -> Result<()> {
        let abs = self.root.join(src);
        let rel = PathBuf::from(slash(src));
        self.deps.insert(abs.clone());
        let stem = format!(
            "{i}_{}",
            src.file_stem().map_or("k".into(), |s| s.to_string_lossy())
        );
        let depfile = self.work.join(format!("{stem}.cl.d"));
        let mut base = vec!["-x".to_string(), "cl".into(), "-cl-std=CL1.2".into()];
        base.extend(self.common());
        let mut args = base.clone();
        args.extend([
            "-fsyntax-only".into(),
            "-MD".into(),
            "-MF".into(),
            depfile.display().to_string(),
            "-Xclang".into(),
            "-ast-dump=json".into(),
            abs.display().to_string(),
        ]);
        let json = self.clang.run("check the OpenCL C", &rel, &os(&args))?;
        let unit = self.parse_ast(&json, &rel, true)?;
        let headers = self.add_deps(&depfile, &[&abs])?;
        let mut asserts = String::new();
        let mut models = Vec::new();
        for decl in &unit.kernels {
            models.push(self.model(decl, &unit.env, &decl.name, &rel, true, &mut asserts)?);
        }
        if !asserts.is_empty() {
            let checked = self.work.join(format!("{stem}.checked.cl"));
            let text = format!("#include \"{}\"\n{asserts}", c_path(&abs));
            std::fs::write(&checked, text).map_err(io("write", &checked))?;
            let mut args = base.clone();
            args.extend(["-fsyntax-only".into(), checked.display().to_string()]);
            self.clang
                .run("check the struct layouts of", &rel, &os(&args))?;
        }
        // The text as written, or preprocessed when it includes headers of its own (the
        // OpenCL driver compiles it later without this include path).
        let text = if headers.is_empty() {
            std::fs::read_to_string(&abs).map_err(io("read", &abs))?
        } else {
            let mut args = base.clone();
            args.extend([
                "-E".into(),
                "-P".into(),
                "-cl-no-stdinc".into(),
                abs.display().to_string(),
            ]);
            String::from_utf8_lossy(&self.clang.run("preprocess", &rel, &os(&args))?).into_owned()
        };
        let blob = format!("__STREAMEXEC_OPENCL_{i}");
        self.blobs.push(Blob {
            name: blob.clone(),
            what: format!("The OpenCL C of {}.", slash(&rel)),
            data: BlobData::Text(text),
        });
        for mut m in models {
            m.opencl = Some((m.symbol.take().unwrap_or_default(), blob.clone()));
            self.kernels.push(m);
        }
        Ok(())
    }

    /// The model of one kernel: its parameters as Rust types, the structs they need (added to
    /// `self.structs`, with clang assertions appended to `asserts`).
    fn model(
        &mut self,
        decl: &KernelDecl,
        env: &TypeEnv,
        c_name: &str,
        file: &Path,
        opencl: bool,
        asserts: &mut String,
    ) -> Result<KernelModel> {
        let unsupported = |param: &str, ty: &str, why: String| Error::UnsupportedParam {
            kernel: c_name.to_string(),
            file: file.to_path_buf(),
            param: param.to_string(),
            ty: ty.to_string(),
            why,
        };
        let mut params = Vec::new();
        let mut taken = vec!["stream".to_string(), "threads".into(), "blocks".into()];
        let mut types = decl.params.clone();
        if let Some(elem) = &decl.dynamic_shared {
            types.push(("dynamic_shared".into(), format!("__local {elem} *")));
        }
        for (n, (name, text)) in types.iter().enumerate() {
            let shown = if name.is_empty() {
                format!("#{n}")
            } else {
                name.clone()
            };
            let local_ok = opencl || (decl.dynamic_shared.is_some() && n == decl.params.len());
            let ty = ctype::parse(text, env, opencl || local_ok)
                .map_err(|why| unsupported(&shown, text, why))?;
            if matches!(ty, CType::Pointer(_, Space::Local)) && !local_ok {
                return Err(unsupported(&shown, text, "a local pointer".into()));
            }
            self.need_structs(&ty, env, asserts)
                .map_err(|why| unsupported(&shown, text, why))?;
            let mut ident = codegen::ident(if name.is_empty() { &shown } else { name });
            while taken.contains(&ident) {
                ident.push('_');
            }
            taken.push(ident.clone());
            let c_type = match &decl.dynamic_shared {
                Some(elem) if n == decl.params.len() => format!("extern __shared__ {elem}[]"),
                _ => text.clone(),
            };
            params.push(Param {
                name: ident,
                c_type,
                pod: ctype::pod_rust(&ty, env, "super::"),
                launcher: ctype::launcher_rust(&ty, env, "super::"),
            });
        }
        Ok(KernelModel {
            module: codegen::ident(c_name),
            c_name: c_name.to_string(),
            params,
            symbol: Some(decl.symbol.clone()),
            sources: vec![slash(file)],
            ..KernelModel::default()
        })
    }

    /// Adds the structs `ty` names (and the structs inside them) to the models.
    fn need_structs(
        &mut self,
        ty: &CType,
        env: &TypeEnv,
        asserts: &mut String,
    ) -> Result<(), String> {
        let id = match ty {
            CType::Record(id) => id,
            CType::Array(elem, _) => return self.need_structs(elem, env, asserts),
            // A pointee struct must be plain data too, but it is not passed by value.
            CType::Pointer(Some(elem), _) => return self.need_structs(elem, env, asserts),
            CType::Scalar(_) | CType::Pointer(None, _) => return Ok(()),
        };
        let record = env
            .records
            .get(id)
            .ok_or_else(|| "a struct whose definition clang did not show".to_string())?;
        let fields = ctype::record_fields(id, env)?;
        let (size, align) = ctype::layout(ty, env)?;
        let mut out_fields = Vec::new();
        let mut offset = 0usize;
        let c = &record.c_name;
        *asserts += &format!(
            "_Static_assert(sizeof({c}) == {size} && __alignof__({c}) == {align}, \
             \"streamexec-build: {c} is not laid out as plain C (packed or aligned?); such \
             structs cannot be kernel arguments from Rust\");\n"
        );
        for (name, fty) in &fields {
            self.need_structs(fty, env, asserts)?;
            let (fsize, falign) = ctype::layout(fty, env)?;
            let at = offset.next_multiple_of(falign);
            if at > offset {
                out_fields.push((
                    format!("__pad{offset}"),
                    format!("[u8; {}]", at - offset),
                    offset,
                    at - offset,
                ));
            }
            *asserts += &format!(
                "_Static_assert(__builtin_offsetof({c}, {name}) == {at}, \"streamexec-build: \
                 field {name} of {c} is not where plain C puts it\");\n"
            );
            let rust = match fty {
                CType::Scalar(Scalar::Bool) => "u8".to_string(),
                _ => ctype::pod_rust(fty, env, ""),
            };
            out_fields.push((codegen::ident(name), rust, at, fsize));
            offset = at + fsize;
        }
        if size > offset {
            out_fields.push((
                format!("__pad{offset}"),
                format!("[u8; {}]", size - offset),
                offset,
                size - offset,
            ));
        }
        let model = StructModel {
            rust_name: record.rust_name.clone(),
            c_name: c.clone(),
            fields: out_fields,
            size,
            align,
        };
        match self.structs.get(&model.rust_name) {
            // One struct in CUDA C++ (`S`) and OpenCL C (`struct S`): the same if laid out alike.
            Some(prev)
                if (&prev.fields, prev.size, prev.align)
                    != (&model.fields, model.size, model.align) =>
            {
                Err(format!(
                    "struct `{}` is defined differently in two sources",
                    model.rust_name
                ))
            }
            Some(_) => Ok(()),
            None => {
                self.structs.insert(model.rust_name.clone(), model);
                Ok(())
            }
        }
    }
}

/// A path inside a C string literal.
fn c_path(p: &Path) -> String {
    p.display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

/// An architecture name as part of a constant's name.
fn const_part(arch: &str) -> String {
    arch.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}
