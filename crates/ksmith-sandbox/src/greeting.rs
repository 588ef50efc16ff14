//! Reading a worker's output and its greeting, the same way for every stage.
//!
//! A worker writes JSON lines on its stdout, the first one its greeting: an object with the
//! protocol version `v`, `"type": "hello"` and `sandbox` (what the sandbox set up; see
//! [`missing`]), plus what the stage's own protocol adds. [`lines`] reads the output on a thread
//! of its own, so a worker that says nothing cannot block the caller past [`first_line`]'s
//! timeout; [`parse_greeting`] checks the greeting and hands the stage its object.
//!
//! A worker that gives no greeting may have refused to run without the whole sandbox; [`unstarted`]
//! tells that one line from any other failure.
//!
//! [`missing`]: crate::missing

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

/// Why a worker gave no first line.
#[derive(Debug, thiserror::Error)]
pub enum NoGreeting {
    /// It wrote nothing within the timeout.
    #[error("no greeting within {0:?}")]
    Silent(Duration),
    /// Its output ended (it exited) before a first line.
    #[error("it exited at start")]
    Exited,
    /// Its output could not be read.
    #[error("reading its output: {0}")]
    Unreadable(#[source] std::io::Error),
}

/// The lines of `output` (without their line ends), read on a thread of its own; the channel
/// ends when the output does (after an error, if reading failed).
pub fn lines(output: impl Read + Send + 'static) -> Receiver<std::io::Result<String>> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(output);
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {
                    let end = line.trim_end_matches(['\n', '\r']).len();
                    line.truncate(end);
                    if tx.send(Ok(line)).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    break;
                }
            }
        }
    });
    rx
}

/// The first line of a worker's output, waiting up to `timeout`.
pub fn first_line(
    lines: &Receiver<std::io::Result<String>>,
    timeout: Duration,
) -> Result<String, NoGreeting> {
    match lines.recv_timeout(timeout) {
        Ok(Ok(line)) => Ok(line),
        Ok(Err(e)) => Err(NoGreeting::Unreadable(e)),
        Err(RecvTimeoutError::Timeout) => Err(NoGreeting::Silent(timeout)),
        Err(RecvTimeoutError::Disconnected) => Err(NoGreeting::Exited),
    }
}

/// A worker that gave no greeting, as a stage reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unstarted {
    /// It refused to run without the whole sandbox: its one line is the error.
    Refused(crate::Refused),
    /// Anything else: why, with the end of what it wrote on stderr.
    Failed(String),
}

/// What became of a worker that gave no greeting (`why`), from what it wrote on stderr.
pub fn unstarted(why: &NoGreeting, stderr: &str) -> Unstarted {
    match crate::refusal(stderr) {
        Some(refused) => Unstarted::Refused(refused),
        None => Unstarted::Failed(format!("{why}; stderr:\n{}", end_of(stderr.trim(), 2000))),
    }
}

/// The last `max` bytes of `text` at most, cut at a character boundary.
fn end_of(text: &str, max: usize) -> &str {
    let start = text.len().saturating_sub(max);
    let start = (start..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    &text[start..]
}

/// The greeting object of `line`, if it is one of protocol `version`; otherwise what is wrong
/// with it, in words.
pub fn parse_greeting(
    line: &str,
    version: u32,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let object = match serde_json::from_str::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(o)) => o,
        Ok(_) => return Err(format!("its first line is not an object: {}", line.trim())),
        Err(e) => {
            return Err(format!("its first line is not JSON ({e}): {}", line.trim()));
        }
    };
    let kind = object.get("type").and_then(|t| t.as_str()).unwrap_or("");
    let v = object.get("v").and_then(|v| v.as_u64());
    if v != Some(u64::from(version)) {
        return Err(format!(
            "it speaks protocol version {} (`{kind}`), this ksmith speaks {version}",
            object
                .get("v")
                .map_or_else(|| "none".into(), |v| v.to_string())
        ));
    }
    if kind != "hello" {
        return Err(format!("its first message is `{kind}`, not a hello"));
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_arrive_without_their_ends_and_the_channel_ends_with_the_output() {
        let rx = lines(std::io::Cursor::new(b"{\"a\": 1}\r\nsecond\nlast".to_vec()));
        let got: Vec<String> = rx.iter().map(|l| l.unwrap()).collect();
        assert_eq!(got, ["{\"a\": 1}", "second", "last"]);
    }

    #[test]
    fn a_silent_or_finished_worker_has_no_greeting() {
        let (_tx, rx) = channel::<std::io::Result<String>>();
        let e = first_line(&rx, Duration::from_millis(20)).unwrap_err();
        assert!(matches!(e, NoGreeting::Silent(_)), "{e}");
        let rx = lines(std::io::Cursor::new(Vec::new()));
        assert!(matches!(
            first_line(&rx, Duration::from_secs(5)),
            Err(NoGreeting::Exited)
        ));
    }

    #[test]
    fn a_refusal_is_told_from_other_silent_starts() {
        let refused = format!("Traceback...\n{}bubblewrap is missing\n", crate::REFUSAL);
        match unstarted(&NoGreeting::Exited, &refused) {
            Unstarted::Refused(r) => assert!(r.0.ends_with("bubblewrap is missing"), "{r}"),
            other => panic!("{other:?}"),
        }
        let long = format!("{}é the end", "x".repeat(5000));
        match unstarted(&NoGreeting::Silent(Duration::from_secs(2)), &long) {
            Unstarted::Failed(m) => {
                assert!(m.starts_with("no greeting within 2s; stderr:\n"), "{m}");
                assert!(m.ends_with("é the end") && m.len() < 2100, "{}", m.len());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_greeting_must_be_a_hello_of_this_version() {
        let hello = parse_greeting(r#"{"v": 3, "type": "hello", "sandbox": {}}"#, 3).unwrap();
        assert_eq!(hello["type"], "hello");
        for (line, needle) in [
            (r#"{"v": 2, "type": "hello"}"#, "version 2 (`hello`)"),
            (r#"{"type": "hello"}"#, "version none"),
            (r#"{"v": 3, "type": "result"}"#, "`result`, not a hello"),
            ("[1]", "not an object"),
            ("Traceback (most recent call last):", "not JSON"),
        ] {
            let e = parse_greeting(line, 3).unwrap_err();
            assert!(e.contains(needle), "{line}: {e}");
        }
    }
}
