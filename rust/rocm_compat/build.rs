//! Chooses the platform this crate binds to, from the environment the build backend sets:
//!
//! - `MONARCH_GPU_PLATFORM`: `cpu` (default, no toolkit needed), `cuda` or `rocm`;
//! - `MONARCH_CUDA_HOME` / `MONARCH_ROCM_PATH`: the toolkit root (headers in include/, libraries in lib/);
//! - `MONARCH_BRIDGE_LIB_DIR`: the directory holding `libmonarch_bridge.a` (the compiled csrc/);
//! - `MONARCH_HIP_LIB_DIR`: where libamdhip64 lives when it is not `<root>/lib`.
//!
//! Every variable is declared with rerun-if-env-changed, so switching platform rebuilds this crate.
//!
//! On cuda/rocm the C side is compiled against the toolkit's real headers: the device-properties
//! shim and the generated thunks (`shim/generated/compat_{cuda,hip}.c`, written by
//! `python -m tools gen-compat`). Each thunk statically asserts that the header's prototype is the
//! one the Rust declaration was generated from and calls the function through the header, so a
//! `#define`-versioned symbol (HIP 6's `hipGetDevicePropertiesR0600`) is the one linked.
use std::env;
use std::path::PathBuf;

fn var(name: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={name}");
    env::var(name).ok().filter(|v| !v.is_empty())
}

fn require(name: &str, platform: &str) -> PathBuf {
    match var(name) {
        Some(v) => PathBuf::from(v),
        None => panic!("MONARCH_GPU_PLATFORM={platform} needs {name}; the build backend sets it"),
    }
}

/// The minor version of the compiler cargo runs (`rustc 1.95.0 (...)` -> 95).
fn rustc_minor() -> Option<u32> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}

/// The bridge (`libmonarch_bridge.a`), linked into the extension, not bundled into this crate's rlib: nvcc's
/// objects differ from one compile to the next in what the final link drops, and a bundled copy would make
/// this crate's rlib differ too, a compiler-cache miss for it whenever the bridge was compiled again.
fn link_bridge(bridge: &std::path::Path) {
    println!("cargo:rustc-link-search=native={}", bridge.display());
    println!("cargo:rustc-link-lib=static:-bundle=monarch_bridge");
    // Relink when the bridge changes (a kernel edit rebuilds only the library, not this crate's code).
    println!(
        "cargo:rerun-if-changed={}",
        bridge.join("libmonarch_bridge.a").display()
    );
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=shim");
    let platform = var("MONARCH_GPU_PLATFORM").unwrap_or_else(|| "cpu".to_string());
    match platform.as_str() {
        "cpu" => {}
        "cuda" => {
            let home = require("MONARCH_CUDA_HOME", "cuda");
            let bridge = require("MONARCH_BRIDGE_LIB_DIR", "cuda");
            cc::Build::new()
                .file("shim/device_cuda.c")
                .file("shim/generated/compat_cuda.c")
                .include(home.join("include"))
                .flag_if_supported("-ffile-prefix-map=/=/")
                .compile("mr_device_shim");
            link_bridge(&bridge);
            println!(
                "cargo:rustc-link-search=native={}",
                home.join("lib").display()
            );
            // cudart static: no libcudart.so needed at run time; the driver is dlopened by cudart. Not
            // bundled either, and after the bridge on the extension's link line, which needs it.
            println!("cargo:rustc-link-lib=static:-bundle=cudart_static");
            for lib in ["dl", "rt", "pthread", "stdc++"] {
                println!("cargo:rustc-link-lib=dylib={lib}");
            }
        }
        "rocm" => {
            let root = require("MONARCH_ROCM_PATH", "rocm");
            let bridge = require("MONARCH_BRIDGE_LIB_DIR", "rocm");
            let hip_lib = var("MONARCH_HIP_LIB_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("lib"));
            cc::Build::new()
                .file("shim/device_hip.c")
                .file("shim/generated/compat_hip.c")
                .include(root.join("include"))
                .define("__HIP_PLATFORM_AMD__", None)
                .compile("mr_device_shim");
            link_bridge(&bridge);
            println!("cargo:rustc-link-search=native={}", hip_lib.display());
            println!("cargo:rustc-link-lib=dylib=amdhip64");
            for lib in ["dl", "pthread", "stdc++"] {
                println!("cargo:rustc-link-lib=dylib={lib}");
            }
        }
        other => panic!("MONARCH_GPU_PLATFORM must be cpu, cuda or rocm, not {other:?}"),
    }
    // The AVX-512 checksum (checksum.rs) needs the AVX-512 intrinsics, stable since Rust 1.89; older
    // compilers build the AVX2 and scalar forms only.
    if rustc_minor().is_some_and(|minor| minor >= 89) {
        println!("cargo:rustc-cfg=mr_avx512");
    }
    println!("cargo:rustc-cfg=mr_platform=\"{platform}\"");
    println!("cargo:rustc-env=MONARCH_GPU_PLATFORM={platform}");
}
