//! The Kubernetes CIDR library (`k8s.io/apiserver/pkg/cel/library/cidr.go`) over a port of
//! Go's `net/netip.ParsePrefix`.
//!
//! As in Kubernetes, a prefix keeps the host bits it was written with (`cidr('10.0.0.1/8')`
//! is valid; `masked()` clears them) and IPv4-mapped IPv6 prefixes are rejected.
//! `containsCIDR` is the fixed version of Kubernetes PR #130450 (1.33, backported to 1.31
//! and 1.32): the other prefix's address is masked before comparing.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::go::quote;
use super::ip::{self, GoAddr, Ip, IpError};

/// The errors of `cidr()` with Kubernetes' messages, which repeat their prefix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// `netip.ParsePrefix` failed.
    #[error(
        "network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix({}): {reason}",
        quote(input)
    )]
    Parse { input: String, reason: String },
    #[error(
        "network address parse error during conversion from string: IPv4-mapped IPv6 address {} is not allowed",
        quote(.0)
    )]
    Ipv4Mapped(String),
}

/// A network (`net.CIDR`): an address and a prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl Cidr {
    /// `cidr(s)`.
    pub fn parse(s: &str) -> Result<Cidr, CidrError> {
        let fail = |reason: String| CidrError::Parse {
            input: s.to_string(),
            reason,
        };
        let Some(slash) = s.rfind('/') else {
            return Err(fail("no '/'".to_string()));
        };
        let addr = ip::parse_addr_bytes(&s.as_bytes()[..slash]).map_err(|e| fail(e.to_string()))?;
        let (addr, max_bits) = match addr {
            GoAddr::V4(o) => (IpAddr::V4(Ipv4Addr::from(o)), 32),
            GoAddr::V6(_, zone) if !zone.is_empty() => {
                return Err(fail("IPv6 zones cannot be present in a prefix".to_string()));
            }
            GoAddr::V6(b, _) => (IpAddr::V6(Ipv6Addr::from(b)), 128),
        };
        let bits_str = &s[slash + 1..];
        // Go rejects signs and leading zeros that strconv.Atoi would accept.
        let well_formed = !bits_str.is_empty()
            && bits_str.bytes().all(|b| b.is_ascii_digit())
            && (bits_str.len() == 1 || !bits_str.starts_with('0'));
        let bits: u64 = match bits_str.parse() {
            Ok(b) if well_formed => b,
            _ => {
                return Err(fail(format!("bad bits after slash: {}", quote(bits_str))));
            }
        };
        if bits > max_bits {
            return Err(fail("prefix length out of range".to_string()));
        }
        if let IpAddr::V6(a) = addr
            && a.to_ipv4_mapped().is_some()
        {
            return Err(CidrError::Ipv4Mapped(s.to_string()));
        }
        Ok(Cidr {
            addr,
            bits: bits as u8,
        })
    }

    /// `ip()`: the address as written, host bits included.
    pub fn ip(&self) -> Ip {
        Ip::from_std(self.addr)
    }

    /// `prefixLength()`.
    pub fn prefix_length(&self) -> i64 {
        i64::from(self.bits)
    }

    /// `masked()`: the canonical network, host bits cleared.
    pub fn masked(&self) -> Cidr {
        Cidr {
            addr: mask(self.addr, self.bits),
            bits: self.bits,
        }
    }

    /// `containsIP(ip)`: Go's `Prefix.Contains` (an address of the other family is never
    /// contained).
    pub fn contains_ip(&self, ip: &Ip) -> bool {
        let other = ip.addr();
        other.is_ipv4() == self.addr.is_ipv4()
            && mask(other, self.bits) == mask(self.addr, self.bits)
    }

    /// `containsIP(string)`: the string is parsed as `ip()` does, errors included.
    pub fn contains_ip_str(&self, s: &str) -> Result<bool, IpError> {
        Ok(self.contains_ip(&Ip::parse(s)?))
    }

    /// `containsCIDR(cidr)`: the other network is at least as long and lies inside.
    pub fn contains_cidr(&self, other: &Cidr) -> bool {
        other.addr.is_ipv4() == self.addr.is_ipv4()
            && self.bits <= other.bits
            && mask(other.addr, self.bits) == mask(self.addr, self.bits)
    }

    /// `containsCIDR(string)`: the string is parsed as `cidr()` does, errors included.
    pub fn contains_cidr_str(&self, s: &str) -> Result<bool, CidrError> {
        Ok(self.contains_cidr(&Cidr::parse(s)?))
    }
}

impl fmt::Display for Cidr {
    /// Go's `Prefix.String` (`string(cidr)`): the address as written, `/`, the length.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ip::from_std(self.addr), self.bits)
    }
}

