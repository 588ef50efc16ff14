//! configs/default.toml is the documentation of every configuration key: each key of each
//! stage's section appears there with its default value (or commented out, for keys whose
//! default is "unset"), and nothing there differs from the defaults in the code.

use ksmith_cli::stages::StageConfigs;

fn default_toml() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../configs/default.toml"
    ))
    .expect("configs/default.toml")
}

#[test]
fn every_key_is_documented_with_its_default() {
    let text = default_toml();
    let file: toml::Table = toml::from_str(&text).expect("default.toml parses");
    let defaults = toml::Table::try_from(StageConfigs::default()).expect("defaults serialize");
    let mut problems = Vec::new();
    for (section, value) in &defaults {
        let Some(keys) = value.as_table() else {
            continue;
        };
        let documented = file.get(section).and_then(|v| v.as_table());
        for (key, default) in keys {
            match documented.and_then(|t| t.get(key)) {
                Some(v) if v == default => {}
                Some(v) => problems.push(format!(
                    "[{section}] {key} = {v} in default.toml, but the code's default is {default}"
                )),
                None => {
                    // Keys whose default is "unset" (or a list of tables) are documented as a
                    // commented line.
                    let commented = [format!("# {key} ="), format!("# [[{section}.{key}]]")];
                    let in_section = text
                        .split(&format!("\n[{section}]\n"))
                        .nth(1)
                        .is_some_and(|rest| commented.iter().any(|c| rest.contains(c)));
                    if !in_section {
                        problems.push(format!("[{section}] {key} is not documented"));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_default_file_is_a_valid_configuration() {
    let cfg = ksmith_core::config::Config::parse(&default_toml(), "default.toml").expect("parses");
    StageConfigs::from_config(&cfg).expect("every section validates");
    assert!(
        !cfg.sources.is_empty(),
        "the default crawls the sample corpus"
    );
}
