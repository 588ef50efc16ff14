//! The `features` of a card's `dataset_info`: the Arrow schema of the shards in the YAML form the
//! `datasets` library reads (`Features._from_yaml_list`), so a folder load needs no schema
//! inference and the card documents every column's type.
//!
//! Only the types the formats use are mapped (strings, 64-bit integers and floats, booleans,
//! structs, lists); anything else is an error, never a guess.

use std::fmt::Write as _;

use arrow::datatypes::{DataType, FieldRef};

/// The YAML lines of `fields` as `datasets` features, indented by `indent` spaces.
pub fn yaml(fields: &[FieldRef], indent: usize) -> Result<String, String> {
    let mut out = String::new();
    for f in fields {
        field(&mut out, f.name(), f.data_type(), indent)?;
    }
    Ok(out)
}

/// The `datasets` dtype of a scalar Arrow type.
fn dtype(dt: &DataType) -> Option<&'static str> {
    Some(match dt {
        DataType::Utf8 => "string",
        DataType::Int64 => "int64",
        DataType::Int32 => "int32",
        DataType::UInt32 => "uint32",
        DataType::UInt8 => "uint8",
        DataType::Float64 => "float64",
        DataType::Boolean => "bool",
        _ => return None,
    })
}

/// One `- name: ...` entry with its type.
fn field(out: &mut String, name: &str, dt: &DataType, indent: usize) -> Result<(), String> {
    let pad = " ".repeat(indent);
    let _ = writeln!(out, "{pad}- name: {name}");
    body(out, name, dt, indent + 2)
}

/// The type part of an entry (`dtype:`, `struct:` or `list:`).
fn body(out: &mut String, name: &str, dt: &DataType, indent: usize) -> Result<(), String> {
    let pad = " ".repeat(indent);
    if let Some(d) = dtype(dt) {
        let _ = writeln!(out, "{pad}dtype: {d}");
        return Ok(());
    }
    match dt {
        DataType::Struct(fields) => {
            let _ = writeln!(out, "{pad}struct:");
            for f in fields {
                field(out, f.name(), f.data_type(), indent)?;
            }
            Ok(())
        }
        DataType::List(item) => match item.data_type() {
            DataType::Struct(fields) => {
                let _ = writeln!(out, "{pad}list:");
                for f in fields {
                    field(out, f.name(), f.data_type(), indent)?;
                }
                Ok(())
            }
            scalar => match dtype(scalar) {
                Some(d) => {
                    let _ = writeln!(out, "{pad}list: {d}");
                    Ok(())
                }
                None => Err(format!("column `{name}`: no `datasets` feature for {dt}")),
            },
        },
        other => Err(format!(
            "column `{name}`: no `datasets` feature for {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::datatypes::{Field, Fields};

    use super::*;

    #[test]
    fn message_lists_structs_and_scalars() {
        let message = Fields::from(vec![
            Field::new("role", DataType::Utf8, false),
            Field::new("content", DataType::Utf8, false),
        ]);
        let fields: Vec<FieldRef> = vec![
            Arc::new(Field::new(
                "prompt",
                DataType::List(Arc::new(Field::new(
                    "element",
                    DataType::Struct(message),
                    false,
                ))),
                false,
            )),
            Arc::new(Field::new(
                "meta",
                DataType::Struct(Fields::from(vec![
                    Field::new("index", DataType::Int64, false),
                    Field::new("speedup", DataType::Float64, true),
                    Field::new("ok", DataType::Boolean, false),
                ])),
                false,
            )),
            Arc::new(Field::new(
                "tags",
                DataType::List(Arc::new(Field::new("element", DataType::Utf8, false))),
                false,
            )),
        ];
        assert_eq!(
            yaml(&fields, 2).unwrap(),
            "  - name: prompt\n    list:\n    - name: role\n      dtype: string\n    - name: content\n      dtype: string\n\
             \x20 - name: meta\n    struct:\n    - name: index\n      dtype: int64\n    - name: speedup\n      dtype: float64\n    - name: ok\n      dtype: bool\n\
             \x20 - name: tags\n    list: string\n"
        );
    }

    #[test]
    fn an_unmapped_type_is_an_error_naming_the_column() {
        let fields: Vec<FieldRef> = vec![Arc::new(Field::new("when", DataType::Date32, false))];
        let err = yaml(&fields, 0).unwrap_err();
        assert!(err.contains("`when`"), "{err}");
    }
}
