//! License detection: which root files hold a license, what SPDX id their text is, and whether
//! the allow-list admits it.
//!
//! The classifier is phrase based. A text is normalized (lower case, punctuation and comment
//! markers turned into spaces, whitespace collapsed, dots kept only inside version numbers) and
//! each known license is recognized by phrases only its text (or its usual notice) contains.
//! When several licenses match, the one whose anchor phrase comes first wins: a LICENSE file
//! that states its own terms and then reproduces third-party notices is classified by its own
//! terms. The GNU family is told apart by the first license title in the text and the version
//! number that follows it.

/// How a license was recognized, for one SPDX id.
struct Rule {
    id: &'static str,
    /// The phrase whose position orders competing matches; must be present.
    anchor: &'static str,
    /// Further phrases that must all be present.
    all: &'static [&'static str],
    /// Phrases that must all be absent.
    none: &'static [&'static str],
}

/// Non-GNU licenses; within one anchor position, earlier rules win.
const RULES: &[Rule] = &[
    Rule {
        id: "Apache-2.0",
        anchor: "apache license",
        all: &["version 2.0"],
        none: &[],
    },
    Rule {
        id: "MIT",
        anchor: "permission is hereby granted free of charge to any person obtaining a copy",
        all: &["the above copyright notice and this permission notice shall be included"],
        none: &[],
    },
    Rule {
        id: "MIT-0",
        anchor: "permission is hereby granted free of charge to any person obtaining a copy",
        all: &[],
        none: &["the above copyright notice and this permission notice shall be included"],
    },
    Rule {
        id: "BSD-4-Clause",
        anchor: "redistribution and use in source and binary forms with or without modification are permitted provided that",
        all: &["all advertising materials mentioning features"],
        none: &[],
    },
    Rule {
        id: "BSD-3-Clause",
        anchor: "redistribution and use in source and binary forms with or without modification are permitted provided that",
        all: &["endorse or promote products derived from this software"],
        none: &["all advertising materials mentioning features"],
    },
    Rule {
        id: "BSD-2-Clause",
        anchor: "redistribution and use in source and binary forms with or without modification are permitted provided that",
        all: &["redistributions in binary form must reproduce"],
        none: &[
            "endorse or promote products derived from this software",
            "all advertising materials mentioning features",
        ],
    },
    Rule {
        id: "ISC",
        anchor: "permission to use copy modify and or distribute this software for any purpose with or without fee is hereby granted",
        all: &[
            "provided that the above copyright notice and this permission notice appear in all copies",
        ],
        none: &[],
    },
    Rule {
        id: "ISC",
        anchor: "permission to use copy modify and distribute this software for any purpose with or without fee is hereby granted",
        all: &[
            "provided that the above copyright notice and this permission notice appear in all copies",
        ],
        none: &[],
    },
    Rule {
        id: "0BSD",
        anchor: "permission to use copy modify and or distribute this software for any purpose with or without fee is hereby granted",
        all: &[],
        none: &[
            "provided that the above copyright notice and this permission notice appear in all copies",
        ],
    },
    Rule {
        id: "Unlicense",
        anchor: "this is free and unencumbered software released into the public domain",
        all: &[],
        none: &[],
    },
    Rule {
        id: "CC0-1.0",
        anchor: "cc0 1.0 universal",
        all: &[],
        none: &[],
    },
    Rule {
        id: "CC0-1.0",
        anchor: "creative commons legal code cc0",
        all: &[],
        none: &[],
    },
    Rule {
        id: "MPL-2.0",
        anchor: "mozilla public license",
        all: &["2.0"],
        none: &[],
    },
    Rule {
        id: "BSL-1.0",
        anchor: "boost software license",
        all: &["version 1.0"],
        none: &[],
    },
    Rule {
        id: "Zlib",
        anchor: "this software is provided as is without any express or implied warranty",
        all: &["altered source versions must be plainly marked as such"],
        none: &[],
    },
    Rule {
        id: "PSF-2.0",
        anchor: "python software foundation license",
        all: &[],
        none: &[],
    },
    Rule {
        id: "EPL-2.0",
        anchor: "eclipse public license",
        all: &["v 2.0"],
        none: &[],
    },
    Rule {
        id: "CC-BY-NC-4.0",
        anchor: "attribution noncommercial 4.0 international",
        all: &[],
        none: &[],
    },
    Rule {
        id: "CC-BY-4.0",
        anchor: "attribution 4.0 international",
        all: &[],
        none: &["noncommercial"],
    },
    Rule {
        id: "WTFPL",
        anchor: "do what the fuck you want to public license",
        all: &[],
        none: &[],
    },
];

