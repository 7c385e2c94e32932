//! CUDA graphs, the explicit API: a graph is built node by node (kernel, memset, memcpy, host,
//! empty, event record, event wait and child-graph nodes, each after the nodes it names as
//! dependencies), instantiated into an executable graph, and launched into streams.
//!
//! - **Adding a node** checks it as the matching stream call would: a kernel node is a
//!   [`KernelLaunch`] (geometry, shared memory, `kernelParams` or `extra` against the `.param`
//!   list, argument values copied now, as CUDA does), a memset or memcpy node's ranges must lie
//!   inside live allocations. Dependencies must be live nodes of the same graph, without
//!   duplicates. A child-graph node holds a clone of the child graph as it is now.
//! - **Instantiating** snapshots the graph: its nodes in a topological order (dependencies
//!   first, else in the order they were added; a cycle is refused), child graphs flattened in
//!   place. Later changes of the graph do not reach the executable graph. All nodes that run in
//!   a context (kernels, memsets, memcpys, event records) must share one.
//! - **Launching** enqueues the nodes one after the other on the stream, a valid schedule of
//!   the graph's partial order, as one stream operation: stream-ordered like any other work,
//!   and after the previous launch of the same executable graph (on any stream), as CUDA
//!   orders launches of one `CUgraphExec`. Memory ranges and events are checked again first,
//!   so a launch is enqueued whole or not at all. A fault is the context's sticky error, as for
//!   any work. Kernel arguments are packed at launch: `cuGraphExecKernelNodeSetParams` changes
//!   launches made after it, never queued ones.
//! - Host memory that a memcpy node names is read or written when the node runs (no staging),
//!   so it must stay valid until then, pinned or not.
//!
//! Graph, node and executable-graph handles are table handles like every other (`handles.rs`);
//! a bad one is `CUDA_ERROR_INVALID_VALUE`, as the graph API documents. Node handles of a
//! destroyed graph are dead; its executable graphs live on.
//!
//! # Files
//!
//! `mod.rs` holds the graph, node and executable-graph tables and the topological order;
//! `nodes.rs` what each kind of node does (checked when added, resolved at each launch);
//! `build.rs` building a graph and reading it back; `instantiate.rs` executable graphs and
//! their node updates; `launch.rs` `cuGraphUpload` and `cuGraphLaunch`.

pub(crate) mod build;
pub(crate) mod instantiate;
pub(crate) mod launch;
pub(crate) mod nodes;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use cudarc::driver::sys::{CUcontext, CUgraph, CUgraphExec, CUgraphNode};
use parking_lot::Mutex;
use streamexec::Event;

use crate::context;
use crate::driver::driver;
use crate::entry::{CuResult, invalid};
use crate::handles::Table;
use nodes::Op;

/// Live graphs.
static GRAPHS: Table<Graph> = Table::new(0x6000_0000);
/// Live nodes (a destroyed graph's nodes are taken out with it).
static NODES: Table<Node> = Table::new(0x7000_0000);
/// Live executable graphs.
static EXECS: Table<Exec> = Table::new(0x8000_0000);

/// One node of a graph.
struct Node {
    handle: usize,
    graph: usize,
    deps: Vec<usize>,
    op: Op,
}

/// A graph: its nodes in the order they were added.
struct Graph {
    handle: usize,
    nodes: Mutex<Vec<Arc<Node>>>,
}

/// An executable graph.
struct Exec {
    /// The operations, in the order a launch enqueues them.
    steps: Mutex<Vec<Op>>,
    /// For each node of the graph it was made from: its step (`None`: a child-graph node).
    node_at: HashMap<usize, Option<usize>>,
    /// The context every node runs in (`None`: no node runs in a context).
    ctx: Option<usize>,
    /// Done when the last launch is done (the next one waits for it); held while launching,
    /// so launches of one executable graph are ordered.
    last: Mutex<Option<Event>>,
}

fn graph(h: CUgraph) -> CuResult<Arc<Graph>> {
    driver()?;
    GRAPHS
        .get(h as usize)
        .ok_or_else(|| invalid(format!("{:#x} is not a live graph", h as usize)))
}

