//! Running clang: finding it, its command lines, its diagnostics as errors, its depfiles.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result, io};

/// The clang binary when `STREAMEXEC_CLANG` is not set.
pub const DEFAULT_CLANG: &str = "clang++-19";

/// A clang that answered `--version`.
#[derive(Clone, Debug)]
pub struct Clang {
    /// The binary.
    pub path: PathBuf,
}

impl Clang {
    /// Finds clang: `explicit`, else `STREAMEXEC_CLANG`, else [`DEFAULT_CLANG`] on `PATH`.
    pub fn find(explicit: Option<&Path>) -> Result<Clang> {
        let path = explicit
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("STREAMEXEC_CLANG").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CLANG));
        let not_found = |reason: String| Error::ClangNotFound {
            tried: path.display().to_string(),
            reason,
        };
        match Command::new(&path).arg("--version").output() {
            Ok(out) if out.status.success() => Ok(Clang { path }),
            Ok(out) => Err(not_found(format!(
                "`--version` exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
            Err(e) => Err(not_found(e.to_string())),
        }
    }

    /// Runs clang with `args` on `file`; its stdout, or [`Error::Clang`] with its diagnostics.
    pub fn run(&self, action: &str, file: &Path, args: &[OsString]) -> Result<Vec<u8>> {
        let command = format!(
            "{} {}",
            self.path.display(),
            args.iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let out =
            Command::new(&self.path)
                .args(args)
                .output()
                .map_err(|e| Error::ClangNotFound {
                    tried: self.path.display().to_string(),
                    reason: e.to_string(),
                })?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        let diagnostics = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
        let hint =
            if diagnostics.contains("\"lld\" doesn't exist") || diagnostics.contains("ld.lld") {
                "\nhint: HSACO (hip_archs) needs LLVM's linker: `apt install lld-19`, or drop \
             hip_archs"
                    .to_string()
            } else {
                String::new()
            };
        Err(Error::Clang {
            action: action.to_string(),
            file: file.to_path_buf(),
            diagnostics,
            hint,
            command,
        })
    }
}

/// The files of a Make-style depfile (`-MD -MF`), targets left out.
pub fn read_depfile(path: &Path) -> Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string(path).map_err(io("read clang's depfile", path))?;
    Ok(parse_depfile(&text))
}

/// Parses a depfile's text: `target: dep dep \` lines, `\ ` escaping spaces.
pub fn parse_depfile(text: &str) -> Vec<PathBuf> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut deps = Vec::new();
    for line in joined.lines() {
        let Some(colon) = find_target_colon(line) else {
            continue;
        };
        let mut word = String::new();
        let mut chars = line[colon + 1..].chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    word.push(' ');
                    chars.next();
                }
                ' ' | '\t' => {
                    if !word.is_empty() {
                        deps.push(PathBuf::from(std::mem::take(&mut word)));
                    }
                }
                _ => word.push(c),
            }
        }
        if !word.is_empty() {
            deps.push(PathBuf::from(word));
        }
    }
    deps
}

/// The `:` that ends the target list (not a Windows drive letter's).
fn find_target_colon(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    (0..bytes.len()).find(|&i| {
        bytes[i] == b':' && !(i == 1 && bytes.get(2).is_some_and(|b| *b == b'\\' || *b == b'/'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depfiles_list_every_dependency() {
        let text = "out.ptx: /src/a.cu /src/my\\ dir/b.h \\\n  /usr/lib/llvm-19/x.h\n";
        assert_eq!(
            parse_depfile(text),
            vec![
                PathBuf::from("/src/a.cu"),
                PathBuf::from("/src/my dir/b.h"),
                PathBuf::from("/usr/lib/llvm-19/x.h")
            ]
        );
    }

    #[test]
    fn a_missing_clang_says_how_to_install_it() {
        let err = Clang::find(Some(Path::new("/nonexistent/clang-streamexec"))).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::ClangNotFound { .. }), "{text}");
        for needle in [
            "apt install clang-19",
            "STREAMEXEC_CLANG",
            "prebuilt",
            "/nonexistent/clang-streamexec",
        ] {
            assert!(text.contains(needle), "`{needle}` missing from: {text}");
        }
    }
}
