//! HIP without an AMD GPU (feature `hip`, built with `HIP_PATH=/usr` against Debian's
//! libamdhip64-dev): the platform reports "no device" cleanly, and the `hipDeviceProp_t`
//! layout of hip-runtime-sys matches the installed header, field by field, so the device
//! description never reads garbage.
#![cfg(feature = "hip")]

#[path = "common/mod.rs"]
mod common;

use std::mem::offset_of;
use std::process::Command;

use hip_runtime_sys::hipDeviceProp_t;
use streamexec::{Error, PlatformManager};

#[test]
fn without_a_device_the_platform_is_unavailable_with_the_reason() {
    if common::required_platforms().iter().any(|r| r == "hip") {
        return;
    }
    match PlatformManager::platform_with_name("hip") {
        Err(Error::PlatformUnavailable { platform, reason }) => {
            assert_eq!(platform, "hip");
            assert!(reason.contains("hipErrorNoDevice"), "{reason}");
        }
        Ok(_) => eprintln!("an AMD device is present; nothing to check"),
        Err(other) => panic!("{other}"),
    }
}

/// Fields streamexec reads from `hipDeviceProp_t`, as (name, offset in the bindings).
fn read_fields() -> Vec<(&'static str, usize)> {
    vec![
        ("name", offset_of!(hipDeviceProp_t, name)),
        (
            "totalGlobalMem",
            offset_of!(hipDeviceProp_t, totalGlobalMem),
        ),
        (
            "sharedMemPerBlock",
            offset_of!(hipDeviceProp_t, sharedMemPerBlock),
        ),
        ("warpSize", offset_of!(hipDeviceProp_t, warpSize)),
        (
            "maxThreadsPerBlock",
            offset_of!(hipDeviceProp_t, maxThreadsPerBlock),
        ),
        ("maxThreadsDim", offset_of!(hipDeviceProp_t, maxThreadsDim)),
        ("maxGridSize", offset_of!(hipDeviceProp_t, maxGridSize)),
        ("clockRate", offset_of!(hipDeviceProp_t, clockRate)),
        (
            "multiProcessorCount",
            offset_of!(hipDeviceProp_t, multiProcessorCount),
        ),
        (
            "canMapHostMemory",
            offset_of!(hipDeviceProp_t, canMapHostMemory),
        ),
        ("gcnArchName", offset_of!(hipDeviceProp_t, gcnArchName)),
    ]
}

#[test]
fn the_bindings_layout_of_hip_device_prop_matches_the_installed_header() {
    let root = std::env::var("HIP_PATH").unwrap_or_else(|_| "/usr".into());
    let include = std::path::Path::new(&root).join("include");
    if !include.join("hip/hip_runtime_api.h").exists() {
        panic!(
            "{}/hip/hip_runtime_api.h is missing: install libamdhip64-dev or set HIP_PATH",
            include.display()
        );
    }
    let fields = read_fields();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <hip/hip_runtime_api.h>\n\
         int main(void) {\n  printf(\"size %zu\\n\", sizeof(hipDeviceProp_t));\n",
    );
    for (f, _) in &fields {
        c += &format!("  printf(\"{f} %zu\\n\", offsetof(hipDeviceProp_t, {f}));\n");
    }
    c += "  return 0;\n}\n";
    let dir = std::env::temp_dir().join(format!("streamexec-hip-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("layout.c"), c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .arg("-D__HIP_PLATFORM_AMD__")
        .arg(format!("-I{}", include.display()))
        .arg(dir.join("layout.c"))
        .arg("-o")
        .arg(dir.join("layout"))
        .status()
        .unwrap();
    assert!(status.success(), "compiling the layout probe with {cc}");
    let out = Command::new(dir.join("layout")).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let header: Vec<(String, usize)> = text
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    assert_eq!(
        header[0],
        ("size".to_string(), size_of::<hipDeviceProp_t>()),
        "sizeof(hipDeviceProp_t)"
    );
    for ((name, ours), (hname, theirs)) in fields.iter().zip(&header[1..]) {
        assert_eq!((name, ours), (&hname.as_str(), theirs), "offset of {name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
