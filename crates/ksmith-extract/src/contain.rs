//! Containing the unexpected: a panic while extracting one class or one repository becomes that
//! class's or repository's `failed` row (`internal_error: ...`), and the rest of the stage
//! finishes. A panic is a bug in extract, never a verdict on the input; the row names it so it
//! can be reported and fixed.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `f`; a panic inside it becomes `Err("internal_error: <what> panicked: <message>")`.
///
/// The shared state a panicking extraction may leave behind is only caches behind mutexes,
/// which every reader treats as empty when poisoned, so continuing is sound.
pub(crate) fn contained<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|payload| format!("internal_error: {what} panicked: {}", message(&*payload)))
}

fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_reason_and_a_value_passes_through() {
        assert_eq!(contained("adding", || 2 + 2), Ok(4));
        let index = [1, 2, 3];
        let at = index.len() + 1;
        let err = contained("indexing pkg/net.v1.py", || index[at]).unwrap_err();
        assert!(
            err.starts_with("internal_error: indexing pkg/net.v1.py panicked: index out of bounds"),
            "{err}"
        );
        let err = contained("formatting", || -> u8 { panic!("bad {}", 7) }).unwrap_err();
        assert_eq!(err, "internal_error: formatting panicked: bad 7");
    }
}