fn mask(addr: IpAddr, bits: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

/// `isCIDR(s)`.
pub fn is_cidr(s: &str) -> bool {
    Cidr::parse(s).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        Cidr::parse(s).unwrap()
    }

    fn ip(s: &str) -> Ip {
        Ip::parse(s).unwrap()
    }

    #[test]
    fn documented_examples() {
        assert!(is_cidr("192.168.0.0/16") && is_cidr("::1/128"));
        assert!(!is_cidr("192.168.0.0/33") && !is_cidr("::1/129"));
        assert!(cidr("192.168.0.0/24").contains_ip(&ip("192.168.0.1")));
        assert!(!cidr("192.168.0.0/24").contains_ip(&ip("192.168.1.1")));
        assert_eq!(
            cidr("192.168.0.0/24").contains_ip_str("192.168.0.1"),
            Ok(true)
        );
        assert_eq!(
            cidr("192.168.0.0/24").contains_ip_str("192.168.1.1"),
            Ok(false)
        );
        assert!(cidr("192.168.0.0/16").contains_cidr(&cidr("192.168.10.0/24")));
        assert!(!cidr("192.168.1.0/24").contains_cidr(&cidr("192.168.2.0/24")));
        assert_eq!(
            cidr("192.168.0.0/16").contains_cidr_str("192.168.10.0/24"),
            Ok(true)
        );
        assert_eq!(
            cidr("192.168.1.0/24").contains_cidr_str("192.168.2.0/24"),
            Ok(false)
        );
        assert_eq!(cidr("192.168.0.1/24").ip(), ip("192.168.0.1"));
        assert_eq!(cidr("192.168.0.1/24").ip().family(), 4);
        assert_eq!(cidr("::1/128").ip(), ip("::1"));
        assert_eq!(cidr("::1/128").ip().family(), 6);
        assert_eq!(cidr("192.168.0.0/24").masked(), cidr("192.168.0.0/24"));
        assert_eq!(cidr("192.168.0.1/24").masked(), cidr("192.168.0.0/24"));
        assert_ne!(cidr("192.168.0.1/24"), cidr("192.168.0.1/24").masked());
        assert_eq!(cidr("192.168.0.0/16").prefix_length(), 16);
        assert_eq!(cidr("::1/128").prefix_length(), 128);
        assert_eq!(cidr("192.168.0.0/24").to_string(), "192.168.0.0/24");
    }

    #[test]
    fn upstream_test_cases() {
        assert!(cidr("192.168.0.0/24").contains_cidr(&cidr("192.168.0.0/25")));
        assert!(!cidr("192.168.0.0/24").contains_cidr(&cidr("192.168.0.0/23")));
        assert!(cidr("2001:db8::/32").contains_ip(&ip("2001:db8::1")));
        assert!(!cidr("2001:db8::/32").contains_ip(&ip("2001:dc8::1")));
        assert!(cidr("2001:db8::/32").contains_cidr(&cidr("2001:db8::/33")));
        assert!(!cidr("2001:db8::/32").contains_cidr(&cidr("2001:db8::/31")));
        assert_eq!(cidr("2001:db8:1::/32").masked(), cidr("2001:db8::/32"));
        assert_eq!(cidr("2001:db8::/32").ip(), ip("2001:db8::"));
        // PR #130450
        assert!(cidr("192.168.0.0/16").contains_cidr(&cidr("192.168.0.1/32")));
        // other family
        assert!(!cidr("0.0.0.0/0").contains_ip(&ip("::1")));
        assert!(!cidr("::/0").contains_cidr(&cidr("10.0.0.0/8")));
        assert!(cidr("0.0.0.0/0").contains_ip(&ip("255.255.255.255")));
    }

    #[test]
    fn messages() {
        let e = |s: &str| Cidr::parse(s).unwrap_err().to_string();
        assert_eq!(
            e("192.168.0.0/"),
            r#"network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("192.168.0.0/"): bad bits after slash: """#
        );
        assert_eq!(
            e("2001:db8::/"),
            r#"network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("2001:db8::/"): bad bits after slash: """#
        );
        assert!(
            e("192.168.0.0/33")
                .ends_with(r#"netip.ParsePrefix("192.168.0.0/33"): prefix length out of range"#)
        );
        assert!(e("10.0.0.0/08").ends_with(r#"bad bits after slash: "08""#));
        assert!(e("10.0.0.0/+8").ends_with(r#"bad bits after slash: "+8""#));
        assert!(e("10.0.0.0").ends_with(r#"netip.ParsePrefix("10.0.0.0"): no '/'"#));
        assert!(e("10.0.0.256/8").ends_with(
            r#"netip.ParsePrefix("10.0.0.256/8"): ParseAddr("10.0.0.256"): IPv4 field has value >255"#
        ));
        assert!(e("fe80::%eth0/64").ends_with("IPv6 zones cannot be present in a prefix"));
        assert_eq!(
            e("::ffff:1.2.3.4/24"),
            r#"network address parse error during conversion from string: IPv4-mapped IPv6 address "::ffff:1.2.3.4/24" is not allowed"#
        );
        assert!(cidr("10.0.0.0/8").contains_ip_str("10.0.0.256").is_err());
    }
}
