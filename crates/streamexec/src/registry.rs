//! The platform registry: which backends are compiled in, which can run here, and their devices.
//!
//! As StreamExecutor's `MultiPlatformManager`, platforms are chosen at run time by name
//! (case-insensitive). A platform whose driver is missing is listed as unavailable with the
//! reason; asking for it returns `Error::PlatformUnavailable`, never a panic. Each device has at
//! most one live executor per `PluginConfig`: `executor_for_device(_with)` hands out the same
//! one while any handle to it lives, and opens a fresh one after every handle has dropped.
//!
//! Adding a platform: a folder under `src/platform/` whose `mod.rs` has an `open` function, and
//! one line in [`REGISTRY`].

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::executor::{ExecutorShared, StreamExecutor};
use crate::interface::PlatformInterface;
use crate::platform;
use crate::types::{DeviceDescription, PluginConfig};

/// A backend's opener: the platform, or why it cannot run here.
type OpenFn = fn() -> std::result::Result<Arc<dyn PlatformInterface>, String>;

/// How a backend is found: its name, the cargo feature that compiles it, and its opener.
struct Registration {
    name: &'static str,
    feature: Option<&'static str>,
    open: OpenFn,
    /// Listed by `platforms()` and found by name. False only for a test-only template backend
    /// built without its feature, which users should not see at all.
    listed: bool,
}

/// A registry entry for a backend behind cargo feature `$feature`: its folder's `open` when the
/// feature is on, else an opener that says how to turn it on.
macro_rules! feature_backend {
    ($name:literal, $feature:literal, $($open:ident)::+) => {
        Registration {
            name: $name,
            feature: Some($feature),
            open: {
                #[cfg(feature = $feature)]
                fn open() -> std::result::Result<Arc<dyn PlatformInterface>, String> {
                    $($open)::+()
                }
                #[cfg(not(feature = $feature))]
                fn open() -> std::result::Result<Arc<dyn PlatformInterface>, String> {
                    Err(format!(
                        "not compiled in; rebuild with `--features {}`",
                        $feature
                    ))
                }
                open
            },
            listed: true,
        }
    };
    // A test-only template backend: invisible unless its feature is on.
    (template $name:literal, $feature:literal, $($open:ident)::+) => {
        Registration {
            listed: cfg!(feature = $feature),
            ..feature_backend!($name, $feature, $($open)::+)
        }
    };
}

/// Every platform streamexec knows, in the order `PlatformManager::platforms` lists them.
const REGISTRY: &[Registration] = &[
    Registration {
        name: "host",
        feature: None,
        open: platform::host::open,
        listed: true,
    },
    feature_backend!("opencl", "opencl", platform::opencl::open),
    feature_backend!("cuda", "cuda", platform::cuda::open),
    feature_backend!("hip", "hip", platform::hip::open),
    feature_backend!(template "noop", "noop", platform::noop::open),
];

/// The registrations users can see.
fn registry() -> impl Iterator<Item = &'static Registration> {
    REGISTRY.iter().filter(|r| r.listed)
}

/// What [`PlatformManager::platforms`] reports for one platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlatformInfo {
    /// Lower-case name.
    pub name: &'static str,
    /// The cargo feature that compiles it (`None`: always compiled).
    pub feature: Option<&'static str>,
    /// `Ok(device count)` when usable, else the reason it is not.
    pub availability: std::result::Result<usize, String>,
}

impl PlatformInfo {
    /// True when the platform can be used here.
    pub fn is_available(&self) -> bool {
        self.availability.is_ok()
    }
}

/// A platform: a driver and its devices. Cheap to clone.
#[derive(Clone)]
pub struct Platform {
    inner: Arc<PlatformShared>,
}

struct PlatformShared {
    iface: Arc<dyn PlatformInterface>,
    /// Live executors by (ordinal, plugin config).
    executors: Mutex<HashMap<(usize, PluginConfig), Weak<ExecutorShared>>>,
}

