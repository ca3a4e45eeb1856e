//! Memory planning: gives every internal entry a storage block, reusing blocks whose
//! entries are dead and computing in place where the operator allows it.

use super::IndexedGraph;
use std::collections::BTreeMap;

/// A free block may serve a request this many times smaller or larger than itself.
const MATCH_RANGE: usize = 16;

/// The result of planning.
#[derive(Debug, Clone, Default)]
pub struct MemoryPlan {
    /// The storage block of each entry; `None` for external entries.
    pub storage: Vec<Option<usize>>,
    /// The size in bytes of each storage block.
    pub block_bytes: Vec<usize>,
    /// For each entry, true if it shares its block with an input of its producer.
    pub inplace: Vec<bool>,
}

impl MemoryPlan {
    /// Bytes of all blocks together.
    pub fn total_bytes(&self) -> usize {
        self.block_bytes.iter().sum()
    }
}

struct Allocator {
    free: BTreeMap<usize, Vec<usize>>,
    bytes: Vec<usize>,
}

impl Allocator {
    fn request(&mut self, size: usize) -> usize {
        let lo = size / MATCH_RANGE;
        let hi = size.saturating_mul(MATCH_RANGE);
        let fit = self
            .free
            .range(size..=hi)
            .next()
            .map(|(&s, _)| s)
            .or_else(|| self.free.range(lo..size).next_back().map(|(&s, _)| s));
        if let Some(s) = fit {
            let list = self.free.get_mut(&s).expect("listed size");
            let id = list.pop().expect("non-empty list");
            if list.is_empty() {
                self.free.remove(&s);
            }
            self.bytes[id] = self.bytes[id].max(size);
            return id;
        }
        self.bytes.push(size);
        self.bytes.len() - 1
    }

    fn release(&mut self, id: usize) {
        self.free.entry(self.bytes[id]).or_default().push(id);
    }
}

/// Plans the graph's memory. `bytes[e]` is entry `e`'s size, `external[e]` marks entries
/// that live in arrays the caller supplies (arguments, gradients, head gradients);
/// `nodes` limits planning to those nodes (all when `None`).
pub fn plan_memory(g: &IndexedGraph, bytes: &[usize], external: &[bool]) -> MemoryPlan {
    let n_entries = g.num_entries();
    let mut refs = g.ref_counts();
    let mut alloc = Allocator {
        free: BTreeMap::new(),
        bytes: Vec::new(),
    };
    let mut storage: Vec<Option<usize>> = vec![None; n_entries];
    let mut inplace = vec![false; n_entries];
    let mut users: Vec<usize> = Vec::new();
    for (i, node) in g.nodes.iter().enumerate() {
        let Some(op) = &node.op else { continue };
        let pairs = op.inplace();
        for (k, e) in g.node_entries(i).enumerate() {
            if external[e] {
                continue;
            }
            let shared = pairs.iter().find(|(_, o)| *o == k).and_then(|&(inp, _)| {
                let src = *g.inputs[i].get(inp)?;
                let sid = storage[src]?;
                let sole_reader = refs[src] == 1
                    && g.inputs[i].iter().filter(|&&x| x == src).count() == 1
                    && users[sid] == 1;
                (sole_reader && bytes[src] == bytes[e]).then_some(sid)
            });
            let sid = match shared {
                Some(sid) => {
                    inplace[e] = true;
                    sid
                }
                None => {
                    let sid = alloc.request(bytes[e]);
                    if sid == users.len() {
                        users.push(0);
                    }
                    sid
                }
            };
            users[sid] += 1;
            storage[e] = Some(sid);
        }
        let mut dead = Vec::new();
        for &src in &g.inputs[i] {
            refs[src] -= 1;
            if refs[src] == 0 {
                dead.push(src);
            }
        }
        dead.extend(g.node_entries(i).filter(|&e| refs[e] == 0));
        dead.sort_unstable();
        dead.dedup();
        for e in dead {
            if let Some(sid) = storage[e] {
                users[sid] -= 1;
                if users[sid] == 0 {
                    alloc.release(sid);
                }
            }
        }
    }
    MemoryPlan {
        storage,
        block_bytes: alloc.bytes,
        inplace,
    }
}
