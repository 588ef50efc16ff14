//! A small Chrome DevTools Protocol client over `--remote-debugging-pipe`: the browser reads
//! NUL-separated JSON commands from its fd 3 and writes answers and events to its fd 4. The
//! two pipes are named FIFOs the shell opens as those descriptors, so the test needs no
//! WebSocket library and no unsafe code.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long one command or awaited event may take.
const TIMEOUT: Duration = Duration::from_secs(60);

/// A headless browser with one page attached.
pub(crate) struct Browser {
    child: Child,
    to: File,
    from: Receiver<Value>,
    next_id: u64,
    session: String,
}

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {}", path.display());
}

impl Browser {
    /// Starts the browser (profile and pipes in `dir`) and attaches to a blank page.
    pub(crate) fn start(dir: &Path) -> Browser {
        let (to_path, from_path) = (dir.join("cdp-in"), dir.join("cdp-out"));
        mkfifo(&to_path);
        mkfifo(&from_path);
        let mut args = super::chromium::headless_args(dir);
        args.push("--remote-debugging-pipe".into());
        args.push("about:blank".into());
        let child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<"$CDP_IN" 4>"$CDP_OUT""#)
            .arg(super::chromium::chromium())
            .args(args)
            .env("CDP_IN", &to_path)
            .env("CDP_OUT", &from_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium starts");
        // Opening a FIFO waits for the other end: the shell opens fd 3, then fd 4.
        let to = OpenOptions::new()
            .write(true)
            .open(&to_path)
            .expect("command pipe");
        let from = File::open(&from_path).expect("event pipe");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from);
            loop {
                let mut buf = Vec::new();
                match reader.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        buf.pop_if(|b| *b == 0);
                        if let Ok(v) = serde_json::from_slice::<Value>(&buf)
                            && tx.send(v).is_err()
                        {
                            break;
                        }
                    }
                }
            }
        });
        let mut browser = Browser {
            child,
            to,
            from: rx,
            next_id: 0,
            session: String::new(),
        };
        let target = browser.call_browser("Target.createTarget", json!({"url": "about:blank"}));
        let attached = browser.call_browser(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("session id")
            .to_string();
        browser.call("Page.enable", json!({}));
        browser
    }

    fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> u64 {
        self.next_id += 1;
        let mut msg = json!({"id": self.next_id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).expect("json");
        bytes.push(0);
        self.to.write_all(&bytes).expect("browser pipe");
        self.next_id
    }

    /// Waits for the first message `pick` accepts (events before it are dropped).
    fn wait_for(&self, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from.recv_timeout(left) {
                Ok(v) if pick(&v) => return v,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!("no {what} within {TIMEOUT:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("the browser closed its pipe"),
            }
        }
    }

    fn result_of(&self, id: u64, method: &str) -> Value {
        let v = self.wait_for(method, |v| v["id"] == json!(id));
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }

    fn call_browser(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params, None);
        self.result_of(id, method)
    }

    /// Sends a command to the page and returns its result.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        let id = self.send(method, params, Some(&session));
        self.result_of(id, method)
    }

    /// Runs `action` and waits until the page it leads to has loaded.
    pub(crate) fn until_loaded(&mut self, action: impl FnOnce(&mut Browser)) {
        action(self);
        let session = self.session.clone();
        self.wait_for("Page.loadEventFired", |v| {
            v["method"] == "Page.loadEventFired" && v["sessionId"] == json!(session)
        });
    }

    /// Opens `url` and waits for it to load.
    pub(crate) fn open(&mut self, url: &str) {
        self.until_loaded(|b| {
            b.call("Page.navigate", json!({"url": url}));
        });
    }

    /// The value of a JavaScript expression evaluated in the page.
    pub(crate) fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// Clicks the element matching `selector` with the mouse, as a person would: scrolled into
    /// view, pressed and released at its centre.
    pub(crate) fn click(&mut self, selector: &str) {
        let selector_js = serde_json::to_string(selector).expect("json");
        let rect = self.eval(&format!(
            "(() => {{ const e = document.querySelector({selector_js}); if (!e) return null; \
             e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); \
             return [r.x + r.width / 2, r.y + r.height / 2]; }})()"
        ));
        let (x, y) = (
            rect[0]
                .as_f64()
                .unwrap_or_else(|| panic!("no element {selector}")),
            rect[1].as_f64().expect("y"),
        );
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            );
        }
    }

    /// Types `text` into the focused element, key by key.
    pub(crate) fn type_text(&mut self, text: &str) {
        self.call("Input.insertText", json!({"text": text}));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
