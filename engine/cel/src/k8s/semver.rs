//! The Kubernetes semver library (`k8s.io/apiserver/pkg/cel/library/semverlib.go`,
//! version 1) over a port of `github.com/blang/semver/v4`, whose strictness and error
//! messages Kubernetes exposes.
//!
//! The workspace's `semver` crate is not used: Kubernetes returns blang's error messages
//! verbatim (`Major number must not contain leading zeroes "01"`), and the port keeps
//! blang's exact grammar (for instance its `uint64` overflow errors from `ParseUint`).

use std::cmp::Ordering;
use std::fmt;

use super::go::{parse_uint, quote};

/// A semantic version (`kubernetes.Semver`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<PreRelease>,
    build: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PreRelease {
    Num(u64),
    Str(String),
}

/// blang/semver's error message, as Kubernetes returns it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SemverError(pub String);

const NUMBERS: &str = "0123456789";
const ALPHANUM: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789";

fn contains_only(s: &str, set: &str) -> bool {
    s.chars().all(|c| set.contains(c))
}

fn has_leading_zeroes(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

impl Semver {
    /// `semver(s)`: blang's `semver.Parse`.
    pub fn parse(s: &str) -> Result<Semver, SemverError> {
        let err = |m: String| SemverError(m);
        if s.is_empty() {
            return Err(err("Version string empty".into()));
        }
        let parts: Vec<&str> = s.splitn(3, '.').collect();
        let [major, minor, rest] = parts.as_slice() else {
            return Err(err("No Major.Minor.Patch elements found".into()));
        };
        let number = |part: &str, what: &str, cap: &str| -> Result<u64, SemverError> {
            if !contains_only(part, NUMBERS) {
                return Err(err(format!(
                    "Invalid character(s) found in {what} number {}",
                    quote(part)
                )));
            }
            if has_leading_zeroes(part) {
                return Err(err(format!(
                    "{cap} number must not contain leading zeroes {}",
                    quote(part)
                )));
            }
            parse_uint(part).map_err(err)
        };
        let major = number(major, "major", "Major")?;
        let minor = number(minor, "minor", "Minor")?;

        let mut patch_str = *rest;
        let mut build: Vec<&str> = Vec::new();
        let mut prerelease: Vec<&str> = Vec::new();
        if let Some(i) = patch_str.find('+') {
            build = patch_str[i + 1..].split('.').collect();
            patch_str = &patch_str[..i];
        }
        if let Some(i) = patch_str.find('-') {
            prerelease = patch_str[i + 1..].split('.').collect();
            patch_str = &patch_str[..i];
        }
        let patch = number(patch_str, "patch", "Patch")?;

        let mut pre = Vec::with_capacity(prerelease.len());
        for p in prerelease {
            pre.push(pre_release(p)?);
        }
        let mut builds = Vec::with_capacity(build.len());
        for b in build {
            if b.is_empty() {
                return Err(err("Build meta data is empty".into()));
            }
            if !contains_only(b, ALPHANUM) {
                return Err(err(format!(
                    "Invalid character(s) found in build meta data {}",
                    quote(b)
                )));
            }
            builds.push(b.to_string());
        }
        Ok(Semver {
            major,
            minor,
            patch,
            pre,
            build: builds,
        })
    }

    /// `semver(s, true)`: Kubernetes' `normalizeAndParse`: a leading `v` removed, leading
    /// zeros removed, missing minor and patch numbers set to 0.
    pub fn parse_normalized(s: &str) -> Result<Semver, SemverError> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = s
            .splitn(3, '.')
            .map(|p| {
                if p.len() > 1 {
                    let trimmed = p.trim_start_matches('0');
                    if trimmed.is_empty() || !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                        return format!("0{trimmed}");
                    }
                    return trimmed.to_string();
                }
                p.to_string()
            })
            .collect();
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err(SemverError(
                    "short version cannot contain PreRelease/Build meta data".into(),
                ));
            }
            while parts.len() < 3 {
                parts.push("0".into());
            }
        }
        Semver::parse(&parts.join("."))
    }

    /// `major()`: as Go's `types.Int(v.Major)`, a `uint64` reinterpreted (wrapping above
    /// 2^63 - 1).
    pub fn major(&self) -> i64 {
        self.major as i64
    }

    pub fn minor(&self) -> i64 {
        self.minor as i64
    }

    pub fn patch(&self) -> i64 {
        self.patch as i64
    }

    /// Precedence (blang's `Version.Compare`): build metadata is ignored.
    pub fn compare(&self, other: &Semver) -> Ordering {
        self.major
            .cmp(&other.major)
            .then(self.minor.cmp(&other.minor))
            .then(self.patch.cmp(&other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let c = match (a, b) {
                            (PreRelease::Num(x), PreRelease::Num(y)) => x.cmp(y),
                            (PreRelease::Num(_), PreRelease::Str(_)) => Ordering::Less,
                            (PreRelease::Str(_), PreRelease::Num(_)) => Ordering::Greater,
                            (PreRelease::Str(x), PreRelease::Str(y)) => x.cmp(y),
                        };
                        if c != Ordering::Equal {
                            return c;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            })
    }

    pub fn is_less_than(&self, other: &Semver) -> bool {
        self.compare(other) == Ordering::Less
    }

    pub fn is_greater_than(&self, other: &Semver) -> bool {
        self.compare(other) == Ordering::Greater
    }

    /// `compareTo()`: -1, 0 or 1.
    pub fn compare_to(&self, other: &Semver) -> i64 {
        match self.compare(other) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }
    }
}