fn node(h: CUgraphNode) -> CuResult<Arc<Node>> {
    driver()?;
    NODES
        .get(h as usize)
        .ok_or_else(|| invalid(format!("{:#x} is not a live graph node", h as usize)))
}

fn exec(h: CUgraphExec) -> CuResult<Arc<Exec>> {
    driver()?;
    EXECS
        .get(h as usize)
        .ok_or_else(|| invalid(format!("{:#x} is not a live executable graph", h as usize)))
}

/// The live context `ctx` a memset or memcpy node runs in.
fn node_context(ctx: CUcontext) -> CuResult<usize> {
    if ctx.is_null() {
        return Err(invalid(
            "ctx is NULL: pass the context the node runs in (cuCtxGetCurrent)",
        ));
    }
    driver()?;
    Ok(context::lookup(ctx as usize)?.handle)
}

/// `nodes` in a topological order: dependencies first, else in the order they were added.
fn topological(nodes: &[Arc<Node>]) -> CuResult<Vec<Arc<Node>>> {
    let at: HashMap<usize, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.handle, i))
        .collect();
    let mut waiting = vec![0usize; nodes.len()];
    let mut dependents = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for d in &n.deps {
            let j = *at.get(d).ok_or_else(|| {
                invalid(format!(
                    "node {:#x} depends on {d:#x}, which is not in its graph",
                    n.handle
                ))
            })?;
            waiting[i] += 1;
            dependents[j].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..nodes.len())
        .filter(|&i| waiting[i] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(nodes[i].clone());
        for &k in &dependents[i] {
            waiting[k] -= 1;
            if waiting[k] == 0 {
                ready.push(Reverse(k));
            }
        }
    }
    if order.len() != nodes.len() {
        return Err(invalid(format!(
            "the graph has a cycle through {} of its nodes; a graph must be acyclic",
            nodes.len() - order.len()
        )));
    }
    Ok(order)
}

/// The operations of `g` in a topological order, child graphs flattened; and for each node of
/// `g`, its operation's index (`None` for a child-graph node).
type Flat = (Vec<Op>, HashMap<usize, Option<usize>>);

fn flatten(g: &Graph) -> CuResult<Flat> {
    let nodes = g.nodes.lock().clone();
    let (mut ops, mut at) = (Vec::with_capacity(nodes.len()), HashMap::new());
    for n in topological(&nodes)? {
        match &n.op {
            Op::Child(inner) => {
                at.insert(n.handle, None);
                ops.extend(inner.iter().cloned());
            }
            op => {
                at.insert(n.handle, Some(ops.len()));
                ops.push(op.clone());
            }
        }
    }
    Ok((ops, at))
}

#[cfg(test)]
mod tests {
    use cudarc::driver::sys::CUresult;

    use super::*;

    fn nodes(deps: &[&[usize]]) -> Vec<Arc<Node>> {
        deps.iter()
            .enumerate()
            .map(|(i, d)| {
                Arc::new(Node {
                    handle: 100 + i,
                    graph: 1,
                    deps: d.iter().map(|&j| 100 + j).collect(),
                    op: Op::Empty,
                })
            })
            .collect()
    }

    fn order(deps: &[&[usize]]) -> CuResult<Vec<usize>> {
        Ok(topological(&nodes(deps))?
            .iter()
            .map(|n| n.handle - 100)
            .collect())
    }

    #[test]
    fn dependencies_first_else_the_order_of_adding() {
        // A diamond given as D(B, C), B(A), C(A), A: dependencies first.
        assert_eq!(order(&[&[1, 2], &[3], &[3], &[]]).unwrap(), [3, 1, 2, 0]);
        assert_eq!(order(&[&[], &[], &[0]]).unwrap(), [0, 1, 2]);
        assert_eq!(order(&[]).unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn a_cycle_or_a_foreign_dependency_is_refused() {
        // The API cannot build either; instantiation refuses them all the same.
        let e = order(&[&[], &[2], &[1]]).unwrap_err();
        assert_eq!(e.code, CUresult::CUDA_ERROR_INVALID_VALUE);
        assert!(e.detail.contains("cycle through 2"), "{}", e.detail);
        let e = order(&[&[7]]).unwrap_err();
        assert!(e.detail.contains("not in its graph"), "{}", e.detail);
    }
}