impl Platform {
    /// Lower-case name.
    pub fn name(&self) -> &'static str {
        self.inner.iface.name()
    }

    /// Number of devices.
    pub fn device_count(&self) -> usize {
        self.inner.iface.device_count()
    }

    fn check_ordinal(&self, ordinal: usize) -> Result<()> {
        let count = self.device_count();
        if ordinal >= count {
            return Err(Error::InvalidDevice {
                platform: self.name(),
                ordinal,
                count,
            });
        }
        Ok(())
    }

    /// Description of device `ordinal`.
    pub fn description(&self, ordinal: usize) -> Result<DeviceDescription> {
        self.check_ordinal(ordinal)?;
        self.inner.iface.description(ordinal)
    }

    /// The executor of device `ordinal` with the default [`PluginConfig`] (every family on
    /// `Plugin::Auto`): the live one if there is one, else a new one.
    pub fn executor_for_device(&self, ordinal: usize) -> Result<StreamExecutor> {
        self.executor_for_device_with(ordinal, PluginConfig::default())
    }

    /// The executor of device `ordinal` whose canned families are served as `config` asks
    /// (StreamExecutor's `ExecutorForDeviceWithPluginConfig`): the live one for this
    /// (ordinal, config) if there is one, else a new one, so two configs get two executors.
    /// A `Plugin::Vendor` whose library is absent is an `Err` naming the library, here, before
    /// anything runs. `StreamExecutor::plugins` reports what was chosen and why.
    pub fn executor_for_device_with(
        &self,
        ordinal: usize,
        config: PluginConfig,
    ) -> Result<StreamExecutor> {
        self.check_ordinal(ordinal)?;
        let mut cache = self.inner.executors.lock();
        cache.retain(|_, weak| weak.strong_count() > 0);
        if let Some(shared) = cache.get(&(ordinal, config)).and_then(Weak::upgrade) {
            return Ok(StreamExecutor::from_shared(shared));
        }
        let iface = self.inner.iface.create_executor(ordinal, &config)?;
        let exec = StreamExecutor::with_plugins(self.name(), ordinal, iface, config);
        cache.insert((ordinal, config), exec.downgrade());
        Ok(exec)
    }
}

impl std::fmt::Debug for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Platform({}, {} device(s))",
            self.name(),
            self.device_count()
        )
    }
}

type Opened = std::result::Result<Platform, String>;

fn opened() -> &'static Mutex<HashMap<&'static str, Opened>> {
    static OPENED: OnceLock<Mutex<HashMap<&'static str, Opened>>> = OnceLock::new();
    OPENED.get_or_init(|| Mutex::new(HashMap::new()))
}

fn open(reg: &Registration) -> Opened {
    let mut map = opened().lock();
    map.entry(reg.name)
        .or_insert_with(|| {
            (reg.open)().map(|iface| Platform {
                inner: Arc::new(PlatformShared {
                    iface,
                    executors: Mutex::new(HashMap::new()),
                }),
            })
        })
        .clone()
}

/// Finds platforms by name.
pub struct PlatformManager;

impl PlatformManager {
    /// Name of the default platform, which is always available.
    pub const DEFAULT_PLATFORM: &'static str = "host";

    /// Every platform streamexec knows, compiled in or not, with its availability.
    pub fn platforms() -> Vec<PlatformInfo> {
        registry()
            .map(|reg| PlatformInfo {
                name: reg.name,
                feature: reg.feature,
                availability: open(reg).and_then(|p| match p.device_count() {
                    0 => Err("the driver loaded but reports no device".to_string()),
                    n => Ok(n),
                }),
            })
            .collect()
    }

    /// The platform called `name` (case-insensitive): `UnknownPlatform` if there is none,
    /// `PlatformUnavailable` with the reason if it cannot run here.
    pub fn platform_with_name(name: &str) -> Result<Platform> {
        let reg = registry()
            .find(|r| r.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::UnknownPlatform {
                name: name.to_string(),
                known: registry().map(|r| r.name).collect::<Vec<_>>().join(", "),
            })?;
        open(reg).map_err(|reason| Error::PlatformUnavailable {
            platform: reg.name,
            reason,
        })
    }

    /// The host platform.
    pub fn default_platform() -> Result<Platform> {
        Self::platform_with_name(Self::DEFAULT_PLATFORM)
    }
}
