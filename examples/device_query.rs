//! Lists every platform streamexec knows — compiled in or not — with its availability or the
//! reason it is unavailable, each device's description (like `clinfo` or `deviceQuery`), and
//! what serves its canned operations under the default `PluginConfig` (`executor.plugins()`).

use streamexec::PlatformManager;

fn main() {
    let platforms = PlatformManager::platforms();
    println!(
        "streamexec {}: {} platform(s) known",
        env!("CARGO_PKG_VERSION"),
        platforms.len()
    );
    for info in platforms {
        let feature = info
            .feature
            .map(|f| format!(" (cargo feature `{f}`)"))
            .unwrap_or_default();
        match &info.availability {
            Ok(count) => {
                println!(
                    "\nPlatform {}{feature}: available, {count} device(s)",
                    info.name
                );
                let Ok(platform) = PlatformManager::platform_with_name(info.name) else {
                    continue;
                };
                for ordinal in 0..*count {
                    match platform.description(ordinal) {
                        Ok(desc) => println!("{desc}"),
                        Err(e) => println!("  Device {ordinal}: cannot describe: {e}"),
                    }
                    match platform.executor_for_device(ordinal) {
                        Ok(exec) => {
                            println!("  canned operations (Plugin::Auto):");
                            for line in exec.plugins().to_string().lines() {
                                println!("    {line}");
                            }
                        }
                        Err(e) => println!("  Device {ordinal}: cannot open: {e}"),
                    }
                }
            }
            Err(reason) => println!("\nPlatform {}{feature}: unavailable: {reason}", info.name),
        }
    }
}
