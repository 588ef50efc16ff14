//! Constant values of Python expressions at a call site: literals, names bound once to a constant
//! (a module-level `SIZE = 256`, a local `prompt_embed_dim = 256`, a parameter's default, a loop
//! variable over `range(...)` at its first iteration), and arithmetic, comparisons, conditional
//! expressions, subscripts and a few builtins (`int`, `float`, `min`, `max`, `len`, `round`,
//! `tuple`, `list`) over them. Anything else is unknown: a parameter whose default is `None` (the
//! function resolves it later), a name bound twice, an attribute, a call of the repository's code.

use std::collections::HashMap;

use tree_sitter::Node;

use crate::syntax::text;

/// The longest sequence a value may hold (`[0] * n` with a large `n` stays unknown).
const MAX_ITEMS: usize = 256;

/// A constant value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A plain string literal, as written.
    Str(String),
    None,
    Tuple(Vec<Value>),
    List(Vec<Value>),
}

impl Value {
    /// The value as Python source.
    pub(crate) fn source(&self) -> String {
        match self {
            Value::Int(i) => i.to_string(),
            Value::Float(f) => {
                let s = format!("{f:?}");
                if s.contains(['.', 'e', 'E']) {
                    s
                } else {
                    format!("{s}.0")
                }
            }
            Value::Bool(true) => "True".into(),
            Value::Bool(false) => "False".into(),
            Value::Str(s) => s.clone(),
            Value::None => "None".into(),
            Value::Tuple(items) if items.len() == 1 => format!("({},)", items[0].source()),
            Value::Tuple(items) => format!("({})", join(items)),
            Value::List(items) => format!("[{}]", join(items)),
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }

    fn int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    fn items(&self) -> Option<&[Value]> {
        match self {
            Value::Tuple(v) | Value::List(v) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn truth(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Int(i) => Some(*i != 0),
            Value::Float(f) => Some(*f != 0.0),
            Value::None => Some(false),
            Value::Tuple(v) | Value::List(v) => Some(!v.is_empty()),
            Value::Str(_) => None,
        }
    }
}

fn join(items: &[Value]) -> String {
    items
        .iter()
        .map(Value::source)
        .collect::<Vec<_>>()
        .join(", ")
}

fn float(f: f64) -> Option<Value> {
    f.is_finite().then_some(Value::Float(f))
}

/// Where a name's constant value comes from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Origin {
    /// The default of a parameter of the enclosing function.
    Default,
    /// An assignment in the enclosing function.
    Local,
    /// An assignment at the file's top level.
    Module,
    /// A `for` variable over `range(...)`, at its first iteration.
    FirstIteration,
}

impl Origin {
    /// How a call site's provenance names it (`default of dim`, `local prompt_embed_dim`, ...).
    pub(crate) fn describe(&self, name: &str) -> String {
        match self {
            Origin::Default => format!("default of {name}"),
            Origin::Local => format!("local {name}"),
            Origin::Module => format!("constant {name}"),
            Origin::FirstIteration => format!("first iteration of {name}"),
        }
    }
}

/// The names with a known constant value in a scope.
pub(crate) type Env = HashMap<String, (Value, Origin)>;

/// The value of `node` in `env`, when it is constant.
pub(crate) fn eval(node: Node<'_>, src: &str, env: &Env) -> Option<Value> {
    eval_depth(node, src, env, 0)
}

fn eval_depth(node: Node<'_>, src: &str, env: &Env, depth: u32) -> Option<Value> {
    if depth > 32 {
        return None;
    }
    let ev = |n: Node<'_>| eval_depth(n, src, env, depth + 1);
    let named: Vec<Node<'_>> = {
        let mut c = node.walk();
        node.named_children(&mut c)
            .filter(|n| n.kind() != "comment")
            .collect()
    };
    match node.kind() {
        "integer" => parse_int(text(src, node)).map(Value::Int),
        "float" => text(src, node)
            .replace('_', "")
            .parse::<f64>()
            .ok()
            .and_then(float),
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        "none" => Some(Value::None),
        "string" => crate::calls::is_literal(node, src).then(|| Value::Str(text(src, node).into())),
        "identifier" => env.get(text(src, node)).map(|(v, _)| v.clone()),
        "parenthesized_expression" if named.len() == 1 => ev(named[0]),
        "tuple" => named
            .iter()
            .map(|n| ev(*n))
            .collect::<Option<Vec<_>>>()
            .map(Value::Tuple),
        "list" => named
            .iter()
            .map(|n| ev(*n))
            .collect::<Option<Vec<_>>>()
            .map(Value::List),
        "unary_operator" => {
            let v = ev(*named.first()?)?;
            let op = text(src, node.child_by_field_name("operator")?);
            match (op, v) {
                ("-", Value::Int(i)) => i.checked_neg().map(Value::Int),
                ("-", Value::Float(f)) => float(-f),
                ("+", v @ (Value::Int(_) | Value::Float(_))) => Some(v),
                ("~", Value::Int(i)) => Some(Value::Int(!i)),
                _ => None,
            }
        }
        "not_operator" => Some(Value::Bool(!ev(*named.first()?)?.truth()?)),
        "binary_operator" => {
            let a = ev(node.child_by_field_name("left")?)?;
            let b = ev(node.child_by_field_name("right")?)?;
            binary(text(src, node.child_by_field_name("operator")?), &a, &b)
        }
        "boolean_operator" => {
            let a = ev(node.child_by_field_name("left")?)?;
            let op = text(src, node.child_by_field_name("operator")?);
            match (op, a.truth()?) {
                ("and", false) | ("or", true) => Some(a),
                _ => ev(node.child_by_field_name("right")?),
            }
        }
        "comparison_operator" => compare(node, &named, src, env, depth),
        "conditional_expression" if named.len() == 3 => {
            if ev(named[1])?.truth()? {
                ev(named[0])
            } else {
                ev(named[2])
            }
        }
        "subscript" => {
            let seq = ev(node.child_by_field_name("value")?)?;
            let index = node.child_by_field_name("subscript")?;
            if index.kind() == "slice" {
                return None;
            }
            let i = ev(index)?.int()?;
            let items = seq.items()?;
            let at = if i < 0 { items.len() as i64 + i } else { i };
            usize::try_from(at)
                .ok()
                .and_then(|at| items.get(at))
                .cloned()
        }
        "call" => builtin_call(node, src, env, depth),
        _ => None,
    }
}

