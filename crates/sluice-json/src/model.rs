//! The typed model of a BMv2 JSON program and its parser from JSON.
//!
//! The model mirrors the JSON closely (names stay names); every element that
//! the compiler may need to blame keeps its JSON `path`.

use crate::reader::At;
use crate::LoadError;

/// A whole BMv2 JSON program.
#[derive(Debug, Clone, Default)]
pub struct Program {
    pub header_types: Vec<HeaderType>,
    pub headers: Vec<HeaderInstance>,
    pub header_stacks: Vec<HeaderStack>,
    pub header_union_types: Vec<HeaderUnionType>,
    pub header_unions: Vec<HeaderUnion>,
    pub header_union_stacks: Vec<HeaderUnionStack>,
    /// `(name, value)` pairs of the `error` enum.
    pub errors: Vec<(String, u64)>,
    pub enums: Vec<EnumDecl>,
    pub field_lists: Vec<FieldList>,
    pub learn_lists: Vec<FieldList>,
    pub parsers: Vec<Parser>,
    pub parse_vsets: Vec<ParseVset>,
    pub deparsers: Vec<Deparser>,
    pub meter_arrays: Vec<MeterArray>,
    pub counter_arrays: Vec<CounterArray>,
    pub register_arrays: Vec<RegisterArray>,
    pub calculations: Vec<Calculation>,
    pub checksums: Vec<Checksum>,
    pub actions: Vec<Action>,
    pub pipelines: Vec<Pipeline>,
    pub extern_instances: Vec<ExternInstance>,
    /// `(alias, (header, field))`: old intrinsic names mapped to real fields.
    pub field_aliases: Vec<(String, (String, String))>,
    /// The P4 source file name, when p4c recorded it.
    pub program: Option<String>,
}

/// Width of a header field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldWidth {
    /// A fixed number of bits.
    Bits(u32),
    /// A `varbit`; its maximum comes from the header type's `max_length`.
    Varbit,
}

/// One field of a header type.
#[derive(Debug, Clone)]
pub struct FieldDef {
    pub name: String,
    pub width: FieldWidth,
    /// `int<N>` rather than `bit<N>`.
    pub signed: bool,
    /// Only used by p4c for `bool` fields that are saturating; kept for completeness.
    pub saturating: bool,
}

/// A header (or metadata struct) type.
#[derive(Debug, Clone)]
pub struct HeaderType {
    pub name: String,
    pub id: u64,
    pub fields: Vec<FieldDef>,
    /// Maximum length in bytes, present when the type has a varbit field.
    pub max_length: Option<u32>,
    pub path: String,
}

/// A header instance.
#[derive(Debug, Clone)]
pub struct HeaderInstance {
    pub name: String,
    pub id: u64,
    pub header_type: String,
    /// Metadata instances are always valid and are not deparsed.
    pub metadata: bool,
    pub path: String,
}

/// A header stack: a fixed array of header instances.
#[derive(Debug, Clone)]
pub struct HeaderStack {
    pub name: String,
    pub id: u64,
    pub header_type: String,
    pub size: u32,
    pub header_ids: Vec<u64>,
    pub path: String,
}

/// A header union type: named members, each of a header type.
#[derive(Debug, Clone)]
pub struct HeaderUnionType {
    pub name: String,
    pub id: u64,
    /// `(member name, header type name)`.
    pub headers: Vec<(String, String)>,
}

/// A header union instance: its member header instances by id.
#[derive(Debug, Clone)]
pub struct HeaderUnion {
    pub name: String,
    pub id: u64,
    pub union_type: String,
    pub header_ids: Vec<u64>,
}

/// A stack of header unions.
#[derive(Debug, Clone)]
pub struct HeaderUnionStack {
    pub name: String,
    pub id: u64,
    pub union_type: String,
    pub size: u32,
    pub header_union_ids: Vec<u64>,
}

/// A (serializable) enum declaration.
#[derive(Debug, Clone)]
pub struct EnumDecl {
    pub name: String,
    pub entries: Vec<(String, u64)>,
}

/// A named list of fields (clone/resubmit/recirculate preservation, digests).
#[derive(Debug, Clone)]
pub struct FieldList {
    pub name: String,
    pub id: u64,
    pub elements: Vec<Expr>,
    pub path: String,
}

/// A parser.
#[derive(Debug, Clone)]
pub struct Parser {
    pub name: String,
    /// The JSON `id` (bmv2's event stream names the parser by it).
    pub id: u64,
    pub init_state: String,
    pub states: Vec<ParseState>,
    pub path: String,
}

/// One parser state.
#[derive(Debug, Clone)]
pub struct ParseState {
    pub name: String,
    pub ops: Vec<ParserOp>,
    pub key: Vec<Expr>,
    pub transitions: Vec<Transition>,
    pub path: String,
}

/// A parser operation.
#[derive(Debug, Clone)]
pub enum ParserOpKind {
    /// Extract into a header instance.
    Extract(HeaderRef),
    /// Extract a header with a varbit field of run-time length (in bits).
    ExtractVl(HeaderRef, Expr),
    /// `dst = src`.
    Set(Expr, Expr),
    /// `verify(cond, error)`.
    Verify(Expr, Expr),
    /// Skip bits.
    Advance(Expr),
    /// An action primitive run inside the parser.
    Primitive(Primitive),
}

/// A parser operation with its JSON path.
#[derive(Debug, Clone)]
pub struct ParserOp {
    pub kind: ParserOpKind,
    pub path: String,
}

