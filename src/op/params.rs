//! Operator attributes: string values parsed as MXNet's parameter parser reads them.

use crate::dtype::DType;
use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// An operator's attributes as given: name to string value.
pub type Attrs = BTreeMap<String, String>;

/// One attribute an operator takes, declared once: the declaration feeds validation
/// (unknown names are rejected), defaults (read by [`Params::get`]), the operator's
/// documentation and the generated Python docstrings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// The attribute's name.
    pub name: &'static str,
    /// MXNet's description of its type (`int`, `float`, `boolean`, `Shape(tuple)`,
    /// `{'max', 'avg'}`, ...).
    pub ty: &'static str,
    /// The default as MXNet writes it; `None` if the attribute is required.
    pub default: Option<&'static str>,
    /// What it does.
    pub doc: &'static str,
}

impl Param {
    /// An optional attribute with its default.
    pub const fn new(
        name: &'static str,
        ty: &'static str,
        default: &'static str,
        doc: &'static str,
    ) -> Param {
        Param {
            name,
            ty,
            default: Some(default),
            doc,
        }
    }

    /// A required attribute.
    pub const fn required(name: &'static str, ty: &'static str, doc: &'static str) -> Param {
        Param {
            name,
            ty,
            default: None,
            doc,
        }
    }
}

/// The type MXNet's documentation gives a dtype attribute that takes every numeric type.
pub const ALL_TYPES: &str =
    "{'bfloat16', 'float16', 'float32', 'float64', 'int32', 'int64', 'int8', 'uint8'}";

/// As [`ALL_TYPES`], with `bool`.
pub const ALL_TYPES_WITH_BOOL: &str =
    "{'bfloat16', 'bool', 'float16', 'float32', 'float64', 'int32', 'int64', 'int8', 'uint8'}";

/// A value [`Params::get`] can parse from an attribute string.
pub trait FromAttr: Sized {
    /// What the string should look like, for errors.
    const EXPECTED: &'static str;
    /// Parses `s`, or `None` if it is malformed.
    fn from_attr(s: &str) -> Option<Self>;
}

/// Implements [`FromAttr`] for each type: what its string looks like, and its parser.
macro_rules! from_attr {
    ($($t:ty => $expected:literal, $parse:expr;)*) => {
        $(impl FromAttr for $t {
            const EXPECTED: &'static str = $expected;
            fn from_attr(s: &str) -> Option<$t> {
                let parse: fn(&str) -> Option<$t> = $parse;
                parse(s)
            }
        })*
    };
}

from_attr! {
    i64 => "an integer", parse_int;
    usize => "a non-negative integer", |s| parse_int(s).and_then(|v| usize::try_from(v).ok());
    f64 => "a number", parse_float;
    bool => "a boolean", parse_bool;
    Vec<i64> => "a tuple of integers", |s| parse_tuple(s).flatten();
    Vec<f64> => "a tuple of numbers", |s| tuple_entries(s.trim()).map(parse_float).collect();
    DType => "a dtype name such as float32", |s| DType::from_name(unquote(s)).ok();
    String => "a string", |s| Some(unquote(s).to_string());
    // A tuple whose entries may be `None` (slice begin, end and step).
    Vec<Option<i64>> => "a tuple of integers or None", parse_opt_tuple;
}

/// Parses a boolean as MXNet does (`true`, `false`, `1`, `0`, any case).
fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

/// `None` (the string `None`) or a value.
impl<T: FromAttr> FromAttr for Option<T> {
    const EXPECTED: &'static str = T::EXPECTED;
    fn from_attr(s: &str) -> Option<Option<T>> {
        if s.trim() == "None" {
            Some(None)
        } else {
            T::from_attr(s).map(Some)
        }
    }
}

fn unquote(s: &str) -> &str {
    s.trim().trim_matches('\'').trim_matches('"')
}

/// Typed access to one operator's attributes; rejects names the operator does not take.
pub struct Params<'a> {
    op: &'a str,
    attrs: &'a Attrs,
    decls: &'a [Param],
}

