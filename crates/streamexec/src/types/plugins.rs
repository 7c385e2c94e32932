//! Which implementation serves each canned-operation family of an executor, as
//! StreamExecutor's `PluginConfig`: the user's choice per family ([`PluginConfig`]), what a
//! backend made of it ([`PluginStatus`]) and the executor's report ([`PluginReport`]).
//!
//! A backend decides each family once, when the executor is created
//! (`PlatformInterface::create_executor` receives the config), with [`decide`]: `Vendor` where
//! the vendor library is absent fails there, so `Platform::executor_for_device_with` returns the
//! `Err` naming the library before any work is enqueued.

use std::fmt;

use crate::error::{Error, Result};

/// One family of canned operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PluginFamily {
    /// `then_blas_*`.
    Blas,
    /// `then_set_rng_seed`, `then_populate_rand_*`.
    Rng,
    /// FFT plans.
    Fft,
    /// Deep-learning primitives (not implemented yet on any platform).
    Dnn,
}

impl PluginFamily {
    /// Every family, in report order.
    pub const ALL: [PluginFamily; 4] = [
        PluginFamily::Blas,
        PluginFamily::Rng,
        PluginFamily::Fft,
        PluginFamily::Dnn,
    ];

    /// Lower-case name, as in the report (`blas`, `rng`, `fft`, `dnn`).
    pub const fn name(self) -> &'static str {
        match self {
            PluginFamily::Blas => "blas",
            PluginFamily::Rng => "rng",
            PluginFamily::Fft => "fft",
            PluginFamily::Dnn => "dnn",
        }
    }

    /// Upper-case name, for messages (`BLAS`, `RNG`, `FFT`, `DNN`).
    pub const fn title(self) -> &'static str {
        match self {
            PluginFamily::Blas => "BLAS",
            PluginFamily::Rng => "RNG",
            PluginFamily::Fft => "FFT",
            PluginFamily::Dnn => "DNN",
        }
    }
}

/// What should serve one family.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Plugin {
    /// The vendor library (cuBLAS, CLBlast, ...) when it is installed, else the built-in
    /// implementation.
    #[default]
    Auto,
    /// The vendor library; creating the executor fails, naming the library, where it is absent.
    Vendor,
    /// The built-in implementation, even where a vendor library is installed.
    Builtin,
}

impl fmt::Display for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Plugin::Auto => "Plugin::Auto",
            Plugin::Vendor => "Plugin::Vendor",
            Plugin::Builtin => "Plugin::Builtin",
        })
    }
}

/// The choice per family for one executor (`Platform::executor_for_device_with`). The default
/// is [`Plugin::Auto`] everywhere. Builder style:
/// `PluginConfig::default().blas(Plugin::Builtin)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PluginConfig {
    blas: Plugin,
    rng: Plugin,
    fft: Plugin,
    dnn: Plugin,
}

impl PluginConfig {
    /// Chooses what serves BLAS.
    pub const fn blas(mut self, p: Plugin) -> Self {
        self.blas = p;
        self
    }
    /// Chooses what serves RNG.
    pub const fn rng(mut self, p: Plugin) -> Self {
        self.rng = p;
        self
    }
    /// Chooses what serves FFT.
    pub const fn fft(mut self, p: Plugin) -> Self {
        self.fft = p;
        self
    }
    /// Chooses what serves DNN.
    pub const fn dnn(mut self, p: Plugin) -> Self {
        self.dnn = p;
        self
    }
    /// Chooses `p` for `family`.
    pub const fn with(self, family: PluginFamily, p: Plugin) -> Self {
        match family {
            PluginFamily::Blas => self.blas(p),
            PluginFamily::Rng => self.rng(p),
            PluginFamily::Fft => self.fft(p),
            PluginFamily::Dnn => self.dnn(p),
        }
    }
    /// The choice for `family`.
    pub const fn get(&self, family: PluginFamily) -> Plugin {
        match family {
            PluginFamily::Blas => self.blas,
            PluginFamily::Rng => self.rng,
            PluginFamily::Fft => self.fft,
            PluginFamily::Dnn => self.dnn,
        }
    }
}

/// What serves one family of one executor, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginStatus {
    /// The family.
    pub family: PluginFamily,
    /// What the config asked for.
    pub choice: Plugin,
    /// What serves it: a library ("CLBlast (libclblast.so.1)", "cuBLAS"), "built-in kernels",
    /// a crate ("gemm crate"), or "none".
    pub implementation: String,
    /// Why that one (e.g. "cuBLAS not found: libcublas.so.12 missing; using built-in kernels").
    pub reason: String,
}

impl fmt::Display for PluginStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} ({})",
            self.family.name(),
            self.implementation,
            self.reason
        )
    }
}

/// `StreamExecutor::plugins`: one [`PluginStatus`] per family, in [`PluginFamily::ALL`]
/// order. `Display` writes one line per family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginReport {
    /// The platform's name.
    pub platform: &'static str,
    /// One entry per family.
    pub families: Vec<PluginStatus>,
}

impl PluginReport {
    /// The entry of `family`.
    pub fn get(&self, family: PluginFamily) -> Option<&PluginStatus> {
        self.families.iter().find(|s| s.family == family)
    }
}

