//! The one table of the tools' arguments. Each [`Param`] says its name,
//! kind, limits, default and meaning once; from it come the JSON schema
//! the model sees ([`schema`]), the checks of a call ([`check`]) and the
//! errors that say what to send instead — so a limit such as 86400 or
//! 1048576 is written exactly once.
//!
//! Lenient where a model's slip is unambiguous: an id sent as a number, a
//! number or boolean sent as a string. Strict everywhere else: unknown
//! arguments, wrong types and out-of-range values are errors, never
//! silently clamped or ignored.
//!
//! New kinds of argument (named keys for PTY sessions, say) are a new
//! [`Kind`] variant with its schema and its check side by side.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::error::ArgError;

/// One argument of a tool.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// Its name in the call.
    pub name: &'static str,
    /// What it holds, with its limits and default.
    pub kind: Kind,
    /// A call without it is refused.
    pub required: bool,
    /// What the model reads about it.
    pub doc: &'static str,
}

/// What an argument holds.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A session id: a string (a number is taken as its digits).
    Id,
    /// A string.
    Text,
    /// A regular expression (Rust syntax), checked when the call arrives.
    Regex,
    /// `true` or `false`.
    Bool {
        /// When not given.
        default: bool,
    },
    /// A number of seconds in a range.
    Seconds {
        /// Lowest value.
        min: f64,
        /// `min` itself is refused (`timeout_s` must be above 0).
        min_exclusive: bool,
        /// Highest value.
        max: f64,
        /// When not given (`None`: no default, or one decided at run time).
        default: Option<f64>,
    },
    /// A whole number in a range.
    Integer {
        /// Said before the range in errors ("a byte offset: ").
        what: &'static str,
        /// Lowest value.
        min: u64,
        /// Highest value (`u64::MAX`: no upper limit worth naming).
        max: u64,
        /// When not given.
        default: Option<u64>,
    },
    /// One of a few words.
    Choice {
        /// The words.
        values: &'static [&'static str],
        /// When not given.
        default: &'static str,
    },
    /// A number (not necessarily whole) in a range, in `unit`s.
    Number {
        /// What it counts, for errors ("cores").
        unit: &'static str,
        /// Lowest value.
        min: f64,
        /// Highest value.
        max: f64,
    },
    /// A size in bytes: a whole number, or a string such as `"512M"` or
    /// `"2G"` (binary units), up to `max` bytes.
    Size {
        /// Highest value, in bytes.
        max: u64,
    },
    /// A non-empty array of strings.
    StringArray,
    /// An object of string values.
    StringMap,
}

impl Kind {
    /// The allowed values in words, for errors.
    fn range(&self) -> String {
        match *self {
            Kind::Seconds {
                min,
                min_exclusive: true,
                max,
                ..
            } => format!("a number of seconds above {min} and at most {max}"),
            Kind::Seconds { min, max, .. } => format!("a number of seconds from {min} to {max}"),
            Kind::Integer {
                what,
                min,
                max: u64::MAX,
                ..
            } => format!("{what}an integer from {min}"),
            Kind::Integer { what, min, max, .. } => format!("{what}an integer from {min} to {max}"),
            Kind::Choice { values, .. } => format!("one of {}", values.join(", ")),
            Kind::Number { unit, min, max } => format!("a number of {unit} from {min} to {max}"),
            Kind::Size { max } => format!(
                "a size from 1 byte to {max} bytes: a number of bytes or a string such as \"512M\" or \"2G\""
            ),
            _ => String::new(),
        }
    }