fn bad(op: &str, key: &str, value: &str, want: &str) -> Error {
    Error::Value(format!(
        "{op}: invalid value '{value}' for argument '{key}': expected {want}"
    ))
}

/// Rejects any attribute of `attrs` not among `names` (hidden `__x__` ones pass); the
/// error lists the names the op takes.
fn check_names<'n>(
    op: &str,
    attrs: &Attrs,
    names: impl Iterator<Item = &'n str> + Clone,
) -> Result<()> {
    for key in attrs.keys() {
        if key.starts_with("__") || names.clone().any(|n| n == key) {
            continue;
        }
        let list = names.collect::<Vec<_>>().join(", ");
        return Err(Error::Value(format!(
            "{op}: unknown argument '{key}'; possible arguments: {}",
            if list.is_empty() { "none" } else { &list }
        )));
    }
    Ok(())
}

/// Parses an integer as MXNet does (plain decimal, possibly signed, surrounding spaces).
pub fn parse_int(s: &str) -> Option<i64> {
    let t = s.trim();
    t.parse::<i64>()
        .ok()
        .or_else(|| t.strip_suffix('L').and_then(|u| u.parse().ok()))
}

/// The entries of a tuple like `(2, 3)`, `[2,3]`, `(2,)`, `()` or a bare `2`, trimmed.
fn tuple_entries(t: &str) -> impl Iterator<Item = &str> {
    let inner =
        if (t.starts_with('(') && t.ends_with(')')) || (t.starts_with('[') && t.ends_with(']')) {
            &t[1..t.len() - 1]
        } else {
            t
        };
    inner.split(',').map(str::trim).filter(|p| !p.is_empty())
}

/// Parses a tuple like `(2, 3)`, `[2,3]`, `(2,)`, `()` or a bare `2`; `None` for `None`.
pub fn parse_tuple(s: &str) -> Option<Option<Vec<i64>>> {
    let t = s.trim();
    if t == "None" {
        return Some(None);
    }
    tuple_entries(t)
        .map(|p| if p == "None" { None } else { parse_int(p) })
        .collect::<Option<Vec<i64>>>()
        .map(Some)
}

/// Parses a tuple of optional integers (`None` entries allowed), as slice begin/end take.
pub fn parse_opt_tuple(s: &str) -> Option<Vec<Option<i64>>> {
    tuple_entries(s.trim())
        .map(|p| {
            if p == "None" {
                Some(None)
            } else {
                parse_int(p).map(Some)
            }
        })
        .collect()
}

impl<'a> Params<'a> {
    /// Checks that every attribute is declared in `decls` (hidden `__x__` attributes
    /// pass); [`Params::get`] then reads the declared defaults. Allocates nothing unless
    /// an attribute is rejected.
    pub fn declared(op: &'a str, attrs: &'a Attrs, decls: &'a [Param]) -> Result<Params<'a>> {
        check_names(op, attrs, decls.iter().map(|d| d.name))?;
        Ok(Params { op, attrs, decls })
    }

    /// The given value of `key`, else its declared default.
    fn value(&self, key: &str) -> Result<&'a str> {
        if let Some(v) = self.raw(key) {
            return Ok(v);
        }
        let decl = self.decls.iter().find(|d| d.name == key).ok_or_else(|| {
            Error::Runtime(format!("{}: argument '{key}' is not declared", self.op))
        })?;
        decl.default.ok_or_else(|| {
            Error::Value(format!("{}: required argument '{key}' is missing", self.op))
        })
    }

    /// The attribute `key` parsed as `T`: the given value, else the declared default;
    /// an error naming the op if it is missing, undeclared or malformed.
    pub fn get<T: FromAttr>(&self, key: &str) -> Result<T> {
        let raw = self.value(key)?;
        T::from_attr(raw).ok_or_else(|| bad(self.op, key, raw, T::EXPECTED))
    }

