//! Thrift values as a small tree, read and written with the `thrift` crate's
//! binary protocol.
//!
//! Why a tree and not generated structs: the services have ~90 methods whose
//! argument structs are a handful of fields each; one generic reader plus
//! typed accessors that name the missing field keeps the server short and
//! turns every malformed call into a clear protocol error.

use thrift::protocol::{
    TFieldIdentifier, TInputProtocol, TListIdentifier, TMapIdentifier, TOutputProtocol, TStructIdentifier, TType,
};

/// A Thrift value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    F64(f64),
    /// `string` and `binary`.
    Bin(Vec<u8>),
    Struct(Fields),
    List(TType, Vec<Val>),
    Map(TType, TType, Vec<(Val, Val)>),
}

/// A struct's fields by id, in wire order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fields(pub Vec<(i16, Val)>);

/// A call or value that does not have the shape its method needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadMessage(pub String);

type R<T> = Result<T, BadMessage>;

impl Fields {
    /// A struct from `(id, value)` pairs.
    pub fn of(v: Vec<(i16, Val)>) -> Fields {
        Fields(v)
    }

    fn get(&self, id: i16) -> Option<&Val> {
        self.0.iter().find(|(i, _)| *i == id).map(|(_, v)| v)
    }

    fn need(&self, id: i16, what: &str) -> R<&Val> {
        self.get(id).ok_or_else(|| BadMessage(format!("field {id} ({what}) is missing")))
    }

    /// An i32 field.
    pub fn i32(&self, id: i16, what: &str) -> R<i32> {
        match self.need(id, what)? {
            Val::I32(x) => Ok(*x),
            v => Err(BadMessage(format!("field {id} ({what}) must be an i32, not {}", kind(v)))),
        }
    }

    /// An optional i32 field.
    pub fn opt_i32(&self, id: i16) -> Option<i32> {
        match self.get(id) {
            Some(Val::I32(x)) => Some(*x),
            _ => None,
        }
    }

    /// An i16 field.
    pub fn i16(&self, id: i16, what: &str) -> R<i16> {
        match self.need(id, what)? {
            Val::I16(x) => Ok(*x),
            v => Err(BadMessage(format!("field {id} ({what}) must be an i16, not {}", kind(v)))),
        }
    }

    /// An i64 field.
    pub fn i64(&self, id: i16, what: &str) -> R<i64> {
        match self.need(id, what)? {
            Val::I64(x) => Ok(*x),
            v => Err(BadMessage(format!("field {id} ({what}) must be an i64, not {}", kind(v)))),
        }
    }

    /// A double field.
    pub fn f64(&self, id: i16, what: &str) -> R<f64> {
        match self.need(id, what)? {
            Val::F64(x) => Ok(*x),
            v => Err(BadMessage(format!("field {id} ({what}) must be a double, not {}", kind(v)))),
        }
    }

    /// A bool field.
    pub fn bool(&self, id: i16, what: &str) -> R<bool> {
        match self.need(id, what)? {
            Val::Bool(x) => Ok(*x),
            v => Err(BadMessage(format!("field {id} ({what}) must be a bool, not {}", kind(v)))),
        }
    }

    /// A binary field.
    pub fn bin(&self, id: i16, what: &str) -> R<&[u8]> {
        match self.need(id, what)? {
            Val::Bin(x) => Ok(x),
            v => Err(BadMessage(format!("field {id} ({what}) must be a string, not {}", kind(v)))),
        }
    }

    /// A string field (UTF-8).
    pub fn str(&self, id: i16, what: &str) -> R<&str> {
        std::str::from_utf8(self.bin(id, what)?).map_err(|_| BadMessage(format!("field {id} ({what}) is not UTF-8")))
    }

    /// A struct field.
    pub fn st(&self, id: i16, what: &str) -> R<&Fields> {
        match self.need(id, what)? {
            Val::Struct(x) => Ok(x),
            v => Err(BadMessage(format!("field {id} ({what}) must be a struct, not {}", kind(v)))),
        }
    }

    /// An optional struct field.
    pub fn opt_st(&self, id: i16) -> Option<&Fields> {
        match self.get(id) {
            Some(Val::Struct(x)) => Some(x),
            _ => None,
        }
    }

    /// A list field.
    pub fn list(&self, id: i16, what: &str) -> R<&[Val]> {
        match self.need(id, what)? {
            Val::List(_, x) => Ok(x),
            v => Err(BadMessage(format!("field {id} ({what}) must be a list, not {}", kind(v)))),
        }
    }

