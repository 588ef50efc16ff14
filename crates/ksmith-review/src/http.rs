//! Just enough HTTP/1.1 for a page on the loopback interface: one request per connection, a
//! request line, headers and a `Content-Length` body of bounded size; responses close the
//! connection.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The largest request body accepted (a form with a note).
pub const MAX_BODY: usize = 1 << 20;
/// The largest request line or header line accepted.
const MAX_LINE: usize = 8 << 10;

/// One request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// Headers by lowercase name.
    pub headers: HashMap<String, String>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a request could not be read (answered with 400 when the connection still works).
#[derive(Debug, thiserror::Error)]
pub enum BadRequest {
    /// The connection failed or closed early.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The request is not one this server reads.
    #[error("{0}")]
    Malformed(String),
}

fn line(reader: &mut impl BufRead) -> Result<String, BadRequest> {
    let mut buf = Vec::new();
    reader
        .by_ref()
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut buf)?;
    if buf.len() > MAX_LINE {
        return Err(BadRequest::Malformed("line too long".into()));
    }
    String::from_utf8(buf)
        .map(|s| s.trim_end_matches(['\r', '\n']).to_string())
        .map_err(|_| BadRequest::Malformed("not UTF-8".into()))
}

/// Reads one request from `stream` (10 s to arrive).
pub fn read_request(stream: &TcpStream) -> Result<Request, BadRequest> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream);
    let first = line(&mut reader)?;
    let mut parts = first.split(' ');
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Err(BadRequest::Malformed(format!("request line {first:?}")));
    };
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    let mut headers = HashMap::new();
    for _ in 0..100 {
        let h = line(&mut reader)?;
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let length: usize = match headers.get("content-length") {
        Some(v) => v
            .parse()
            .map_err(|_| BadRequest::Malformed(format!("content-length {v:?}")))?,
        None => 0,
    };
    if length > MAX_BODY {
        return Err(BadRequest::Malformed(format!(
            "body of {length} bytes (at most {MAX_BODY})"
        )));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Request {
        method: method.to_string(),
        path,
        headers,
        body,
    })
}

/// Writes a response with `status` (e.g. `200 OK`), extra headers and a body, then closes.
pub fn respond(
    mut stream: &TcpStream,
    status: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}