    fn schema(&self) -> Map<String, Value> {
        let value = match *self {
            Kind::Id | Kind::Text | Kind::Regex => json!({"type": "string"}),
            Kind::Bool { default } => json!({"type": "boolean", "default": default}),
            Kind::Seconds {
                min,
                min_exclusive,
                max,
                default,
            } => {
                let mut s = json!({"type": "number", "maximum": max});
                if min_exclusive {
                    s["exclusiveMinimum"] = json!(min);
                } else {
                    s["minimum"] = json!(min);
                }
                if let Some(d) = default {
                    s["default"] = json!(d);
                }
                s
            }
            Kind::Integer {
                min, max, default, ..
            } => {
                let mut s = json!({"type": "integer", "minimum": min});
                if max != u64::MAX {
                    s["maximum"] = json!(max);
                }
                if let Some(d) = default {
                    s["default"] = json!(d);
                }
                s
            }
            Kind::Choice { values, default } => {
                json!({"type": "string", "enum": values, "default": default})
            }
            Kind::Number { min, max, .. } => {
                json!({"type": "number", "minimum": min, "maximum": max})
            }
            Kind::Size { .. } => json!({"type": ["integer", "string"]}),
            Kind::StringArray => {
                json!({"type": "array", "items": {"type": "string"}, "minItems": 1})
            }
            Kind::StringMap => {
                json!({"type": "object", "additionalProperties": {"type": "string"}})
            }
        };
        match value {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }
}

/// The JSON schema (an object schema) of a tool taking `params`.
pub fn schema(params: &[Param]) -> Value {
    let mut properties = Map::new();
    for p in params {
        let mut s = p.kind.schema();
        s.insert("description".into(), p.doc.into());
        properties.insert(p.name.into(), Value::Object(s));
    }
    let required: Vec<&str> = params
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name)
        .collect();
    let mut schema = json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
    });
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

/// A call's arguments, checked against its table: every value present has
/// its kind and lies in its range; accessors apply the defaults.
pub struct Checked<'a> {
    params: &'static [Param],
    map: &'a Map<String, Value>,
}

/// Checks `map` against `params`: no unknown argument, every required one
/// present, every present one of its kind and in its range.
pub fn check<'a>(
    params: &'static [Param],
    map: &'a Map<String, Value>,
) -> Result<Checked<'a>, ArgError> {
    if let Some(name) = map
        .keys()
        .find(|k| !params.iter().any(|p| p.name == k.as_str()))
    {
        let known: Vec<&str> = params.iter().map(|p| p.name).collect();
        return Err(ArgError::Unknown {
            name: name.clone(),
            known: if known.is_empty() {
                "no arguments".into()
            } else {
                known.join(", ")
            },
        });
    }
    let checked = Checked { params, map };
    for p in params {
        match checked.get(p.name) {
            None if p.required => {
                return Err(ArgError::Missing {
                    name: p.name,
                    hint: p.doc,
                });
            }
            None => {}
            Some(value) => check_value(p, value)?,
        }
    }
    Ok(checked)
}

fn check_value(p: &Param, value: &Value) -> Result<(), ArgError> {
    match p.kind {
        Kind::Id => {
            id_of(value).ok_or_else(|| wrong_type(p.name, "a string", value))?;
        }
        Kind::Text => {
            if !value.is_string() {
                return Err(wrong_type(p.name, "a string", value));
            }
        }
        Kind::Regex => {
            let Value::String(pattern) = value else {
                return Err(wrong_type(p.name, "a string (a regex)", value));
            };
            if pattern.is_empty() {
                return Err(ArgError::Invalid {
                    name: p.name,
                    reason: "is empty; give a regex, or leave it out".into(),
                });
            }
            if let Err(e) = regex::bytes::Regex::new(pattern) {
                return Err(ArgError::Invalid {
                    name: p.name,
                    reason: format!(
                        "is not a valid regex ({}); escape special characters with \\, e.g. \
                         \"Listening on port 8080\\\\.\"",
                        e.to_string()
                            .lines()
                            .last()
                            .unwrap_or("syntax error")
                            .trim()
                    ),
                });
            }
        }
        Kind::Bool { .. } => {
            bool_of(value).ok_or_else(|| wrong_type(p.name, "true or false", value))?;
        }
        Kind::Seconds {
            min,
            min_exclusive,
            max,
            ..
        } => {
            let s = number_of(value).ok_or_else(|| wrong_type(p.name, "a number", value))?;
            let low_ok = if min_exclusive { s > min } else { s >= min };
            if !low_ok || s > max {
                return Err(out_of_range(p, s));
            }
        }
        Kind::Integer { min, max, .. } => {
            let n = number_of(value).ok_or_else(|| wrong_type(p.name, "a number", value))?;
            if n.fract() != 0.0 || n < min as f64 || n > max as f64 {
                return Err(out_of_range(p, n));
            }
        }
        Kind::Number { min, max, .. } => {
            let n = number_of(value).ok_or_else(|| wrong_type(p.name, "a number", value))?;
            if n < min || n > max {
                return Err(out_of_range(p, n));
            }
        }
        Kind::Size { .. } => {
            size_of(p, value)?;
        }
        Kind::Choice { values, .. } => match value {
            Value::String(s) if values.contains(&s.as_str()) => {}
            other => {
                return Err(ArgError::OutOfRange {
                    name: p.name,
                    range: p.kind.range(),
                    got: shown(other),
                });
            }
        },
        Kind::StringArray => {
            let Value::Array(items) = value else {
                return Err(wrong_type(p.name, "an array of strings", value));
            };
            if let Some(bad) = items.iter().find(|v| !v.is_string()) {
                return Err(wrong_type(p.name, "an array of strings", bad));
            }
        }
        Kind::StringMap => {
            let Value::Object(vars) = value else {
                return Err(wrong_type(
                    p.name,
                    "an object such as {\"KEY\": \"value\"}",
                    value,
                ));
            };
            if let Some(bad) = vars.values().find(|v| !v.is_string()) {
                return Err(wrong_type(p.name, "an object of string values", bad));
            }
        }
    }
    Ok(())
}

