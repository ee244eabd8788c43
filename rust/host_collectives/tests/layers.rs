//! The crate's modules are layered: lib.rs lists them from the bottom up, and each module may use
//! (`crate::<module>`) only modules listed before it. This test reads the sources and fails on an
//! arrow that points up or sideways, on a module missing from the list, and on `unsafe` creeping in.
use std::collections::HashMap;
use std::fs;
use std::path::Path;

fn src() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

/// The modules in lib.rs's list (`//! 3. \`reduce\`: ...`), bottom first.
fn order(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| l.strip_prefix("//! "))
        .filter_map(|l| {
            let (number, rest) = l.split_once(". `")?;
            number.trim().parse::<usize>().ok()?;
            Some(rest.split('`').next()?.to_string())
        })
        .collect()
}

/// The source without `//` comments (doc comments name modules freely).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `crate::<name>` paths in `text` (also inside `use crate::{a, b}`), as module names.
fn uses(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let code = code(text);
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            for item in inner.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.push(name);
            }
        } else {
            found.push(
                rest.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect(),
            );
        }
    }
    found
}

/// Every arrow that breaks the layering, as `module -> module`.
fn violations(lib: &str, modules: &HashMap<String, String>) -> Vec<String> {
    let order = order(lib);
    let place: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut bad = Vec::new();
    for (name, text) in modules {
        let Some(&mine) = place.get(name.as_str()) else {
            bad.push(format!("{name} is not in lib.rs's list"));
            continue;
        };
        for used in uses(text) {
            match place.get(used.as_str()) {
                Some(&theirs) if theirs < mine => {}
                _ => bad.push(format!("{name} -> {used}")),
            }
        }
    }
    for listed in &order {
        if !modules.contains_key(listed) {
            bad.push(format!("{listed} is listed but has no source file"));
        }
    }
    bad.sort();
    bad
}

fn sources() -> (String, HashMap<String, String>) {
    let lib = fs::read_to_string(src().join("lib.rs")).unwrap();
    let modules = fs::read_dir(src())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && !p.ends_with("lib.rs"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, fs::read_to_string(&p).unwrap())
        })
        .collect();
    (lib, modules)
}

#[test]
fn every_use_points_down() {
    let (lib, modules) = sources();
    assert!(
        order(&lib).len() >= 10,
        "lib.rs's module list was not found"
    );
    for name in modules.keys() {
        assert!(
            lib.contains(&format!("mod {name};")),
            "{name} is not declared in lib.rs"
        );
    }
    assert_eq!(violations(&lib, &modules), Vec::<String>::new());
}

#[test]
fn an_upward_use_is_caught() {
    let (lib, mut modules) = sources();
    let reduce = modules.get_mut("reduce").unwrap();
    reduce.push_str(
        "\nuse crate::{failure::Failure, tcp::TcpComm};\nfn f() { crate::local::x(); }\n",
    );
    assert_eq!(
        violations(&lib, &modules),
        ["reduce -> local", "reduce -> tcp"]
    );
}

#[test]
fn the_crate_forbids_unsafe() {
    let (lib, modules) = sources();
    assert!(lib.contains("#![forbid(unsafe_code)]"));
    for (name, text) in &modules {
        assert!(!code(text).contains("unsafe"), "{name} mentions unsafe");
    }
}