    /// A `list<binary>` field.
    pub fn bin_list(&self, id: i16, what: &str) -> R<Vec<Vec<u8>>> {
        self.list(id, what)?
            .iter()
            .map(|v| match v {
                Val::Bin(b) => Ok(b.clone()),
                v => Err(BadMessage(format!("field {id} ({what}) must hold strings, not {}", kind(v)))),
            })
            .collect()
    }
}

fn kind(v: &Val) -> &'static str {
    match v {
        Val::Bool(_) => "a bool",
        Val::I8(_) => "a byte",
        Val::I16(_) => "an i16",
        Val::I32(_) => "an i32",
        Val::I64(_) => "an i64",
        Val::F64(_) => "a double",
        Val::Bin(_) => "a string",
        Val::Struct(_) => "a struct",
        Val::List(..) => "a list",
        Val::Map(..) => "a map",
    }
}

/// Deepest nesting accepted (the API's deepest value is three levels).
const MAX_DEPTH: u32 = 16;
/// Largest container accepted, in elements.
const MAX_ELEMENTS: i32 = 1 << 24;

fn count(n: i32) -> thrift::Result<usize> {
    if !(0..=MAX_ELEMENTS).contains(&n) {
        return Err(thrift::Error::Protocol(thrift::ProtocolError::new(
            thrift::ProtocolErrorKind::SizeLimit,
            format!("container of {n} elements"),
        )));
    }
    Ok(n as usize)
}

/// Reads one value of a given type.
pub fn read_val(i: &mut dyn TInputProtocol, t: TType, depth: u32) -> thrift::Result<Val> {
    if depth > MAX_DEPTH {
        return Err(thrift::Error::Protocol(thrift::ProtocolError::new(
            thrift::ProtocolErrorKind::DepthLimit,
            "values nested too deeply",
        )));
    }
    Ok(match t {
        TType::Bool => Val::Bool(i.read_bool()?),
        TType::I08 => Val::I8(i.read_i8()?),
        TType::I16 => Val::I16(i.read_i16()?),
        TType::I32 => Val::I32(i.read_i32()?),
        TType::I64 => Val::I64(i.read_i64()?),
        TType::Double => Val::F64(i.read_double()?),
        TType::String => Val::Bin(i.read_bytes()?),
        TType::Struct => Val::Struct(read_struct(i, depth + 1)?),
        TType::List | TType::Set => {
            let (et, n) = if t == TType::List {
                let l = i.read_list_begin()?;
                (l.element_type, l.size)
            } else {
                let s = i.read_set_begin()?;
                (s.element_type, s.size)
            };
            let n = count(n)?;
            let mut v = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                v.push(read_val(i, et, depth + 1)?);
            }
            if t == TType::List {
                i.read_list_end()?;
            } else {
                i.read_set_end()?;
            }
            Val::List(et, v)
        }
        TType::Map => {
            let m = i.read_map_begin()?;
            let n = count(m.size)?;
            let (kt, vt) = (m.key_type.unwrap_or(TType::Void), m.value_type.unwrap_or(TType::Void));
            let mut v = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let k = read_val(i, kt, depth + 1)?;
                v.push((k, read_val(i, vt, depth + 1)?));
            }
            i.read_map_end()?;
            Val::Map(kt, vt, v)
        }
        other => {
            return Err(thrift::Error::Protocol(thrift::ProtocolError::new(
                thrift::ProtocolErrorKind::InvalidData,
                format!("unsupported field type {other:?}"),
            )))
        }
    })
}

/// Reads a struct's fields up to its STOP.
pub fn read_struct(i: &mut dyn TInputProtocol, depth: u32) -> thrift::Result<Fields> {
    i.read_struct_begin()?;
    let mut f = Vec::new();
    loop {
        let id = i.read_field_begin()?;
        if id.field_type == TType::Stop {
            break;
        }
        let v = read_val(i, id.field_type, depth)?;
        f.push((id.id.unwrap_or(0), v));
        i.read_field_end()?;
    }
    i.read_struct_end()?;
    Ok(Fields(f))
}

