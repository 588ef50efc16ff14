//! The runner's defaults are defined once (`python/ksmith/probe/defaults.json`): a default
//! configuration sends exactly them (`test_probe_defaults.py` checks the runner falls back to
//! them).

#![allow(clippy::unwrap_used)]

use crate::common::module;
use ksmith_probe::config::{ProbeConfig, RUNNER_DEFAULTS_JSON};
use ksmith_probe::pool::request_for;

/// Every value a request carries (but the module's own) is, by default, the value the runner
/// defaults to, with nothing left over.
#[test]
fn the_default_request_is_the_runners_defaults_json() {
    let mut m = module("m", "x".into());
    m.arg_sources = vec!["dim=64: call net.py:3".into()];
    let sent = request_for(&m, "x", &ProbeConfig::default(), None, false);
    let mut sent = serde_json::to_value(sent).unwrap();
    let sent = sent.as_object_mut().unwrap();
    // the module's own: where its arguments came from, and whether an observation overrides them
    assert_eq!(
        sent["arg_sources"],
        serde_json::json!(["dim=64: call net.py:3"])
    );
    assert_eq!(sent["observed"], serde_json::Value::Bool(false));
    for own in ["v", "id", "program", "override", "arg_sources", "observed"] {
        sent.remove(own).unwrap();
    }
    let mut file: serde_json::Value = serde_json::from_str(RUNNER_DEFAULTS_JSON).unwrap();
    // `enabled` is this side's: a request carries `sizing` only when it is on.
    let enabled = file["sizing"].as_object_mut().unwrap().remove("enabled");
    assert_eq!(enabled, Some(serde_json::Value::Bool(true)));
    assert!(ProbeConfig::default().sizing.enabled);
    sent["sizing"].as_object_mut().unwrap().remove("enabled");
    assert_eq!(serde_json::Value::Object(sent.clone()), file);
}
