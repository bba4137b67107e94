//! How often the batch function applies each table, from counts on a few
//! edges of the pipelines' graphs (edge profiling on a spanning tree).
//!
//! Why: every lookup is counted once, as a hit or a miss (`State::lookups`,
//! the telemetry's figures). Helpers count what they resolve; a hit the
//! generated code resolves alone would need a count of its own, a load and
//! a store per table per packet, and memory operations bound the batch
//! function (basic_routing, five tables a packet, lost 6 to 13%). Instead,
//! packets entering a pipeline are known (the packets a call ran), and the
//! applies of every node follow from the counts on the edges outside a
//! spanning tree of the pipeline's graph (flow is conserved at each node).
//! The tree takes the edges expected to be taken most (a static guess, see
//! `shares`: the path through the most lookups), so the common path counts
//! nothing: inline hits of a table are then its applies minus the lookups
//! its helpers made during the call (each helper call counts exactly one,
//! so their number is the difference of `State::lookups` across the call,
//! `State::lookup_marks`; nothing on the packet path counts them twice).
//! A wrong guess costs one count on the edge taken, never a wrong figure.
//!
//! Contract:
//! - [`FlowPlan::new`] builds, before the batch function is generated, each
//!   pipeline's graph from the plan (every successor a node may jump to,
//!   and the pipeline's end, which any table may reach by `exit` or a
//!   fallback) and chooses the counted edges (chords);
//! - while generating, every jump from one node's code to another node or
//!   to the pipeline's end goes through [`FlowPlan::edge`] (`Gen::edge_to`),
//!   which says whether that edge is counted and in which slot of
//!   `BatchCtx::edges`; an edge the plan did not foresee is counted too;
//! - [`FlowPlan::finish`] solves each node's applies as a sum of slots and
//!   pipeline entries ([`BatchFlow`]); [`BatchFlow::mark`] notes each
//!   table's lookups before a call of the batch function and
//!   [`BatchFlow::fold`] adds its inline hits to `State::lookups` after it
//!   (lookups the interpreter made off the graph, `State::outside_flow`,
//!   are neither applies nor helper lookups).
//!
//! Slot 0 counts packets dropped at the end of ingress (they never enter
//! egress); egress is entered by every packet a call ran, less those and
//! the packet the call stopped at when it stopped after ingress.

use std::collections::{BTreeMap, HashMap};

use crate::plan::{Node, Plan, Prim};
use crate::state::State;

/// Slots in `BatchCtx::edges`; a program that needs more counts its inline
/// hits one by one instead (`Gen::count_inline_hit`).
pub(super) const EDGE_SLOTS: usize = 64;
/// The slot of packets dropped at the end of ingress.
pub(super) const DROPPED_AFTER_INGRESS: usize = 0;

/// A vertex of a pipeline's graph: its entry, a node, or its end.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Vertex {
    Entry,
    Node(u8, u32),
    End,
}

fn vertex(n: Option<Node>) -> Vertex {
    match n {
        Some(Node::Table(t)) => Vertex::Node(0, t),
        Some(Node::Cond(c)) => Vertex::Node(1, c),
        None => Vertex::End,
    }
}

/// A sum of edge slots and the pipeline's entries, with integer factors.
#[derive(Clone, Default, Debug, PartialEq)]
struct Sum {
    entries: i64,
    slots: BTreeMap<usize, i64>,
}

impl Sum {
    fn slot(k: usize) -> Sum {
        Sum { entries: 0, slots: BTreeMap::from([(k, 1)]) }
    }

    fn add(&mut self, other: &Sum, factor: i64) {
        self.entries += factor * other.entries;
        for (k, v) in &other.slots {
            *self.slots.entry(*k).or_default() += factor * v;
        }
        self.slots.retain(|_, v| *v != 0);
    }
}

/// One pipeline's graph while the batch function is generated.
struct Graph {
    /// Every edge `(from, to)`: its counting slot, or `None` on the tree.
    edges: HashMap<(Vertex, Vertex), Option<usize>>,
}

/// The counted edges of the batch function's pipelines (ingress, then
/// egress), chosen before generation.
pub(super) struct FlowPlan {
    graphs: Vec<Graph>,
    /// The pipeline being generated (an index into `graphs`).
    current: usize,
    /// Slots handed out (slot 0 is `DROPPED_AFTER_INGRESS`).
    slots: usize,
}

