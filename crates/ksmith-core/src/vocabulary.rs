//! Closed vocabularies: enums whose variants have one stable name each.
//!
//! Statuses, verdicts, methods and reasons are stored in the tables as strings, counted in the
//! reports under those strings and spoken across the Python boundary. [`vocabulary!`] declares
//! such an enum once, with the name of every variant written next to it; the serde form, the
//! [`Vocabulary`] methods (`as_str`, `parse`, `ALL`) and `Display` all come from that one list,
//! so no code needs to round-trip a value through serde to learn its name.
//!
//! [`vocabulary!`]: crate::vocabulary!

/// What every enum declared with [`vocabulary!`](crate::vocabulary!) offers.
pub trait Vocabulary: Sized + Copy + 'static {
    /// Every variant, in declaration order.
    const ALL: &'static [Self];

    /// The stable name of the variant (as stored in the tables).
    fn as_str(self) -> &'static str;

    /// The variant called `name`, if any.
    fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.as_str() == name)
    }

    /// Every name, in declaration order.
    fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|v| v.as_str()).collect()
    }
}

/// Declares an enum of a closed vocabulary: each variant with its stable name.
///
/// ```
/// use ksmith_core::vocabulary::Vocabulary;
///
/// ksmith_core::vocabulary! {
///     /// How a thing ended.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
///     pub enum Ending {
///         /// It worked.
///         Done = "done",
///         /// It ran out of time.
///         TimedOut = "timed_out",
///     }
/// }
///
/// assert_eq!(Ending::TimedOut.as_str(), "timed_out");
/// assert_eq!(Ending::parse("done"), Some(Ending::Done));
/// assert_eq!(serde_json::to_string(&Ending::TimedOut)?, "\"timed_out\"");
/// assert_eq!(Ending::TimedOut.to_string(), "timed_out");
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// The derives are the caller's (serde's included); the macro adds the serde name of every
/// variant, `as_str` and `parse` (inherent, so callers need no import), the [`Vocabulary`]
/// implementation and `Display`.
#[macro_export]
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* #[serde(rename = $text)] $variant, )+
        }

        impl $name {
            /// The stable name of the variant (as stored in the tables).
            $vis const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The variant called `name`, if any.
            $vis fn parse(name: &str) -> Option<Self> {
                match name {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl $crate::vocabulary::Vocabulary for $name {
            const ALL: &'static [Self] = &[$($name::$variant),+];

            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }

            fn parse(name: &str) -> Option<Self> {
                $name::parse(name)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str($name::as_str(*self))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Vocabulary;
    use crate::evaluation::{EvalStatus, HackKind, TimingMethod};
    use crate::tables::{
        DedupMethod, EditFormat, EditOutcome, GrpoSelection, ModuleReason, ModuleStatus,
        ProbeStatus, RepoReason, RepoStatus, ReviewVerdict, SftKind, SkipReason, SourceKind, Split,
        StepKind,
    };

    /// Each name is unique, parses back, and is the serde form of its variant.
    fn check<T: Vocabulary + serde::Serialize + std::fmt::Debug + PartialEq>() {
        let names = T::names();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        for v in T::ALL {
            assert_eq!(T::parse(v.as_str()), Some(*v));
            assert_eq!(
                serde_json::to_value(v).ok(),
                Some(serde_json::Value::from(v.as_str()))
            );
        }
        assert_eq!(T::parse("no such name"), None);
    }

    #[test]
    fn every_vocabulary_is_consistent() {
        check::<EvalStatus>();
        check::<HackKind>();
        check::<TimingMethod>();
        check::<ProbeStatus>();
        check::<RepoStatus>();
        check::<RepoReason>();
        check::<SkipReason>();
        check::<RepoReason>();
        check::<SkipReason>();
        check::<SourceKind>();
        check::<ModuleStatus>();
        check::<ModuleReason>();
        check::<DedupMethod>();
        check::<StepKind>();
        check::<EditOutcome>();
        check::<EditFormat>();
        check::<Split>();
        check::<SftKind>();
        check::<GrpoSelection>();
        check::<ReviewVerdict>();
    }
}