fn pre_release(s: &str) -> Result<PreRelease, SemverError> {
    if s.is_empty() {
        return Err(SemverError("Prerelease is empty".into()));
    }
    if contains_only(s, NUMBERS) {
        if has_leading_zeroes(s) {
            return Err(SemverError(format!(
                "Numeric PreRelease version must not contain leading zeroes {}",
                quote(s)
            )));
        }
        return parse_uint(s).map(PreRelease::Num).map_err(SemverError);
    }
    if contains_only(s, ALPHANUM) {
        return Ok(PreRelease::Str(s.to_string()));
    }
    Err(SemverError(format!(
        "Invalid character(s) found in prerelease {}",
        quote(s)
    )))
}

impl fmt::Display for Semver {
    /// blang's `Version.String`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, p) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            match p {
                PreRelease::Num(n) => write!(f, "{n}")?,
                PreRelease::Str(s) => f.write_str(s)?,
            }
        }
        for (i, b) in self.build.iter().enumerate() {
            f.write_str(if i == 0 { "+" } else { "." })?;
            f.write_str(b)?;
        }
        Ok(())
    }
}

/// `isSemver(s)`.
pub fn is_semver(s: &str) -> bool {
    Semver::parse(s).is_ok()
}

/// `isSemver(s, normalize)`.
pub fn is_semver_normalized(s: &str, normalize: bool) -> bool {
    if normalize {
        Semver::parse_normalized(s).is_ok()
    } else {
        is_semver(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Semver {
        Semver::parse(s).unwrap()
    }

    fn e(s: &str) -> String {
        Semver::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn documented_examples() {
        assert!(is_semver("1.0.0") && is_semver("0.1.0-alpha.1"));
        assert!(!is_semver("200K") && !is_semver("Three") && !is_semver("Mi"));
        assert!(!is_semver("hello"));
        assert!(!is_semver("v1.0"));
        assert!(is_semver_normalized("v1.0", true));
        assert_eq!(Semver::parse_normalized("v1.0.0").unwrap(), v("1.0.0"));
        assert_eq!(Semver::parse_normalized("1.0").unwrap(), v("1.0.0"));
        assert_eq!(Semver::parse_normalized("01.01.01").unwrap(), v("1.1.1"));
        assert_eq!(v("1.2.3").major(), 1);
        assert_eq!(v("1.2.3").minor(), 2);
        assert_eq!(v("1.2.3").patch(), 3);
        assert_eq!(v("1.2.3").compare_to(&v("1.2.3")), 0);
        assert_eq!(v("1.2.3").compare_to(&v("2.0.0")), -1);
        assert_eq!(v("1.2.3").compare_to(&v("0.1.2")), 1);
        assert!(v("2.0.0").is_greater_than(&v("1.9.9")));
        assert!(v("1.2.3").is_less_than(&v("2.0.0")));
    }

    #[test]
    fn blang_strictness() {
        assert_eq!(e(""), "Version string empty");
        assert_eq!(e("1.0"), "No Major.Minor.Patch elements found");
        assert_eq!(
            e("v1.0.0"),
            r#"Invalid character(s) found in major number "v1""#
        );
        assert_eq!(
            e("01.0.0"),
            r#"Major number must not contain leading zeroes "01""#
        );
        assert_eq!(
            e("1.01.0"),
            r#"Minor number must not contain leading zeroes "01""#
        );
        assert_eq!(
            e("1.0.01"),
            r#"Patch number must not contain leading zeroes "01""#
        );
        assert_eq!(
            e("1.0.x"),
            r#"Invalid character(s) found in patch number "x""#
        );
        assert_eq!(
            e(".0.0"),
            r#"strconv.ParseUint: parsing "": invalid syntax"#
        );
        assert_eq!(
            e("99999999999999999999.0.0"),
            r#"strconv.ParseUint: parsing "99999999999999999999": value out of range"#
        );
        assert_eq!(e("1.0.0-"), "Prerelease is empty");
        assert_eq!(
            e("1.0.0-01"),
            r#"Numeric PreRelease version must not contain leading zeroes "01""#
        );
        assert_eq!(
            e("1.0.0-a_b"),
            r#"Invalid character(s) found in prerelease "a_b""#
        );
        assert_eq!(e("1.0.0+"), "Build meta data is empty");
        assert_eq!(
            e("1.0.0+a_b"),
            r#"Invalid character(s) found in build meta data "a_b""#
        );
        // build metadata may have leading zeros and does not affect precedence
        assert_eq!(v("1.0.0+001").compare_to(&v("1.0.0+002")), 0);
        assert_eq!(v("1.0.0+001").to_string(), "1.0.0+001");
        assert_eq!(
            Semver::parse_normalized("1-beta").unwrap_err().to_string(),
            "short version cannot contain PreRelease/Build meta data"
        );
        assert!(!is_semver_normalized(" 1.0.0", true));
    }

    #[test]
    fn upstream_test_cases() {
        assert_eq!(e("v1.0"), "No Major.Minor.Patch elements found");
        assert!(is_semver("1.2.3-beta.1+build.1"));
        for bad in [
            "", "v1.0.0", " 1.0.0", "1. 0.0", "1.0.0 ", "01.01.01", "1", "1.1",
        ] {
            assert!(!is_semver(bad), "{bad:?}");
        }
        for bad in ["", " 1.0.0", "1. 0.0", "1.0.0 "] {
            assert!(!is_semver_normalized(bad, true), "{bad:?}");
        }
        for good in ["v1.0.0", "01.01.01", "1", "1.1"] {
            assert!(is_semver_normalized(good, true), "{good:?}");
        }
        assert_eq!(Semver::parse_normalized("v01.01").unwrap(), v("1.1.0"));
        assert_ne!(v("1.2.3"), v("1.0.0"));
        assert!(!v("1.0.0").is_less_than(&v("1.0.0")));
        assert!(!v("1.0.0").is_greater_than(&v("1.0.0")));
        assert_eq!(v("1.0.0").compare_to(&v("1.2.3")), -1);
    }

    #[test]
    fn precedence() {
        let order = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
        ];
        for w in order.windows(2) {
            assert!(v(w[0]).is_less_than(&v(w[1])), "{} < {}", w[0], w[1]);
        }
        assert_eq!(v("18446744073709551615.0.0").major(), -1);
    }
}
