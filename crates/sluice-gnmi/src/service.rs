//! The gNMI service: Capabilities, Get, Set and Subscribe over the tree of
//! `tree.rs`.
//!
//! Contract. Reads: snapshots of the ports (one per Get and Set; the
//! streams share one at most [`FRESH`] old). Writes: a port's
//! enabled state (Set). Values of leaves are typed scalars (`uint_val`,
//! `string_val`, `bool_val`) whatever the encoding, as the gNMI
//! specification asks for scalars; JSON and JSON_IETF encode the subtrees
//! a Get names above the leaves, PROTO sends every leaf on its own. Paths
//! in answers are whole (the interface's `name` key included), relative
//! to the request's prefix when it has one without wildcards.
//!
//! Concurrency invariants (this file owns them): a subscription is one
//! task, holding its own record of what it sent; it writes into a queue
//! of [`QUEUE`] responses toward its client, waiting when the queue is
//! full (a slow client delays its own samples, which then carry the
//! newest values; nothing piles up). Snapshots are taken on a blocking
//! thread, never on the runtime's.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::proto;
use crate::proto::subscribe_request::Request as SubReq;
use crate::proto::subscribe_response::Response as SubResp;
use crate::proto::subscription_list::Mode as ListMode;
use crate::tree::{self, Class, Elem, Encoding, Leaf, Pattern, Scalar, SetOp};
use crate::{PortState, Ports, GNMI_VERSION};

/// How old a snapshot may be and still be served.
const FRESH: Duration = Duration::from_millis(50);

/// How often streaming subscriptions look for changes; the shortest
/// sample interval.
const TICK: Duration = Duration::from_millis(100);

/// How often a TARGET_DEFINED subscription samples counters (the other
/// leaves it sends on change).
const TARGET_DEFINED_SAMPLE: Duration = Duration::from_secs(10);

/// Responses queued toward one subscriber.
const QUEUE: usize = 16;

/// The service (see the module documentation).
#[derive(Clone)]
pub struct Gnmi {
    inner: Arc<Inner>,
}

struct Inner {
    ports: Arc<dyn Ports>,
    cache: Mutex<Option<(Instant, Arc<Vec<PortState>>)>>,
}

impl Gnmi {
    pub(crate) fn new(ports: Arc<dyn Ports>) -> Gnmi {
        Gnmi { inner: Arc::new(Inner { ports, cache: Mutex::new(None) }) }
    }
}