impl<'a> Checked<'a> {
    fn param(&self, name: &str) -> &'static Param {
        self.params
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("`{name}` is not in this tool's table"))
    }

    /// The value given for `name` (`null` counts as not given).
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    /// Whether `name` was given.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// A string argument (Text or Regex), if given.
    pub fn text(&self, name: &str) -> Option<&'a str> {
        self.get(name).and_then(Value::as_str)
    }

    /// The session id (trimmed).
    pub fn id(&self) -> Result<String, ArgError> {
        let p = self.param("id");
        match self.get("id").and_then(id_of) {
            Some(id) if !id.is_empty() => Ok(id),
            _ => Err(ArgError::Missing {
                name: "id",
                hint: p.doc,
            }),
        }
    }

    /// A boolean, or its default.
    pub fn boolean(&self, name: &str) -> bool {
        let Kind::Bool { default } = self.param(name).kind else {
            panic!("`{name}` is not a boolean");
        };
        self.get(name).and_then(bool_of).unwrap_or(default)
    }

    /// Seconds, or the default.
    pub fn seconds(&self, name: &str) -> Option<Duration> {
        let Kind::Seconds { default, .. } = self.param(name).kind else {
            panic!("`{name}` is not in seconds");
        };
        self.get(name)
            .and_then(number_of)
            .or(default)
            .map(Duration::from_secs_f64)
    }

    /// An integer, or the default.
    pub fn integer(&self, name: &str) -> Option<u64> {
        let Kind::Integer { default, .. } = self.param(name).kind else {
            panic!("`{name}` is not an integer");
        };
        self.get(name)
            .and_then(number_of)
            .map(|n| n as u64)
            .or(default)
    }

    /// A number, if given.
    pub fn number(&self, name: &str) -> Option<f64> {
        let Kind::Number { .. } = self.param(name).kind else {
            panic!("`{name}` is not a number");
        };
        self.get(name).and_then(number_of)
    }

    /// A size in bytes, if given (checked already).
    pub fn size(&self, name: &str) -> Option<u64> {
        let p = self.param(name);
        let Kind::Size { .. } = p.kind else {
            panic!("`{name}` is not a size");
        };
        self.get(name).and_then(|v| size_of(p, v).ok())
    }

    /// A choice, or its default.
    pub fn choice(&self, name: &str) -> &'a str {
        let Kind::Choice { default, .. } = self.param(name).kind else {
            panic!("`{name}` is not a choice");
        };
        self.text(name).unwrap_or(default)
    }

    /// An array of strings, if given.
    pub fn strings(&self, name: &str) -> Option<Vec<&'a str>> {
        match self.get(name) {
            Some(Value::Array(items)) => Some(items.iter().filter_map(Value::as_str).collect()),
            _ => None,
        }
    }

    /// An object of strings, if given (in the order sent).
    pub fn string_map(&self, name: &str) -> Vec<(&'a str, &'a str)> {
        match self.get(name) {
            Some(Value::Object(vars)) => vars
                .iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
                .collect(),
            _ => Vec::new(),
        }
    }
}

