//! Kernels out of clang's JSON AST (`-Xclang -ast-dump=json`): their names as the device code
//! knows them (`mangledName`: the PTX entry of a C++ kernel is its mangled name, of an
//! `extern "C"` or OpenCL kernel its plain name), their parameters, the dynamic shared memory
//! (`extern __shared__ T x[]`) they reach, and the typedefs and structs their types name.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::ctype::{Record, TypeEnv, Typedef};

/// One kernel as clang declared it.
#[derive(Clone, Debug)]
pub struct KernelDecl {
    /// The source-level name (`scale` for `scale<float>`).
    pub name: String,
    /// The symbol in the device code (PTX `.entry`, HSACO, OpenCL kernel name).
    pub symbol: String,
    /// Parameters: name (empty when unnamed) and C type text.
    pub params: Vec<(String, String)>,
    /// The element type of the `extern __shared__` array it reaches, if any (CUDA).
    pub dynamic_shared: Option<String>,
    /// Its AST id.
    pub id: String,
}

/// What one translation unit holds.
#[derive(Debug, Default)]
pub struct Unit {
    /// Every kernel with a body: plain kernels, then instantiated templates.
    pub kernels: Vec<KernelDecl>,
    /// The kernels that `__streamexec_instantiation_<i>` markers name, by `i`.
    pub instantiations: HashMap<usize, String>,
    /// Typedefs and records.
    pub env: TypeEnv,
}

/// The marker function the generator adds for each requested instantiation.
pub const MARKER: &str = "__streamexec_instantiation_";

fn kind(n: &Value) -> &str {
    n["kind"].as_str().unwrap_or("")
}

fn inner(n: &Value) -> &[Value] {
    n["inner"].as_array().map_or(&[], Vec::as_slice)
}

fn type_text(n: &Value) -> String {
    let t = &n["type"];
    t["desugaredQualType"]
        .as_str()
        .or_else(|| t["qualType"].as_str())
        .unwrap_or("")
        .to_string()
}

/// Every `referencedDecl` id under `n` (`DeclRefExpr`s: variables and called functions).
fn references(n: &Value, out: &mut Vec<String>) {
    if let Some(id) = n["referencedDecl"]["id"].as_str() {
        out.push(id.to_string());
    }
    for c in inner(n) {
        references(c, out);
    }
}

struct Walk<'a> {
    unit: Unit,
    /// Function bodies by id (kernels, device functions, template specializations).
    bodies: HashMap<String, &'a Value>,
    /// `extern __shared__ T x[]`: id → element type.
    shared: HashMap<String, String>,
    /// Kernel candidates: (decl, is a template specialization).
    candidates: Vec<(&'a Value, bool)>,
}

/// Reads the kernels of one translation unit. `opencl` selects OpenCL's kernel attribute.
pub fn read(ast: &Value, opencl: bool) -> Result<Unit, String> {
    if kind(ast) != "TranslationUnitDecl" {
        return Err(format!(
            "the top node is `{}`, not TranslationUnitDecl",
            kind(ast)
        ));
    }
    let mut walk = Walk {
        unit: Unit::default(),
        bodies: HashMap::new(),
        shared: HashMap::new(),
        candidates: Vec::new(),
    };
    for n in inner(ast) {
        walk.decl(n, false);
    }
    let attr = if opencl {
        "OpenCLKernelAttr"
    } else {
        "CUDAGlobalAttr"
    };
    let mut seen = HashSet::new();
    let candidates = std::mem::take(&mut walk.candidates);
    for (n, specialization) in candidates {
        let is_kernel = inner(n).iter().any(|c| kind(c) == attr);
        let has_body = inner(n).iter().any(|c| kind(c) == "CompoundStmt");
        let Some(symbol) = n["mangledName"].as_str() else {
            continue; // a template's pattern: no code of its own
        };
        if !is_kernel || !has_body || !seen.insert(symbol.to_string()) {
            continue;
        }
        let params = inner(n)
            .iter()
            .filter(|c| kind(c) == "ParmVarDecl")
            .map(|p| (p["name"].as_str().unwrap_or("").to_string(), type_text(p)))
            .collect();
        let id = n["id"].as_str().unwrap_or("").to_string();
        let dynamic_shared = walk.dynamic_shared(&id);
        let decl = KernelDecl {
            name: n["name"].as_str().unwrap_or("").to_string(),
            symbol: symbol.to_string(),
            params,
            dynamic_shared,
            id,
        };
        // Specializations only where asked for (by a marker), others always.
        if !specialization || walk.unit.instantiations.values().any(|k| *k == decl.id) {
            walk.unit.kernels.push(decl);
        }
    }
    Ok(walk.unit)
}