fn ttype(v: &Val) -> TType {
    match v {
        Val::Bool(_) => TType::Bool,
        Val::I8(_) => TType::I08,
        Val::I16(_) => TType::I16,
        Val::I32(_) => TType::I32,
        Val::I64(_) => TType::I64,
        Val::F64(_) => TType::Double,
        Val::Bin(_) => TType::String,
        Val::Struct(_) => TType::Struct,
        Val::List(..) => TType::List,
        Val::Map(..) => TType::Map,
    }
}

/// Writes one value.
pub fn write_val(o: &mut dyn TOutputProtocol, v: &Val) -> thrift::Result<()> {
    match v {
        Val::Bool(x) => o.write_bool(*x),
        Val::I8(x) => o.write_i8(*x),
        Val::I16(x) => o.write_i16(*x),
        Val::I32(x) => o.write_i32(*x),
        Val::I64(x) => o.write_i64(*x),
        Val::F64(x) => o.write_double(*x),
        Val::Bin(x) => o.write_bytes(x),
        Val::Struct(f) => write_struct(o, f),
        Val::List(et, items) => {
            o.write_list_begin(&TListIdentifier::new(*et, items.len() as i32))?;
            for x in items {
                write_val(o, x)?;
            }
            o.write_list_end()
        }
        Val::Map(kt, vt, items) => {
            o.write_map_begin(&TMapIdentifier::new(*kt, *vt, items.len() as i32))?;
            for (k, x) in items {
                write_val(o, k)?;
                write_val(o, x)?;
            }
            o.write_map_end()
        }
    }
}

/// Writes a struct.
pub fn write_struct(o: &mut dyn TOutputProtocol, f: &Fields) -> thrift::Result<()> {
    o.write_struct_begin(&TStructIdentifier::new("s"))?;
    for (id, v) in &f.0 {
        o.write_field_begin(&TFieldIdentifier::new::<Option<String>, String, i16>(None, ttype(v), *id))?;
        write_val(o, v)?;
        o.write_field_end()?;
    }
    o.write_field_stop()?;
    o.write_struct_end()
}

/// A string value.
pub fn s(x: impl Into<String>) -> Val {
    Val::Bin(x.into().into_bytes())
}

/// A struct value.
pub fn st(v: Vec<(i16, Val)>) -> Val {
    Val::Struct(Fields(v))
}

/// A list of structs.
pub fn st_list(v: Vec<Val>) -> Val {
    Val::List(TType::Struct, v)
}

/// A list of binaries.
pub fn bin_list(v: Vec<Vec<u8>>) -> Val {
    Val::List(TType::String, v.into_iter().map(Val::Bin).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use thrift::protocol::{TBinaryInputProtocol, TBinaryOutputProtocol};

    #[test]
    fn values_round_trip_through_the_binary_protocol() {
        let v = Fields(vec![
            (1, Val::I32(-3)),
            (2, s("tbl")),
            (3, st_list(vec![st(vec![(1, Val::I32(0)), (2, st(vec![(1, Val::Bin(vec![0, 1]))]))])])),
            (4, Val::Map(TType::String, TType::String, vec![(s("a"), s("b"))])),
            (5, Val::F64(0.5)),
            (6, Val::I64(1 << 40)),
            (7, Val::Bool(true)),
            (8, Val::I16(-1)),
        ]);
        let mut buf = Vec::new();
        write_struct(&mut TBinaryOutputProtocol::new(&mut buf, true), &v).unwrap();
        let back = read_struct(&mut TBinaryInputProtocol::new(&buf[..], true), 0).unwrap();
        assert_eq!(back, v);
        assert_eq!(back.i32(1, "x"), Ok(-3));
        assert!(back.i32(2, "name").unwrap_err().0.contains("must be an i32"));
        assert!(back.i32(9, "handle").unwrap_err().0.contains("field 9 (handle) is missing"));
    }

    #[test]
    fn huge_or_deep_containers_are_refused_without_allocating() {
        // A list header claiming 2^30 elements.
        let bytes = [0x0f, 0x00, 0x01, 0x08, 0x40, 0x00, 0x00, 0x00];
        assert!(read_struct(&mut TBinaryInputProtocol::new(&bytes[..], true), 0).is_err());
        // Structs nested 100 deep.
        let mut deep = Vec::new();
        for _ in 0..100 {
            deep.extend_from_slice(&[0x0c, 0x00, 0x01]);
        }
        assert!(read_struct(&mut TBinaryInputProtocol::new(&deep[..], true), 0).is_err());
    }
}
