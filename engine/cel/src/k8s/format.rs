//! The Kubernetes format library (`k8s.io/apiserver/pkg/cel/library/format.go`):
//! `format.named(name)`, `format.<name>()` and `<format>.validate(s)`, with the messages of
//! `k8s.io/apimachinery/pkg/util/validation` and the checks of kube-openapi's `strfmt`.
//!
//! The name checks operate on bytes, as Go's do: `*Prefix` formats replace a trailing `-`
//! and the byte before it by `a` (Go's `maskTrailingDash`), which may cut a multi-byte
//! character; the input `-` makes Go slice out of range, which cel-go reports as an
//! internal error ([`FormatError`]).

use std::sync::OnceLock;

use regex::Regex;

use super::url;

/// A named format (`kubernetes.NamedFormat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NamedFormat {
    Dns1123Label,
    Dns1123Subdomain,
    Dns1035Label,
    QualifiedName,
    Dns1123LabelPrefix,
    Dns1123SubdomainPrefix,
    Dns1035LabelPrefix,
    LabelValue,
    Uri,
    Uuid,
    Byte,
    Date,
    Datetime,
}

/// The `validate` call failed where Go panics (cel-go turns the panic into this error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("internal error: runtime error: slice bounds out of range [:-1]")]
pub struct FormatError;

impl NamedFormat {
    /// Every format, by the name `format.named` and `format.<name>()` use.
    pub const ALL: [(&'static str, NamedFormat); 13] = [
        ("dns1123Label", NamedFormat::Dns1123Label),
        ("dns1123Subdomain", NamedFormat::Dns1123Subdomain),
        ("dns1035Label", NamedFormat::Dns1035Label),
        ("qualifiedName", NamedFormat::QualifiedName),
        ("dns1123LabelPrefix", NamedFormat::Dns1123LabelPrefix),
        (
            "dns1123SubdomainPrefix",
            NamedFormat::Dns1123SubdomainPrefix,
        ),
        ("dns1035LabelPrefix", NamedFormat::Dns1035LabelPrefix),
        ("labelValue", NamedFormat::LabelValue),
        ("uri", NamedFormat::Uri),
        ("uuid", NamedFormat::Uuid),
        ("byte", NamedFormat::Byte),
        ("date", NamedFormat::Date),
        ("datetime", NamedFormat::Datetime),
    ];

    /// `format.named(name)`: `None` for an unknown name (`optional.none()`).
    pub fn named(name: &str) -> Option<NamedFormat> {
        NamedFormat::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
    }

    /// The name `format.named` knows it by.
    #[allow(dead_code)] // API for callers that list the formats
    pub fn key(self) -> &'static str {
        NamedFormat::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("", |(n, _)| n)
    }

    /// `<format>.validate(s)`: `None` when `s` is valid (`optional.none()`), else the
    /// validation messages.
    pub fn validate(self, s: &str) -> Result<Option<Vec<String>>, FormatError> {
        let errs = match self {
            NamedFormat::Dns1123Label => dns1123_label(s.as_bytes()),
            NamedFormat::Dns1123Subdomain => dns1123_subdomain(s.as_bytes()),
            NamedFormat::Dns1035Label => dns1035_label(s.as_bytes()),
            NamedFormat::QualifiedName => qualified_name(s.as_bytes()),
            NamedFormat::Dns1123LabelPrefix => dns1123_label(&mask_trailing_dash(s)?),
            NamedFormat::Dns1123SubdomainPrefix => dns1123_subdomain(&mask_trailing_dash(s)?),
            NamedFormat::Dns1035LabelPrefix => dns1035_label(&mask_trailing_dash(s)?),
            NamedFormat::LabelValue => label_value(s.as_bytes()),
            NamedFormat::Uri => match url::parse_request_uri(s) {
                Ok(_) => Vec::new(),
                Err(e) => vec![e.to_string()],
            },
            NamedFormat::Uuid => check(is_uuid(s), "does not match the UUID format"),
            NamedFormat::Byte => check(is_base64(s), "invalid base64"),
            NamedFormat::Date => check(is_date(s), "invalid date"),
            NamedFormat::Datetime => check(is_datetime(s), "invalid datetime"),
        };
        Ok(if errs.is_empty() { None } else { Some(errs) })
    }
}

fn check(ok: bool, msg: &str) -> Vec<String> {
    if ok {
        Vec::new()
    } else {
        vec![msg.to_string()]
    }
}

/// Go's `maskTrailingDash`: `name[:len(name)-2] + "a"` when the name ends with `-`.
fn mask_trailing_dash(s: &str) -> Result<Vec<u8>, FormatError> {
    let b = s.as_bytes();
    if !b.ends_with(b"-") {
        return Ok(b.to_vec());
    }
    let keep = b.len().checked_sub(2).ok_or(FormatError)?;
    let mut out = b[..keep].to_vec();
    out.push(b'a');
    Ok(out)
}