/// Where an `extract` puts its header.
#[derive(Debug, Clone)]
pub enum HeaderRef {
    /// A plain header instance.
    Header(String),
    /// The next element of a header stack.
    StackNext(String),
    /// The next element of a union stack, member `member`.
    UnionStackNext(String, String),
}

/// What a transition compares the key with.
#[derive(Debug, Clone)]
pub enum TransitionValue {
    Default,
    /// Value (and optional mask), as big-endian bytes of the whole key.
    Value {
        value: Vec<u8>,
        mask: Option<Vec<u8>>,
    },
    /// A parser value set.
    Vset(String),
}

/// One transition of a parser state.
#[derive(Debug, Clone)]
pub struct Transition {
    pub value: TransitionValue,
    /// `None` means accept.
    pub next_state: Option<String>,
}

/// A parser value set.
#[derive(Debug, Clone)]
pub struct ParseVset {
    pub name: String,
    pub id: u64,
    pub compressed_bitwidth: u32,
    pub max_size: u32,
}

/// A deparser: the emit order of headers.
#[derive(Debug, Clone)]
pub struct Deparser {
    pub name: String,
    pub id: u64,
    pub order: Vec<String>,
    pub primitives: Vec<Primitive>,
    pub path: String,
}

/// A meter array.
#[derive(Debug, Clone)]
pub struct MeterArray {
    pub name: String,
    pub id: u64,
    pub is_direct: bool,
    pub size: u64,
    pub rate_count: u32,
    /// Meters `packets` (true) or `bytes` (false).
    pub packets: bool,
    pub binding: Option<String>,
    pub result_target: Option<(String, String)>,
    pub path: String,
}

/// A counter array.
#[derive(Debug, Clone)]
pub struct CounterArray {
    pub name: String,
    pub id: u64,
    pub is_direct: bool,
    pub size: u64,
    pub binding: Option<String>,
    pub path: String,
}

/// A register array.
#[derive(Debug, Clone)]
pub struct RegisterArray {
    pub name: String,
    pub id: u64,
    pub size: u64,
    pub bitwidth: u32,
    pub path: String,
}

/// A named hash/checksum calculation over a list of fields.
#[derive(Debug, Clone)]
pub struct Calculation {
    pub name: String,
    pub id: u64,
    pub algo: String,
    pub input: Vec<CalcInput>,
    pub path: String,
}

/// One input of a calculation.
#[derive(Debug, Clone)]
pub struct CalcInput {
    pub expr: Expr,
    /// The width a `hexstr` constant is packed with (its required `bitwidth` key).
    pub bitwidth: Option<u32>,
    pub path: String,
}

/// A verify/update checksum bound to a target field.
#[derive(Debug, Clone)]
pub struct Checksum {
    pub name: String,
    pub id: u64,
    pub target: (String, String),
    /// `generic` or `ipv4`.
    pub kind: String,
    pub calculation: String,
    pub verify: bool,
    pub update: bool,
    pub if_cond: Option<Expr>,
    pub path: String,
}

/// A runtime parameter of an action.
#[derive(Debug, Clone)]
pub struct RuntimeParam {
    pub name: String,
    pub bitwidth: u32,
}

/// An action.
#[derive(Debug, Clone)]
pub struct Action {
    pub name: String,
    pub id: u64,
    pub runtime_data: Vec<RuntimeParam>,
    pub primitives: Vec<Primitive>,
    pub path: String,
}

/// One primitive call inside an action (or parser/deparser).
#[derive(Debug, Clone)]
pub struct Primitive {
    pub op: String,
    pub params: Vec<Expr>,
    pub path: String,
}

/// An expression or primitive/parser parameter, mirroring the JSON `{type, value}` form.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Field(String, String),
    /// A constant: sign and big-endian magnitude.
    Hex {
        negative: bool,
        magnitude: Vec<u8>,
    },
    Bool(bool),
    Header(String),
    HeaderStack(String),
    HeaderUnion(String),
    HeaderUnionStack(String),
    /// `(stack, field)`: field of the last extracted element of a stack.
    StackField(String, String),
    RuntimeData(u32),
    Local(u32),
    /// `(offset bits, width bits)` ahead of the parser cursor.
    Lookahead(u32, u32),
    /// A `(union stack, member)` pair as used by `extract`.
    UnionStack(String, String),
    /// `(union stack, member, field)`: field of a member of the last
    /// extracted union of a union stack (bmv2 allows it in parser
    /// transition keys only).
    UnionStackField(String, String, String),
    Str(String),
    /// A reference to a named object: calculation, counter_array, register_array,
    /// meter_array, extern, field_list.
    Object {
        kind: String,
        name: String,
    },
    /// An operation.
    Op {
        op: String,
        left: Option<Box<Expr>>,
        right: Option<Box<Expr>>,
    },
    /// The unparsed packet payload (calculation inputs of `*_with_payload`).
    Payload,
    /// A field list written in place: its elements, in order.
    List(Vec<Expr>),
    /// `cond ? left : right`.
    Cond {
        cond: Box<Expr>,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    /// `access_field(header expression, field offset)`.
    AccessField(Box<Expr>, u32),
}

/// A key element of a match table.
#[derive(Debug, Clone)]
pub struct TableKey {
    pub match_type: String,
    pub name: String,
    pub target: Vec<String>,
    pub mask: Option<Vec<u8>>,
    pub path: String,
}

/// An action call with its data (default entries, const entries).
#[derive(Debug, Clone)]
pub struct ActionEntry {
    pub action_id: u64,
    /// Parameter values as big-endian byte strings.
    pub action_data: Vec<Vec<u8>>,
}

