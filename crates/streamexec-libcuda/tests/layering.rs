//! No import cycle between the files of this crate's `src`: a file imports another when its
//! code names a path that resolves there (`crate::…`, `super::…`, `self::…`, or a child
//! module's name), `use` groups (`{…}`) expanded; comments and test code (from a file's first
//! `#[cfg(test)]` on) are left out. Paths a macro builds from its arguments are not seen; the
//! declaration list names its families as `crate::…` paths, so those edges are.
//!
//! Std only, and nothing crate-specific: `crates/streamexec-libnvrtc/tests/layering.rs` runs
//! this same file on its own crate (`CARGO_MANIFEST_DIR`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`graph::build`; the crate root is empty) → the file's code.
fn sources(src: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(src, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(src).unwrap().with_extension("");
        let mut segs: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into()).collect();
        if matches!(
            segs.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            segs.pop();
        }
        let text = std::fs::read_to_string(&path).expect("a readable source file");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let code: String = code
            .lines()
            .map(|l| l.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        out.insert(segs.join("::"), code);
    }
}

/// Every path of `code` (as segments) that starts at a word boundary and has a `::`, with
/// `use` groups expanded.
fn paths(code: &str) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = ident(b[i]) && (i == 0 || !(ident(b[i - 1]) || b[i - 1] == b':'));
        if starts {
            let end = parse(code, i, Vec::new(), &mut out);
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// Parses the path at `i` (after `prefix`) into `out`; returns where it ends.
fn parse(code: &str, mut i: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let b = code.as_bytes();
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    loop {
        i = skip_ws(i);
        if i < b.len() && b[i] == b'{' {
            // A `use` group: each item is a path after `prefix`.
            i += 1;
            loop {
                i = skip_ws(i);
                if i >= b.len() || b[i] == b'}' {
                    return i + 1;
                }
                if b[i] == b',' {
                    i += 1;
                    continue;
                }
                let end = parse(code, i, prefix.clone(), out);
                i = end.max(i + 1);
            }
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'*') {
            i += 1;
        }
        if i == start {
            break;
        }
        prefix.push(code[start..i].to_string());
        if code[i..].starts_with("::") {
            i += 2;
        } else {
            break;
        }
    }
    // A lone name is no path (`use a::{b}` carries `a` in `prefix`).
    if prefix.len() > 1 {
        out.push(prefix);
    }
    i
}

/// The file (module path) `path`, named in module `from`, resolves to, if it is of the crate.
fn resolve(path: &[String], from: &str, modules: &BTreeSet<String>) -> Option<String> {
    let mut at: Vec<&str> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").collect()
    };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => at.clear(),
        Some("self") => {}
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                at.pop()?;
                rest = &rest[1..];
            }
            return longest(&at, rest, modules);
        }
        Some(child) => {
            let name = at
                .iter()
                .chain([&child])
                .copied()
                .collect::<Vec<_>>()
                .join("::");
            return modules
                .contains(&name)
                .then(|| longest(&at, rest, modules))?;
        }
        None => return None,
    }
    longest(&at, &rest[1..], modules)
}

/// The longest module `at` + a prefix of `rest` names.
fn longest(at: &[&str], rest: &[String], modules: &BTreeSet<String>) -> Option<String> {
    let mut best = at.join("::");
    let mut cur: Vec<&str> = at.to_vec();
    for seg in rest {
        cur.push(seg);
        let name = cur.join("::");
        if modules.contains(&name) {
            best = name;
        } else {
            break;
        }
    }
    Some(best)
}

/// A cycle of `graph`, if it has one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                0 => {
                    if let Some(c) = visit(m, graph, state, stack) {
                        return Some(c);
                    }
                }
                1 => {
                    let from = stack.iter().position(|s| s == m).unwrap();
                    let mut c = stack[from..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(n, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_import_cycle_between_the_files_of_src() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    sources(&src, &src, &mut files);
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, code) in &files {
        let edges = graph.entry(m.clone()).or_default();
        for p in paths(code) {
            if let Some(to) = resolve(&p, m, &modules)
                && &to != m
            {
                edges.insert(to);
            }
        }
    }
    let shown = |m: &String| {
        if m.is_empty() {
            "lib".into()
        } else {
            m.clone()
        }
    };
    for (m, to) in &graph {
        let to: Vec<String> = to.iter().map(shown).collect();
        eprintln!("{} -> {}", shown(m), to.join(", "));
    }
    assert!(
        graph.values().map(BTreeSet::len).sum::<usize>() >= files.len() - 1,
        "too few imports found: the parser of this test is broken"
    );
    if let Some(c) = cycle(&graph) {
        let c: Vec<String> = c.iter().map(shown).collect();
        panic!("import cycle between files of src: {}", c.join(" -> "));
    }
}
