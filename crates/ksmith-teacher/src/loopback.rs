//! A scripted OpenAI-compatible server on `127.0.0.1`, for tests (feature `loopback`).
//!
//! [`LoopbackServer::start`] binds an ephemeral port and answers each `POST` with what a
//! responder returns for it: a completion, an HTTP error, garbage, a slow reply or a dropped
//! connection. Every connection is answered once and closed. The server stops when dropped
//! (the accept loop polls a stop flag), so a test never hangs on it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One scripted reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A completion with this content and `finish_reason` (`stop`, `length`, ...).
    Chat {
        /// The answer text.
        content: String,
        /// The finish reason.
        finish_reason: String,
        /// Reasoning text sent as `reasoning_content`.
        reasoning: Option<String>,
    },
    /// A status code and a raw body (garbage, an error object, ...).
    Status {
        /// HTTP status.
        status: u16,
        /// Body bytes.
        body: String,
        /// Value of a `Retry-After` header.
        retry_after: Option<String>,
    },
    /// Waits, then sends the inner reply (slow answers, timeouts).
    Delay(Duration, Box<Reply>),
    /// Closes the connection without answering.
    Hangup,
}

impl Reply {
    /// A normal completion ending with `stop`.
    pub fn chat(content: impl Into<String>) -> Reply {
        Reply::Chat {
            content: content.into(),
            finish_reason: "stop".into(),
            reasoning: None,
        }
    }

    /// An HTTP status with a plain body.
    pub fn status(status: u16, body: impl Into<String>) -> Reply {
        Reply::Status {
            status,
            body: body.into(),
            retry_after: None,
        }
    }
}

/// A request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// Request path.
    pub path: String,
    /// `Authorization` header, when sent.
    pub authorization: Option<String>,
    /// The JSON body.
    pub body: serde_json::Value,
}

impl Received {
    /// The content of the last message with `role`, or "" when none.
    pub fn message(&self, role: &str) -> String {
        self.body["messages"]
            .as_array()
            .and_then(|m| {
                m.iter()
                    .rev()
                    .find(|x| x["role"] == role)
                    .and_then(|x| x["content"].as_str())
            })
            .unwrap_or("")
            .to_string()
    }
}

type Responder = dyn Fn(&Received, usize) -> Reply + Send + Sync;

/// The running server; stops when dropped.
pub struct LoopbackServer {
    url: String,
    stop: Arc<AtomicBool>,
    received: Arc<Mutex<Vec<Received>>>,
    accept: Option<JoinHandle<()>>,
}

impl LoopbackServer {
    /// Serves the replies of `script` in order; once it is exhausted every request gets HTTP 503.
    pub fn scripted(script: Vec<Reply>) -> std::io::Result<LoopbackServer> {
        LoopbackServer::start(move |_, n| {
            script
                .get(n)
                .cloned()
                .unwrap_or_else(|| Reply::status(503, "script exhausted"))
        })
    }

    /// Serves whatever `responder` returns for the n-th request (counting from 0).
    pub fn start(
        responder: impl Fn(&Received, usize) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<LoopbackServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}/v1", listener.local_addr()?);
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(Mutex::new(Vec::new()));
        let responder: Arc<Responder> = Arc::new(responder);
        let accept = {
            let stop = stop.clone();
            let received = received.clone();
            std::thread::spawn(move || accept_loop(listener, stop, received, responder))
        };
        Ok(LoopbackServer {
            url,
            stop,
            received,
            accept: Some(accept),
        })
    }

    /// The base URL (`http://127.0.0.1:PORT/v1`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Requests received so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    received: Arc<Mutex<Vec<Received>>>,
    responder: Arc<Responder>,
) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let received = received.clone();
                let responder = responder.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &received, &*responder, &stop);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn serve(
    stream: TcpStream,
    received: &Mutex<Vec<Received>>,
    responder: &Responder,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut length = 0usize;
    let mut authorization = None;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let k = k.trim().to_ascii_lowercase();
            if k == "content-length" {
                length = v.trim().parse().unwrap_or(0);
            } else if k == "authorization" {
                authorization = Some(v.trim().to_string());
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let req = Received {
        path,
        authorization,
        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    };
    let n = {
        let mut r = received.lock().unwrap_or_else(|e| e.into_inner());
        r.push(req.clone());
        r.len() - 1
    };
    let mut reply = responder(&req, n);
    let mut stream = stream;
    loop {
        match reply {
            Reply::Delay(d, inner) => {
                let until = std::time::Instant::now() + d;
                while std::time::Instant::now() < until && !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                reply = *inner;
            }
            Reply::Hangup => return Ok(()),
            Reply::Chat {
                content,
                finish_reason,
                reasoning,
            } => {
                let model = req.body["model"].as_str().unwrap_or("loopback").to_string();
                let mut message = serde_json::json!({"role": "assistant", "content": content});
                if let Some(r) = reasoning {
                    message["reasoning_content"] = serde_json::Value::String(r);
                }
                let prompt_chars: usize = req.body["messages"]
                    .as_array()
                    .map(|m| {
                        m.iter()
                            .map(|x| x["content"].as_str().map_or(0, str::len))
                            .sum()
                    })
                    .unwrap_or(0);
                let body = serde_json::json!({
                    "id": format!("cmpl-{n}"),
                    "object": "chat.completion",
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
                    "usage": {"prompt_tokens": prompt_chars / 4, "completion_tokens": content.len() / 4}
                });
                return write_reply(&mut stream, 200, &body.to_string(), None);
            }
            Reply::Status {
                status,
                body,
                retry_after,
            } => return write_reply(&mut stream, status, &body, retry_after.as_deref()),
        }
    }
}

fn write_reply(
    stream: &mut TcpStream,
    status: u16,
    body: &str,
    retry_after: Option<&str>,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(ra) = retry_after {
        head.push_str(&format!("Retry-After: {ra}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}
