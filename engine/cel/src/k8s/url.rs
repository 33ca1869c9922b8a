//! The Kubernetes URL library (`k8s.io/apiserver/pkg/cel/library/urls.go`) over a port of
//! Go's `net/url` parser.
//!
//! `url(s)` validates with `url.ParseRequestURI` (absolute URIs and absolute paths only)
//! and then keeps the result of `url.Parse` (which splits off the fragment), as Kubernetes
//! does. The parser follows Go 1.25's `net/url` including its security fixes: a bracketed
//! host must be an IPv6 literal (CVE-2025-47912), a `[` not at the start of the host is
//! rejected (CVE-2026-25679), and a query of more than 10 000 parameters yields no
//! parameters (CVE-2025-61726).
//!
//! Go strings may hold bytes that are not UTF-8 (`%ff` decodes to one); the accessors here
//! return such bytes as U+FFFD.

use std::collections::BTreeMap;

use super::go::{quote, quote_bytes};
use super::ip;

/// The error of `url()`: Kubernetes' message around Go's `*url.Error`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("URL parse error during conversion from string: {0}")]
pub struct UrlError(pub UrlParseError);

/// Go's `*url.Error` for the `parse` operation: `parse "<url>": <reason>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("parse {}: {reason}", quote(url))]
pub struct UrlParseError {
    pub url: String,
    pub reason: String,
}

/// A parsed URL (Go's `url.URL`), as `url()` returns it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Url {
    scheme: Vec<u8>,
    opaque: Vec<u8>,
    user: Option<(Vec<u8>, Option<Vec<u8>>)>,
    host: Vec<u8>,
    path: Vec<u8>,
    raw_path: Vec<u8>,
    omit_host: bool,
    force_query: bool,
    raw_query: Vec<u8>,
    fragment: Vec<u8>,
    raw_fragment: Vec<u8>,
}

/// `url(s)`.
pub fn url(s: &str) -> Result<Url, UrlError> {
    parse_request_uri(s).map_err(UrlError)?;
    parse(s).map_err(UrlError)
}

/// `isURL(s)`.
pub fn is_url(s: &str) -> bool {
    parse_request_uri(s).is_ok()
}

/// Go's `url.ParseRequestURI`.
pub fn parse_request_uri(s: &str) -> Result<Url, UrlParseError> {
    parse_inner(s.as_bytes(), true).map_err(|reason| UrlParseError {
        url: s.to_string(),
        reason,
    })
}

