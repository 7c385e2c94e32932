//! The file-level import graph of a crate's `src/` (std only, no parser), for tests that check
//! a crate's layering: its import cycles, and which files may import which.
//!
//! **Graph.** One node per `.rs` file under `src/`, named by module path (`src/a/b.rs` and
//! `src/a/b/mod.rs` are `a::b`, `src/lib.rs` is `lib`). Test-only code is left out: files declared
//! by a `#[cfg(test)] mod x;` (and their children), and items under a `#[cfg(..)]` that is false
//! when `test` is off (`cfg(test)`, `cfg(all(test, not(miri)))`; not `cfg(not(test))`). File A has
//! an edge to file B when A's code (comments and literals blanked) holds a path starting with
//! `crate::`, `super::` or `self::`, in a `use` tree or inline, that resolves to B: the longest
//! module prefix of the path, then through `use` re-exports to the defining file
//! (`crate::StreamExecutor` is `executor`, not `lib`). `mod x;` is not an edge, and neither is a
//! path starting with a child module's bare name (`use kernel::X` in `host/mod.rs`).
//!
//! **Checks.**
//! 1. [`cycle_problems`]: every import cycle (strongly connected component of more than one
//!    file) is listed in a Markdown document's `## Import cycles` section, and every listed
//!    set is a real cycle. To allow a cycle, or after breaking one, edit that section: one
//!    bullet per cycle, its files in any order, then why it is acceptable:
//!    ``- `executor`, `stream`, `memory`: <reason>``. A failure prints each cycle with the
//!    edges inside it (and their source lines), so you see which import to cut, and the bullet
//!    to paste if the cycle is meant to stay. [`cycles`] alone, for a crate that has none.
//! 2. [`layer_violations`]: a table of layers (which files may import which) and the crossings
//!    allowed between backend folders. A failure prints
//!    `file:line: `path` — <layer> may not import <target>` per import.
//!
//! Self-tests run the same analysis over small fake crates written to a temp dir.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// `(layer, files, may import)`: files whose module path matches a pattern of `files` may import
/// only modules matching a pattern of `may import` (`x` is the module `x`; `x::*` is `x` and all
/// under it). The first matching row applies; files no row matches (`registry`, `lib`) may
/// import anything.
pub type Layer = (&'static str, Patterns, Patterns);
/// Module patterns: `x` is the module `x`; `x::*` is `x` and all under it.
pub type Patterns = &'static [&'static str];

/// A token and its line.
type Tok<'a> = (&'a str, usize);

/// A `use` leaf: its path (a `self` leaf folded into its prefix), the name it binds (`None` for
/// a glob or `as _`), its line.
type UseItem = (Vec<String>, Option<String>, usize);

/// One import: file `from` names `path` (at `line`), which resolves to file `to`.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    /// The importing file's module path.
    pub from: String,
    /// The imported file's module path.
    pub to: String,
    /// The line of the import.
    pub line: usize,
    /// The path as written.
    pub path: String,
}

/// A crate's files and the imports between them.
#[derive(Default)]
pub struct Graph {
    /// File module name → path from the crate root (`src/a/b.rs`).
    pub files: BTreeMap<String, String>,
    /// File modules that are folders (`a/b/mod.rs`, or `a/b.rs` next to `a/b/`).
    pub dirs: BTreeSet<String>,
    /// Every import, sorted (so several per pair of files).
    pub edges: Vec<Edge>,
    texts: BTreeMap<String, String>,
}

