//! SPDX license ids as the configuration and the manifests give them: a plausibility check and
//! allow-list matching, shared by crawl (the license it detects or is given) and discover (the
//! license GitHub reports), so both stages accept exactly the same licenses.

/// True when `id` looks like an SPDX license id or an `OR` expression of them.
pub fn is_plausible_spdx_id(id: &str) -> bool {
    id.split(" OR ").all(|part| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
    })
}

/// Whether a license (an SPDX id or `A OR B ...`) is on the allow-list. Ids compare
/// case-insensitively; an `-only` suffix compares equal to the bare id (`GPL-3.0-only` is
/// `GPL-3.0`).
pub fn is_allowed(license: &str, allowed: &[String]) -> bool {
    let canon = |s: &str| {
        let s = s.trim().to_ascii_lowercase();
        s.strip_suffix("-only").map(str::to_string).unwrap_or(s)
    };
    license
        .split(" OR ")
        .any(|part| allowed.iter().any(|a| canon(a) == canon(part)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list_matching() {
        let allowed: Vec<String> = ["MIT", "Apache-2.0", "GPL-3.0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(is_allowed("MIT", &allowed));
        assert!(is_allowed("mit", &allowed));
        assert!(is_allowed("GPL-3.0-only", &allowed));
        assert!(is_allowed("Apache-2.0 OR BSD-4-Clause", &allowed));
        assert!(!is_allowed("BSD-4-Clause", &allowed));
        assert!(!is_allowed("GPL-3.0-or-later", &allowed));
        assert!(is_plausible_spdx_id("Apache-2.0 OR MIT"));
        assert!(!is_plausible_spdx_id("MIT License"));
    }
}
