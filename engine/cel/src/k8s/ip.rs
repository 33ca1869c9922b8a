//! The Kubernetes IP address library (`k8s.io/apiserver/pkg/cel/library/ip.go`) over a
//! port of Go's `net/netip.ParseAddr` (whose error messages Kubernetes returns).
//!
//! As in Kubernetes, IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) and addresses with a
//! zone (`fe80::1%eth0`) are rejected, and so are IPv4 octets with leading zeros.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::go::quote_bytes;

/// An error of `ip()`/`ip.isCanonical()` with Kubernetes' messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IpError {
    /// `IP Address "x" parse error during conversion from string: ParseAddr(...)`.
    #[error("IP Address {} parse error during conversion from string: {source}", quote_bytes(input.as_bytes()))]
    Parse {
        input: String,
        source: AddrParseError,
    },
    #[error("IP address {} with zone value is not allowed", quote_bytes(.0.as_bytes()))]
    Zone(String),
    #[error("IPv4-mapped IPv6 address {} is not allowed", quote_bytes(.0.as_bytes()))]
    Ipv4Mapped(String),
}

/// Go's `netip.parseAddrError`: `ParseAddr("in"): msg (at "rest")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrParseError {
    input: Vec<u8>,
    msg: &'static str,
    at: Vec<u8>,
}

impl fmt::Display for AddrParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ParseAddr({}): {}", quote_bytes(&self.input), self.msg)?;
        if !self.at.is_empty() {
            write!(f, " (at {})", quote_bytes(&self.at))?;
        }
        Ok(())
    }
}

impl std::error::Error for AddrParseError {}

/// A parsed address as `netip.Addr` holds it: IPv4, or IPv6 with an optional zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GoAddr {
    V4([u8; 4]),
    V6([u8; 16], Vec<u8>),
}

impl GoAddr {
    pub(crate) fn is_v4(&self) -> bool {
        matches!(self, GoAddr::V4(_))
    }
}

/// Go's `netip.ParseAddr`.
pub(crate) fn parse_addr_bytes(s: &[u8]) -> Result<GoAddr, AddrParseError> {
    let fail = |msg, at: &[u8]| AddrParseError {
        input: s.to_vec(),
        msg,
        at: at.to_vec(),
    };
    for &c in s {
        match c {
            b'.' => return parse_ipv4_fields(s, s).map(GoAddr::V4),
            b':' => return parse_ipv6(s),
            b'%' => return Err(fail("missing IPv6 address", b"")),
            _ => {}
        }
    }
    Err(fail("unable to parse IP", b""))
}

/// Go's `parseIPv4Fields` over `part` (all of `input`, or its embedded IPv4 tail).
fn parse_ipv4_fields(input: &[u8], part: &[u8]) -> Result<[u8; 4], AddrParseError> {
    let fail = |msg, at: &[u8]| AddrParseError {
        input: input.to_vec(),
        msg,
        at: at.to_vec(),
    };
    let mut fields = [0u8; 4];
    let (mut val, mut pos, mut dig_len) = (0u32, 0usize, 0);
    for (i, &c) in part.iter().enumerate() {
        if c.is_ascii_digit() {
            if dig_len == 1 && val == 0 {
                return Err(fail("IPv4 field has octet with leading zero", b""));
            }
            val = val * 10 + u32::from(c - b'0');
            dig_len += 1;
            if val > 255 {
                return Err(fail("IPv4 field has value >255", b""));
            }
        } else if c == b'.' {
            if i == 0 || i == part.len() - 1 || part[i - 1] == b'.' {
                return Err(fail("IPv4 field must have at least one digit", &part[i..]));
            }
            if pos == 3 {
                return Err(fail("IPv4 address too long", b""));
            }
            fields[pos] = val as u8;
            pos += 1;
            val = 0;
            dig_len = 0;
        } else {
            return Err(fail("unexpected character", &part[i..]));
        }
    }
    if pos < 3 {
        return Err(fail("IPv4 address too short", b""));
    }
    fields[3] = val as u8;
    Ok(fields)
}