/// GNU license titles and the SPDX ids per version found after the title.
const GNU_TITLES: &[(&str, &[(&str, &str)])] = &[
    ("gnu affero general public license", &[("3", "AGPL-3.0")]),
    (
        "gnu lesser general public license",
        &[("3", "LGPL-3.0"), ("2.1", "LGPL-2.1")],
    ),
    ("gnu library general public license", &[("2", "LGPL-2.0")]),
    (
        "gnu general public license",
        &[("3", "GPL-3.0"), ("2", "GPL-2.0"), ("1", "GPL-1.0")],
    ),
];

/// How far after a GNU title the version is looked for (normalized characters).
const GNU_VERSION_WINDOW: usize = 160;

/// Normalizes license text for phrase matching.
pub fn normalize(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    for (i, &c) in chars.iter().enumerate() {
        let keep_dot = c == '.'
            && i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit());
        if c.is_alphanumeric() || keep_dot {
            for l in c.to_lowercase() {
                out.push(l);
            }
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// The SPDX id of a license text, or `None` when no known license is recognized.
pub fn classify(text: &str) -> Option<&'static str> {
    let norm = normalize(text);
    // Phrases are written naturally above and normalized here, so they follow the same rules
    // as the text.
    let has = |phrase: &str| norm.contains(&normalize(phrase));
    let mut best: Option<(usize, &'static str)> = None;
    for rule in RULES {
        let Some(pos) = norm.find(&normalize(rule.anchor)) else {
            continue;
        };
        if rule.all.iter().all(|p| has(p))
            && !rule.none.iter().any(|p| has(p))
            && best.is_none_or(|(b, _)| pos < b)
        {
            best = Some((pos, rule.id));
        }
    }
    if let Some((pos, id)) = gnu(&norm)
        && best.is_none_or(|(b, _)| pos < b)
    {
        best = Some((pos, id));
    }
    best.map(|(_, id)| id)
}

/// The first GNU title in the text and the version that follows it.
fn gnu(norm: &str) -> Option<(usize, &'static str)> {
    let (pos, title, versions) = GNU_TITLES
        .iter()
        .filter_map(|(title, versions)| norm.find(title).map(|p| (p, *title, *versions)))
        .min_by_key(|(p, _, _)| *p)?;
    let after = &norm[pos + title.len()..];
    let window: String = after.chars().take(GNU_VERSION_WINDOW).collect();
    let words: Vec<&str> = window.split(' ').collect();
    for pair in words.windows(2) {
        if (pair[0] == "version" || pair[0] == "v")
            && let Some((_, id)) = versions.iter().find(|(v, _)| *v == pair[1])
        {
            return Some((pos, id));
        }
    }
    None
}

/// Root file names that may hold the license, by priority: the main license files first.
pub fn license_file_rank(name: &str) -> Option<u8> {
    let lower = name.to_ascii_lowercase();
    let stem = [".txt", ".md", ".rst", ".markdown"]
        .iter()
        .find_map(|ext| lower.strip_suffix(ext))
        .unwrap_or(&lower);
    match stem {
        "license" | "licence" | "unlicense" => Some(0),
        "copying" => Some(1),
        "copying.lesser" | "license.lesser" => Some(0),
        _ if stem.starts_with("license-")
            || stem.starts_with("licence-")
            || stem.starts_with("license_")
            || stem.starts_with("copying-") =>
        {
            Some(2)
        }
        _ => None,
    }
}

/// Most bytes of a license file that are read.
pub const MAX_LICENSE_BYTES: u64 = 256 * 1024;

/// The outcome of license detection over the root license files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    /// A license was recognized: SPDX id (or `A OR B` for dual-licensed repositories) and the
    /// file(s) it came from.
    Known {
        /// SPDX id or `OR` expression.
        id: String,
        /// The file names that were classified, comma separated.
        file: String,
    },
    /// A license file exists but its text is not one the classifier knows.
    Unknown {
        /// The file that was read.
        file: String,
    },
    /// No license file at the root.
    Missing,
}

/// Detects the license from the root license files (`name`, `text`).
///
/// The most important file decides (LICENSE / LICENCE / UNLICENSE before COPYING before
/// `LICENSE-*`); an `LGPL` text in any of them wins over a GPL text next to it (the usual
/// COPYING + COPYING.LESSER pair). When only `LICENSE-*` files exist and they name different
/// licenses, the repository is dual-licensed: `A OR B`.
pub fn detect(files: &[(String, String)]) -> Detected {
    let mut ranked: Vec<(u8, &str, &str)> = files
        .iter()
        .filter_map(|(name, text)| {
            license_file_rank(name).map(|r| (r, name.as_str(), text.as_str()))
        })
        .collect();
    ranked.sort();
    let Some(&(top_rank, top_name, _)) = ranked.first() else {
        return Detected::Missing;
    };
    let classified: Vec<(u8, &str, Option<&'static str>)> = ranked
        .iter()
        .map(|(r, n, t)| (*r, *n, classify(t)))
        .collect();
    if let Some((_, name, Some(id))) = classified
        .iter()
        .find(|(_, _, id)| id.is_some_and(|i| i.starts_with("LGPL")))
    {
        return Detected::Known {
            id: id.to_string(),
            file: name.to_string(),
        };
    }
    if top_rank < 2 {
        return match classified
            .iter()
            .find(|(r, _, _)| *r == top_rank)
            .and_then(|(_, n, id)| id.map(|id| (n, id)))
        {
            Some((name, id)) => Detected::Known {
                id: id.to_string(),
                file: name.to_string(),
            },
            None => Detected::Unknown {
                file: top_name.to_string(),
            },
        };
    }
    let mut ids: Vec<&str> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (_, name, id) in &classified {
        if let Some(id) = id {
            names.push(name);
            if !ids.contains(id) {
                ids.push(id);
            }
        }
    }
    if ids.is_empty() {
        return Detected::Unknown {
            file: top_name.to_string(),
        };
    }
    ids.sort_unstable();
    Detected::Known {
        id: ids.join(" OR "),
        file: names.join(","),
    }
}

pub use ksmith_core::spdx::{is_allowed, is_plausible_spdx_id};

#[cfg(test)]
mod tests {
    use super::*;

    // Short excerpts written from memory of each license's distinctive wording.
    const MIT: &str = "MIT License\n\nCopyright (c) 2024 Someone\n\nPermission is hereby granted, free of charge, to any person obtaining a copy\nof this software and associated documentation files (the \"Software\"), to deal\nin the Software without restriction...\n\nThe above copyright notice and this permission notice shall be included in all\ncopies or substantial portions of the Software.\n\nTHE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND";
    const APACHE: &str = "                                 Apache License\n                           Version 2.0, January 2004\n                        http://www.apache.org/licenses/\n\n   TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION";
    const BSD3: &str = "Copyright (c) 2020, Someone\nAll rights reserved.\n\nRedistribution and use in source and binary forms, with or without\nmodification, are permitted provided that the following conditions are met:\n\n1. Redistributions of source code must retain the above copyright notice.\n2. Redistributions in binary form must reproduce the above copyright notice.\n3. Neither the name of the copyright holder nor the names of its\n   contributors may be used to endorse or promote products derived from\n   this software without specific prior written permission.";
    const BSD2: &str = "Redistribution and use in source and binary forms, with or without\nmodification, are permitted provided that the following conditions are met:\n\n* Redistributions of source code must retain the above copyright notice.\n* Redistributions in binary form must reproduce the above copyright notice,\n  this list of conditions and the following disclaimer.";
    const BSD4: &str = "Redistribution and use in source and binary forms, with or without modification, are permitted provided that the following conditions are met:\n3. All advertising materials mentioning features or use of this software must display the following acknowledgement";
    const ISC: &str = "ISC License\n\nPermission to use, copy, modify, and/or distribute this software for any\npurpose with or without fee is hereby granted, provided that the above\ncopyright notice and this permission notice appear in all copies.";
    const ZERO_BSD: &str = "Permission to use, copy, modify, and/or distribute this software for any\npurpose with or without fee is hereby granted.\n\nTHE SOFTWARE IS PROVIDED \"AS IS\"";
    const UNLICENSE: &str = "This is free and unencumbered software released into the public domain.\n\nAnyone is free to copy, modify, publish, use, compile, sell, or distribute";
    const CC0: &str = "Creative Commons Legal Code\n\nCC0 1.0 Universal\n\n    CREATIVE COMMONS CORPORATION IS NOT A LAW FIRM";
    const MPL: &str =
        "Mozilla Public License Version 2.0\n==================================\n\n1. Definitions";
    const BSL: &str = "Boost Software License - Version 1.0 - August 17th, 2003\n\nPermission is hereby granted, free of charge, to any person or organization";
    const ZLIB: &str = "This software is provided 'as-is', without any express or implied\nwarranty. In no event will the authors be held liable.\n\n2. Altered source versions must be plainly marked as such, and must not be\n   misrepresented as being the original software.";
    const GPL3: &str = "                    GNU GENERAL PUBLIC LICENSE\n                       Version 3, 29 June 2007\n\n Copyright (C) 2007 Free Software Foundation, Inc.\n...\n  13. Use with the GNU Affero General Public License.";
    const GPL2: &str = "GNU GENERAL PUBLIC LICENSE\n Version 2, June 1991\n\n...\n(Some other Free Software Foundation software is covered by\nthe GNU Library General Public License instead.)";
    const LGPL21: &str = "GNU LESSER GENERAL PUBLIC LICENSE\n Version 2.1, February 1999";
    const LGPL3: &str = "                   GNU LESSER GENERAL PUBLIC LICENSE\n                       Version 3, 29 June 2007\n\n  This version of the GNU Lesser General Public License incorporates\nthe terms and conditions of version 3 of the GNU General Public\nLicense";
    const AGPL3: &str = "GNU AFFERO GENERAL PUBLIC LICENSE\n Version 3, 19 November 2007";
    const GPL3_NOTICE: &str = "# This program is free software: you can redistribute it and/or modify\n# it under the terms of the GNU General Public License as published by\n# the Free Software Foundation, either version 3 of the License, or\n# (at your option) any later version.";

    #[test]
    fn classifies_each_known_license() {
        let cases = [
            (MIT, "MIT"),
            (APACHE, "Apache-2.0"),
            (BSD3, "BSD-3-Clause"),
            (BSD2, "BSD-2-Clause"),
            (BSD4, "BSD-4-Clause"),
            (ISC, "ISC"),
            (ZERO_BSD, "0BSD"),
            (UNLICENSE, "Unlicense"),
            (CC0, "CC0-1.0"),
            (MPL, "MPL-2.0"),
            (BSL, "BSL-1.0"),
            (ZLIB, "Zlib"),
            (GPL3, "GPL-3.0"),
            (GPL2, "GPL-2.0"),
            (LGPL21, "LGPL-2.1"),
            (LGPL3, "LGPL-3.0"),
            (AGPL3, "AGPL-3.0"),
            (GPL3_NOTICE, "GPL-3.0"),
        ];
        for (text, id) in cases {
            assert_eq!(
                classify(text),
                Some(id),
                "text: {}",
                &text[..40.min(text.len())]
            );
        }
    }

    #[test]
    fn unknown_text_is_none() {
        assert_eq!(classify("All rights reserved. Do not copy."), None);
        assert_eq!(classify(""), None);
        // A GNU title without a version is not guessed.
        assert_eq!(classify("see the GNU General Public License"), None);
    }

    #[test]
    fn own_terms_win_over_appended_notices() {
        let text = format!("{APACHE}\n\nThird-party notices:\n{MIT}\n{GPL2}");
        assert_eq!(classify(&text), Some("Apache-2.0"));
        let text = format!("{MIT}\n\nbundled code:\n{APACHE}");
        assert_eq!(classify(&text), Some("MIT"));
    }

    #[test]
    fn normalization_ignores_layout_and_comment_markers() {
        let wrapped = MIT.replace('\n', "\n# ").replace(' ', "  ").to_uppercase();
        assert_eq!(classify(&wrapped), Some("MIT"));
        assert_eq!(
            normalize("Version 2.0, (c) and/or."),
            "version 2.0 c and or"
        );
    }

    #[test]
    fn license_file_names() {
        for name in [
            "LICENSE",
            "license.txt",
            "LICENCE.md",
            "COPYING",
            "UNLICENSE",
            "LICENSE-MIT",
        ] {
            assert!(license_file_rank(name).is_some(), "{name}");
        }
        for name in ["README.md", "setup.py", "license.py", "LICENSES"] {
            assert!(license_file_rank(name).is_none(), "{name}");
        }
    }

    #[test]
    fn detect_picks_the_main_file_and_dual_licenses() {
        let f = |n: &str, t: &str| (n.to_string(), t.to_string());
        assert_eq!(detect(&[]), Detected::Missing);
        assert_eq!(
            detect(&[f("LICENSE", MIT), f("LICENSE-APACHE", APACHE)]),
            Detected::Known {
                id: "MIT".into(),
                file: "LICENSE".into()
            }
        );
        assert_eq!(
            detect(&[f("LICENSE-MIT", MIT), f("LICENSE-APACHE", APACHE)]),
            Detected::Known {
                id: "Apache-2.0 OR MIT".into(),
                file: "LICENSE-APACHE,LICENSE-MIT".into()
            }
        );
        assert_eq!(
            detect(&[f("COPYING", GPL3), f("COPYING.LESSER", LGPL3)]),
            Detected::Known {
                id: "LGPL-3.0".into(),
                file: "COPYING.LESSER".into()
            }
        );
        assert_eq!(
            detect(&[f("LICENSE", "proprietary, all rights reserved")]),
            Detected::Unknown {
                file: "LICENSE".into()
            }
        );
    }
}