fn parse_int(t: &str) -> Option<i64> {
    let t = t.replace('_', "");
    let lower = t.to_ascii_lowercase();
    if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()
    } else {
        t.parse().ok()
    }
}

fn binary(op: &str, a: &Value, b: &Value) -> Option<Value> {
    if let (Some(x), Some(y)) = (a.int(), b.int())
        && !matches!(a, Value::Float(_))
        && !matches!(b, Value::Float(_))
    {
        return match op {
            "+" => x.checked_add(y).map(Value::Int),
            "-" => x.checked_sub(y).map(Value::Int),
            "*" => x.checked_mul(y).map(Value::Int),
            "//" => floor_div(x, y).map(Value::Int),
            "%" => floor_div(x, y)
                .and_then(|q| x.checked_sub(q.checked_mul(y)?))
                .map(Value::Int),
            "/" if y != 0 => float(x as f64 / y as f64),
            "**" if (0..=62).contains(&y) => x.checked_pow(y as u32).map(Value::Int),
            "**" if y < 0 => float((x as f64).powi(y as i32)),
            "<<" if (0..=62).contains(&y) => x.checked_shl(y as u32).map(Value::Int),
            ">>" if (0..=63).contains(&y) => Some(Value::Int(x >> y)),
            _ => None,
        };
    }
    if let (Some(x), Some(y)) = (a.number(), b.number()) {
        return match op {
            "+" => float(x + y),
            "-" => float(x - y),
            "*" => float(x * y),
            "/" if y != 0.0 => float(x / y),
            "//" if y != 0.0 => float((x / y).floor()),
            "**" => float(x.powf(y)),
            _ => None,
        };
    }
    match (op, a, b) {
        ("+", Value::List(x), Value::List(y)) => seq(x.iter().chain(y).cloned().collect(), false),
        ("+", Value::Tuple(x), Value::Tuple(y)) => seq(x.iter().chain(y).cloned().collect(), true),
        ("*", Value::List(x) | Value::Tuple(x), Value::Int(n))
        | ("*", Value::Int(n), Value::List(x) | Value::Tuple(x)) => {
            let n = usize::try_from(*n).unwrap_or(0);
            if x.len().saturating_mul(n) > MAX_ITEMS {
                return None;
            }
            let items: Vec<Value> = (0..n).flat_map(|_| x.iter().cloned()).collect();
            seq(
                items,
                matches!(a, Value::Tuple(_)) || matches!(b, Value::Tuple(_)),
            )
        }
        _ => None,
    }
}

