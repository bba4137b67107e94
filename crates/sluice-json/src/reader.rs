//! Path-tracking access to a `serde_json::Value`.
//!
//! Every accessor knows the JSON path it stands at, so that any problem in a
//! program is reported as `pipelines[0].tables[3].key[1]: ...` instead of a
//! panic or a vague "invalid JSON".

use serde_json::Value;

use crate::LoadError;

/// A JSON value together with the path that leads to it from the document root.
#[derive(Clone)]
pub struct At<'a> {
    /// The value at this path.
    pub v: &'a Value,
    /// Human-readable path, e.g. `pipelines[0].tables[2]`.
    pub path: String,
}

/// The widest header field or action parameter a program may declare, in bits.
pub const MAX_WIDTH: u32 = 4096;

impl<'a> At<'a> {
    /// The document root.
    pub fn root(v: &'a Value) -> Self {
        At { v, path: String::new() }
    }

    /// An error located at this path.
    pub fn err(&self, msg: impl Into<String>) -> LoadError {
        LoadError { path: self.path.clone(), message: msg.into() }
    }

    fn child_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{}", self.path, key)
        }
    }

    /// A required member of an object.
    pub fn get(&self, key: &str) -> Result<At<'a>, LoadError> {
        match self.v {
            Value::Object(m) => match m.get(key) {
                Some(v) => Ok(At { v, path: self.child_path(key) }),
                None => Err(self.err(format!("missing field \"{key}\""))),
            },
            _ => Err(self.err(format!("expected an object with field \"{key}\""))),
        }
    }

    /// An optional member of an object; `null` counts as absent.
    pub fn opt(&self, key: &str) -> Option<At<'a>> {
        match self.v {
            Value::Object(m) => match m.get(key) {
                Some(Value::Null) | None => None,
                Some(v) => Some(At { v, path: self.child_path(key) }),
            },
            _ => None,
        }
    }

    /// True when the value is JSON `null`.
    pub fn is_null(&self) -> bool {
        self.v.is_null()
    }

    /// The elements of an array, each with its indexed path.
    pub fn arr(&self) -> Result<Vec<At<'a>>, LoadError> {
        match self.v {
            Value::Array(a) => {
                Ok(a.iter().enumerate().map(|(i, v)| At { v, path: format!("{}[{}]", self.path, i) }).collect())
            }
            _ => Err(self.err("expected an array")),
        }
    }

    /// An optional array member: absent or null gives an empty list.
    pub fn opt_arr(&self, key: &str) -> Result<Vec<At<'a>>, LoadError> {
        match self.opt(key) {
            Some(a) => a.arr(),
            None => Ok(Vec::new()),
        }
    }

    /// A string value.
    pub fn str(&self) -> Result<&'a str, LoadError> {
        self.v.as_str().ok_or_else(|| self.err("expected a string"))
    }

    /// A string-valued required member.
    pub fn str_of(&self, key: &str) -> Result<String, LoadError> {
        Ok(self.get(key)?.str()?.to_string())
    }

    /// A non-negative integer value.
    pub fn u64(&self) -> Result<u64, LoadError> {
        self.v.as_u64().ok_or_else(|| self.err("expected a non-negative integer"))
    }

    /// A non-negative integer value of at most 32 bits.
    pub fn u32(&self) -> Result<u32, LoadError> {
        let v = self.u64()?;
        u32::try_from(v).map_err(|_| self.err(format!("{v} does not fit in 32 bits")))
    }

    /// A 32-bit integer-valued required member.
    pub fn u32_of(&self, key: &str) -> Result<u32, LoadError> {
        self.get(key)?.u32()
    }

    /// A width in bits, 0 to [`MAX_WIDTH`], of required member `key`.
    pub fn width_of(&self, key: &str) -> Result<u32, LoadError> {
        let n = self.get(key)?;
        let w = n.u64()?;
        if w > u64::from(MAX_WIDTH) {
            return Err(n.err(format!("a width of {w} bits is out of range (at most {MAX_WIDTH})")));
        }
        Ok(w as u32)
    }

    /// A signed integer value.
    pub fn i64(&self) -> Result<i64, LoadError> {
        self.v.as_i64().ok_or_else(|| self.err("expected an integer"))
    }

    /// An integer-valued required member.
    pub fn u64_of(&self, key: &str) -> Result<u64, LoadError> {
        self.get(key)?.u64()
    }

    /// A boolean value.
    pub fn bool(&self) -> Result<bool, LoadError> {
        self.v.as_bool().ok_or_else(|| self.err("expected a boolean"))
    }

    /// An optional boolean member, `default` when absent.
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool, LoadError> {
        match self.opt(key) {
            Some(b) => b.bool(),
            None => Ok(default),
        }
    }
}