/// Whether action `a` always ends the pipeline (`exit`).
fn exits(plan: &Plan, a: u32) -> bool {
    plan.actions[a as usize].prims.iter().any(|p| matches!(p, Prim::Exit))
}

/// The successors node `n` of `plan` may jump to, each with its base
/// weight: a condition's branches alike; a table's successor by how many
/// of its actions lead there, the default action (a miss) half as much as
/// others, or hit twice as much as miss (an action that exits leads to the
/// end); the end by a helper's `exit` or a fallback, and successors only a
/// helper's result may name, nothing.
fn successors(plan: &Plan, n: Node) -> Vec<(Option<Node>, f64)> {
    let mut out: Vec<(Option<Node>, f64)> = Vec::new();
    let mut add = |to: Option<Node>, w: f64| match out.iter_mut().find(|(t, _)| *t == to) {
        Some((_, s)) => *s += w,
        None => out.push((to, w)),
    };
    match n {
        Node::Cond(c) => {
            let cp = &plan.conds[c as usize];
            add(cp.true_next, 1.0);
            add(cp.false_next, 1.0);
        }
        Node::Table(t) => {
            let tp = &plan.tables[t as usize];
            match tp.inline_default {
                Some((a, next)) => add(if exits(plan, a) { None } else { next }, 1.0),
                None => {
                    if let (Some(h), Some(m)) = (tp.next_hit, tp.next_miss) {
                        add(h, 2.0);
                        add(m, 1.0);
                    } else {
                        let default = tp.default_action.as_ref().map(|(a, _)| *a);
                        for (a, next) in tp.actions.iter().zip(&tp.next_by_action) {
                            let w = if Some(*a) == default { 0.5 } else { 1.0 };
                            add(if exits(plan, *a) { None } else { *next }, w);
                        }
                    }
                    // Every successor the helper's result may name.
                    for next in tp.next_by_action.iter().chain(tp.next_hit.as_ref()).chain(tp.next_miss.as_ref()) {
                        add(*next, 0.0);
                    }
                    add(tp.base_default_next, 0.0);
                }
            }
            add(None, 0.0);
        }
    }
    out
}

/// The share of node `n`'s packets each successor is expected to take: its
/// base weight (see [`successors`]) times the square of one more than the
/// lookups on its longest path on (`depth.0`), and, between paths of as
/// many lookups, more for the one with fewer nodes (`depth.1`). Why: the
/// forwarding path of a program runs through most of its tables, while
/// error checks branch off to a drop and the end.
fn shares(plan: &Plan, n: Node, depth: &HashMap<Vertex, (f64, f64)>) -> Vec<(Option<Node>, f64)> {
    let mut w: Vec<(Option<Node>, f64)> = successors(plan, n)
        .into_iter()
        .map(|(to, base)| {
            let (d, nodes) = depth.get(&vertex(to)).copied().unwrap_or((0.0, 0.0));
            (to, base * (1.0 + d) * (1.0 + d) / (1.0 + 0.1 * nodes))
        })
        .collect();
    let total: f64 = w.iter().map(|(_, x)| x).sum();
    if total > 0.0 {
        w.iter_mut().for_each(|(_, x)| *x /= total);
    }
    w
}

/// Union-find over vertices, for Kruskal's spanning tree.
fn root(parent: &mut HashMap<Vertex, Vertex>, v: Vertex) -> Vertex {
    let mut r = v;
    while let Some(&p) = parent.get(&r) {
        if p == r {
            break;
        }
        r = p;
    }
    parent.insert(v, r);
    r
}

