//! Content hashes used as stable ids.
//!
//! An id is the first 16 bytes of a BLAKE3 hash, written as 32 lowercase hex digits. The same
//! content always gets the same id, on any machine and in any run.

/// Length of an id in hex digits.
pub const ID_HEX_LEN: usize = 32;

/// The id of a byte string.
pub fn content_id(bytes: impl AsRef<[u8]>) -> String {
    let hash = blake3::hash(bytes.as_ref());
    hex(&hash.as_bytes()[..ID_HEX_LEN / 2])
}

/// An incremental hasher for ids over several parts.
///
/// Parts are length-prefixed, so `["ab", "c"]` and `["a", "bc"]` give different ids.
#[derive(Default, Clone)]
pub struct IdHasher(blake3::Hasher);

impl IdHasher {
    /// A new hasher.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one part.
    pub fn part(&mut self, bytes: impl AsRef<[u8]>) -> &mut Self {
        let bytes = bytes.as_ref();
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    /// The id of all parts added so far.
    pub fn finish(&self) -> String {
        hex(&self.0.finalize().as_bytes()[..ID_HEX_LEN / 2])
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 0xf) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_content_addressed() {
        let a = content_id("class Model: pass");
        assert_eq!(a.len(), ID_HEX_LEN);
        assert_eq!(a, content_id("class Model: pass"));
        assert_ne!(a, content_id("class Model:  pass"));
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }

    #[test]
    fn parts_are_length_prefixed() {
        let ab_c = IdHasher::new().part("ab").part("c").finish();
        let a_bc = IdHasher::new().part("a").part("bc").finish();
        assert_ne!(ab_c, a_bc);
    }
}
