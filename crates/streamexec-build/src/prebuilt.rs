//! Prebuilt mode: committed outputs for machines without clang, with a manifest that proves
//! they are current.
//!
//! A prebuilt folder holds `kernels.rs` (what a build with clang generated) and
//! `kernels.manifest`: the hash of the builder's options, then one line per input file (each
//! source and every header it includes from inside the package) with the hash of its bytes.
//! The hash is 64-bit FNV-1a ([`fnv1a64`], printed as 16 hex digits): stable across Rust
//! versions and platforms, and enough to notice an edit (it is not a defence against someone
//! forging a collision). A build without clang recomputes every hash and refuses stale outputs,
//! naming the file that changed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result, io};

/// The generated file's name, in a prebuilt folder and in `OUT_DIR`.
pub const KERNELS_RS: &str = "kernels.rs";
/// The manifest's name in a prebuilt folder.
pub const MANIFEST: &str = "kernels.manifest";

/// 64-bit FNV-1a: offset basis 0xcbf29ce484222325, prime 0x100000001b3.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A manifest: the options' hash and each input's path (relative, `/`-separated) and hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Hash of the builder's options text.
    pub options: u64,
    /// Inputs and their hashes, sorted by path.
    pub files: Vec<(String, u64)>,
}

impl Manifest {
    /// The manifest of `files` (relative to `root`) under `options`.
    pub fn compute(root: &Path, options: &str, files: &[String]) -> Result<Manifest> {
        let mut entries = Vec::new();
        for f in files {
            let path = root.join(f);
            let bytes = std::fs::read(&path).map_err(io("read", &path))?;
            entries.push((f.clone(), fnv1a64(&bytes)));
        }
        entries.sort();
        entries.dedup();
        Ok(Manifest {
            options: fnv1a64(options.as_bytes()),
            files: entries,
        })
    }

    /// The manifest's text.
    pub fn render(&self) -> String {
        let mut s = String::from(
            "# streamexec-build prebuilt kernels: FNV-1a 64 hashes of the builder's options and of\n\
             # every input. Regenerate: STREAMEXEC_BUILD_UPDATE_PREBUILT=1 cargo build\n",
        );
        let _ = writeln!(s, "options {:016x}", self.options);
        for (path, hash) in &self.files {
            let _ = writeln!(s, "file {hash:016x} {path}");
        }
        s
    }

    /// Parses a manifest's text.
    pub fn parse(text: &str) -> Option<Manifest> {
        let mut options = None;
        let mut files = Vec::new();
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        {
            let mut words = line.splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("options"), Some(h), None) => options = u64::from_str_radix(h, 16).ok(),
                (Some("file"), Some(h), Some(path)) => {
                    files.push((path.to_string(), u64::from_str_radix(h, 16).ok()?));
                }
                _ => return None,
            }
        }
        Some(Manifest {
            options: options?,
            files,
        })
    }
}

/// Checks the prebuilt folder `dir` against the inputs under `root` and `options`; returns the
/// generated text and the input paths (for `rerun-if-changed`). `sources` are the configured
/// sources (relative), which must all be in the manifest. `why` says why prebuilt mode is used.
pub fn load(
    dir: &Path,
    root: &Path,
    options: &str,
    sources: &[String],
    why: &str,
) -> Result<(String, Vec<PathBuf>)> {
    let missing = |detail: String| Error::MissingPrebuilt {
        dir: dir.to_path_buf(),
        detail,
        why: why.to_string(),
    };
    let manifest_path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&manifest_path)
        .map_err(|e| missing(format!("{}: {e}", manifest_path.display())))?;
    let manifest = Manifest::parse(&text)
        .ok_or_else(|| missing(format!("{} is not a manifest", manifest_path.display())))?;
    let generated_path = dir.join(KERNELS_RS);
    let generated = std::fs::read_to_string(&generated_path)
        .map_err(|e| missing(format!("{}: {e}", generated_path.display())))?;
    let stale = |detail: String| Error::StalePrebuilt {
        dir: dir.to_path_buf(),
        detail,
    };
    if manifest.options != fnv1a64(options.as_bytes()) {
        return Err(stale(
            "the builder's options (sources, architectures, include folders, defines or \
             instantiations in build.rs) changed since they were generated"
                .into(),
        ));
    }
    for s in sources {
        if !manifest.files.iter().any(|(p, _)| p == s) {
            return Err(stale(format!(
                "the source {s} is not among the inputs they were built from"
            )));
        }
    }
    let mut inputs = Vec::new();
    for (path, hash) in &manifest.files {
        let full = root.join(path);
        let bytes = std::fs::read(&full)
            .map_err(|e| stale(format!("the input {path} cannot be read ({e})")))?;
        if fnv1a64(&bytes) != *hash {
            return Err(stale(format!("{path} changed since they were generated")));
        }
        inputs.push(full);
    }
    inputs.push(manifest_path);
    inputs.push(generated_path);
    Ok((generated, inputs))
}

/// Writes `generated` and `manifest` into `dir`.
pub fn store(dir: &Path, generated: &str, manifest: &Manifest) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let rs = dir.join(KERNELS_RS);
    std::fs::write(&rs, generated).map_err(io("write", &rs))?;
    let mf = dir.join(MANIFEST);
    std::fs::write(&mf, manifest.render()).map_err(io("write", &mf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_has_the_published_values() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn manifests_round_trip() {
        let m = Manifest {
            options: 7,
            files: vec![
                ("kernels/a b.cu".into(), 1),
                ("kernels/x.h".into(), u64::MAX),
            ],
        };
        assert_eq!(Manifest::parse(&m.render()), Some(m));
        assert_eq!(Manifest::parse("nonsense"), None);
    }
}