impl FlowPlan {
    /// The graphs of `plan`'s ingress and egress and their counted edges.
    pub(super) fn new(plan: &Plan) -> FlowPlan {
        let mut slots = DROPPED_AFTER_INGRESS + 1;
        let mut graphs = Vec::new();
        for init in [plan.ingress.init, plan.egress.init] {
            // Every edge with its expected share of the pipeline's packets,
            // nodes in the order of a walk from the entry (a DAG).
            let mut weighted: Vec<((Vertex, Vertex), f64)> = vec![((Vertex::Entry, vertex(init)), 1.0)];
            let mut freq: HashMap<Vertex, f64> = HashMap::from([(vertex(init), 1.0)]);
            let mut order = Vec::new();
            let mut seen = std::collections::HashSet::new();
            // Depth-first postorder, reversed: a topological order of the DAG.
            fn visit(plan: &Plan, n: Node, seen: &mut std::collections::HashSet<Vertex>, order: &mut Vec<Node>) {
                if !seen.insert(vertex(Some(n))) {
                    return;
                }
                for (to, _) in successors(plan, n) {
                    if let Some(m) = to {
                        visit(plan, m, seen, order);
                    }
                }
                order.push(n);
            }
            if let Some(n) = init {
                visit(plan, n, &mut seen, &mut order);
            }
            // Lookups (tables with a key) on the longest path from each node
            // on, over the successors it is expected to take, and the nodes
            // on that path (postorder: successors first).
            let mut depth: HashMap<Vertex, (f64, f64)> = HashMap::new();
            for &n in &order {
                let below = successors(plan, n)
                    .iter()
                    .filter(|(_, w)| *w > 0.0)
                    .map(|(to, _)| depth.get(&vertex(*to)).copied().unwrap_or((0.0, 0.0)))
                    .fold((0.0, 0.0), |a, b| if b.0 > a.0 || (b.0 == a.0 && b.1 > a.1) { b } else { a });
                let own = matches!(n, Node::Table(t) if !plan.tables[t as usize].key.is_empty());
                depth.insert(vertex(Some(n)), (below.0 + f64::from(u8::from(own)), below.1 + 1.0));
            }
            for n in order.into_iter().rev() {
                let f = freq.get(&vertex(Some(n))).copied().unwrap_or(0.0);
                for (to, share) in shares(plan, n, &depth) {
                    *freq.entry(vertex(to)).or_default() += f * share;
                    weighted.push(((vertex(Some(n)), vertex(to)), f * share));
                }
            }
            // The heaviest spanning tree (Kruskal). The entries are known:
            // they are the flow of an edge from the end back to the entry,
            // which stays outside the tree, so the tree spans the real edges.
            weighted.sort_by(|a, b| b.1.total_cmp(&a.1));
            let mut parent: HashMap<Vertex, Vertex> = HashMap::new();
            let mut edges = HashMap::new();
            for ((from, to), _) in weighted {
                if edges.contains_key(&(from, to)) {
                    continue;
                }
                let (a, b) = (root(&mut parent, from), root(&mut parent, to));
                if a == b {
                    edges.insert((from, to), Some(slots));
                    slots += 1;
                } else {
                    parent.insert(a, b);
                    edges.insert((from, to), None);
                }
            }
            graphs.push(Graph { edges });
        }
        FlowPlan { graphs, current: 0, slots }
    }

    /// Whether the counts fit `BatchCtx::edges`.
    pub(super) fn fits(&self) -> bool {
        self.slots <= EDGE_SLOTS
    }

    /// Starts generating pipeline `k` (0 ingress, 1 egress).
    pub(super) fn begin(&mut self, k: usize) {
        self.current = k;
    }

    /// The slot that counts the edge from `from` (`None`: the pipeline's
    /// entry) to `to` (`None`: its end), or `None` for a tree edge. An edge
    /// the plan did not foresee gets a slot of its own (`None` when none is
    /// left: the caller then cannot derive the counts).
    pub(super) fn edge(&mut self, from: Option<Node>, to: Option<Node>) -> Result<Option<usize>, ()> {
        let from = from.map_or(Vertex::Entry, |n| vertex(Some(n)));
        let to = vertex(to);
        let g = &mut self.graphs[self.current];
        if let Some(slot) = g.edges.get(&(from, to)) {
            return Ok(*slot);
        }
        if self.slots >= EDGE_SLOTS {
            return Err(());
        }
        g.edges.insert((from, to), Some(self.slots));
        self.slots += 1;
        Ok(Some(self.slots - 1))
    }