/// The default entry of a table.
#[derive(Debug, Clone)]
pub struct DefaultEntry {
    pub entry: ActionEntry,
    /// The default action cannot be changed.
    pub action_const: bool,
    /// The default action's data cannot be changed.
    pub action_entry_const: bool,
}

/// One match field value of a const entry.
#[derive(Debug, Clone)]
pub enum EntryMatch {
    Exact(Vec<u8>),
    Lpm(Vec<u8>, u32),
    Ternary(Vec<u8>, Vec<u8>),
    Range(Vec<u8>, Vec<u8>),
    Valid(bool),
    /// Optional: exact value or wildcard (`None`).
    Optional(Option<Vec<u8>>),
}

/// A const entry compiled into the program.
#[derive(Debug, Clone)]
pub struct ConstEntry {
    pub match_key: Vec<EntryMatch>,
    pub action: ActionEntry,
    pub priority: Option<i64>,
    pub path: String,
}

/// A match table.
#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub id: u64,
    pub key: Vec<TableKey>,
    pub match_type: String,
    /// `simple`, `indirect` or `indirect_ws`.
    pub kind: String,
    pub action_profile: Option<String>,
    /// Selector declared on the table itself (older bmv2 JSON): `(algo, input)`.
    pub selector: Option<(String, Vec<Expr>)>,
    pub max_size: u64,
    pub with_counters: bool,
    pub support_timeout: bool,
    pub direct_meters: Option<String>,
    pub action_ids: Vec<u64>,
    pub actions: Vec<String>,
    pub base_default_next: Option<String>,
    /// `(action name or "__HIT__"/"__MISS__", next node)`.
    pub next_tables: Vec<(String, Option<String>)>,
    pub default_entry: Option<DefaultEntry>,
    pub entries: Vec<ConstEntry>,
    pub path: String,
}

/// An action profile (with an optional selector).
#[derive(Debug, Clone)]
pub struct ActionProfile {
    pub name: String,
    pub id: u64,
    pub max_size: u64,
    /// `(algo, input)` of the selector.
    pub selector: Option<(String, Vec<Expr>)>,
    pub path: String,
}

/// A conditional node of a pipeline.
#[derive(Debug, Clone)]
pub struct Conditional {
    pub name: String,
    pub id: u64,
    /// The P4 source of the condition (`source_info.source_fragment`), if given.
    pub source: Option<String>,
    pub expression: Expr,
    pub true_next: Option<String>,
    pub false_next: Option<String>,
    pub path: String,
}

/// A control pipeline (`ingress` or `egress`).
#[derive(Debug, Clone)]
pub struct Pipeline {
    pub name: String,
    pub id: u64,
    pub init_table: Option<String>,
    pub tables: Vec<Table>,
    pub action_profiles: Vec<ActionProfile>,
    pub conditionals: Vec<Conditional>,
    pub path: String,
}