/// Blanks comments, string literals (raw, byte and C too) and char literals (not lifetimes),
/// keeping newlines so line numbers stay right. On bytes: every delimiter is ASCII.
fn strip(src: &str) -> String {
    let c = src.as_bytes();
    let at = |i: usize| c.get(i).copied().unwrap_or(0);
    let find = |from: usize, b: u8| (from..c.len()).find(|&k| c[k] == b).unwrap_or(c.len());
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    let (mut out, mut i) = (c.to_vec(), 0);
    while i < c.len() {
        let start = i;
        let raw = match (c[i], at(i + 1)) {
            _ if i > 0 && ident(c[i - 1]) => 0,
            (b'r', _) => i + 1,
            (b'b' | b'c', b'r') => i + 2,
            _ => 0,
        };
        let hashes = (raw..).take_while(|&k| raw > 0 && at(k) == b'#').count();
        let len = (at(i + 1).leading_ones() as usize).max(1); // of the char after a `'`
        match (c[i], at(i + 1)) {
            (b'/', b'/') => i = find(i, b'\n'),
            (b'/', b'*') => {
                let mut depth = 0; // block comments nest
                while i < c.len() && (i == start || depth > 0) {
                    let d = match (c[i], at(i + 1)) {
                        (b'/', b'*') => 1,
                        (b'*', b'/') => -1,
                        _ => 0,
                    };
                    (depth, i) = (depth + d, i + 1 + usize::from(d != 0));
                }
            }
            (b'"', _) => {
                i += 1;
                while i < c.len() && c[i] != b'"' {
                    i += 1 + usize::from(c[i] == b'\\');
                }
                i += 1;
            }
            _ if raw > 0 && at(raw + hashes) == b'"' => {
                i = raw + hashes; // r"..", r#".."#, br"..": no escapes
                while i < c.len() && (i == raw + hashes || (1..=hashes).any(|h| at(i + h) != b'#'))
                {
                    i = find(i + 1, b'"');
                }
                i += 1 + hashes;
            }
            (b'\'', b'\\') => i = find(i + 3, b'\'') + 1, // '\'', '\n', '\u{..}'
            (b'\'', _) if at(i + 1 + len) == b'\'' => i += len + 2, // not a lifetime `'a`
            _ => {
                i += 1;
                continue;
            }
        }
        let end = i.min(c.len());
        for b in out[start..end].iter_mut().filter(|b| **b != b'\n') {
            *b = b' ';
        }
    }
    String::from_utf8(out).unwrap() // blanked runs start and end at ASCII delimiters
}

fn tokenize(src: &str) -> Vec<Tok<'_>> {
    let (b, mut toks, mut i, mut line) = (src.as_bytes(), vec![], 0, 1);
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
    while i < b.len() {
        let mut start = i;
        i += 1;
        if b[start] == b'r' && b.get(i) == Some(&b'#') && b.get(i + 1).is_some_and(|&c| ident(c)) {
            (start, i) = (i + 1, i + 1); // raw identifier `r#type`
        }
        if ident(b[start]) || b[start] == b'$' {
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
        } else if b[start..].starts_with(b"::") {
            i += 1;
        } else if b[start].is_ascii_whitespace() {
            line += usize::from(b[start] == b'\n');
            continue;
        }
        toks.push((&src[start..i], line));
    }
    toks
}

fn at<'a>(toks: &[Tok<'a>], i: usize) -> &'a str {
    toks.get(i).map_or("", |t| t.0)
}

fn is_ident(s: &str) -> bool {
    let c = s.bytes().next().unwrap_or(b'0');
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80
}

/// `m` is `prefix` or a module under it.
fn within(m: &str, prefix: &str) -> bool {
    m == prefix || m.strip_prefix(prefix).is_some_and(|r| r.starts_with("::"))
}

fn join(module: &str, name: &str) -> String {
    if module.is_empty() {
        name.to_string()
    } else {
        format!("{module}::{name}")
    }
}

/// Index just past the bracket that closes the one at `start`.
fn close(toks: &[Tok], start: usize) -> usize {
    let (mut depth, mut i) = (0, start);
    while i < toks.len() && (i == start || depth > 0) {
        depth += match at(toks, i) {
            "(" | "[" | "{" => 1,
            ")" | "]" | "}" => -1,
            _ => 0,
        };
        i += 1;
    }
    i
}