/// Go's `url.Parse`.
pub fn parse(s: &str) -> Result<Url, UrlParseError> {
    let (u, frag) = match s.split_once('#') {
        Some((u, f)) => (u, Some(f)),
        None => (s, None),
    };
    let mut url = parse_inner(u.as_bytes(), false).map_err(|reason| UrlParseError {
        url: u.to_string(),
        reason,
    })?;
    if let Some(frag) = frag.filter(|f| !f.is_empty()) {
        let fragment =
            unescape(frag.as_bytes(), Mode::Fragment).map_err(|reason| UrlParseError {
                url: s.to_string(),
                reason,
            })?;
        url.raw_fragment = if escape(&fragment, Mode::Fragment) == frag.as_bytes() {
            Vec::new()
        } else {
            frag.as_bytes().to_vec()
        };
        url.fragment = fragment;
    }
    Ok(url)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Url {
    /// `getScheme()`: lower-cased; empty for a path.
    pub fn scheme(&self) -> String {
        text(&self.scheme)
    }

    /// `getHost()`: the host with its port, IPv6 literals in brackets.
    pub fn host(&self) -> String {
        text(&self.host)
    }

    /// `getHostname()`: the host without port or brackets.
    pub fn hostname(&self) -> String {
        text(split_host_port(&self.host).0)
    }

    /// `getPort()`: the port, empty when absent.
    pub fn port(&self) -> String {
        text(split_host_port(&self.host).1)
    }

    /// `getEscapedPath()`: Go's `EscapedPath`.
    pub fn escaped_path(&self) -> String {
        text(&self.escaped_path_bytes())
    }

    fn escaped_path_bytes(&self) -> Vec<u8> {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path, Mode::Path)
            && unescape(&self.raw_path, Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == b"*" {
            return b"*".to_vec();
        }
        escape(&self.path, Mode::Path)
    }

    fn escaped_fragment(&self) -> Vec<u8> {
        if !self.raw_fragment.is_empty()
            && valid_encoded(&self.raw_fragment, Mode::Fragment)
            && unescape(&self.raw_fragment, Mode::Fragment).is_ok_and(|f| f == self.fragment)
        {
            return self.raw_fragment.clone();
        }
        escape(&self.fragment, Mode::Fragment)
    }

    /// `getQuery()`: every key's values in order, unescaped (`+` is a space); malformed
    /// pairs are dropped, as Go's `URL.Query` does.
    pub fn query(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let q = &self.raw_query;
        if q.iter().filter(|&&b| b == b'&').count() + 1 > MAX_QUERY_PARAMS {
            return out;
        }
        for part in q.split(|&b| b == b'&') {
            if q.is_empty() || part.is_empty() || part.contains(&b';') {
                continue;
            }
            let (k, v) = match part.iter().position(|&b| b == b'=') {
                Some(i) => (&part[..i], &part[i + 1..]),
                None => (part, &part[part.len()..]),
            };
            let (Ok(k), Ok(v)) = (
                unescape(k, Mode::QueryComponent),
                unescape(v, Mode::QueryComponent),
            ) else {
                continue;
            };
            out.entry(text(&k)).or_default().push(text(&v));
        }
        out
    }
}

/// Go's limit on the parameters `ParseQuery` reads (`GODEBUG=urlmaxqueryparams`).
const MAX_QUERY_PARAMS: usize = 10_000;

impl std::fmt::Display for Url {
    /// Go's `URL.String`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut buf: Vec<u8> = Vec::new();
        if !self.scheme.is_empty() {
            buf.extend_from_slice(&self.scheme);
            buf.push(b':');
        }
        if !self.opaque.is_empty() {
            buf.extend_from_slice(&self.opaque);
        } else {
            let authority = !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some();
            let omitted = self.omit_host && self.host.is_empty() && self.user.is_none();
            if authority && !omitted {
                if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                    buf.extend_from_slice(b"//");
                }
                if let Some((name, password)) = &self.user {
                    buf.extend(escape(name, Mode::UserPassword));
                    if let Some(p) = password {
                        buf.push(b':');
                        buf.extend(escape(p, Mode::UserPassword));
                    }
                    buf.push(b'@');
                }
                if !self.host.is_empty() {
                    buf.extend(escape(&self.host, Mode::Host));
                }
            }
            let path = self.escaped_path_bytes();
            if path.first().is_some_and(|&c| c != b'/') && !self.host.is_empty() {
                buf.push(b'/');
            }
            if buf.is_empty() {
                let segment = path.split(|&b| b == b'/').next().unwrap_or(&[]);
                if segment.contains(&b':') {
                    buf.extend_from_slice(b"./");
                }
            }
            buf.extend(path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            buf.push(b'?');
            buf.extend_from_slice(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            buf.push(b'#');
            buf.extend(self.escaped_fragment());
        }
        f.write_str(&text(&buf))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// Go's `shouldEscape`.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone)
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => return true,
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

fn unhex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

/// Go's `unescape`, with its error messages.
fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, String> {
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let ok =
                    i + 2 < s.len() && s[i + 1].is_ascii_hexdigit() && s[i + 2].is_ascii_hexdigit();
                if !ok {
                    let bad = &s[i..s.len().min(i + 3)];
                    return Err(format!("invalid URL escape {}", quote_bytes(bad)));
                }
                let esc = &s[i..i + 3];
                if mode == Mode::Host && unhex(s[i + 1]) < 8 && esc != b"%25" {
                    return Err(format!("invalid URL escape {}", quote_bytes(esc)));
                }
                if mode == Mode::Zone {
                    let v = unhex(s[i + 1]) << 4 | unhex(s[i + 2]);
                    if esc != b"%25" && v != b' ' && should_escape(v, Mode::Host) {
                        return Err(format!("invalid URL escape {}", quote_bytes(esc)));
                    }
                }
                i += 3;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(format!(
                        "invalid character {} in host name",
                        quote_bytes(&[c])
                    ));
                }
                i += 1;
            }
        }
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                out.push(unhex(s[i + 1]) << 4 | unhex(s[i + 2]));
                i += 3;
            }
            b'+' if mode == Mode::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Go's `escape`.