    /// The attribute `key`, one of `options` (quotes stripped), else the declared default.
    pub fn get_choice(&self, key: &str, options: &[&'static str]) -> Result<&'static str> {
        let raw = self.value(key)?;
        let v = unquote(raw);
        options
            .iter()
            .copied()
            .find(|o| *o == v)
            .ok_or_else(|| bad(self.op, key, raw, &format!("one of {}", options.join(", "))))
    }

    /// True if `key` was given (not left to its default).
    pub fn given(&self, key: &str) -> bool {
        self.attrs.contains_key(key)
    }

    /// The operator's name, for messages.
    pub fn op(&self) -> &str {
        self.op
    }

    /// The raw string, if given.
    pub fn raw(&self, key: &str) -> Option<&'a str> {
        self.attrs.get(key).map(|s| s.as_str())
    }
}

/// Parses a float as MXNet does, accepting `inf`, `-inf` and `nan`.
pub fn parse_float(s: &str) -> Option<f64> {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        "true" => Some(1.0),
        "false" => Some(0.0),
        _ => t.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, &str)]) -> Attrs {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_like_mxnet() {
        const DECLS: &[Param] = &[
            Param::new("axis", "Shape or None", "None", "Axes."),
            Param::new("keepdims", "boolean", "False", "Keep axes."),
            Param::new("scalar", "float", "0", "A number."),
        ];
        let a = attrs(&[("axis", "(0, 2)"), ("keepdims", "True"), ("scalar", "1.5")]);
        let p = Params::declared("sum", &a, DECLS).unwrap();
        assert_eq!(p.get::<Option<Vec<i64>>>("axis").unwrap(), Some(vec![0, 2]));
        assert!(p.get::<bool>("keepdims").unwrap());
        assert_eq!(p.get::<f64>("scalar").unwrap(), 1.5);
        assert_eq!(parse_tuple("2"), Some(Some(vec![2])));
        assert_eq!(parse_tuple("(2,)"), Some(Some(vec![2])));
        assert_eq!(parse_tuple("None"), Some(None));
        assert_eq!(parse_opt_tuple("(None, 1)"), Some(vec![None, Some(1)]));
    }

    #[test]
    fn declared_attributes_give_defaults_and_errors() {
        const DECLS: &[Param] = &[
            Param::required("num_hidden", "int", "Outputs."),
            Param::new("flatten", "boolean", "True", "Flatten the input."),
            Param::new("axis", "Shape(tuple) or None", "None", "Axes."),
        ];
        let a = attrs(&[("num_hidden", "4")]);
        let p = Params::declared("fc", &a, DECLS).unwrap();
        assert_eq!(p.get::<i64>("num_hidden").unwrap(), 4);
        assert!(p.get::<bool>("flatten").unwrap());
        assert_eq!(p.get::<Option<Vec<i64>>>("axis").unwrap(), None);
        let e = Params::declared("fc", &attrs(&[("flat", "1")]), DECLS)
            .err()
            .unwrap();
        assert!(e
            .to_string()
            .contains("possible arguments: num_hidden, flatten, axis"));
        let none = attrs(&[]);
        let p = Params::declared("fc", &none, DECLS).unwrap();
        let e = p.get::<i64>("num_hidden").unwrap_err();
        assert_eq!(
            e.to_string(),
            "fc: required argument 'num_hidden' is missing"
        );
        let a = attrs(&[("num_hidden", "x")]);
        let p = Params::declared("fc", &a, DECLS).unwrap();
        assert!(p
            .get::<i64>("num_hidden")
            .unwrap_err()
            .to_string()
            .contains("expected an integer"));
    }

    #[test]
    fn rejects_unknown_and_malformed() {
        const DECLS: &[Param] = &[Param::new("axis", "int", "0", "The axis.")];
        let a = attrs(&[("axes", "1")]);
        let e = Params::declared("sum", &a, DECLS).err().unwrap();
        assert!(e.to_string().contains("unknown argument 'axes'"));
        let a = attrs(&[("axis", "x")]);
        let p = Params::declared("sum", &a, DECLS).unwrap();
        assert!(p.get::<i64>("axis").is_err());
    }
}