    /// Solves each table's applies from the counted edges and the entries.
    pub(super) fn finish(self, plan: &Plan) -> BatchFlow {
        let mut applies: Vec<Vec<(u32, Sum)>> = Vec::new();
        for g in &self.graphs {
            let mut value: HashMap<(Vertex, Vertex), Sum> = HashMap::new();
            let mut incident: HashMap<Vertex, Vec<(Vertex, Vertex)>> = HashMap::new();
            for (&(from, to), slot) in &g.edges {
                incident.entry(from).or_default().push((from, to));
                incident.entry(to).or_default().push((from, to));
                if let Some(k) = slot {
                    value.insert((from, to), Sum::slot(*k));
                }
            }
            // Flow in equals flow out at every vertex; the end's outflow and
            // the entry's inflow are the pipeline's entries. A vertex with
            // one edge left open gives that edge's flow (leaves of the tree
            // first, then inwards).
            let open = |v: &Vertex, value: &HashMap<(Vertex, Vertex), Sum>| -> Vec<(Vertex, Vertex)> {
                incident[v].iter().copied().filter(|e| !value.contains_key(e)).collect()
            };
            let mut work: Vec<Vertex> = incident.keys().copied().collect();
            while let Some(v) = work.pop() {
                let left = open(&v, &value);
                if left.len() != 1 {
                    continue;
                }
                let e = left[0];
                // Known inflow minus known outflow at `v`.
                let mut balance = Sum::default();
                match v {
                    Vertex::Entry => balance.entries += 1,
                    Vertex::End => balance.entries -= 1,
                    Vertex::Node(..) => {}
                }
                for f in &incident[&v] {
                    if let Some(s) = value.get(f) {
                        balance.add(s, if f.1 == v { 1 } else { -1 });
                    }
                }
                // The open edge leaves `v` (it carries the balance) or
                // enters it (it carries the deficit).
                let mut s = Sum::default();
                s.add(&balance, if e.0 == v { 1 } else { -1 });
                value.insert(e, s);
                // Its other end may now have one edge left open.
                work.push(if e.0 == v { e.1 } else { e.0 });
            }
            let mut per_table = Vec::new();
            for (t, tp) in plan.tables.iter().enumerate() {
                // Keyless fixed-action tables are action calls: not lookups.
                if tp.inline_default.is_some() {
                    continue;
                }
                let v = Vertex::Node(0, t as u32);
                let Some(edges) = incident.get(&v) else { continue };
                let mut sum = Sum::default();
                for e in edges.iter().filter(|e| e.1 == v) {
                    if let Some(s) = value.get(e) {
                        sum.add(s, 1);
                    }
                }
                per_table.push((t as u32, sum));
            }
            let solved = g.edges.keys().all(|e| value.contains_key(e));
            assert!(solved, "flow: the counted edges leave a pipeline's applies undetermined");
            applies.push(per_table);
        }
        let used = self.slots;
        let flat = |per: &Vec<(u32, Sum)>| -> Vec<Applies> {
            per.iter()
                .map(|(t, s)| Applies {
                    table: *t as usize,
                    entries: s.entries,
                    slots: s.slots.iter().map(|(k, v)| (*k as u32, *v)).collect(),
                })
                .collect()
        };
        BatchFlow {
            ingress: applies.first().map(flat).unwrap_or_default(),
            egress: applies.get(1).map(flat).unwrap_or_default(),
            used,
        }
    }
}

/// A table's applies in one call: `entries` times the pipeline's entries
/// plus the counted slots with their factors.
#[derive(Debug)]
struct Applies {
    table: usize,
    entries: i64,
    slots: Vec<(u32, i64)>,
}

/// The batch function's table applies as sums of its edge counts (see the
/// module doc).
#[derive(Debug, Default)]
pub(super) struct BatchFlow {
    ingress: Vec<Applies>,
    egress: Vec<Applies>,
    /// Slots in use (the rest of `BatchCtx::edges` stays zero).
    used: usize,
}

impl BatchFlow {
    /// Before a call: notes each table's lookups in `marks`.
    pub(super) fn mark(&self, lookups: &[[u64; 2]], marks: &mut [u64]) {
        for a in self.ingress.iter().chain(&self.egress) {
            let [h, m] = lookups[a.table];
            marks[a.table] = h + m;
        }
    }