/// Python's `x // y` on integers (rounding toward minus infinity); None for a zero divisor or
/// an overflow.
fn floor_div(x: i64, y: i64) -> Option<i64> {
    let q = x.checked_div(y)?;
    let r = x.checked_rem(y)?;
    Some(if r != 0 && ((r < 0) != (y < 0)) {
        q - 1
    } else {
        q
    })
}

fn seq(items: Vec<Value>, tuple: bool) -> Option<Value> {
    if items.len() > MAX_ITEMS {
        return None;
    }
    Some(if tuple {
        Value::Tuple(items)
    } else {
        Value::List(items)
    })
}

/// `a < b <= c`: every comparison of numbers (or `==`/`!=` of any two values).
fn compare(node: Node<'_>, named: &[Node<'_>], src: &str, env: &Env, depth: u32) -> Option<Value> {
    // The operators are the unnamed children between the operands.
    let mut ops = Vec::new();
    let mut c = node.walk();
    for child in node.children(&mut c) {
        if !child.is_named() {
            ops.push(text(src, child));
        }
    }
    if ops.len() + 1 != named.len() {
        return None;
    }
    let values = named
        .iter()
        .map(|n| eval_depth(*n, src, env, depth + 1))
        .collect::<Option<Vec<_>>>()?;
    for (i, op) in ops.iter().enumerate() {
        let (a, b) = (&values[i], &values[i + 1]);
        let holds = match *op {
            "==" => equal(a, b),
            "!=" => !equal(a, b),
            _ => {
                let (x, y) = (a.number()?, b.number()?);
                match *op {
                    "<" => x < y,
                    "<=" => x <= y,
                    ">" => x > y,
                    ">=" => x >= y,
                    _ => return None,
                }
            }
        };
        if !holds {
            return Some(Value::Bool(false));
        }
    }
    Some(Value::Bool(true))
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a.number(), b.number()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn builtin_call(node: Node<'_>, src: &str, env: &Env, depth: u32) -> Option<Value> {
    let function = node.child_by_field_name("function")?;
    if function.kind() != "identifier" {
        return None;
    }
    let name = text(src, function);
    if env.contains_key(name) {
        return None;
    }
    let list = node.child_by_field_name("arguments")?;
    let mut c = list.walk();
    let args = list
        .named_children(&mut c)
        .filter(|n| n.kind() != "comment")
        .map(|n| {
            if n.kind() == "keyword_argument" {
                None
            } else {
                eval_depth(n, src, env, depth + 1)
            }
        })
        .collect::<Option<Vec<_>>>()?;
    match (name, args.as_slice()) {
        ("int", [v]) => match v {
            Value::Float(f) if f.abs() < 9e18 => Some(Value::Int(f.trunc() as i64)),
            v => v.int().map(Value::Int),
        },
        ("float", [v]) => v.number().and_then(float),
        ("round", [v]) => {
            let f = v.number()?;
            // Python rounds halves to even.
            let r = f.round();
            let r = if (f - f.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
                r - f.signum()
            } else {
                r
            };
            (r.abs() < 9e18).then_some(Value::Int(r as i64))
        }
        ("len", [v]) => Some(Value::Int(v.items()?.len() as i64)),
        ("tuple", [v]) => Some(Value::Tuple(v.items()?.to_vec())),
        ("list", [v]) => Some(Value::List(v.items()?.to_vec())),
        ("min" | "max", [_, _, ..]) => extreme(name == "max", &args),
        ("min" | "max", [v]) => extreme(name == "max", v.items()?),
        _ => None,
    }
}

fn extreme(max: bool, values: &[Value]) -> Option<Value> {
    let mut best: Option<(f64, &Value)> = None;
    for v in values {
        let x = v.number()?;
        if best.is_none_or(|(b, _)| if max { x > b } else { x < b }) {
            best = Some((x, v));
        }
    }
    best.map(|(_, v)| v.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::syntax::parse;

    /// The value of the last line's expression, with the lines before it as bindings of a
    /// function scope (each `name = expr`, evaluated in order).
    fn value_of(lines: &str) -> Option<String> {
        let tree = parse(lines, Duration::from_secs(5)).ok()?;
        let root = tree.root_node();
        let mut env = Env::new();
        let mut c = root.walk();
        let stmts: Vec<Node<'_>> = root.named_children(&mut c).collect();
        let (last, before) = stmts.split_last()?;
        for s in before {
            let a = s.named_child(0)?;
            let v = eval(a.child_by_field_name("right")?, lines, &env)?;
            env.insert(
                text(lines, a.child_by_field_name("left")?).into(),
                (v, Origin::Local),
            );
        }
        eval(last.named_child(0)?, lines, &env).map(|v| v.source())
    }

    #[test]
    fn arithmetic_and_names_are_evaluated_as_python_does() {
        let v = |s: &str| value_of(s);
        assert_eq!(
            v("image_size = 1024\npatch = 16\nimage_size // patch\n").as_deref(),
            Some("64")
        );
        assert_eq!(
            v("embed_dim = 96\ni = 2\nint(embed_dim * 2 ** i)\n").as_deref(),
            Some("384")
        );
        assert_eq!(
            v("heads = [3, 6, 12, 24]\nheads[1]\n").as_deref(),
            Some("6")
        );
        assert_eq!(
            v("heads = [3, 6, 12, 24]\nheads[-1]\n").as_deref(),
            Some("24")
        );
        assert_eq!(v("-7 // 2\n").as_deref(), Some("-4"));
        assert_eq!(v("-7 % 2\n").as_deref(), Some("1"));
        assert_eq!(v("7 // -2\n").as_deref(), Some("-4"));
        assert_eq!(v("7 % -2\n").as_deref(), Some("-1"));
        assert_eq!(v("7 / 2\n").as_deref(), Some("3.5"));
        assert_eq!(
            v("w = 7\n0 if (3 % 2 == 0) else w // 2\n").as_deref(),
            Some("3")
        );
        assert_eq!(
            v("dim = 64\n(dim, dim * 4)\n").as_deref(),
            Some("(64, 256)")
        );
        assert_eq!(v("[0.0] * 3\n").as_deref(), Some("[0.0, 0.0, 0.0]"));
        assert_eq!(v("max(4, 2 * 3)\n").as_deref(), Some("6"));
        assert_eq!(v("1e-6\n").as_deref(), Some("1e-6"));
        assert_eq!(v("2.0 * 2\n").as_deref(), Some("4.0"));
        assert_eq!(v("len((1, 2, 3))\n").as_deref(), Some("3"));
        assert_eq!(v("round(2.5)\n").as_deref(), Some("2"));
        assert_eq!(v("1 < 2 <= 2\n").as_deref(), Some("True"));
    }

    #[test]
    fn what_is_not_constant_is_unknown() {
        let v = |s: &str| value_of(s);
        assert_eq!(v("unknown * 2\n"), None);
        assert_eq!(v("self.dim\n"), None);
        assert_eq!(v("default(dim, 4)\n"), None);
        assert_eq!(v("1 // 0\n"), None);
        assert_eq!(v("[1, 2][5]\n"), None);
        assert_eq!(v("[1, 2][0:1]\n"), None);
        assert_eq!(v("[0] * 100000\n"), None);
        assert_eq!(v("10 ** 400\n"), None);
        assert_eq!(v("f'{x}'\n"), None);
    }
}