// ---- k8s.io/apimachinery/pkg/util/validation ------------------------------------------

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// Go's `validation.RegexError` (its examples are joined with `",  or "`).
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` with the given first-character class.
fn is_label(b: &[u8], first: fn(&u8) -> bool) -> bool {
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            first(f)
                && (l.is_ascii_lowercase() || l.is_ascii_digit())
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        }
        _ => false,
    }
}

fn lower_alnum(c: &u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn is_dns1123_label(b: &[u8]) -> bool {
    is_label(b, lower_alnum)
}

fn is_dns1123_subdomain(b: &[u8]) -> bool {
    b.split(|&c| c == b'.').all(is_dns1123_label)
}

/// `validation.IsDNS1123Label`.
fn dns1123_label(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !is_dns1123_label(b) {
        if is_dns1123_subdomain(b) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `validation.IsDNS1123Subdomain`.
fn dns1123_subdomain(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !is_dns1123_subdomain(b) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `validation.IsDNS1035Label`.
fn dns1035_label(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !is_label(b, u8::is_ascii_lowercase) {
        errs.push(regex_error(
            DNS1035_LABEL_ERR,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_qualified_name_part(b: &[u8]) -> bool {
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `validation.IsQualifiedName`.
fn qualified_name(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&[u8]> = b.split(|&c| c == b'/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                for m in dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {m}"));
                }
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `validation.IsValidLabelValue`.
fn label_value(b: &[u8]) -> Vec<String> {
    let mut errs = Vec::new();
    if b.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !b.is_empty() && !is_qualified_name_part(b) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

// ---- k8s.io/kube-openapi/pkg/validation/strfmt -----------------------------------------

/// `strfmt.IsUUID`: `(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`.
fn is_uuid(s: &str) -> bool {
    let mut groups = [8usize, 4, 4, 4, 12].into_iter().peekable();
    let mut b = s.as_bytes();
    while let Some(n) = groups.next() {
        if b.len() < n || !b[..n].iter().all(u8::is_ascii_hexdigit) {
            return false;
        }
        b = &b[n..];
        if groups.peek().is_some() && b.first() == Some(&b'-') {
            b = &b[1..];
        }
    }
    b.is_empty()
}

/// govalidator's `IsBase64`:
/// `^(?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|[A-Za-z0-9+\/]{4})$`.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !b.len().is_multiple_of(4) {
        return false;
    }
    let alpha = |c: &u8| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/';
    let (body, last) = b.split_at(b.len() - 4);
    body.iter().all(alpha)
        && match last {
            [a, b, b'=', b'='] => alpha(a) && alpha(b),
            [a, b, c, b'='] => alpha(a) && alpha(b) && alpha(c),
            q => q.iter().all(alpha),
        }
}

/// `strfmt.IsDate`: Go's `time.Parse("2006-01-02", s)`: four-digit year, two-digit month
/// and day, a day that exists.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = &b[r];
        part.iter().all(u8::is_ascii_digit).then(|| {
            part.iter()
                .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'))
        })
    };
    let (Some(year), Some(month), Some(day)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// `strfmt.IsDateTime`: the date before the first `t` (case-insensitive), then
/// `^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$` with hours at
/// most 23 and minutes and seconds at most 59; text after a second `t` is ignored, as Go
/// ignores it.
fn is_datetime(s: &str) -> bool {
    static TIME: OnceLock<Option<Regex>> = OnceLock::new();
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let Some(re) = TIME
        .get_or_init(|| {
            Regex::new(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
                .ok()
        })
        .as_ref()
    else {
        return false;
    };
    let Some(c) = re.captures(time) else {
        return false;
    };
    let field = |i| c.get(i).map_or("", |m| m.as_str());
    field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(f: &str, s: &str) -> Option<Vec<String>> {
        NamedFormat::named(f).unwrap().validate(s).unwrap()
    }

    #[test]
    fn upstream_examples() {
        assert_eq!(v("dns1123Label", "my-label-name"), None);
        assert_eq!(v("dns1123Subdomain", "apiextensions.k8s.io"), None);
        assert_eq!(v("qualifiedName", "apiextensions.k8s.io/v1beta1"), None);
        assert_eq!(v("dns1123LabelPrefix", "my-label-prefix-"), None);
        assert_eq!(v("dns1123SubdomainPrefix", "mysubdomain.prefix.-"), None);
        assert_eq!(v("dns1035LabelPrefix", "my-label-prefix-"), None);
        assert_eq!(v("uri", "http://example.com"), None);
        assert_eq!(v("uuid", "123e4567-e89b-12d3-a456-426614174000"), None);
        assert_eq!(v("byte", "aGVsbG8="), None);
        assert_eq!(v("date", "2021-01-01"), None);
        assert_eq!(v("datetime", "2021-01-01T00:00:00Z"), None);
        assert_eq!(v("dns1035Label", "my-label-name"), None);
        assert_eq!(v("qualifiedName", "my.name"), None);
        assert_eq!(v("labelValue", "my-cool-label-Value"), None);
        assert_eq!(NamedFormat::named("unknown"), None);
        for (name, f) in NamedFormat::ALL {
            assert_eq!(NamedFormat::named(name), Some(f));
            assert_eq!(f.key(), name);
        }
    }

    #[test]
    fn upstream_messages() {
        let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
        let subdomain = r"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let dns1035 = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
        let qualified = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let one = |s: &str| Some(vec![s.to_string()]);
        assert_eq!(v("dns1123Label", "contains a space"), one(label));
        assert_eq!(v("dns1123Subdomain", "contains a space"), one(subdomain));
        assert_eq!(v("dns1035Label", "contains a space"), one(dns1035));
        assert_eq!(v("qualifiedName", "contains a space"), one(qualified));
        assert_eq!(v("dns1123LabelPrefix", "contains a space-"), one(label));
        assert_eq!(
            v("dns1123SubdomainPrefix", "contains a space-"),
            one(subdomain)
        );
        assert_eq!(v("dns1035LabelPrefix", "contains a space-"), one(dns1035));
        assert_eq!(v("byte", "aGVsbG8"), one("invalid base64"));
        assert_eq!(v("date", "2020-01-32"), one("invalid date"));
        assert_eq!(
            v("datetime", "2020-01-32T00:00:00Z"),
            one("invalid datetime")
        );
        assert_eq!(
            v("labelValue", "my-cool-label-Value!!\n\n!!!"),
            one(
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            )
        );
    }

    #[test]
    fn validation_details() {
        assert_eq!(
            v("dns1123Label", "a.b"),
            Some(vec!["must not contain dots".into()])
        );
        let long = "a".repeat(64);
        assert_eq!(
            v("dns1123Label", &long),
            Some(vec!["must be no more than 63 bytes".into()])
        );
        assert_eq!(
            v("qualifiedName", "/name"),
            Some(vec!["prefix part must be non-empty".into()])
        );
        assert_eq!(
            v("qualifiedName", "Example.com/name"),
            Some(vec![r"prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into()])
        );
        let name_empty = v("qualifiedName", "example.com/").unwrap();
        assert_eq!(name_empty[0], "name part must be non-empty");
        assert_eq!(name_empty.len(), 2);
        assert!(
            v("qualifiedName", "a/b/c").unwrap()[0].starts_with("a qualified name must consist")
        );
        assert_eq!(v("labelValue", ""), None);
        // maskTrailingDash drops the byte before the dash too
        assert_eq!(v("dns1123LabelPrefix", "a-"), None);
        assert_eq!(v("dns1123LabelPrefix", "A-"), None);
        assert_eq!(
            NamedFormat::Dns1123LabelPrefix
                .validate("-")
                .unwrap_err()
                .to_string(),
            "internal error: runtime error: slice bounds out of range [:-1]"
        );
        assert_eq!(
            v("uri", "relative"),
            Some(vec![r#"parse "relative": invalid URI for request"#.into()])
        );
        assert_eq!(v("uuid", "123e4567e89b12d3a456426614174000"), None);
        assert_eq!(v("uuid", "123E4567-E89B-12D3-A456-426614174000"), None);
        assert_eq!(
            v("uuid", "123e4567-e89b-12d3-a456-42661417400"),
            Some(vec!["does not match the UUID format".into()])
        );
        assert_eq!(v("byte", ""), Some(vec!["invalid base64".into()]));
        assert_eq!(v("byte", "aGk="), None);
        assert_eq!(v("byte", "aGVsbG8-"), Some(vec!["invalid base64".into()]));
        assert_eq!(v("date", "2024-02-29"), None);
        assert_eq!(v("date", "2023-02-29"), Some(vec!["invalid date".into()]));
        assert_eq!(v("date", "2023-2-01"), Some(vec!["invalid date".into()]));
        assert_eq!(v("datetime", "2021-01-01t10:00:00.123+02:00"), None);
        assert_eq!(
            v("datetime", "2021-01-01T24:00:00Z"),
            Some(vec!["invalid datetime".into()])
        );
        assert_eq!(
            v("datetime", "2021-01-01T10:00:00"),
            Some(vec!["invalid datetime".into()])
        );
        assert_eq!(
            v("datetime", "2021-01-01"),
            Some(vec!["invalid datetime".into()])
        );
    }
}
