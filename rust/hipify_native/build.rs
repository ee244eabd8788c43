//! Records a fingerprint of this crate's sources (`HIPIFY_NATIVE_SOURCES`): tools/hipify/plan.py computes the
//! same over the checkout's rust/hipify_native and writes it into each plan, so a module built from other
//! sources than the checkout's Python (an old `pip install`) leaves the run to Python instead of giving a
//! different result. CRC-32 (zlib's) and length of, for each file in sorted relative-path order (Cargo.toml,
//! build.rs, src/**/*.rs), the path, a NUL, the contents, a NUL (a change detector: Python computes it at C
//! speed with zlib.crc32).

use std::fs;
use std::path::Path;

fn collect(dir: &Path, rel: &str, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{rel}/{name}");
        if entry.path().is_dir() {
            collect(&entry.path(), &path, out);
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec!["Cargo.toml".to_string(), "build.rs".to_string()];
    collect(&root.join("src"), "src", &mut files);
    files.sort();
    let mut crc: u32 = !0;
    let mut len: u64 = 0;
    let mut feed = |bytes: &[u8]| {
        len += bytes.len() as u64;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
    };
    for rel in &files {
        let data = fs::read(root.join(rel)).unwrap_or_default();
        feed(rel.as_bytes());
        feed(b"\0");
        feed(&data);
        feed(b"\0");
    }
    let crc = !crc;
    println!("cargo:rustc-env=HIPIFY_NATIVE_SOURCES={crc:08x}-{len}");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-changed=build.rs");
}
