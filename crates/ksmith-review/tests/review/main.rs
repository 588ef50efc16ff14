//! The review page end to end in headless Chromium.

#![allow(clippy::unwrap_used)] // Test fixtures: a failure here is a test failure.

#[path = "../../../ksmith-report/tests/support/chromium.rs"]
mod chromium;

mod cdp;
mod page;