/// Go's `parseIPv6`.
fn parse_ipv6(input: &[u8]) -> Result<GoAddr, AddrParseError> {
    let fail = |msg, at: &[u8]| AddrParseError {
        input: input.to_vec(),
        msg,
        at: at.to_vec(),
    };
    let (mut s, zone) = match input.iter().position(|&b| b == b'%') {
        Some(i) => {
            let zone = &input[i + 1..];
            if zone.is_empty() {
                return Err(fail("zone must be a non-empty string", b""));
            }
            (&input[..i], zone.to_vec())
        }
        None => (input, Vec::new()),
    };
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.starts_with(b"::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok(GoAddr::V6(ip, zone));
        }
    }
    let mut i = 0usize;
    while i < 16 {
        let mut off = 0;
        let mut acc: u32 = 0;
        while off < s.len() {
            let d = match s[off] {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                _ => break,
            };
            acc = (acc << 4) + u32::from(d);
            if acc > 0xFFFF {
                return Err(fail("IPv6 field has value >=2^16", s));
            }
            off += 1;
        }
        if off == 0 {
            return Err(fail(
                "each colon-separated field must have at least one digit",
                s,
            ));
        }
        if s.get(off) == Some(&b'.') {
            if ellipsis.is_none() && i != 12 {
                return Err(fail(
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    s,
                ));
            }
            if i + 4 > 16 {
                return Err(fail(
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    s,
                ));
            }
            let v4 = parse_ipv4_fields(input, s)?;
            ip[i..i + 4].copy_from_slice(&v4);
            s = &[];
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if s[0] != b':' {
            return Err(fail("unexpected character, want colon", s));
        } else if s.len() == 1 {
            return Err(fail("colon must be followed by more characters", s));
        }
        s = &s[1..];
        if s[0] == b':' {
            if ellipsis.is_some() {
                return Err(fail("multiple :: in address", s));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(fail("trailing garbage after address", s));
    }
    if i < 16 {
        let Some(e) = ellipsis else {
            return Err(fail("address string too short", b""));
        };
        let n = 16 - i;
        ip.copy_within(e..i, e + n);
        ip[e..e + n].fill(0);
    } else if ellipsis.is_some() {
        return Err(fail(
            "the :: must expand to at least one field of zeros",
            b"",
        ));
    }
    Ok(GoAddr::V6(ip, zone))
}

/// An IP address as the CEL library holds it (`net.IP`): IPv4, or IPv6 without zone that
/// is not IPv4-mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ip(IpAddr);

impl Ip {
    /// `ip(s)`: Kubernetes' `parseIPAddr`.
    pub fn parse(s: &str) -> Result<Ip, IpError> {
        match parse_addr_bytes(s.as_bytes()) {
            Err(source) => Err(IpError::Parse {
                input: s.to_string(),
                source,
            }),
            Ok(GoAddr::V4(o)) => Ok(Ip(IpAddr::V4(Ipv4Addr::from(o)))),
            Ok(GoAddr::V6(_, zone)) if !zone.is_empty() => Err(IpError::Zone(s.to_string())),
            Ok(GoAddr::V6(b, _)) => {
                let a = Ipv6Addr::from(b);
                if a.to_ipv4_mapped().is_some() {
                    return Err(IpError::Ipv4Mapped(s.to_string()));
                }
                Ok(Ip(IpAddr::V6(a)))
            }
        }
    }

    pub(crate) fn from_std(addr: IpAddr) -> Ip {
        Ip(addr)
    }

    pub fn addr(&self) -> IpAddr {
        self.0
    }

    /// `family()`: 4 or 6.
    pub fn family(&self) -> i64 {
        match self.0 {
            IpAddr::V4(_) => 4,
            IpAddr::V6(_) => 6,
        }
    }

    /// `isUnspecified()`: `0.0.0.0` or `::`.
    pub fn is_unspecified(&self) -> bool {
        self.0.is_unspecified()
    }

    /// `isLoopback()`: `127.0.0.0/8` or `::1`.
    pub fn is_loopback(&self) -> bool {
        match self.0 {
            IpAddr::V4(a) => a.octets()[0] == 127,
            IpAddr::V6(a) => a == Ipv6Addr::LOCALHOST,
        }
    }

    fn is_multicast(&self) -> bool {
        match self.0 {
            IpAddr::V4(a) => a.octets()[0] & 0xf0 == 0xe0,
            IpAddr::V6(a) => a.octets()[0] == 0xff,
        }
    }

    /// `isLinkLocalMulticast()`: `224.0.0.0/24`, or IPv6 `ff02::/16` with any flags
    /// (Go's `first16 & 0xff0f == 0xff02`).
    pub fn is_link_local_multicast(&self) -> bool {
        match self.0 {
            IpAddr::V4(a) => matches!(a.octets(), [224, 0, 0, _]),
            IpAddr::V6(a) => a.segments()[0] & 0xff0f == 0xff02,
        }
    }

    /// `isLinkLocalUnicast()`: `169.254.0.0/16` or `fe80::/10`.
    pub fn is_link_local_unicast(&self) -> bool {
        match self.0 {
            IpAddr::V4(a) => matches!(a.octets(), [169, 254, _, _]),
            IpAddr::V6(a) => a.segments()[0] & 0xffc0 == 0xfe80,
        }
    }

    /// `isGlobalUnicast()`: Go's definition (private ranges included): not unspecified,
    /// not the IPv4 broadcast, not loopback, multicast or link-local unicast.
    pub fn is_global_unicast(&self) -> bool {
        if let IpAddr::V4(a) = self.0
            && (a.is_unspecified() || a.is_broadcast())
        {
            return false;
        }
        !(self.0 == IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            || self.is_loopback()
            || self.is_multicast()
            || self.is_link_local_unicast())
    }
}

impl fmt::Display for Ip {
    /// Go's `netip.Addr.String`: dotted quad, or RFC 5952 (lower case, the longest run of
    /// two or more zero groups as `::`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(a) => write!(f, "{a}"),
            IpAddr::V6(a) => f.write_str(&format_v6(&a)),
        }
    }
}