impl<'a> Walk<'a> {
    fn decl(&mut self, n: &'a Value, specialization: bool) {
        match kind(n) {
            "LinkageSpecDecl" | "NamespaceDecl" | "ExternCContextDecl" => {
                for c in inner(n) {
                    self.decl(c, false);
                }
            }
            "FunctionTemplateDecl" => {
                for c in inner(n).iter().filter(|c| kind(c) == "FunctionDecl") {
                    self.decl(c, true);
                }
            }
            "FunctionDecl" => {
                let id = n["id"].as_str().unwrap_or("").to_string();
                if inner(n).iter().any(|c| kind(c) == "CompoundStmt") {
                    self.bodies.insert(id, n);
                }
                let name = n["name"].as_str().unwrap_or("");
                if let Some(i) = name.strip_prefix(MARKER).and_then(|i| i.parse().ok()) {
                    let mut refs = Vec::new();
                    references(n, &mut refs);
                    if let Some(target) = refs.into_iter().next() {
                        self.unit.instantiations.insert(i, target);
                    }
                    return;
                }
                self.candidates.push((n, specialization));
            }
            "VarDecl" => {
                let shared = inner(n).iter().any(|c| kind(c) == "CUDASharedAttr");
                let ty = n["type"]["qualType"].as_str().unwrap_or("");
                if shared && n["storageClass"] == "extern" && ty.ends_with("[]") {
                    let elem = ty.trim_end_matches("[]").trim().to_string();
                    self.shared
                        .insert(n["id"].as_str().unwrap_or("").to_string(), elem);
                }
            }
            "RecordDecl" | "CXXRecordDecl" => self.record(n),
            "TypedefDecl" | "TypeAliasDecl" => self.typedef(n),
            _ => {}
        }
    }

    fn record(&mut self, n: &Value) {
        if n["completeDefinition"] != true || n["tagUsed"] != "struct" {
            return;
        }
        let id = n["id"].as_str().unwrap_or("").to_string();
        let fields = inner(n)
            .iter()
            .filter(|c| kind(c) == "FieldDecl")
            .map(|f| (f["name"].as_str().unwrap_or("").to_string(), type_text(f)))
            .collect();
        let name = n["name"].as_str().unwrap_or("").to_string();
        let env = &mut self.unit.env;
        if !name.is_empty() {
            env.record_names.insert(name.clone(), id.clone());
            env.record_names
                .insert(format!("struct {name}"), id.clone());
        }
        let c_name = if kind(n) == "CXXRecordDecl" || name.is_empty() {
            name.clone()
        } else {
            format!("struct {name}")
        };
        env.records.insert(
            id,
            Record {
                c_name,
                rust_name: name,
                fields,
            },
        );
    }

    fn typedef(&mut self, n: &Value) {
        let Some(name) = n["name"].as_str() else {
            return;
        };
        fn record_id(n: &Value) -> Option<String> {
            match kind(n) {
                "RecordType" => n["decl"]["id"].as_str().map(str::to_string),
                // Only through the sugar of `typedef struct S T;`, never into a pointer.
                "ElaboratedType" | "TypedefDecl" | "TypeAliasDecl" => {
                    inner(n).iter().find_map(record_id)
                }
                _ => None,
            }
        }
        let target = match record_id(n) {
            Some(id) => {
                // An anonymous struct takes the typedef's name.
                if let Some(r) = self.unit.env.records.get_mut(&id)
                    && r.rust_name.is_empty()
                {
                    r.rust_name = name.to_string();
                    r.c_name = name.to_string();
                }
                Typedef::Record(id)
            }
            None => Typedef::Type(type_text(n)),
        };
        self.unit.env.typedefs.insert(name.to_string(), target);
    }

    /// The element type of the first `extern __shared__` array the kernel `id` reaches,
    /// through the functions it calls.
    fn dynamic_shared(&self, id: &str) -> Option<String> {
        let mut stack = vec![id.to_string()];
        let mut seen = HashSet::new();
        let mut found: Vec<String> = Vec::new();
        while let Some(f) = stack.pop() {
            if !seen.insert(f.clone()) {
                continue;
            }
            let Some(body) = self.bodies.get(&f) else {
                continue;
            };
            let mut refs = Vec::new();
            references(body, &mut refs);
            for r in refs {
                if let Some(elem) = self.shared.get(&r) {
                    found.push(elem.clone());
                } else if self.bodies.contains_key(&r) {
                    stack.push(r);
                }
            }
        }
        found.dedup();
        match found.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            // Several arrays of different types alias one region: size it in bytes.
            _ if found.iter().all(|f| *f == found[0]) => Some(found[0].clone()),
            _ => Some("unsigned char".into()),
        }
    }
}