    /// After a call that ran `ran` packets (the last one stopping after
    /// ingress when `stopped_after_ingress`): adds each table's inline hits
    /// (its applies less the lookups its helpers made since [`Self::mark`])
    /// to `state.lookups`, and clears the call's counts.
    pub(super) fn fold(&self, edges: &mut [u64], ran: u64, stopped_after_ingress: bool, state: &mut State) {
        let dropped = edges[DROPPED_AFTER_INGRESS];
        let egress_entries = ran - dropped - u64::from(stopped_after_ingress);
        for (list, entries) in [(&self.ingress, ran), (&self.egress, egress_entries)] {
            for a in list {
                let mut n = a.entries.wrapping_mul(entries as i64);
                for (k, f) in &a.slots {
                    n = n.wrapping_add(f.wrapping_mul(edges[*k as usize] as i64));
                }
                let [h, m] = state.lookups[a.table];
                let outside = std::mem::take(&mut state.outside_flow[a.table]);
                let helpers = (h + m).wrapping_sub(state.lookup_marks[a.table]).wrapping_sub(outside);
                let inline = (n as u64).wrapping_sub(helpers);
                debug_assert!(inline as i64 >= 0, "table {}: fewer applies than helper lookups", a.table);
                state.lookups[a.table][0] += inline;
            }
        }
        edges[..self.used].iter_mut().for_each(|e| *e = 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(example: &str) -> Plan {
        let path = format!("{}/../../examples/{example}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        crate::load_switch(&text).unwrap().program().clone()
    }

    fn named(plan: &Plan, name: &str) -> Vertex {
        if let Some(t) = plan.tables.iter().position(|t| t.name == name) {
            return Vertex::Node(0, t as u32);
        }
        let c = plan.conds.iter().position(|c| c.name == name).unwrap_or_else(|| panic!("no node {name}"));
        Vertex::Node(1, c as u32)
    }

    /// The edges of `path` (node names, from the entry to the end) that
    /// the flow plan of pipeline `k` counts.
    fn counted_on(plan: &Plan, k: usize, path: &[&str]) -> Vec<String> {
        let flow = FlowPlan::new(plan);
        let mut v: Vec<Vertex> = vec![Vertex::Entry];
        v.extend(path.iter().map(|n| named(plan, n)));
        v.push(Vertex::End);
        v.windows(2)
            .filter(|e| {
                let slot = flow.graphs[k].edges.get(&(e[0], e[1]));
                assert!(slot.is_some(), "{:?} -> {:?} is not an edge of the graph", e[0], e[1]);
                slot.is_some_and(|s| s.is_some())
            })
            .map(|e| format!("{:?} -> {:?}", e[0], e[1]))
            .collect()
    }

    /// The router's IPv4 forwarding path (TTL above 1, a route, a next
    /// hop) counts no edge: the tree takes the path through the lookups,
    /// not the checks that branch off to a drop.
    #[test]
    fn the_routers_forwarding_path_counts_nothing() {
        let plan = plan_of("router");
        let ipv4 = [
            "tbl_router133",
            "node_3",
            "node_5",
            "node_6",
            "tbl_router143",
            "RouterIngress.ipv4_lpm",
            "node_19",
            "RouterIngress.nexthop",
        ];
        assert_eq!(counted_on(&plan, 0, &ipv4), Vec::<String>::new());
    }

    /// l2_learning's egress check (`egress_port == ingress_port`: drop)
    /// falls through on the path that does nothing, uncounted; the edge
    /// example's accepted packet (ACL permit, no policing, a route) counts
    /// nothing either.
    #[test]
    fn checks_that_drop_branch_off_the_counted_edges() {
        let plan = plan_of("l2_learning");
        assert_eq!(counted_on(&plan, 1, &["node_6"]), Vec::<String>::new());
        let plan = plan_of("edge");
        let accepted = [
            "tbl_edge201",
            "node_3",
            "node_5",
            "EdgeIngress.acl",
            "EdgeIngress.sources",
            "node_12",
            "tbl_drop_1",
            "EdgeIngress.routes",
        ];
        assert_eq!(counted_on(&plan, 0, &accepted), Vec::<String>::new());
    }

    /// The router's applies are solved from the entries and the counted
    /// edges: its routes see every packet that enters less those that
    /// branch off before (counted edges, subtracted), its next hops every
    /// packet that enters less those that end or drop before them.
    #[test]
    fn applies_are_solved_from_the_counted_edges_and_the_entries() {
        let plan = plan_of("router");
        let flow = FlowPlan::new(&plan).finish(&plan);
        let lpm = plan.tables.iter().position(|t| t.name == "RouterIngress.ipv4_lpm").unwrap();
        let nexthop = plan.tables.iter().position(|t| t.name == "RouterIngress.nexthop").unwrap();
        let find = |t: usize| flow.ingress.iter().find(|a| a.table == t).unwrap_or_else(|| panic!("table {t}"));
        // Every packet that does not branch off reaches the routes; the
        // next hops see every packet that reaches `node_19` and goes on.
        assert_eq!(find(lpm).entries, 1, "{:?}", find(lpm));
        assert!(!find(lpm).slots.is_empty(), "the branches off are subtracted: {:?}", find(lpm));
        assert_eq!(find(nexthop).entries, 1, "{:?}", find(nexthop));
    }
}