fn escape(s: &[u8], mode: Mode) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(s.len());
    for &c in s {
        if c == b' ' && mode == Mode::QueryComponent {
            out.push(b'+');
        } else if should_escape(c, mode) {
            out.extend_from_slice(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
        } else {
            out.push(c);
        }
    }
    out
}

/// Go's `validEncoded`.
fn valid_encoded(s: &[u8], mode: Mode) -> bool {
    s.iter().all(|&c| {
        matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'['
                | b']'
                | b'%'
        ) || !should_escape(c, mode)
    })
}

/// Go's `getScheme`.
fn get_scheme(raw: &[u8]) -> Result<(&[u8], &[u8]), String> {
    for (i, &c) in raw.iter().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' => {
                if i == 0 {
                    return Ok((&[], raw));
                }
            }
            b':' => {
                if i == 0 {
                    return Err("missing protocol scheme".to_string());
                }
                return Ok((&raw[..i], &raw[i + 1..]));
            }
            _ => return Ok((&[], raw)),
        }
    }
    Ok((&[], raw))
}

/// Go's `parse(rawURL, viaRequest)`.
fn parse_inner(raw: &[u8], via_request: bool) -> Result<Url, String> {
    if raw.iter().any(|&b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".to_string());
    }
    if raw.is_empty() && via_request {
        return Err("empty url".to_string());
    }
    let mut url = Url::default();
    if raw == b"*" {
        url.path = b"*".to_vec();
        return Ok(url);
    }
    let (scheme, mut rest) = get_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();

    if rest.ends_with(b"?") && rest.iter().filter(|&&b| b == b'?').count() == 1 {
        url.force_query = true;
        rest = &rest[..rest.len() - 1];
    } else if let Some(i) = rest.iter().position(|&b| b == b'?') {
        url.raw_query = rest[i + 1..].to_vec();
        rest = &rest[..i];
    }

    if !rest.starts_with(b"/") {
        if !url.scheme.is_empty() {
            // rootless paths are opaque (RFC 3986)
            url.opaque = rest.to_vec();
            return Ok(url);
        }
        if via_request {
            return Err("invalid URI for request".to_string());
        }
        let segment = rest.split(|&b| b == b'/').next().unwrap_or(&[]);
        if segment.contains(&b':') {
            return Err("first path segment in URL cannot contain colon".to_string());
        }
    }

    if (!url.scheme.is_empty() || !via_request && !rest.starts_with(b"///"))
        && rest.starts_with(b"//")
    {
        let mut authority = &rest[2..];
        rest = &[];
        if let Some(i) = authority.iter().position(|&b| b == b'/') {
            rest = &authority[i..];
            authority = &authority[..i];
        }
        let (user, host) = parse_authority(authority)?;
        url.user = user;
        url.host = host;
    } else if !url.scheme.is_empty() && rest.starts_with(b"/") {
        url.omit_host = true;
    }

    let path = unescape(rest, Mode::Path)?;
    url.raw_path = if escape(&path, Mode::Path) == rest {
        Vec::new()
    } else {
        rest.to_vec()
    };
    url.path = path;
    Ok(url)
}

type User = Option<(Vec<u8>, Option<Vec<u8>>)>;

/// Go's `parseAuthority`.
fn parse_authority(authority: &[u8]) -> Result<(User, Vec<u8>), String> {
    let at = authority.iter().rposition(|&b| b == b'@');
    let host = match at {
        None => parse_host(authority)?,
        Some(i) => parse_host(&authority[i + 1..])?,
    };
    let Some(i) = at else {
        return Ok((None, host));
    };
    let userinfo = &authority[..i];
    if !valid_userinfo(userinfo) {
        return Err("net/url: invalid userinfo".to_string());
    }
    let user = match userinfo.iter().position(|&b| b == b':') {
        None => (unescape(userinfo, Mode::UserPassword)?, None),
        Some(c) => (
            unescape(&userinfo[..c], Mode::UserPassword)?,
            Some(unescape(&userinfo[c + 1..], Mode::UserPassword)?),
        ),
    };
    Ok((Some(user), host))
}

fn valid_userinfo(s: &[u8]) -> bool {
    s.iter().all(|&c| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b':'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b'%'
                    | b'@'
            )
    })
}

fn valid_optional_port(port: &[u8]) -> bool {
    match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    }
}