pub(crate) fn format_v6(a: &Ipv6Addr) -> String {
    let seg = a.segments();
    let (mut zero_start, mut zero_end) = (usize::MAX, usize::MAX);
    let mut i = 0;
    while i < 8 {
        let mut j = i;
        while j < 8 && seg[j] == 0 {
            j += 1;
        }
        let len = j - i;
        if len >= 2 && (zero_start == usize::MAX || len > zero_end - zero_start) {
            zero_start = i;
            zero_end = j;
        }
        i += 1;
    }
    let mut out = String::new();
    let mut i = 0;
    while i < 8 {
        if i == zero_start {
            out.push_str("::");
            i = zero_end;
            if i >= 8 {
                break;
            }
        } else if i > 0 {
            out.push(':');
        }
        out.push_str(&format!("{:x}", seg[i]));
        i += 1;
    }
    out
}

/// `isIP(s)`.
pub fn is_ip(s: &str) -> bool {
    Ip::parse(s).is_ok()
}

/// `ip.isCanonical(s)`: whether `s` is written as Go writes the address; an error when it
/// is not an address.
pub fn is_canonical(s: &str) -> Result<bool, IpError> {
    Ok(Ip::parse(s)?.to_string() == s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ip {
        Ip::parse(s).unwrap()
    }

    #[test]
    fn documented_examples() {
        assert!(is_ip("127.0.0.1") && is_ip("::1"));
        assert!(!is_ip("127.0.0.256") && !is_ip(":::1"));
        assert_eq!(is_canonical("127.0.0.1"), Ok(true));
        assert_eq!(is_canonical("2001:db8::abcd"), Ok(true));
        assert_eq!(is_canonical("2001:DB8::ABCD"), Ok(false));
        assert_eq!(is_canonical("2001:db8::0:0:0:abcd"), Ok(false));
        assert_eq!(ip("127.0.0.1").family(), 4);
        assert_eq!(ip("::1").family(), 6);
        assert!(ip("0.0.0.0").is_unspecified() && !ip("127.0.0.1").is_unspecified());
        assert!(ip("::").is_unspecified() && !ip("::1").is_unspecified());
        assert!(ip("127.0.0.1").is_loopback() && !ip("192.168.0.1").is_loopback());
        assert!(ip("::1").is_loopback() && !ip("2001:db8::abcd").is_loopback());
        assert!(ip("224.0.0.1").is_link_local_multicast());
        assert!(!ip("224.0.1.1").is_link_local_multicast());
        assert!(ip("ff02::1").is_link_local_multicast());
        assert!(!ip("fd00::1").is_link_local_multicast());
        assert!(ip("169.254.169.254").is_link_local_unicast());
        assert!(!ip("192.168.0.1").is_link_local_unicast());
        assert!(ip("fe80::1").is_link_local_unicast());
        assert!(!ip("fd80::1").is_link_local_unicast());
        assert!(ip("192.168.0.1").is_global_unicast());
        assert!(!ip("255.255.255.255").is_global_unicast());
        assert!(ip("2001:db8::abcd").is_global_unicast());
        assert!(!ip("ff00::1").is_global_unicast());
    }

    #[test]
    fn rejections_and_messages() {
        let e = |s: &str| Ip::parse(s).unwrap_err().to_string();
        assert_eq!(
            e("127.0.0.256"),
            r#"IP Address "127.0.0.256" parse error during conversion from string: ParseAddr("127.0.0.256"): IPv4 field has value >255"#
        );
        assert_eq!(
            e(":::1"),
            r#"IP Address ":::1" parse error during conversion from string: ParseAddr(":::1"): each colon-separated field must have at least one digit (at ":1")"#
        );
        assert_eq!(
            e("::ffff:1.2.3.4"),
            r#"IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed"#
        );
        assert_eq!(
            e("fe80::1%eth0"),
            r#"IP address "fe80::1%eth0" with zone value is not allowed"#
        );
        assert!(e("01.2.3.4").ends_with("IPv4 field has octet with leading zero"));
        assert!(e("1.2.3").ends_with("IPv4 address too short"));
        assert!(e("1.2.3.4.5").ends_with("IPv4 address too long"));
        assert!(e("").ends_with(r#"ParseAddr(""): unable to parse IP"#));
        assert!(e("%eth0").ends_with("missing IPv6 address"));
        assert!(e("1:2:3:4:5:6:7").ends_with("address string too short"));
        assert!(
            e("1:2:3:4:5:6:7::8").ends_with("the :: must expand to at least one field of zeros")
        );
        assert!(e("1::2::3").ends_with(r#"multiple :: in address (at ":3")"#));
        assert!(
            e("::1.2.3.04")
                .ends_with(r#"ParseAddr("::1.2.3.04"): IPv4 field has octet with leading zero"#)
        );
        assert_eq!(
            is_canonical("nope").map_err(|e| e.to_string()).unwrap_err(),
            r#"IP Address "nope" parse error during conversion from string: ParseAddr("nope"): unable to parse IP"#
        );
    }

    #[test]
    fn upstream_test_cases() {
        let e = |s: &str| Ip::parse(s).unwrap_err().to_string();
        assert_eq!(
            e("192.168.0.1.0"),
            r#"IP Address "192.168.0.1.0" parse error during conversion from string: ParseAddr("192.168.0.1.0"): IPv4 address too long"#
        );
        assert_eq!(
            is_canonical("127.0.0.1.0").unwrap_err().to_string(),
            r#"IP Address "127.0.0.1.0" parse error during conversion from string: ParseAddr("127.0.0.1.0"): IPv4 address too long"#
        );
        assert_eq!(
            e("2001:db8:::68"),
            r#"IP Address "2001:db8:::68" parse error during conversion from string: ParseAddr("2001:db8:::68"): each colon-separated field must have at least one digit (at ":68")"#
        );
        assert_eq!(is_canonical("2001:db8::68"), Ok(true));
        assert_eq!(is_canonical("2001:DB8::68"), Ok(false));
        assert_eq!(ip("2001:db8::68").family(), 6);
        assert!(!ip("1.2.3.4").is_loopback());
        assert_eq!(ip("192.168.0.1").to_string(), "192.168.0.1");
    }

    #[test]
    fn go_formatting() {
        assert_eq!(ip("2001:0db8:0:0:1:0:0:1").to_string(), "2001:db8::1:0:0:1");
        assert_eq!(ip("1:0:0:2:0:0:0:3").to_string(), "1:0:0:2::3");
        assert_eq!(ip("1:0:2:3:4:5:6:7").to_string(), "1:0:2:3:4:5:6:7");
        assert_eq!(ip("::1.2.3.4").to_string(), "::102:304");
        assert_eq!(ip("::").to_string(), "::");
        assert_eq!(ip("FE80::1").to_string(), "fe80::1");
    }
}