/// The `cfg` predicate at `i` with `test` off: `Some(false)` when it is false whatever the other
/// options are (test-only code), `None` when it depends on them. Also the index after it.
fn cfg_value(toks: &[Tok], i: usize) -> (Option<bool>, usize) {
    let (op, mut j, mut vals) = (at(toks, i), i + 2, vec![]);
    if !matches!(op, "all" | "any" | "not") {
        let end = (i..toks.len()).find(|&j| matches!(at(toks, j), "," | ")"));
        return ((op == "test").then_some(false), end.unwrap_or(toks.len()));
    }
    let end = close(toks, i + 1);
    while j + 1 < end {
        let (v, next) = cfg_value(toks, j);
        vals.push(v);
        j = next + 1;
    }
    let every = |want: bool| vals.iter().all(|v| *v == Some(want));
    let v = match op {
        "not" => vals.first().copied().flatten().map(|v| !v),
        "all" if vals.contains(&Some(false)) => Some(false),
        "any" if vals.contains(&Some(true)) => Some(true),
        _ if every(op == "all") => Some(op == "all"),
        _ => None,
    };
    (v, end)
}

/// End of the item (or field, or statement) at `i`: past its `;` or `,`, or its first `{ .. }`.
/// A `,` in generics ends it early, which keeps test code in, never leaves other code out.
fn item_end(toks: &[Tok], mut i: usize) -> usize {
    while i < toks.len() {
        match at(toks, i) {
            ";" | "," => return i + 1,
            "{" => return close(toks, i),
            ")" | "]" | "}" => return i,
            "(" | "[" => i = close(toks, i), // attributes, parameters, array types
            _ => i += 1,
        }
    }
    i
}

/// Parses the use tree at `i` under `path` into `out`; returns the index after it.
fn use_tree(toks: &[Tok], mut i: usize, mut path: Vec<String>, out: &mut Vec<UseItem>) -> usize {
    loop {
        let (t, line) = toks.get(i).copied().unwrap_or(("", 0));
        i += 1;
        match t {
            "::" if path.is_empty() => path.push("::".into()), // `use ::name`: an extern crate
            "{" => {
                while !matches!(at(toks, i), "}" | "") {
                    i = use_tree(toks, i, path.clone(), out).max(i + 1);
                    i += usize::from(at(toks, i) == ",");
                }
                return i + 1;
            }
            "*" => {
                out.push((path, None, line));
                return i;
            }
            _ if is_ident(t) && at(toks, i) == "::" => {
                path.push(t.to_string());
                i += 1;
            }
            _ if is_ident(t) => {
                if t != "self" {
                    path.push(t.to_string());
                }
                let name = match at(toks, i) {
                    "as" => Some(at(toks, i + 1).to_string()).filter(|n| n != "_"),
                    _ => path.last().cloned(),
                };
                out.push((path, name, line));
                return i + if at(toks, i) == "as" { 2 } else { 0 };
            }
            _ => {
                if !path.is_empty() {
                    out.push((path, None, line)); // `crate::f::<T>()`
                }
                return i - 1;
            }
        }
    }
}

#[derive(Default)]
struct Scan {
    /// Logical module (`a::b`, also inline `mod x { .. }`s; the root is "") → its file module.
    modules: HashMap<String, String>,
    /// Logical module → its `use` items (any visibility: child modules see private ones).
    imports: HashMap<String, Vec<UseItem>>,
    /// (file, logical module, path, line) of each path starting with `crate`, `super`, `self`.
    refs: Vec<(String, String, Vec<String>, usize)>,
    /// Modules made test-only by a `#[cfg(test)] mod x;` or a `#![cfg(test)]`.
    test_mods: Vec<String>,
}