impl Inner {
    fn snapshot_now(&self) -> Arc<Vec<PortState>> {
        let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, s)) = c.as_ref() {
            if at.elapsed() < FRESH {
                return s.clone();
            }
        }
        let s = Arc::new(self.ports.snapshot());
        *c = Some((Instant::now(), s.clone()));
        s
    }

    /// A snapshot taken now, kept for the streams' next ticks.
    fn snapshot_fresh(&self) -> Arc<Vec<PortState>> {
        let s = Arc::new(self.ports.snapshot());
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), s.clone()));
        s
    }

    fn forget(&self) {
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// A snapshot of the ports, on a blocking thread: `fresh`, taken for this
/// request (a Get or a Set sees every frame counted before it arrived);
/// else, for a stream's tick, shared with the other streams' if recent.
async fn snapshot(inner: &Arc<Inner>, fresh: bool) -> Result<Arc<Vec<PortState>>, Status> {
    let i = inner.clone();
    tokio::task::spawn_blocking(move || if fresh { i.snapshot_fresh() } else { i.snapshot_now() })
        .await
        .map_err(|e| Status::internal(format!("snapshot: {e}")))
}

fn now_ns() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// The prefix answers carry, and how many leading elements it takes off
/// every path: the request's prefix when it has no wildcard, else only its
/// target and origin (paths then whole).
fn answer_prefix(prefix: Option<&proto::Path>) -> Result<(Option<proto::Path>, usize), Status> {
    let Some(p) = prefix else { return Ok((None, 0)) };
    let pat = tree::pattern(Some(p), None).map_err(Status::invalid_argument)?;
    if pat.is_concrete() {
        Ok((Some(p.clone()), p.elem.len()))
    } else {
        Ok((Some(proto::Path { origin: p.origin.clone(), target: p.target.clone(), elem: Vec::new() }), 0))
    }
}

/// Concrete elements as an answer's path, the prefix's `skip` first
/// elements taken off.
fn relative_path(elems: &[Elem], skip: usize) -> proto::Path {
    proto::Path { elem: tree::to_proto(&elems[skip.min(elems.len())..]), ..Default::default() }
}

fn leaf_update(l: &Leaf, skip: usize) -> proto::Update {
    proto::Update { path: Some(relative_path(&l.path, skip)), val: Some(tree::typed(&l.value)), duplicates: 0 }
}

/// The updates answering `pat` from `leaves` in `enc`: each leaf (PROTO,
/// or a path naming a leaf), or each node the path names as one JSON
/// subtree.
fn updates_for(pat: &Pattern, leaves: &[Leaf], enc: Encoding, skip: usize) -> Vec<proto::Update> {
    let matched: Vec<(&Leaf, usize)> = leaves.iter().filter_map(|l| pat.anchor(&l.path).map(|a| (l, a))).collect();
    if enc == Encoding::Proto {
        return matched.iter().map(|(l, _)| leaf_update(l, skip)).collect();
    }
    let mut groups: Vec<(&[Elem], Vec<&Leaf>)> = Vec::new();
    for (l, a) in &matched {
        let node = &l.path[..*a];
        match groups.iter_mut().find(|(n, _)| *n == node) {
            Some((_, ls)) => ls.push(l),
            None => groups.push((node, vec![l])),
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for (node, ls) in groups {
        if let [only] = ls.as_slice() {
            if only.path.len() == node.len() {
                out.push(leaf_update(only, skip));
                continue;
            }
        }
        let rel: Vec<(&[Elem], &Scalar)> = ls.iter().map(|l| (&l.path[node.len()..], &l.value)).collect();
        let json = tree::subtree_json(&rel, enc, node.is_empty()).to_string().into_bytes();
        use proto::typed_value::Value as V;
        let value = if enc == Encoding::JsonIetf { V::JsonIetfVal(json) } else { V::JsonVal(json) };
        out.push(proto::Update {
            path: Some(relative_path(node, skip)),
            val: Some(proto::TypedValue { value: Some(value) }),
            duplicates: 0,
        });
    }
    out
}

fn not_in_schema(p: &Pattern) -> Status {
    Status::not_found(format!(
        "path {} is not in this target's data tree (openconfig-interfaces: /interfaces/interface[name=...]/...)",
        tree::render_pattern(p)
    ))
}

type SubscribeStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<proto::SubscribeResponse, Status>> + Send>>;

#[tonic::async_trait]
impl proto::g_nmi_server::GNmi for Gnmi {
    async fn capabilities(
        &self,
        _req: Request<proto::CapabilityRequest>,
    ) -> Result<Response<proto::CapabilityResponse>, Status> {
        let model = |name: &str, version: &str| proto::ModelData {
            name: name.into(),
            organization: "OpenConfig working group".into(),
            version: version.into(),
        };
        Ok(Response::new(proto::CapabilityResponse {
            supported_models: vec![
                model("openconfig-interfaces", "2.4.1"),
                model("openconfig-if-ethernet", "2.6.2"),
                model("openconfig-p4rt", "0.1.0"),
            ],
            supported_encodings: vec![
                proto::Encoding::Json as i32,
                proto::Encoding::JsonIetf as i32,
                proto::Encoding::Proto as i32,
            ],
            g_nmi_version: GNMI_VERSION.into(),
        }))
    }

    async fn get(&self, req: Request<proto::GetRequest>) -> Result<Response<proto::GetResponse>, Status> {
        let r = req.into_inner();
        let enc = Encoding::from_request(r.encoding).map_err(Status::unimplemented)?;
        let paths: Vec<Option<&proto::Path>> =
            if r.path.is_empty() { vec![None] } else { r.path.iter().map(Some).collect() };
        let mut pats = Vec::with_capacity(paths.len());
        for p in paths {
            let pat = tree::pattern(r.prefix.as_ref(), p).map_err(Status::invalid_argument)?;
            if !pat.in_schema() {
                return Err(not_in_schema(&pat));
            }
            pats.push(pat);
        }
        let (prefix, skip) = answer_prefix(r.prefix.as_ref())?;
        let wanted = |c: Class| match proto::get_request::DataType::try_from(r.r#type) {
            Ok(proto::get_request::DataType::Config) => c == Class::Config,
            Ok(proto::get_request::DataType::State) => c != Class::Config,
            Ok(proto::get_request::DataType::Operational) => c == Class::Operational,
            _ => true,
        };
        let ports = snapshot(&self.inner, true).await?;
        let leaves: Vec<Leaf> = tree::leaves(&ports).into_iter().filter(|l| wanted(l.class)).collect();
        let timestamp = now_ns();
        let mut notification = Vec::with_capacity(pats.len());
        for pat in &pats {
            let update = updates_for(pat, &leaves, enc, skip);
            if update.is_empty() && pat.is_concrete() {
                return Err(Status::not_found(format!("no data at {}", tree::render_pattern(pat))));
            }
            notification.push(proto::Notification { timestamp, prefix: prefix.clone(), update, ..Default::default() });
        }
        Ok(Response::new(proto::GetResponse { notification }))
    }

    async fn set(&self, req: Request<proto::SetRequest>) -> Result<Response<proto::SetResponse>, Status> {
        use proto::update_result::Operation;
        let r = req.into_inner();
        let mut ops = Vec::new();
        let mut results = Vec::new();
        for d in &r.delete {
            ops.push(SetOp::Delete(d));
            results.push((Some(d.clone()), Operation::Delete));
        }
        for u in &r.replace {
            ops.push(SetOp::Replace(u));
            results.push((u.path.clone(), Operation::Replace));
        }
        for u in &r.update {
            ops.push(SetOp::Update(u));
            results.push((u.path.clone(), Operation::Update));
        }
        let ports = snapshot(&self.inner, true).await?;
        let changes = tree::plan_set(r.prefix.as_ref(), &ops, &ports).map_err(|(c, m)| Status::new(c, m))?;
        let inner = self.inner.clone();
        let before: HashMap<String, bool> = ports.iter().map(|p| (p.name.clone(), p.admin_up)).collect();
        let applied = tokio::task::spawn_blocking(move || {
            // One transaction: a change that fails undoes the ones before it.
            let mut done: Vec<&str> = Vec::new();
            for c in &changes {
                let tree::Change::Enable { name, up } = c;
                if let Err(e) = inner.ports.set_enabled(name, *up) {
                    for n in done.iter().rev() {
                        let _ = inner.ports.set_enabled(n, before.get(*n).copied().unwrap_or(true));
                    }
                    inner.forget();
                    return Err(Status::failed_precondition(format!("interface {name}: {e}")));
                }
                done.push(name);
            }
            inner.forget();
            Ok(())
        })
        .await
        .map_err(|e| Status::internal(format!("set: {e}")))?;
        applied?;
        Ok(Response::new(proto::SetResponse {
            prefix: r.prefix.clone(),
            response: results.into_iter().map(|(path, op)| proto::UpdateResult { path, op: op as i32 }).collect(),
            timestamp: now_ns(),
        }))
    }

    type SubscribeStream = SubscribeStream;

    async fn subscribe(
        &self,
        req: Request<Streaming<proto::SubscribeRequest>>,
    ) -> Result<Response<SubscribeStream>, Status> {
        let mut inbound = req.into_inner();
        let first = inbound
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("the stream ended before a subscription list"))?;
        let list = match first.request {
            Some(SubReq::Subscribe(l)) => l,
            Some(SubReq::Poll(_)) => return Err(Status::invalid_argument("a poll before the subscription list")),
            Some(SubReq::Aliases(_)) => return Err(Status::unimplemented("aliases are not supported")),
            None => return Err(Status::invalid_argument("a SubscribeRequest without a subscription list")),
        };
        let plan = Plan::new(&list)?;
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(self.inner.clone(), plan, inbound, tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// How one subscription sends its values.
#[derive(Debug, Clone, Copy)]
enum How {
    OnChange,
    Sample {
        every: Duration,
        suppress: bool,
        heartbeat: Option<Duration>,
    },
    /// Counters sampled, everything else on change.
    TargetDefined,
}

struct Sub {
    pat: Pattern,
    how: How,
    /// What was last sent, by path.
    sent: HashMap<Vec<Elem>, Scalar>,
    next_sample: Instant,
    last_full: Instant,
}

/// A subscription list, checked.
struct Plan {
    mode: ListMode,
    updates_only: bool,
    prefix: Option<proto::Path>,
    skip: usize,
    subs: Vec<Sub>,
}

impl Plan {
    fn new(list: &proto::SubscriptionList) -> Result<Plan, Status> {
        let mode = ListMode::try_from(list.mode).map_err(|_| Status::invalid_argument("unknown subscription mode"))?;
        // The encoding is checked; values are typed scalars whatever it is.
        Encoding::from_request(list.encoding).map_err(Status::unimplemented)?;
        if list.use_aliases {
            return Err(Status::unimplemented("aliases are not supported"));
        }
        if list.subscription.is_empty() {
            return Err(Status::invalid_argument("a subscription list without subscriptions"));
        }
        let (prefix, skip) = answer_prefix(list.prefix.as_ref())?;
        let now = Instant::now();
        let mut subs = Vec::with_capacity(list.subscription.len());
        for s in &list.subscription {
            let pat = tree::pattern(list.prefix.as_ref(), s.path.as_ref()).map_err(Status::invalid_argument)?;
            if !pat.in_schema() {
                return Err(not_in_schema(&pat));
            }
            let how = match proto::SubscriptionMode::try_from(s.mode) {
                Ok(proto::SubscriptionMode::OnChange) => How::OnChange,
                Ok(proto::SubscriptionMode::Sample) => How::Sample {
                    // Zero asks for the shortest interval; none is shorter than the tick.
                    every: Duration::from_nanos(s.sample_interval).max(TICK),
                    suppress: s.suppress_redundant,
                    heartbeat: (s.heartbeat_interval > 0).then(|| Duration::from_nanos(s.heartbeat_interval).max(TICK)),
                },
                Ok(proto::SubscriptionMode::TargetDefined) => How::TargetDefined,
                Err(_) => return Err(Status::invalid_argument(format!("unknown subscription mode {}", s.mode))),
            };
            subs.push(Sub { pat, how, sent: HashMap::new(), next_sample: now, last_full: now });
        }
        Ok(Plan { mode, updates_only: list.updates_only, prefix, skip, subs })
    }
}

type Tx = mpsc::Sender<Result<proto::SubscribeResponse, Status>>;

/// Sends one response; false when the client is gone.
async fn send(tx: &Tx, r: SubResp) -> bool {
    tx.send(Ok(proto::SubscribeResponse { response: Some(r) })).await.is_ok()
}

async fn send_notification(tx: &Tx, plan: &Plan, update: Vec<proto::Update>, delete: Vec<proto::Path>) -> bool {
    if update.is_empty() && delete.is_empty() {
        return true;
    }
    let n =
        proto::Notification { timestamp: now_ns(), prefix: plan.prefix.clone(), update, delete, ..Default::default() };
    send(tx, SubResp::Update(n)).await
}

/// Every current value of every subscription (ONCE, POLL, a stream's
/// first answer), recorded as sent.
async fn send_all(tx: &Tx, plan: &mut Plan, ports: &[PortState], record_only: bool) -> bool {
    let leaves = tree::leaves(ports);
    for i in 0..plan.subs.len() {
        let sub = &mut plan.subs[i];
        let mine: Vec<&Leaf> = leaves.iter().filter(|l| sub.pat.anchor(&l.path).is_some()).collect();
        sub.sent = mine.iter().map(|l| (l.path.clone(), l.value.clone())).collect();
        let now = Instant::now();
        sub.last_full = now;
        // The values just sent are the first sample.
        sub.next_sample = match sub.how {
            How::Sample { every, .. } => now + every,
            How::TargetDefined => now + TARGET_DEFINED_SAMPLE,
            How::OnChange => now,
        };
        if record_only {
            continue;
        }
        let update = mine.iter().map(|l| leaf_update(l, plan.skip)).collect();
        if !send_notification(tx, plan, update, Vec::new()).await {
            return false;
        }
    }
    true
}

/// What a streaming subscription sends at this tick.
fn due(sub: &mut Sub, leaves: &[Leaf], now: Instant) -> (Vec<Leaf>, Vec<Vec<Elem>>) {
    let mine: Vec<&Leaf> = leaves.iter().filter(|l| sub.pat.anchor(&l.path).is_some()).collect();
    let sent = &sub.sent;
    let changed = |l: &Leaf| sent.get(&l.path) != Some(&l.value);
    let pick: Vec<Leaf> = match sub.how {
        How::OnChange => mine.iter().filter(|l| changed(l)).map(|l| (*l).clone()).collect(),
        How::TargetDefined => {
            let sample = now >= sub.next_sample;
            if sample {
                sub.next_sample = now + TARGET_DEFINED_SAMPLE;
            }
            mine.iter().filter(|l| if l.is_counter() { sample } else { changed(l) }).map(|l| (*l).clone()).collect()
        }
        How::Sample { every, suppress, heartbeat } => {
            if now < sub.next_sample {
                return (Vec::new(), Vec::new());
            }
            sub.next_sample += every;
            if sub.next_sample < now {
                sub.next_sample = now + every;
            }
            let full = !suppress || heartbeat.is_some_and(|h| now.duration_since(sub.last_full) >= h);
            if full {
                sub.last_full = now;
                mine.iter().map(|l| (*l).clone()).collect()
            } else {
                mine.iter().filter(|l| changed(l)).map(|l| (*l).clone()).collect()
            }
        }
    };
    let gone: Vec<Vec<Elem>> = sub.sent.keys().filter(|p| !mine.iter().any(|l| &l.path == *p)).cloned().collect();
    for p in &gone {
        sub.sent.remove(p);
    }
    for l in &pick {
        sub.sent.insert(l.path.clone(), l.value.clone());
    }
    (pick, gone)
}

/// One subscription, from its first answer to its end.
async fn run(inner: Arc<Inner>, mut plan: Plan, mut inbound: Streaming<proto::SubscribeRequest>, tx: Tx) {
    let quiet = plan.updates_only;
    if plan.mode != ListMode::Poll {
        let Ok(ports) = snapshot(&inner, false).await else { return };
        if !send_all(&tx, &mut plan, &ports, quiet).await || !send(&tx, SubResp::SyncResponse(true)).await {
            return;
        }
    }
    match plan.mode {
        // The RPC ends after the sync response.
        ListMode::Once => {}
        // Values are sent for each poll, none before the first.
        ListMode::Poll => loop {
            match inbound.message().await {
                Ok(Some(proto::SubscribeRequest { request: Some(SubReq::Poll(_)) })) => {
                    let Ok(ports) = snapshot(&inner, false).await else { return };
                    if !send_all(&tx, &mut plan, &ports, quiet).await || !send(&tx, SubResp::SyncResponse(true)).await {
                        return;
                    }
                }
                Ok(Some(_)) => {
                    let _ = tx.send(Err(Status::invalid_argument("only polls may follow a POLL subscription"))).await;
                    return;
                }
                Ok(None) | Err(_) => return,
            }
        },
        ListMode::Stream => {
            let mut tick = tokio::time::interval(TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut open = true;
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        let Ok(ports) = snapshot(&inner, false).await else { return };
                        let leaves = tree::leaves(&ports);
                        let now = Instant::now();
                        for i in 0..plan.subs.len() {
                            let (pick, gone) = due(&mut plan.subs[i], &leaves, now);
                            let update = pick.iter().map(|l| leaf_update(l, plan.skip)).collect();
                            let delete = gone.iter().map(|p| relative_path(p, plan.skip)).collect();
                            if !send_notification(&tx, &plan, update, delete).await {
                                return;
                            }
                        }
                    }
                    m = inbound.message(), if open => match m {
                        // A client that half-closes still gets its stream.
                        Ok(None) => open = false,
                        Ok(Some(_)) => {
                            let _ = tx
                                .send(Err(Status::invalid_argument("a STREAM subscription takes no further requests")))
                                .await;
                            return;
                        }
                        Err(_) => return,
                    },
                    _ = tx.closed() => return,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Counters;

    fn port(name: &str, id: u32, up: bool, in_pkts: u64) -> PortState {
        PortState {
            name: name.into(),
            id,
            mac: None,
            admin_up: true,
            oper_up: up,
            last_change: 0,
            counters: Counters { in_pkts, ..Default::default() },
        }
    }

    fn pat(text: &str) -> Pattern {
        tree::pattern(None, Some(&tree::path(text))).unwrap()
    }

    #[test]
    fn on_change_sends_what_changed_and_sample_sends_everything_when_due() {
        let leaves = |up, n| tree::leaves(&[port("a", 1, up, n), port("b", 2, true, 0)]);
        let now = Instant::now();
        let mut on_change = Sub {
            pat: pat("/interfaces/interface/state/oper-status"),
            how: How::OnChange,
            sent: HashMap::new(),
            next_sample: now,
            last_full: now,
        };
        let (first, _) = due(&mut on_change, &leaves(true, 0), now);
        assert_eq!(first.len(), 2, "both interfaces at first");
        assert!(due(&mut on_change, &leaves(true, 5), now).0.is_empty(), "a counter is not an oper-status change");
        let (down, _) = due(&mut on_change, &leaves(false, 5), now);
        assert_eq!(down.len(), 1);
        assert_eq!(down[0].value, Scalar::Str("DOWN".into()));
        let (_, gone) = due(&mut on_change, &tree::leaves(&[port("b", 2, true, 0)]), now);
        assert_eq!(gone.len(), 1, "an interface that went away is deleted");

        let every = Duration::from_secs(1);
        let mut sample = Sub {
            pat: pat("/interfaces/interface[name=a]/state/counters/in-pkts"),
            how: How::Sample { every, suppress: true, heartbeat: None },
            sent: HashMap::new(),
            next_sample: now,
            last_full: now,
        };
        assert_eq!(due(&mut sample, &leaves(true, 1), now).0.len(), 1);
        assert!(due(&mut sample, &leaves(true, 2), now).0.is_empty(), "not due before its interval");
        assert_eq!(due(&mut sample, &leaves(true, 2), now + every).0.len(), 1);
        assert!(due(&mut sample, &leaves(true, 2), now + every * 2).0.is_empty(), "suppressed: unchanged");
    }

    #[test]
    fn get_groups_leaves_into_json_subtrees_or_sends_them_typed() {
        let leaves = tree::leaves(&[port("a", 1, true, 3), port("b", 2, true, 4)]);
        let p = pat("/interfaces/interface[name=*]/state/counters");
        let json = updates_for(&p, &leaves, Encoding::JsonIetf, 0);
        assert_eq!(json.len(), 2, "one subtree per interface");
        let typed = updates_for(&p, &leaves, Encoding::Proto, 0);
        assert_eq!(typed.len(), 2 * tree::COUNTERS.len());
        let leaf = updates_for(&pat("/interfaces/interface[name=b]/state/id"), &leaves, Encoding::Json, 0);
        assert_eq!(leaf[0].val.as_ref().unwrap().value, Some(proto::typed_value::Value::UintVal(2)));
        assert_eq!(tree::render(&leaf[0].path.as_ref().unwrap().elem), "/interfaces/interface[name=b]/state/id");
        let relative = updates_for(&pat("/interfaces/interface[name=b]/state/id"), &leaves, Encoding::Proto, 2);
        assert_eq!(tree::render(&relative[0].path.as_ref().unwrap().elem), "/state/id");
    }
}