fn invalid_port(colon_port: &[u8]) -> String {
    format!("invalid port {} after host", quote_bytes(colon_port))
}

/// Go's `parseHost` (Go 1.25 with the IP-literal fixes).
fn parse_host(host: &[u8]) -> Result<Vec<u8>, String> {
    match host.iter().rposition(|&b| b == b'[') {
        Some(i) if i > 0 => Err("invalid IP-literal".to_string()),
        Some(_) => {
            let Some(close) = host.iter().rposition(|&b| b == b']') else {
                return Err("missing ']' in host".to_string());
            };
            let colon_port = &host[close + 1..];
            if !valid_optional_port(colon_port) {
                return Err(invalid_port(colon_port));
            }
            let colon_port = unescape(colon_port, Mode::Host)?;
            let hostname = &host[1..close];
            let unescaped = match find(hostname, b"%25") {
                Some(z) => {
                    let mut h = unescape(&hostname[..z], Mode::Host)?;
                    h.extend(unescape(&hostname[z..], Mode::Zone)?);
                    h
                }
                None => unescape(hostname, Mode::Host)?,
            };
            // Only an IPv6 address may be enclosed in brackets.
            match ip::parse_addr_bytes(&unescaped) {
                Err(e) => return Err(format!("invalid host: {e}")),
                Ok(a) if a.is_v4() => return Err("invalid IP-literal".to_string()),
                Ok(_) => {}
            }
            let mut out = b"[".to_vec();
            out.extend(unescaped);
            out.push(b']');
            out.extend(colon_port);
            Ok(out)
        }
        None => {
            if let Some(i) = host.iter().rposition(|&b| b == b':') {
                let colon_port = &host[i..];
                if !valid_optional_port(colon_port) {
                    return Err(invalid_port(colon_port));
                }
            }
            unescape(host, Mode::Host)
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Go's `splitHostPort` (for `Hostname` and `Port`).
fn split_host_port(host_port: &[u8]) -> (&[u8], &[u8]) {
    let mut host = host_port;
    let mut port: &[u8] = &[];
    if let Some(colon) = host.iter().rposition(|&b| b == b':')
        && valid_optional_port(&host[colon..])
    {
        port = &host[colon + 1..];
        host = &host[..colon];
    }
    if host.len() >= 2 && host.starts_with(b"[") && host.ends_with(b"]") {
        host = &host[1..host.len() - 1];
    }
    (host, port)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        url(s).unwrap()
    }

    fn err(s: &str) -> String {
        url(s).unwrap_err().to_string()
    }

    #[test]
    fn documented_examples() {
        assert!(url("https://user:pass@example.com:80/path?query=val#fragment").is_ok());
        assert!(url("/absolute-path").is_ok());
        assert!(is_url(
            "https://user:pass@example.com:80/path?query=val#fragment"
        ));
        assert!(is_url("/absolute-path"));
        assert!(!is_url("https://a:b:c/"));
        assert!(!is_url("../relative-path"));
        assert_eq!(u("/path").scheme(), "");
        assert_eq!(u("https://example.com/").scheme(), "https");
        assert_eq!(u("https://example.com:80/").host(), "example.com:80");
        assert_eq!(u("https://example.com/").host(), "example.com");
        assert_eq!(u("https://[::1]:80/").host(), "[::1]:80");
        assert_eq!(u("https://[::1]/").host(), "[::1]");
        assert_eq!(u("/path").host(), "");
        assert_eq!(u("https://example.com:80/").hostname(), "example.com");
        assert_eq!(u("https://127.0.0.1:80/").hostname(), "127.0.0.1");
        assert_eq!(u("https://[::1]:80/").hostname(), "::1");
        assert_eq!(u("/path").hostname(), "");
        assert_eq!(u("https://example.com:80/").port(), "80");
        assert_eq!(u("https://example.com/").port(), "");
        assert_eq!(u("/path").port(), "");
        assert_eq!(u("https://example.com/path").escaped_path(), "/path");
        assert_eq!(
            u("https://example.com/path with spaces/").escaped_path(),
            "/path%20with%20spaces/"
        );
        assert_eq!(u("https://example.com").escaped_path(), "");
        let q = u("https://example.com/path?k1=a&k2=b&k2=c").query();
        assert_eq!(q.get("k1"), Some(&vec!["a".to_string()]));
        assert_eq!(q.get("k2"), Some(&vec!["b".to_string(), "c".to_string()]));
        let q = u("https://example.com/path?key with spaces=value with spaces").query();
        assert_eq!(
            q.get("key with spaces"),
            Some(&vec!["value with spaces".to_string()])
        );
        assert!(u("https://example.com/path?").query().is_empty());
        assert!(u("https://example.com/path").query().is_empty());
    }

    #[test]
    fn errors_match_go() {
        assert_eq!(
            err("https://a:b:c/"),
            r#"URL parse error during conversion from string: parse "https://a:b:c/": invalid port ":c" after host"#
        );
        assert_eq!(
            err("../relative-path"),
            r#"URL parse error during conversion from string: parse "../relative-path": invalid URI for request"#
        );
        assert_eq!(
            err(""),
            r#"URL parse error during conversion from string: parse "": empty url"#
        );
        assert_eq!(
            err("://x"),
            r#"URL parse error during conversion from string: parse "://x": missing protocol scheme"#
        );
        assert_eq!(
            err("https://example.com/%zz"),
            r#"URL parse error during conversion from string: parse "https://example.com/%zz": invalid URL escape "%zz""#
        );
        assert_eq!(
            err("https://a{b}/"),
            r#"URL parse error during conversion from string: parse "https://a{b}/": invalid character "{" in host name"#
        );
        assert_eq!(
            err("https://ü@example.com/"),
            r#"URL parse error during conversion from string: parse "https://ü@example.com/": net/url: invalid userinfo"#
        );
        assert_eq!(
            err("https://[1.2.3.4]/"),
            r#"URL parse error during conversion from string: parse "https://[1.2.3.4]/": invalid IP-literal"#
        );
        assert_eq!(
            err("https://[v1.x]/"),
            r#"URL parse error during conversion from string: parse "https://[v1.x]/": invalid host: ParseAddr("v1.x"): unexpected character (at "v1.x")"#
        );
        assert_eq!(
            err("http://x[::1]/"),
            r#"URL parse error during conversion from string: parse "http://x[::1]/": invalid IP-literal"#
        );
        assert_eq!(
            err("http://[::1/"),
            r#"URL parse error during conversion from string: parse "http://[::1/": missing ']' in host"#
        );
        assert_eq!(
            err("http://a\nb/"),
            r#"URL parse error during conversion from string: parse "http://a\nb/": net/url: invalid control character in URL"#
        );
    }

    #[test]
    fn go_parse_details() {
        // scheme is lower-cased; opaque URLs are absolute
        assert_eq!(u("HTTPS://Example.com/").scheme(), "https");
        assert_eq!(u("HTTPS://Example.com/").host(), "Example.com");
        assert!(is_url("mailto:someone@example.com"));
        assert_eq!(u("mailto:someone@example.com").escaped_path(), "");
        // the fragment is split off by url.Parse
        let x = u("https://example.com/a%2Fb?x=1#frag");
        assert_eq!(x.escaped_path(), "/a%2Fb");
        assert_eq!(x.to_string(), "https://example.com/a%2Fb?x=1#frag");
        assert_eq!(u("https://example.com/p#f?x=1").query().len(), 0);
        // hosts are unescaped; a zone is allowed in an IPv6 literal
        assert_eq!(u("http://[fe80::1%25en0]:8080/").hostname(), "fe80::1%en0");
        assert_eq!(u("http://%C3%A9.com/").host(), "é.com");
        // an empty port is valid
        assert_eq!(u("http://example.com:/").port(), "");
        assert_eq!(u("http://example.com:/").hostname(), "example.com");
        // queries: + is a space, malformed pairs and semicolons are dropped
        let q = u("/p?a=1+2&b=%zz&c;d=1&=e&&f").query();
        assert_eq!(q.get("a"), Some(&vec!["1 2".to_string()]));
        assert!(!q.contains_key("b") && !q.contains_key("c"));
        assert_eq!(q.get(""), Some(&vec!["e".to_string()]));
        assert_eq!(q.get("f"), Some(&vec![String::new()]));
        // "*" is a valid request URI
        assert!(is_url("*"));
        assert_eq!(u("*").escaped_path(), "*");
        // user info
        assert_eq!(
            u("https://us%20er:p@ss@example.com/").to_string(),
            "https://us%20er:p%40ss@example.com/"
        );
    }
}