fn id_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn bool_of(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s == "true" => Some(true),
        Value::String(s) if s == "false" => Some(false),
        _ => None,
    }
}

fn number_of(value: &Value) -> Option<f64> {
    let n = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }?;
    n.is_finite().then_some(n)
}

/// A size argument in bytes: a whole number, or text such as `512M`.
fn size_of(p: &Param, value: &Value) -> Result<u64, ArgError> {
    let Kind::Size { max } = p.kind else {
        unreachable!("size_of on a non-size")
    };
    let bytes = match value {
        Value::Number(_) => {
            let n = number_of(value).ok_or_else(|| wrong_type(p.name, "a size", value))?;
            if n.fract() != 0.0 || n < 1.0 {
                return Err(out_of_range(p, n));
            }
            n as u64
        }
        Value::String(text) => tether::parse_size(text).map_err(|_| ArgError::OutOfRange {
            name: p.name,
            range: p.kind.range(),
            got: shown(value),
        })?,
        other => return Err(wrong_type(p.name, "a size such as \"512M\"", other)),
    };
    if bytes > max {
        return Err(ArgError::OutOfRange {
            name: p.name,
            range: p.kind.range(),
            got: shown(value),
        });
    }
    Ok(bytes)
}

fn out_of_range(p: &Param, n: f64) -> ArgError {
    ArgError::OutOfRange {
        name: p.name,
        range: p.kind.range(),
        got: number_text(n),
    }
}

/// A number as a model would write it; huge ones (a `1e309` the line
/// reader had to cap) in exponent form.
fn number_text(n: f64) -> String {
    if n.abs() >= 1e16 {
        format!("{n:e}")
    } else {
        n.to_string()
    }
}

fn wrong_type(name: &'static str, expected: &'static str, got: &Value) -> ArgError {
    ArgError::WrongType {
        name,
        expected,
        got: shown(got),
    }
}

/// A value as shown in an error, cut to 60 characters.
fn shown(got: &Value) -> String {
    let mut shown = got.to_string();
    if shown.len() > 60 {
        let mut cut = 57;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("...");
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[Param] = &[
        Param {
            name: "id",
            kind: Kind::Id,
            required: true,
            doc: "the session id",
        },
        Param {
            name: "t",
            kind: Kind::Seconds {
                min: 0.0,
                min_exclusive: true,
                max: 86400.0,
                default: Some(600.0),
            },
            required: false,
            doc: "a timeout",
        },
        Param {
            name: "n",
            kind: Kind::Integer {
                what: "",
                min: 1,
                max: 1_048_576,
                default: None,
            },
            required: false,
            doc: "a count",
        },
    ];

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_schema_and_the_check_say_the_same_limits() {
        let schema = schema(TABLE);
        assert_eq!(schema["properties"]["t"]["maximum"], 86400.0);
        assert_eq!(schema["properties"]["t"]["exclusiveMinimum"], 0.0);
        assert_eq!(schema["properties"]["n"]["maximum"], 1_048_576);
        assert_eq!(schema["required"], json!(["id"]));
        let err = check(TABLE, &map(json!({"id": "a", "t": 86401})))
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "`t` must be a number of seconds above 0 and at most 86400, got 86401"
        );
        let err = check(TABLE, &map(json!({"id": "a", "n": 0})))
            .err()
            .unwrap();
        assert_eq!(
            err.to_string(),
            "`n` must be an integer from 1 to 1048576, got 0"
        );
        let args = map(json!({"id": 42, "n": "7"}));
        let ok = check(TABLE, &args).unwrap();
        assert_eq!(ok.id().unwrap(), "42");
        assert_eq!(ok.seconds("t"), Some(Duration::from_secs(600)));
        assert_eq!(ok.integer("n"), Some(7));
        let err = check(TABLE, &map(json!({"x": 1}))).err().unwrap();
        assert!(
            err.to_string()
                .starts_with("unknown argument `x`; this tool takes: id, t, n")
        );
        assert_eq!(
            number_text(f64::MAX),
            "1.7976931348623157e308",
            "capped 1e309 reads as a huge number"
        );
    }
}