impl fmt::Display for PluginReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.families.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// Which implementation a backend runs for a family, once decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// The vendor library.
    Vendor,
    /// The built-in implementation.
    Builtin,
    /// Nothing: the family's operations fail with `Unsupported`.
    Nothing,
}

/// A backend's decision for `family` under `choice`: `vendor` is the vendor library's name
/// when it is installed, else why not (`Err(None)`: this platform has no vendor library for
/// the family in this build); `builtin` names the built-in implementation, if any.
///
/// `Vendor` without the library is an `Err` naming it (the executor is not created); `Auto`
/// falls back to the built-in implementation and says why; `Builtin` is always honoured.
pub(crate) fn decide(
    platform: &'static str,
    family: PluginFamily,
    choice: Plugin,
    vendor: std::result::Result<&str, Option<String>>,
    builtin: Option<&str>,
) -> Result<(Served, PluginStatus)> {
    let status = |implementation: &str, reason: String| PluginStatus {
        family,
        choice,
        implementation: implementation.to_string(),
        reason,
    };
    let fam = family.title();
    let builtin_or_none = |reason: String| match builtin {
        Some(b) => (Served::Builtin, status(b, reason)),
        None => (
            Served::Nothing,
            status("none", format!("{reason}; no built-in {fam} on {platform}")),
        ),
    };
    Ok(match (choice, vendor) {
        (Plugin::Vendor | Plugin::Auto, Ok(lib)) => (
            Served::Vendor,
            status(lib, format!("{choice}: the vendor library loaded")),
        ),
        (Plugin::Vendor, Err(why)) => {
            let why = why
                .unwrap_or_else(|| format!("{platform} has no vendor {fam} plugin in this build"));
            let fallback = match builtin {
                Some(_) => "choose Plugin::Auto or Plugin::Builtin",
                None => "no other implementation exists here either",
            };
            return Err(Error::unsupported(
                platform,
                format!("executor_for_device_with ({fam}: Plugin::Vendor)"),
                format!("{why}; {fallback}"),
            ));
        }
        (Plugin::Auto, Err(Some(why))) => builtin_or_none(format!(
            "{choice}: {why}; using {}",
            builtin.unwrap_or("nothing")
        )),
        (Plugin::Auto, Err(None)) => builtin_or_none(format!(
            "{choice}: {platform} has no vendor {fam} plugin in this build"
        )),
        (Plugin::Builtin, _) => builtin_or_none(format!("{choice} chosen")),
    })
}

/// For the `families` a backend has no vendor library for in this build: `Plugin::Vendor` is
/// an `Err` saying so (`Auto` and `Builtin` are whatever the backend has, reported by
/// `StreamExecutor::plugins` from what it serves).
pub(crate) fn refuse_vendor(
    platform: &'static str,
    config: &PluginConfig,
    families: &[PluginFamily],
) -> Result<()> {
    for &f in families {
        if config.get(f) == Plugin::Vendor {
            decide(platform, f, Plugin::Vendor, Err(None), Some(""))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendor_without_its_library_names_it() {
        let e = decide(
            "opencl",
            PluginFamily::Blas,
            Plugin::Vendor,
            Err(Some("CLBlast (libclblast.so.1) not found".into())),
            Some("built-in kernels"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("libclblast.so.1") && e.contains("Plugin::Builtin"),
            "{e}"
        );
    }

    #[test]
    fn auto_falls_back_and_says_why() {
        let (s, st) = decide(
            "cuda",
            PluginFamily::Blas,
            Plugin::Auto,
            Err(Some("cuBLAS not found: libcublas.so.12 missing".into())),
            Some("built-in kernels"),
        )
        .unwrap();
        assert_eq!(s, Served::Builtin);
        assert_eq!(
            st.to_string(),
            "blas: built-in kernels (Plugin::Auto: cuBLAS not found: libcublas.so.12 missing; \
             using built-in kernels)"
        );
    }

    #[test]
    fn builtin_is_honoured_where_the_vendor_library_exists() {
        let (s, st) = decide(
            "cuda",
            PluginFamily::Blas,
            Plugin::Builtin,
            Ok("cuBLAS"),
            Some("built-in kernels"),
        )
        .unwrap();
        assert_eq!(s, Served::Builtin);
        assert_eq!(st.reason, "Plugin::Builtin chosen");
        let (s, _) = decide("cuda", PluginFamily::Rng, Plugin::Auto, Ok("cuRAND"), None).unwrap();
        assert_eq!(s, Served::Vendor);
    }

    #[test]
    fn a_family_without_any_implementation_is_none() {
        let (s, st) = decide("hip", PluginFamily::Dnn, Plugin::Auto, Err(None), None).unwrap();
        assert_eq!(s, Served::Nothing);
        assert_eq!(st.implementation, "none");
        assert!(decide("hip", PluginFamily::Dnn, Plugin::Vendor, Err(None), None).is_err());
    }

    #[test]
    fn config_builder_sets_one_family() {
        let c = PluginConfig::default().blas(Plugin::Builtin);
        assert_eq!(c.get(PluginFamily::Blas), Plugin::Builtin);
        assert_eq!(c.get(PluginFamily::Rng), Plugin::Auto);
        assert_ne!(c, PluginConfig::default());
        assert_eq!(
            c,
            PluginConfig::default().with(PluginFamily::Blas, Plugin::Builtin)
        );
    }
}