/// An extern instance (PSA-style externs used from v1model programs).
#[derive(Debug, Clone)]
pub struct ExternInstance {
    pub name: String,
    pub id: u64,
    pub kind: String,
    /// `(name, type, value)` of each attribute.
    pub attributes: Vec<(String, String, String)>,
    pub path: String,
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

/// Parses a hex string like `0x0800`, `-0x1` or `0x` into sign and magnitude bytes.
pub fn parse_hexstr(s: &str) -> Option<(bool, Vec<u8>)> {
    let (neg, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    // Older bmv2 JSON sometimes writes bare hex digits without the 0x prefix.
    let digits = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")).unwrap_or(rest);
    if !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let digits: String = if digits.len() % 2 == 1 { format!("0{digits}") } else { digits.to_string() };
    let mut out = Vec::with_capacity(digits.len() / 2);
    for i in (0..digits.len()).step_by(2) {
        out.push(u8::from_str_radix(&digits[i..i + 2], 16).ok()?);
    }
    Some((neg, out))
}

fn hexbytes(a: &At) -> Result<Vec<u8>, LoadError> {
    let s = a.str()?;
    match parse_hexstr(s) {
        Some((false, b)) => Ok(b),
        _ => Err(a.err(format!("expected a non-negative hex string like \"0x0a\", got \"{s}\""))),
    }
}

fn name_id(a: &At) -> Result<(String, u64), LoadError> {
    Ok((a.str_of("name")?, a.opt("id").map(|i| i.u64()).transpose()?.unwrap_or(0)))
}

fn str_pair(a: &At) -> Result<(String, String), LoadError> {
    let items = a.arr()?;
    if items.len() != 2 {
        return Err(a.err("expected a [header, field] pair"));
    }
    Ok((items[0].str()?.to_string(), items[1].str()?.to_string()))
}

fn opt_str(a: &At, key: &str) -> Result<Option<String>, LoadError> {
    a.opt(key).map(|v| v.str().map(str::to_string)).transpose()
}

/// Parses a `{type, value}` parameter or expression.
pub fn parse_expr(a: &At) -> Result<Expr, LoadError> {
    let ty = a.get("type")?.str()?;
    if ty == "payload" {
        return Ok(Expr::Payload);
    }
    let val = a.get("value")?;
    Ok(match ty {
        "field" => {
            let (h, f) = str_pair(&val)?;
            Expr::Field(h, f)
        }
        "hexstr" => {
            let s = val.str()?;
            let (negative, magnitude) = parse_hexstr(s).ok_or_else(|| val.err(format!("bad hex string \"{s}\"")))?;
            Expr::Hex { negative, magnitude }
        }
        "bool" => Expr::Bool(val.bool()?),
        "header" | "regular" => Expr::Header(val.str()?.to_string()),
        "header_stack" | "stack" => Expr::HeaderStack(val.str()?.to_string()),
        "header_union" => Expr::HeaderUnion(val.str()?.to_string()),
        "header_union_stack" => Expr::HeaderUnionStack(val.str()?.to_string()),
        "union_stack" => {
            let (s, m) = str_pair(&val)?;
            Expr::UnionStack(s, m)
        }
        "stack_field" => {
            let (s, f) = str_pair(&val)?;
            Expr::StackField(s, f)
        }
        "union_stack_field" => {
            let items = val.arr()?;
            if items.len() != 3 {
                return Err(val.err("expected a [union stack, member, field] triple"));
            }
            Expr::UnionStackField(items[0].str()?.to_string(), items[1].str()?.to_string(), items[2].str()?.to_string())
        }
        "runtime_data" => Expr::RuntimeData(val.u32()?),
        "local" => Expr::Local(val.u32()?),
        "lookahead" => {
            let items = val.arr()?;
            if items.len() != 2 {
                return Err(val.err("expected [offset, width]"));
            }
            Expr::Lookahead(items[0].u32()?, items[1].u32()?)
        }
        "string" => Expr::Str(val.str()?.to_string()),
        // A field list written in place (PSA externs' arguments), and
        // log_msg's list of arguments.
        "field_list" | "parameters_vector" if val.v.is_array() => {
            Expr::List(val.arr()?.iter().map(parse_expr).collect::<Result<_, _>>()?)
        }
        "calculation" | "counter_array" | "register_array" | "meter_array" | "extern" | "field_list" | "parse_vset" => {
            Expr::Object { kind: ty.to_string(), name: obj_name(&val)? }
        }
        "expression" => parse_expression_value(&val)?,
        other => return Err(a.err(format!("expression type \"{other}\" is not supported"))),
    })
}

fn obj_name(v: &At) -> Result<String, LoadError> {
    match v.v {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        _ => Err(v.err("expected an object name")),
    }
}

/// The `value` of an `expression`: either an `{op, left, right}` object or a nested `{type, value}`.
fn parse_expression_value(v: &At) -> Result<Expr, LoadError> {
    if v.opt("op").is_none() {
        return parse_expr(v);
    }
    let op = v.str_of("op")?;
    let side = |k: &str| -> Result<Option<Box<Expr>>, LoadError> {
        match v.opt(k) {
            None => Ok(None),
            Some(x) => Ok(Some(Box::new(parse_expr(&x)?))),
        }
    };
    match op.as_str() {
        "?" => {
            let cond = v.get("cond")?;
            Ok(Expr::Cond {
                cond: Box::new(parse_expr(&cond)?),
                left: Box::new(parse_expr(&v.get("left")?)?),
                right: Box::new(parse_expr(&v.get("right")?)?),
            })
        }
        "access_field" => {
            let l = parse_expr(&v.get("left")?)?;
            let r = v.get("right")?.u32()?;
            Ok(Expr::AccessField(Box::new(l), r))
        }
        _ => Ok(Expr::Op { op, left: side("left")?, right: side("right")? }),
    }
}

fn parse_primitive(a: &At) -> Result<Primitive, LoadError> {
    let op = a.str_of("op")?;
    let mut params = Vec::new();
    for p in a.opt_arr("parameters")? {
        params.push(parse_expr(&p)?);
    }
    Ok(Primitive { op, params, path: a.path.clone() })
}

fn parse_header_type(a: &At) -> Result<HeaderType, LoadError> {
    let (name, id) = name_id(a)?;
    let mut fields = Vec::new();
    for f in a.get("fields")?.arr()? {
        let items = f.arr()?;
        if items.len() < 2 {
            return Err(f.err("expected [name, width, signed]"));
        }
        let fname = items[0].str()?.to_string();
        let width = match items[1].v {
            serde_json::Value::String(s) if s == "*" => FieldWidth::Varbit,
            _ => {
                let w = items[1].u64()?;
                if w == 0 || w > u64::from(crate::reader::MAX_WIDTH) {
                    return Err(items[1].err(format!("field width {w} is out of range")));
                }
                FieldWidth::Bits(w as u32)
            }
        };
        // p4c writes the signedness as a boolean, some versions as 0/1.
        let signed = match items.get(2) {
            Some(s) if s.v.is_u64() => s.u64()? != 0,
            Some(s) => s.bool()?,
            None => false,
        };
        let saturating = match items.get(3) {
            Some(s) => s.bool()?,
            None => false,
        };
        fields.push(FieldDef { name: fname, width, signed, saturating });
    }
    let max_length = match a.opt("max_length") {
        Some(m) => {
            let v = m.u64()?;
            if v > 65_535 {
                return Err(m.err(format!("max_length {v} is out of range (at most 65535 bytes)")));
            }
            Some(v as u32)
        }
        None => None,
    };
    if fields.iter().any(|f| f.width == FieldWidth::Varbit) && max_length.is_none() {
        return Err(a.err("header type has a varbit field but no max_length"));
    }
    Ok(HeaderType { name, id, fields, max_length, path: a.path.clone() })
}

fn parse_field_list(a: &At) -> Result<FieldList, LoadError> {
    let (name, id) = name_id(a)?;
    let mut elements = Vec::new();
    for e in a.opt_arr("elements")? {
        elements.push(parse_expr(&e)?);
    }
    Ok(FieldList { name, id, elements, path: a.path.clone() })
}

fn parse_parser(a: &At) -> Result<Parser, LoadError> {
    let (name, id) = name_id(a)?;
    let init_state = a.str_of("init_state")?;
    let mut states = Vec::new();
    for s in a.get("parse_states")?.arr()? {
        let sname = s.str_of("name")?;
        let mut ops = Vec::new();
        for o in s.opt_arr("parser_ops")? {
            ops.push(parse_parser_op(&o)?);
        }
        let mut key = Vec::new();
        for k in s.opt_arr("transition_key")? {
            key.push(parse_expr(&k)?);
        }
        let mut transitions = Vec::new();
        for t in s.opt_arr("transitions")? {
            let ty = match t.opt("type") {
                Some(x) => x.str()?.to_string(),
                None => {
                    // Older bmv2 JSON: no type, value "default" or a hex string.
                    match t.opt("value") {
                        Some(v) if v.str()? == "default" => "default".into(),
                        _ => "hexstr".into(),
                    }
                }
            };
            let value = match ty.as_str() {
                "default" => TransitionValue::Default,
                "hexstr" => {
                    let value = hexbytes(&t.get("value")?)?;
                    let mask = t.opt("mask").map(|m| hexbytes(&m)).transpose()?;
                    TransitionValue::Value { value, mask }
                }
                "parse_vset" => TransitionValue::Vset(t.get("value")?.str()?.to_string()),
                other => return Err(t.get("type")?.err(format!("transition type \"{other}\" is not supported"))),
            };
            let next_state = opt_str(&t, "next_state")?;
            transitions.push(Transition { value, next_state });
        }
        states.push(ParseState { name: sname, ops, key, transitions, path: s.path.clone() });
    }
    Ok(Parser { name, id, init_state, states, path: a.path.clone() })
}

fn parse_parser_op(o: &At) -> Result<ParserOp, LoadError> {
    let op = o.str_of("op")?;
    let params = o.opt_arr("parameters")?;
    let need = |n: usize| -> Result<(), LoadError> {
        if params.len() != n {
            Err(o.err(format!("parser op \"{op}\" takes {n} parameters, got {}", params.len())))
        } else {
            Ok(())
        }
    };
    let header_ref = |p: &At| -> Result<HeaderRef, LoadError> {
        match parse_expr(p)? {
            Expr::Header(h) => Ok(HeaderRef::Header(h)),
            Expr::HeaderStack(s) => Ok(HeaderRef::StackNext(s)),
            Expr::UnionStack(s, m) => Ok(HeaderRef::UnionStackNext(s, m)),
            _ => Err(p.err("expected a header, stack or union_stack to extract into")),
        }
    };
    let kind = match op.as_str() {
        "extract" => {
            need(1)?;
            ParserOpKind::Extract(header_ref(&params[0])?)
        }
        "extract_VL" => {
            need(2)?;
            ParserOpKind::ExtractVl(header_ref(&params[0])?, parse_expr(&params[1])?)
        }
        "set" => {
            need(2)?;
            ParserOpKind::Set(parse_expr(&params[0])?, parse_expr(&params[1])?)
        }
        "verify" => {
            need(2)?;
            ParserOpKind::Verify(parse_expr(&params[0])?, parse_expr(&params[1])?)
        }
        "advance" => {
            need(1)?;
            ParserOpKind::Advance(parse_expr(&params[0])?)
        }
        "primitive" => {
            need(1)?;
            ParserOpKind::Primitive(parse_primitive(&params[0])?)
        }
        other => return Err(o.err(format!("parser op \"{other}\" is not supported"))),
    };
    Ok(ParserOp { kind, path: o.path.clone() })
}

fn parse_action_entry(a: &At) -> Result<ActionEntry, LoadError> {
    let action_id = a.u64_of("action_id")?;
    let mut action_data = Vec::new();
    for d in a.opt_arr("action_data")? {
        action_data.push(hexbytes(&d)?);
    }
    Ok(ActionEntry { action_id, action_data })
}

fn parse_table(t: &At) -> Result<Table, LoadError> {
    let (name, id) = name_id(t)?;
    let mut key = Vec::new();
    for k in t.opt_arr("key")? {
        let match_type = k.str_of("match_type")?;
        let kname = opt_str(&k, "name")?.unwrap_or_default();
        let target = match k.get("target")?.v {
            serde_json::Value::Array(_) => {
                k.get("target")?.arr()?.iter().map(|x| x.str().map(str::to_string)).collect::<Result<_, _>>()?
            }
            serde_json::Value::String(s) => vec![s.clone()],
            _ => return Err(k.get("target")?.err("expected a field reference")),
        };
        let mask = k.opt("mask").map(|m| hexbytes(&m)).transpose()?;
        key.push(TableKey { match_type, name: kname, target, mask, path: k.path.clone() });
    }
    let mut next_tables = Vec::new();
    if let Some(n) = t.opt("next_tables") {
        if let serde_json::Value::Object(m) = n.v {
            for (k, v) in m {
                let next = match v {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) => Some(s.clone()),
                    _ => return Err(n.err(format!("next_tables.{k}: expected a node name or null"))),
                };
                next_tables.push((k.clone(), next));
            }
        } else {
            return Err(n.err("expected an object"));
        }
    }
    let default_entry = match t.opt("default_entry") {
        Some(d) => Some(DefaultEntry {
            entry: parse_action_entry(&d)?,
            action_const: d.bool_or("action_const", false)?,
            action_entry_const: d.bool_or("action_entry_const", false)?,
        }),
        None => None,
    };
    let mut entries = Vec::new();
    for e in t.opt_arr("entries")? {
        let mut match_key = Vec::new();
        for m in e.get("match_key")?.arr()? {
            let mt = m.str_of("match_type")?;
            let km = match mt.as_str() {
                "exact" => EntryMatch::Exact(hexbytes(&m.get("key")?)?),
                "lpm" => EntryMatch::Lpm(hexbytes(&m.get("key")?)?, m.u32_of("prefix_length")?),
                "ternary" => EntryMatch::Ternary(hexbytes(&m.get("key")?)?, hexbytes(&m.get("mask")?)?),
                "range" => EntryMatch::Range(hexbytes(&m.get("start")?)?, hexbytes(&m.get("end")?)?),
                "valid" => EntryMatch::Valid(m.get("key")?.bool()?),
                "optional" => {
                    let v = hexbytes(&m.get("key")?)?;
                    let mask = m.opt("mask").map(|x| hexbytes(&x)).transpose()?;
                    let wildcard = mask.is_some_and(|mk| mk.iter().all(|b| *b == 0));
                    EntryMatch::Optional(if wildcard { None } else { Some(v) })
                }
                other => return Err(m.err(format!("match_type \"{other}\" is not supported"))),
            };
            match_key.push(km);
        }
        let action = parse_action_entry(&e.get("action_entry")?)?;
        let priority = e.opt("priority").map(|p| p.i64()).transpose()?;
        entries.push(ConstEntry { match_key, action, priority, path: e.path.clone() });
    }
    let action_ids = match t.opt("action_ids") {
        Some(a) => a.arr()?.iter().map(|x| x.u64()).collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let actions = t.opt_arr("actions")?.iter().map(|x| x.str().map(str::to_string)).collect::<Result<_, _>>()?;
    let kind = t.str_of("type")?;
    let action_profile = opt_str(t, "action_profile")?.or(opt_str(t, "act_prof_name")?);
    let selector = match t.opt("selector") {
        Some(s) => {
            let mut input = Vec::new();
            for i in s.opt_arr("input")? {
                input.push(parse_expr(&i)?);
            }
            Some((s.str_of("algo")?, input))
        }
        None => None,
    };
    Ok(Table {
        selector,
        name,
        id,
        key,
        match_type: t.str_of("match_type")?,
        kind,
        action_profile,
        max_size: t.opt("max_size").map(|m| m.u64()).transpose()?.unwrap_or(1024),
        with_counters: t.bool_or("with_counters", false)?,
        support_timeout: t.bool_or("support_timeout", false)?,
        direct_meters: opt_str(t, "direct_meters")?,
        action_ids,
        actions,
        base_default_next: opt_str(t, "base_default_next")?,
        next_tables,
        default_entry,
        entries,
        path: t.path.clone(),
    })
}

fn parse_pipeline(p: &At) -> Result<Pipeline, LoadError> {
    let (name, id) = name_id(p)?;
    let init_table = opt_str(p, "init_table")?;
    let mut tables = Vec::new();
    for t in p.opt_arr("tables")? {
        tables.push(parse_table(&t)?);
    }
    let mut action_profiles = Vec::new();
    for a in p.opt_arr("action_profiles")? {
        let (aname, id) = name_id(&a)?;
        let selector = match a.opt("selector") {
            Some(s) => {
                let algo = s.str_of("algo")?;
                let mut input = Vec::new();
                for i in s.opt_arr("input")? {
                    input.push(parse_expr(&i)?);
                }
                Some((algo, input))
            }
            None => None,
        };
        action_profiles.push(ActionProfile {
            name: aname,
            id,
            max_size: a.opt("max_size").map(|m| m.u64()).transpose()?.unwrap_or(1024),
            selector,
            path: a.path.clone(),
        });
    }
    let mut conditionals = Vec::new();
    for c in p.opt_arr("conditionals")? {
        let (name, id) = name_id(&c)?;
        let source =
            c.opt("source_info").and_then(|s| s.opt("source_fragment")).and_then(|f| f.str().ok().map(str::to_string));
        conditionals.push(Conditional {
            name,
            id,
            source,
            expression: parse_expr(&c.get("expression")?)?,
            true_next: opt_str(&c, "true_next")?,
            false_next: opt_str(&c, "false_next")?,
            path: c.path.clone(),
        });
    }
    Ok(Pipeline { name, id, init_table, tables, action_profiles, conditionals, path: p.path.clone() })
}

/// Parses a whole program from its JSON root.
pub fn parse_program(root: &At) -> Result<Program, LoadError> {
    if !root.v.is_object() {
        return Err(root.err("the program must be a JSON object"));
    }
    let mut p = Program::default();
    for a in root.opt_arr("header_types")? {
        p.header_types.push(parse_header_type(&a)?);
    }
    for a in root.opt_arr("headers")? {
        let (name, id) = name_id(&a)?;
        p.headers.push(HeaderInstance {
            name,
            id,
            header_type: a.str_of("header_type")?,
            metadata: a.bool_or("metadata", false)?,
            path: a.path.clone(),
        });
    }
    for a in root.opt_arr("header_stacks")? {
        let (name, id) = name_id(&a)?;
        let header_ids: Vec<u64> = a.get("header_ids")?.arr()?.iter().map(|x| x.u64()).collect::<Result<_, _>>()?;
        p.header_stacks.push(HeaderStack {
            name,
            id,
            header_type: a.str_of("header_type")?,
            size: a.opt("size").map(|s| s.u32()).transpose()?.unwrap_or(header_ids.len() as u32),
            header_ids,
            path: a.path.clone(),
        });
    }
    for a in root.opt_arr("header_union_types")? {
        let (name, id) = name_id(&a)?;
        let headers = a.get("headers")?.arr()?.iter().map(str_pair).collect::<Result<_, _>>()?;
        p.header_union_types.push(HeaderUnionType { name, id, headers });
    }
    for a in root.opt_arr("header_unions")? {
        let (name, id) = name_id(&a)?;
        p.header_unions.push(HeaderUnion {
            name,
            id,
            union_type: a.str_of("union_type")?,
            header_ids: a.get("header_ids")?.arr()?.iter().map(|x| x.u64()).collect::<Result<_, _>>()?,
        });
    }
    for a in root.opt_arr("header_union_stacks")? {
        let (name, id) = name_id(&a)?;
        let ids: Vec<u64> = a.get("header_union_ids")?.arr()?.iter().map(|x| x.u64()).collect::<Result<_, _>>()?;
        p.header_union_stacks.push(HeaderUnionStack {
            name,
            id,
            union_type: a.str_of("union_type")?,
            size: a.opt("size").map(|s| s.u32()).transpose()?.unwrap_or(ids.len() as u32),
            header_union_ids: ids,
        });
    }
    for a in root.opt_arr("errors")? {
        let items = a.arr()?;
        if items.len() != 2 {
            return Err(a.err("expected [name, value]"));
        }
        p.errors.push((items[0].str()?.to_string(), items[1].u64()?));
    }
    for a in root.opt_arr("enums")? {
        let name = a.str_of("name")?;
        let mut entries = Vec::new();
        for e in a.opt_arr("entries")? {
            let items = e.arr()?;
            if items.len() != 2 {
                return Err(e.err("expected [name, value]"));
            }
            entries.push((items[0].str()?.to_string(), items[1].u64()?));
        }
        p.enums.push(EnumDecl { name, entries });
    }
    for a in root.opt_arr("field_lists")? {
        p.field_lists.push(parse_field_list(&a)?);
    }
    for a in root.opt_arr("learn_lists")? {
        p.learn_lists.push(parse_field_list(&a)?);
    }
    for a in root.opt_arr("parsers")? {
        p.parsers.push(parse_parser(&a)?);
    }
    for a in root.opt_arr("parse_vsets")? {
        let (name, id) = name_id(&a)?;
        p.parse_vsets.push(ParseVset {
            name,
            id,
            compressed_bitwidth: a.u32_of("compressed_bitwidth")?,
            max_size: a.opt("max_size").map(|m| m.u32()).transpose()?.unwrap_or(0),
        });
    }
    for a in root.opt_arr("deparsers")? {
        let (name, id) = name_id(&a)?;
        let order = a.get("order")?.arr()?.iter().map(|x| x.str().map(str::to_string)).collect::<Result<_, _>>()?;
        let mut primitives = Vec::new();
        for pr in a.opt_arr("primitives")? {
            primitives.push(parse_primitive(&pr)?);
        }
        p.deparsers.push(Deparser { name, id, order, primitives, path: a.path.clone() });
    }
    for a in root.opt_arr("meter_arrays")? {
        let (name, id) = name_id(&a)?;
        let ty = a.str_of("type")?;
        let packets = match ty.as_str() {
            "packets" => true,
            "bytes" => false,
            other => return Err(a.get("type")?.err(format!("meter type \"{other}\" is not supported"))),
        };
        let result_target = a.opt("result_target").map(|r| str_pair(&r)).transpose()?;
        p.meter_arrays.push(MeterArray {
            name,
            id,
            is_direct: a.bool_or("is_direct", false)?,
            size: a.opt("size").map(|s| s.u64()).transpose()?.unwrap_or(0),
            rate_count: a.opt("rate_count").map(|s| s.u32()).transpose()?.unwrap_or(2),
            packets,
            binding: opt_str(&a, "binding")?,
            result_target,
            path: a.path.clone(),
        });
    }
    for a in root.opt_arr("counter_arrays")? {
        let (name, id) = name_id(&a)?;
        p.counter_arrays.push(CounterArray {
            name,
            id,
            is_direct: a.bool_or("is_direct", false)?,
            size: a.opt("size").map(|s| s.u64()).transpose()?.unwrap_or(0),
            binding: opt_str(&a, "binding")?,
            path: a.path.clone(),
        });
    }
    for a in root.opt_arr("register_arrays")? {
        let (name, id) = name_id(&a)?;
        p.register_arrays.push(RegisterArray {
            name,
            id,
            size: a.u64_of("size")?,
            bitwidth: a.u32_of("bitwidth")?,
            path: a.path.clone(),
        });
    }
    for a in root.opt_arr("calculations")? {
        let (name, id) = name_id(&a)?;
        let mut input = Vec::new();
        for i in a.opt_arr("input")? {
            let expr = parse_expr(&i)?;
            // bmv2 packs a constant with the width its `bitwidth` key gives.
            let bitwidth = match (&expr, i.opt("bitwidth")) {
                (Expr::Hex { .. }, None) => return Err(i.err("a hexstr calculation input needs a \"bitwidth\"")),
                (_, None) => None,
                (_, Some(b)) => match b.u64()? {
                    w @ 1..=0xffff_ffff => Some(w as u32),
                    w => return Err(b.err(format!("bitwidth {w} is out of range"))),
                },
            };
            input.push(CalcInput { expr, bitwidth, path: i.path.clone() });
        }
        p.calculations.push(Calculation { name, id, algo: a.str_of("algo")?, input, path: a.path.clone() });
    }
    for a in root.opt_arr("checksums")? {
        let (name, id) = name_id(&a)?;
        let target = str_pair(&a.get("target")?)?;
        let kind = opt_str(&a, "type")?.unwrap_or_else(|| "generic".into());
        let if_cond = a.opt("if_cond").map(|c| parse_expr(&c)).transpose()?;
        p.checksums.push(Checksum {
            name,
            id,
            target,
            kind,
            calculation: a.str_of("calculation")?,
            verify: a.bool_or("verify", true)?,
            update: a.bool_or("update", true)?,
            if_cond,
            path: a.path.clone(),
        });
    }
    for a in root.opt_arr("actions")? {
        let (name, id) = name_id(&a)?;
        let mut runtime_data = Vec::new();
        for r in a.opt_arr("runtime_data")? {
            runtime_data.push(RuntimeParam { name: r.str_of("name")?, bitwidth: r.width_of("bitwidth")? });
        }
        let mut primitives = Vec::new();
        for pr in a.opt_arr("primitives")? {
            primitives.push(parse_primitive(&pr)?);
        }
        p.actions.push(Action { name, id, runtime_data, primitives, path: a.path.clone() });
    }
    for a in root.opt_arr("pipelines")? {
        p.pipelines.push(parse_pipeline(&a)?);
    }
    for a in root.opt_arr("extern_instances")? {
        let (name, id) = name_id(&a)?;
        let mut attributes = Vec::new();
        for at in a.opt_arr("attribute_values")? {
            let v = at.get("value")?;
            let value = match v.v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            attributes.push((at.str_of("name")?, at.str_of("type")?, value));
        }
        p.extern_instances.push(ExternInstance { name, id, kind: a.str_of("type")?, attributes, path: a.path.clone() });
    }
    for a in root.opt_arr("field_aliases")? {
        let items = a.arr()?;
        if items.len() != 2 {
            return Err(a.err("expected [alias, [header, field]]"));
        }
        p.field_aliases.push((items[0].str()?.to_string(), str_pair(&items[1])?));
    }
    p.program = opt_str(root, "program")?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_str;

    #[test]
    fn hexstr_parsing() {
        assert_eq!(parse_hexstr("0x0800"), Some((false, vec![8, 0])));
        assert_eq!(parse_hexstr("-0x1"), Some((true, vec![1])));
        assert_eq!(parse_hexstr("0xabc"), Some((false, vec![0x0a, 0xbc])));
        assert_eq!(parse_hexstr("12"), Some((false, vec![0x12])));
        assert_eq!(parse_hexstr("0xzz"), None);
    }

    #[test]
    fn malformed_json_is_an_error_not_a_panic() {
        let e = load_str("{ not json").unwrap_err();
        assert!(e.message.contains("not valid JSON"), "{e}");
    }

    #[test]
    fn errors_name_the_path() {
        let text = r#"{"header_types":[{"name":"h","id":0,"fields":[["a",8,false],["b","x",false]]}]}"#;
        let e = load_str(text).unwrap_err();
        assert_eq!(e.path, "header_types[0].fields[1][1]");
        let text = r#"{"pipelines":[{"name":"ingress","tables":[{"name":"t","key":[{"match_type":"exact","target":["h","a"]}],"match_type":"exact","type":"simple","entries":[{"match_key":[{"match_type":"weird","key":"0x1"}],"action_entry":{"action_id":0}}]}]}]}"#;
        let e = load_str(text).unwrap_err();
        assert_eq!(e.path, "pipelines[0].tables[0].entries[0].match_key[0]");
        assert!(e.message.contains("weird"));
    }

    #[test]
    fn a_union_stack_field_is_a_stack_member_field_triple() {
        let state = |key: &str| {
            format!(
                r#"{{"parsers":[{{"name":"p","init_state":"s","parse_states":[{{"name":"s","transition_key":[{key}],"transitions":[]}}]}}]}}"#
            )
        };
        let p = load_str(&state(r#"{"type":"union_stack_field","value":["opts","a","bos"]}"#)).unwrap();
        let want = Expr::UnionStackField("opts".into(), "a".into(), "bos".into());
        assert_eq!(p.parsers[0].states[0].key, vec![want]);
        let e = load_str(&state(r#"{"type":"union_stack_field","value":["opts","bos"]}"#)).unwrap_err();
        assert_eq!(e.path, "parsers[0].parse_states[0].transition_key[0].value");
    }

    #[test]
    fn calculation_constants_carry_their_bitwidth() {
        let calc =
            |input: &str| format!(r#"{{"calculations":[{{"name":"c","id":0,"algo":"csum16","input":[{input}]}}]}}"#);
        let p = load_str(&calc(r#"{"type":"field","value":["h","a"]},{"type":"hexstr","value":"0x00","bitwidth":8}"#))
            .unwrap();
        let input = &p.calculations[0].input;
        assert_eq!((input[0].bitwidth, input[1].bitwidth), (None, Some(8)));
        assert_eq!(input[1].expr, Expr::Hex { negative: false, magnitude: vec![0] });
        assert_eq!(input[1].path, "calculations[0].input[1]");
        let e = load_str(&calc(r#"{"type":"hexstr","value":"0x00"}"#)).unwrap_err();
        assert_eq!(e.path, "calculations[0].input[0]");
        let e = load_str(&calc(r#"{"type":"hexstr","value":"0x00","bitwidth":0}"#)).unwrap_err();
        assert_eq!(e.path, "calculations[0].input[0].bitwidth");
    }

    #[test]
    fn loads_the_router_example() {
        let p =
            crate::load_file(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/router.json")))
                .unwrap();
        assert!(p.headers.iter().any(|h| h.name == "ipv4"));
        assert_eq!(p.pipelines.len(), 2);
        assert!(!p.checksums.is_empty());
    }
}