fn scan_file(file: &str, module: &str, toks: &[Tok], scan: &mut Scan) {
    let mut stack = vec![(module.to_string(), -1)]; // inline modules, with the depth they open at
    let (mut depth, mut i) = (0, 0);
    scan.modules.insert(module.to_string(), file.to_string());
    while i < toks.len() {
        let cur = || stack.last().unwrap().0.clone();
        let t = |k: usize| at(toks, i + k);
        let before = |k: usize| if i >= k { at(toks, i - k) } else { "" };
        let path_start = matches!(t(0), "crate" | "$crate" | "super" | "self")
            && t(1) == "::"
            && before(1) != "::"
            && (before(3), before(2), before(1)) != ("pub", "(", "in");
        match t(0) {
            "#" if t(1) == "[" || (t(1), t(2)) == ("!", "[") => {
                let open = if t(1) == "!" { i + 2 } else { i + 1 };
                let end = close(toks, open);
                let cfg = (at(toks, open + 1), at(toks, open + 2)) == ("cfg", "(");
                let test = cfg && cfg_value(toks, open + 3).0 == Some(false);
                if test && t(1) == "!" {
                    return scan.test_mods.push(cur()); // `#![cfg(test)]`: this whole module
                }
                i = if test { item_end(toks, end) } else { end };
                let decl = (end..i).find(|&j| at(toks, j) == "mod" && at(toks, j + 2) == ";");
                if let Some(j) = decl.filter(|_| test) {
                    scan.test_mods.push(join(&cur(), at(toks, j + 1)));
                }
                continue;
            }
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if stack.last().unwrap().1 == depth {
                    stack.pop();
                }
            }
            "mod" if is_ident(t(1)) && t(2) == "{" => {
                let m = join(&cur(), t(1));
                scan.modules.insert(m.clone(), file.to_string());
                stack.push((m, depth));
                i += 2;
                continue;
            }
            _ if (t(0) == "use" && t(1) != "<") || path_start => {
                let (mut items, is_use) = (vec![], t(0) == "use"); // inline: a one-leaf use tree
                i = use_tree(toks, i + usize::from(is_use), vec![], &mut items);
                for (path, _, line) in &items {
                    let first = path.first().map_or("", String::as_str);
                    if matches!(first, "crate" | "$crate" | "super" | "self") {
                        scan.refs
                            .push((file.to_string(), cur(), path.clone(), *line));
                    }
                }
                if is_use {
                    scan.imports.entry(cur()).or_default().extend(items);
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

impl Scan {
    /// The file that `path`, written in logical module `from`, lands in: the longest module
    /// prefix, then through `use` items to the defining file. `None` when it leaves the crate.
    fn resolve(&self, from: &str, path: &[String], depth: usize) -> Option<String> {
        let first = path.first()?.as_str();
        let known =
            self.modules.contains_key(&join(from, first)) || self.import(from, first).is_some();
        let (mut cur, rest) = match first {
            "crate" | "$crate" => (String::new(), &path[1..]),
            "self" | "super" => (from.to_string(), path),
            _ if !known => return None, // `::name`, or an extern crate: `std`, `opencl3`, ...
            _ => (from.to_string(), path), // `pub use kernel::HostKernel` in `platform::host`
        };
        let mut k = 0;
        while let Some(seg) = rest.get(k) {
            match seg.as_str() {
                "self" => {}
                "super" => cur = cur.rsplit_once("::").map_or("", |p| p.0).to_string(),
                _ if self.modules.contains_key(&join(&cur, seg)) => cur = join(&cur, seg),
                _ => break,
            }
            k += 1;
        }
        let via = rest.get(k).and_then(|name| self.import(&cur, name));
        match via.filter(|_| depth < 8) {
            Some(u) => self.resolve(&cur, &[&u.0[..], &rest[k + 1..]].concat(), depth + 1),
            None => self.modules.get(&cur).cloned(),
        }
    }

    fn import(&self, module: &str, name: &str) -> Option<&UseItem> {
        let items = self.imports.get(module)?;
        items.iter().find(|u| u.1.as_deref() == Some(name))
    }
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The import graph of `<root>/src` (`root`: a crate's folder).
pub fn graph(root: &Path) -> Graph {
    let (mut g, mut paths, mut srcs) = (Graph::default(), vec![], vec![]);
    rs_files(&root.join("src"), &mut paths);
    for p in &paths {
        let rel = p.strip_prefix(root).unwrap().to_string_lossy();
        let rel = rel.replace('\\', "/");
        let name = rel[4..rel.len() - 3]
            .trim_end_matches("/mod")
            .replace('/', "::");
        let m = if name == "lib" {
            String::new()
        } else {
            name.clone()
        };
        if rel.ends_with("/mod.rs") || p.with_extension("").is_dir() {
            g.dirs.insert(name.clone());
        }
        let text = fs::read_to_string(p).unwrap();
        srcs.push((m, name.clone(), strip(&text)));
        g.files.insert(name.clone(), rel);
        g.texts.insert(name, text);
    }
    let toks: Vec<Vec<Tok>> = srcs.iter().map(|s| tokenize(&s.2)).collect();
    let mut first = Scan::default(); // finds the test-only modules
    for ((m, name, _), toks) in srcs.iter().zip(&toks) {
        scan_file(name, m, toks, &mut first);
    }
    let mut scan = Scan::default();
    for ((m, name, _), toks) in srcs.iter().zip(&toks) {
        if !first.test_mods.iter().any(|t| within(m, t)) {
            scan_file(name, m, toks, &mut scan);
        }
    }
    for (file, module, path, line) in &scan.refs {
        let Some(to) = scan.resolve(module, path, 0).filter(|to| to != file) else {
            continue;
        };
        let (from, line, path) = (file.clone(), *line, path.join("::"));
        g.edges.push(Edge {
            from,
            to,
            line,
            path,
        });
    }
    g.files.retain(|f, _| scan.modules.values().any(|m| m == f));
    g.edges.sort();
    g.edges.dedup();
    g
}

/// The import cycles: strongly connected components of more than one file (Kosaraju), sorted.
pub fn cycles(g: &Graph) -> Vec<BTreeSet<String>> {
    fn dfs(v: usize, adj: &[Vec<usize>], seen: &mut [bool], out: &mut Vec<usize>) {
        seen[v] = true;
        for &w in &adj[v] {
            if !seen[w] {
                dfs(w, adj, seen, out);
            }
        }
        out.push(v);
    }
    let names: Vec<&String> = g.files.keys().collect();
    let ix: HashMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let (mut fwd, mut rev) = (vec![vec![]; names.len()], vec![vec![]; names.len()]);
    for e in &g.edges {
        fwd[ix[&e.from]].push(ix[&e.to]);
        rev[ix[&e.to]].push(ix[&e.from]);
    }
    let (mut seen, mut order) = (vec![false; names.len()], vec![]);
    for v in 0..names.len() {
        if !seen[v] {
            dfs(v, &fwd, &mut seen, &mut order);
        }
    }
    let (mut seen, mut out) = (vec![false; names.len()], vec![]);
    for &v in order.iter().rev() {
        let mut scc = vec![];
        if !seen[v] {
            dfs(v, &rev, &mut seen, &mut scc);
        }
        if scc.len() > 1 {
            out.push(scc.iter().map(|&i| names[i].clone()).collect());
        }
    }
    out.sort();
    out
}

/// The sets listed under `## Import cycles` (`None` when there is no such section).
fn documented_cycles(md: &str) -> Result<Option<Vec<BTreeSet<String>>>, String> {
    let Some(start) = md.lines().position(|l| l.trim_end() == "## Import cycles") else {
        return Ok(None);
    };
    let (mut sets, lines) = (Vec::new(), md.lines().skip(start + 1));
    let heading = |l: &&str| l.starts_with("# ") || l.starts_with("## "); // `###` stays inside
    for line in lines.take_while(|l| !heading(l)) {
        let Some(mut rest) = line.strip_prefix("- ") else {
            continue;
        };
        let mut set = BTreeSet::new();
        while let Some((name, r)) = rest.strip_prefix('`').and_then(|r| r.split_once('`')) {
            set.insert(name.to_string());
            rest = r.trim_start_matches([',', ' ']);
        }
        if set.is_empty() || !rest.starts_with(':') {
            let want = "`## Import cycles`: expected ``- `a`, `b`: why``";
            return Err(format!("{want}, got: {line}"));
        }
        sets.push(set);
    }
    Ok(Some(sets))
}

/// The cycles of `g` that `md` does not list under `## Import cycles`, and the sets it lists
/// that are not cycles (with the imports inside each, to show which one to cut).
pub fn cycle_problems(g: &Graph, md: &str) -> Vec<String> {
    let listed = match documented_cycles(md) {
        Ok(listed) => listed,
        Err(e) => return vec![e],
    };
    let (found, mut problems) = (cycles(g), vec![]);
    for scc in found
        .iter()
        .filter(|s| !listed.iter().flatten().any(|l| l == *s))
    {
        let mut p = format!("undocumented import cycle of {} files: {scc:?}", scc.len());
        let mut pairs: BTreeMap<(&str, &str), Vec<&Edge>> = BTreeMap::new();
        for e in &g.edges {
            if scc.contains(&e.from) && scc.contains(&e.to) {
                pairs.entry((&e.from, &e.to)).or_default().push(e);
            }
        }
        p += "\n  imports inside it (file → file: path, where, the line; then how many more):";
        for ((from, to), es) in pairs {
            let (e, n) = (es[0], es.len() - 1);
            let src = g.texts[from].lines().nth(e.line - 1).unwrap_or("").trim();
            let more = if n > 0 {
                format!(" (+{n})")
            } else {
                String::new()
            };
            let at = format!("{}:{}", g.files[from], e.line);
            write!(p, "\n    {from} → {to}: `{}`  {at}: {src}{more}", e.path).unwrap();
        }
        let bullet: Vec<String> = scc.iter().map(|f| format!("`{f}`")).collect();
        p += "\n  cut one of them, or if the cycle is meant to stay, list it in the document:";
        write!(p, "\n    - {}: <why>", bullet.join(", ")).unwrap();
        problems.push(p);
    }
    if listed.is_none() && !found.is_empty() {
        let msg = "the document has no `## Import cycles` section (add one with the bullets above)";
        problems.push(msg.into());
    }
    for set in listed.iter().flatten().filter(|s| !found.contains(s)) {
        let near: Vec<_> = found.iter().filter(|s| !s.is_disjoint(set)).collect();
        let msg = format!("the document lists {set:?} as an import cycle, but it is not one");
        problems.push(format!("{msg}; cycles touching it: {near:?}"));
    }
    problems
}

/// `file:line: `path` — <layer> may not import <target>` for each import that breaks `layers`
/// (`(layer, files, may import)`: the first row whose `files` match a file applies; files no row
/// matches may import anything), or that crosses from one backend folder under `backends` to
/// another where `crossings` does not allow it (the files directly under `backends` are shared
/// helpers, not backends). Sorted by file and line.
pub fn layer_violations(
    g: &Graph,
    layers: &[Layer],
    backends: &str,
    crossings: &[(&str, &str)],
) -> Vec<String> {
    let matches = |pattern: &str, m: &str| match pattern.strip_suffix("::*") {
        Some(prefix) => within(m, prefix),
        None => m == pattern,
    };
    let backend = |m: &'_ str| -> Option<String> {
        let rest = m.strip_prefix(backends)?.strip_prefix("::")?;
        let folder = rest.split("::").next()?;
        g.dirs
            .contains(&join(backends, folder))
            .then(|| folder.to_string())
    };
    let mut out = Vec::new();
    for e in &g.edges {
        let layer = layers
            .iter()
            .find(|l| l.1.iter().any(|p| matches(p, &e.from)));
        let Some(&(layer, _, allowed)) = layer else {
            continue;
        };
        let why = match (backend(&e.from), backend(&e.to)) {
            _ if !allowed.iter().any(|p| matches(p, &e.to)) => {
                format!("{layer} may not import {}", e.to)
            }
            (Some(x), Some(y)) if x != y && !crossings.contains(&(x.as_str(), y.as_str())) => {
                format!("{backends} backend `{x}` may not import backend `{y}`")
            }
            _ => continue,
        };
        out.push((&g.files[&e.from], e.line, format!("`{}` — {why}", e.path)));
    }
    out.sort();
    out.iter()
        .map(|(f, line, msg)| format!("{f}:{line}: {msg}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of the self-test's fake crate.
    #[rustfmt::skip]
    const LAYERS: &[Layer] = &[
        ("floor-0",   &["error"],        &[]),
        ("types",     &["types::*"],     &["error", "types::*"]),
        ("ptx",       &["ptx::*"],       &["ptx::*"]),
        ("platform",  &["platform::*"],  &["error", "types::*", "ptx::*", "platform::*"]),
        ("handles",   &["executor"],     &["error", "types::*", "executor"]),
    ];

    /// Writes a fake crate into the temp dir: the files of `spec`, each after a `//- <path>` line.
    fn fixture(name: &str, spec: &str) -> PathBuf {
        let dir = format!("streamexec-layering-{}-{name}", std::process::id());
        let root = std::env::temp_dir().join(dir);
        let _ = fs::remove_dir_all(&root);
        for (path, text) in spec
            .split("\n//- ")
            .skip(1)
            .filter_map(|f| f.split_once('\n'))
        {
            fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            fs::write(root.join(path), text).unwrap();
        }
        root
    }

    /// Comments say what each line checks (they are blanked before analysis, like the strings).
    const ANALYSIS_FIXTURE: &str = r##"
//- src/lib.rs
mod a; mod b; pub mod x; mod y; mod z; mod zz; mod w;
pub use a::Alpha; // re-exports: `crate::Alpha` is a, `crate::Linked` is b::deep
pub use b::Chain as Linked;
//- src/a.rs
use crate::{b::{self as bee, Beta}, zz::*}; // a → b twice (a group, `self as`), a → zz (a glob)
pub struct Alpha;
#[cfg(test)]
mod tests { // no edges from here
    use crate::x::X;
    fn f() { let _ = crate::z::Z; }
}
//- src/b.rs
mod deep; // not an edge
pub use deep::Deep as Chain; // relative to b
pub struct Beta;
pub fn f() -> crate::Alpha { todo!() } // b → a through the root's re-export: a cycle
//- src/b/deep.rs
const D: u8 = b'"'; use super::Beta;
pub struct Deep;
//- src/x.rs
#[cfg(test)]
mod tests;
// use crate::y::Y;
/* crate::z /* nested */ crate::z */
const S: &str = "crate::z\" crate::z"; const R: &str = r#"crate::"z"#; const B: &[u8] = br"crate::z";
const C: char = '"'; const Q: char = '\''; const E: char = 'é'; // unpaired quotes in chars
fn l<'a>(s: &'a str) -> impl Sized + use<'a> { 'outer: loop { break 'outer s; } }
pub fn g() -> u32 { let r#type = 1; crate::Linked::new(r#type) } // x → b::deep, two re-exports
//- src/x/tests.rs
mod more;
use crate::a::Alpha;
//- src/x/tests/more.rs
use crate::z::Z;
//- src/y.rs
#[cfg(all(test, not(miri)))]
pub(crate) mod model {
    use crate::a::Alpha;
}
#[cfg(not(test))]
use crate::z::Z; // kept
pub(crate) fn h() {}
//- src/z.rs
pub struct Z;
mod inner {
    use super::Z; // z itself
    fn f() { super::super::Alpha; } // z → a
}
use std::sync::Arc;
//- src/zz.rs
fn f() { crate::z::Arc::new(1); let _ = self::g; } // std's `Arc` through z's `use`; zz itself
fn g() {}
//- src/w.rs
#![cfg(test)]
use crate::a::Alpha;
"##;

    const ANALYSIS_EDGES: &str = "\
a -> b @1 crate::b
a -> b @1 crate::b::Beta
a -> zz @1 crate::zz
b -> a @4 crate::Alpha
b::deep -> b @1 super::Beta
x -> b::deep @8 crate::Linked::new
y -> z @6 crate::z::Z
z -> a @4 super::super::Alpha";

    #[test]
    fn analysis_self_test() {
        let root = fixture("analysis", ANALYSIS_FIXTURE);
        let g = graph(&root);
        fs::remove_dir_all(root).unwrap();
        let files: Vec<&String> = g.files.keys().collect();
        assert_eq!(files, ["a", "b", "b::deep", "lib", "x", "y", "z", "zz"]);
        let edges: Vec<String> = g
            .edges
            .iter()
            .map(|e| format!("{} -> {} @{} {}", e.from, e.to, e.line, e.path))
            .collect();
        assert_eq!(edges.join("\n"), ANALYSIS_EDGES);
        assert_eq!(format!("{:?}", cycles(&g)), r#"[{"a", "b"}]"#);

        let md = "# x\n## Import cycles\nProse.\n### Sub\n- `b`, `a`: why\n## Next\n- `x`, `y`: elsewhere\n";
        assert_eq!(cycle_problems(&g, md), Vec::<String>::new());
        let p = cycle_problems(&g, "## Import cycles\n- `a`, `b`, `z`: stale\n").join("\n");
        assert!(
            p.contains("undocumented import cycle of 2 files: {\"a\", \"b\"}"),
            "{p}"
        );
        assert!(
            p.contains("b → a: `crate::Alpha`  src/b.rs:4: pub fn f() -> crate::Alpha { todo!() }"),
            "{p}"
        );
        assert!(
            p.contains("lists {\"a\", \"b\", \"z\"} as an import cycle, but it is not one"),
            "{p}"
        );
        assert!(cycle_problems(&g, "no section")[1].contains("no `## Import cycles` section"));
        assert!(cycle_problems(&g, "## Import cycles\n- `a` `b` why\n")[0].contains("expected"));
    }

    const LAYERS_FIXTURE: &str = r##"
//- src/lib.rs
mod error; mod types; mod ptx; mod platform; mod executor;
pub use error::Error;
//- src/error.rs
use crate::types::Dim; // no
//- src/types/mod.rs
pub struct Dim(crate::Error); // fine
//- src/ptx/mod.rs
fn parse() -> crate::Error { todo!() } // no: the `ptx` layer is a leaf
//- src/executor.rs
use crate::platform::host::Host; // no: handles reach backends only through the interface
//- src/platform/mod.rs
pub mod gpu; pub mod cuda; pub mod host; pub mod helper;
//- src/platform/helper.rs
pub fn h() {}
//- src/platform/gpu/mod.rs
pub trait Driver {}
//- src/platform/cuda/mod.rs
use super::{gpu::Driver, helper::h}; // fine: cuda may use gpu, any backend a helper file
use crate::types::Dim;
//- src/platform/host/mod.rs
use crate::platform::gpu::Driver; // no: host may not use gpu
use crate::executor::E; // no: the handle layer
pub struct Host;
"##;

    #[test]
    fn layer_table_self_test() {
        let root = fixture("layers", LAYERS_FIXTURE);
        let v = layer_violations(
            &graph(&root),
            LAYERS,
            "platform",
            &[("cuda", "gpu"), ("hip", "gpu")],
        );
        fs::remove_dir_all(root).unwrap();
        assert_eq!(v.join("\n"), "\
src/error.rs:1: `crate::types::Dim` — floor-0 may not import types
src/executor.rs:1: `crate::platform::host::Host` — handles may not import platform::host
src/platform/host/mod.rs:1: `crate::platform::gpu::Driver` — platform backend `host` may not import backend `gpu`
src/platform/host/mod.rs:2: `crate::executor::E` — platform may not import executor
src/ptx/mod.rs:1: `crate::Error` — ptx may not import error");
    }
}
