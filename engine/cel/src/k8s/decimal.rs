//! Exact decimal arithmetic for quantities: a port of the parts of `gopkg.in/inf.v0` that
//! `resource.Quantity` uses (`inf.Dec`: an unscaled big integer and a scale, the value being
//! `unscaled × 10^-scale`).
//!
//! The big integer is a little-endian vector of base-10⁹ limbs, so decimal parsing,
//! printing and scaling by powers of ten are cheap. Operations that would need more than
//! [`MAX_DIGITS`] digits fail with [`TooLarge`] where Go would allocate them (a quantity
//! such as `1e1000000000` plus `1m`).

use std::cmp::Ordering;

const BASE: u64 = 1_000_000_000;
const LIMB_DIGITS: usize = 9;

/// The most decimal digits an intermediate value may have.
pub(crate) const MAX_DIGITS: u64 = 100_000;

/// An operation needed more than [`MAX_DIGITS`] digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooLarge;

/// A natural number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Nat {
    /// Base 10⁹, least significant first, no trailing zero limb.
    limbs: Vec<u32>,
}

impl Nat {
    pub(crate) fn zero() -> Nat {
        Nat { limbs: Vec::new() }
    }

    pub(crate) fn from_u128(mut v: u128) -> Nat {
        let mut limbs = Vec::new();
        while v > 0 {
            limbs.push((v % u128::from(BASE)) as u32);
            v /= u128::from(BASE);
        }
        Nat { limbs }
    }

    /// From ASCII decimal digits (callers pass digits only; anything else counts as 0).
    pub(crate) fn from_digits(digits: &[u8]) -> Nat {
        let digits = match digits.iter().position(|&d| d != b'0') {
            Some(i) => &digits[i..],
            None => return Nat::zero(),
        };
        let mut limbs = Vec::with_capacity(digits.len() / LIMB_DIGITS + 1);
        for chunk in digits.rchunks(LIMB_DIGITS) {
            let mut limb = 0u32;
            for &d in chunk {
                limb = limb * 10 + u32::from(d.wrapping_sub(b'0').min(9));
            }
            limbs.push(limb);
        }
        let mut n = Nat { limbs };
        n.trim();
        n
    }

    fn trim(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.limbs.is_empty()
    }

    /// The number of decimal digits (0 for zero).
    pub(crate) fn digits(&self) -> u64 {
        match self.limbs.last() {
            None => 0,
            Some(&top) => {
                let top_digits = if top == 0 { 0 } else { top.ilog10() + 1 };
                (self.limbs.len() as u64 - 1) * LIMB_DIGITS as u64 + u64::from(top_digits)
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn to_u128(&self) -> Option<u128> {
        if self.limbs.len() > 5 {
            return None;
        }
        let mut v: u128 = 0;
        for &l in self.limbs.iter().rev() {
            v = v
                .checked_mul(u128::from(BASE))?
                .checked_add(u128::from(l))?;
        }
        Some(v)
    }

    pub(crate) fn to_decimal(&self) -> String {
        let Some((top, rest)) = self.limbs.split_last() else {
            return "0".to_string();
        };
        let mut s = top.to_string();
        for l in rest.iter().rev() {
            s.push_str(&format!("{l:09}"));
        }
        s
    }

    pub(crate) fn cmp_nat(&self, other: &Nat) -> Ordering {
        self.limbs
            .len()
            .cmp(&other.limbs.len())
            .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }

    pub(crate) fn add(&self, other: &Nat) -> Nat {
        let n = self.limbs.len().max(other.limbs.len());
        let mut limbs = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let s = u64::from(self.limbs.get(i).copied().unwrap_or(0))
                + u64::from(other.limbs.get(i).copied().unwrap_or(0))
                + carry;
            limbs.push((s % BASE) as u32);
            carry = s / BASE;
        }
        if carry > 0 {
            limbs.push(carry as u32);
        }
        Nat { limbs }
    }

    /// `self - other`, for `self >= other` (saturates at zero otherwise).
    pub(crate) fn sub(&self, other: &Nat) -> Nat {
        if self.cmp_nat(other) != Ordering::Greater {
            return Nat::zero();
        }
        let mut limbs = Vec::with_capacity(self.limbs.len());
        let mut borrow = 0i64;
        for (i, &a) in self.limbs.iter().enumerate() {
            let mut d = i64::from(a) - i64::from(other.limbs.get(i).copied().unwrap_or(0)) - borrow;
            if d < 0 {
                d += BASE as i64;
                borrow = 1;
            } else {
                borrow = 0;
            }
            limbs.push(d as u32);
        }
        let mut n = Nat { limbs };
        n.trim();
        n
    }

    pub(crate) fn mul_small(&self, m: u32) -> Nat {
        if m == 0 || self.is_zero() {
            return Nat::zero();
        }
        let mut limbs = Vec::with_capacity(self.limbs.len() + 1);
        let mut carry = 0u64;
        for &l in &self.limbs {
            let p = u64::from(l) * u64::from(m) + carry;
            limbs.push((p % BASE) as u32);
            carry = p / BASE;
        }
        while carry > 0 {
            limbs.push((carry % BASE) as u32);
            carry /= BASE;
        }
        Nat { limbs }
    }

    /// `self × 10^k`.
    pub(crate) fn mul_pow10(&self, k: u64) -> Result<Nat, TooLarge> {
        if self.is_zero() {
            return Ok(Nat::zero());
        }
        if self.digits().saturating_add(k) > MAX_DIGITS {
            return Err(TooLarge);
        }
        let shift = (k / LIMB_DIGITS as u64) as usize;
        let mut limbs = vec![0u32; shift];
        limbs.extend_from_slice(&self.limbs);
        let n = Nat { limbs };
        Ok(n.mul_small(10u32.pow((k % LIMB_DIGITS as u64) as u32)))
    }

    /// `self × 2^k`.
    pub(crate) fn mul_pow2(&self, mut k: u32) -> Nat {
        let mut n = self.clone();
        while k > 0 {
            let step = k.min(29);
            n = n.mul_small(1 << step);
            k -= step;
        }
        n
    }

    /// Quotient and remainder by a small divisor.
    pub(crate) fn divrem_small(&self, d: u32) -> (Nat, u32) {
        let mut limbs = vec![0u32; self.limbs.len()];
        let mut rem = 0u64;
        for i in (0..self.limbs.len()).rev() {
            let cur = rem * BASE + u64::from(self.limbs[i]);
            limbs[i] = (cur / u64::from(d)) as u32;
            rem = cur % u64::from(d);
        }
        let mut q = Nat { limbs };
        q.trim();
        (q, rem as u32)
    }

    /// `self / 10^k` (truncated) and whether the remainder is zero.
    pub(crate) fn div_pow10(&self, k: u64) -> (Nat, bool) {
        if k >= self.digits() {
            return (Nat::zero(), self.is_zero());
        }
        let shift = (k / LIMB_DIGITS as u64) as usize;
        let exact_limbs = self.limbs[..shift].iter().all(|&l| l == 0);
        let n = Nat {
            limbs: self.limbs[shift..].to_vec(),
        };
        let (q, r) = n.divrem_small(10u32.pow((k % LIMB_DIGITS as u64) as u32));
        (q, exact_limbs && r == 0)
    }

    /// The number of trailing decimal zeros.
    pub(crate) fn trailing_zeros(&self) -> u64 {
        let mut count = 0u64;
        for &l in &self.limbs {
            if l == 0 {
                count += LIMB_DIGITS as u64;
                continue;
            }
            let mut l = l;
            while l % 10 == 0 {
                count += 1;
                l /= 10;
            }
            return count;
        }
        count
    }
}

/// A signed decimal `unscaled × 10^-scale` (`inf.Dec`; `scale` counts digits after the
/// point, so `1E3` has scale -3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dec {
    pub(crate) negative: bool,
    pub(crate) unscaled: Nat,
    pub(crate) scale: i64,
}

impl Dec {
    pub(crate) fn new(negative: bool, unscaled: Nat, scale: i64) -> Dec {
        let negative = negative && !unscaled.is_zero();
        Dec {
            negative,
            unscaled,
            scale,
        }
    }

    pub(crate) fn from_i64(value: i64, scale: i64) -> Dec {
        Dec::new(
            value < 0,
            Nat::from_u128(u128::from(value.unsigned_abs())),
            scale,
        )
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.unscaled.is_zero()
    }

    pub(crate) fn sign(&self) -> i64 {
        if self.is_zero() {
            0
        } else if self.negative {
            -1
        } else {
            1
        }
    }

    pub(crate) fn neg(&self) -> Dec {
        Dec::new(!self.negative, self.unscaled.clone(), self.scale)
    }

    /// The magnitudes of `a` and `b` at their common (larger) scale, and that scale.
    fn aligned(a: &Dec, b: &Dec) -> Result<(Nat, Nat, i64), TooLarge> {
        let scale = a.scale.max(b.scale);
        let ua = a.unscaled.mul_pow10(scale.abs_diff(a.scale))?;
        let ub = b.unscaled.mul_pow10(scale.abs_diff(b.scale))?;
        Ok((ua, ub, scale))
    }

    /// `a + b` at the larger of their scales, as `inf.Dec.Add` does.
    pub(crate) fn add(&self, other: &Dec) -> Result<Dec, TooLarge> {
        let (ua, ub, scale) = Dec::aligned(self, other)?;
        Ok(if self.negative == other.negative {
            Dec::new(self.negative, ua.add(&ub), scale)
        } else {
            match ua.cmp_nat(&ub) {
                Ordering::Less => Dec::new(other.negative, ub.sub(&ua), scale),
                _ => Dec::new(self.negative, ua.sub(&ub), scale),
            }
        })
    }

    pub(crate) fn sub(&self, other: &Dec) -> Result<Dec, TooLarge> {
        self.add(&other.neg())
    }

    /// Exact comparison, without writing out an alignment the magnitudes already decide.
    pub(crate) fn cmp_dec(&self, other: &Dec) -> Ordering {
        let (sa, sb) = (self.sign(), other.sign());
        if sa != sb {
            return sa.cmp(&sb);
        }
        if sa == 0 {
            return Ordering::Equal;
        }
        let magnitude = Dec::cmp_abs(self, other);
        if sa < 0 {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    fn cmp_abs(a: &Dec, b: &Dec) -> Ordering {
        // |x| is in [10^(digits-1-scale), 10^(digits-scale)).
        let ea = i128::from(a.unscaled.digits()) - i128::from(a.scale);
        let eb = i128::from(b.unscaled.digits()) - i128::from(b.scale);
        if ea != eb {
            return ea.cmp(&eb);
        }
        // Same order of magnitude: the alignment is at most the digit-count difference.
        match Dec::aligned(a, b) {
            Ok((ua, ub, _)) => ua.cmp_nat(&ub),
            Err(TooLarge) => Ordering::Equal,
        }
    }

    /// `self` rounded away from zero to `scale` digits after the point (`inf.RoundUp`), and
    /// whether that was exact.
    pub(crate) fn round_up(&self, scale: i64) -> Result<(Dec, bool), TooLarge> {
        if scale >= self.scale {
            let unscaled = self.unscaled.mul_pow10(scale.abs_diff(self.scale))?;
            return Ok((Dec::new(self.negative, unscaled, scale), true));
        }
        let (q, exact) = self.unscaled.div_pow10(scale.abs_diff(self.scale));
        let q = if exact { q } else { q.add(&Nat::from_u128(1)) };
        Ok((Dec::new(self.negative, q, scale), exact))
    }

    /// The value as an `i64` when it is one exactly.
    #[cfg(test)]
    pub(crate) fn to_i64_exact(&self) -> Option<i64> {
        if self.scale > 0 {
            let (q, exact) = self.unscaled.div_pow10(self.scale.unsigned_abs());
            if !exact {
                return None;
            }
            return Dec::new(self.negative, q, 0).to_i64_exact();
        }
        if self.unscaled.digits() + self.scale.unsigned_abs() > 20 {
            return None;
        }
        let mag = self
            .unscaled
            .mul_pow10(self.scale.unsigned_abs())
            .ok()?
            .to_u128()?;
        if self.negative {
            0i128
                .checked_sub(i128::try_from(mag).ok()?)
                .and_then(|v| i64::try_from(v).ok())
        } else {
            i64::try_from(mag).ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nat(s: &str) -> Nat {
        Nat::from_digits(s.as_bytes())
    }

    #[test]
    fn nat_arithmetic() {
        assert_eq!(nat("000123").to_decimal(), "123");
        assert_eq!(nat("0").to_decimal(), "0");
        assert_eq!(nat("1234567890123").digits(), 13);
        assert_eq!(nat("999999999").add(&nat("1")).to_decimal(), "1000000000");
        assert_eq!(nat("1000000000").sub(&nat("1")).to_decimal(), "999999999");
        assert_eq!(
            nat("12").mul_pow10(20).map(|n| n.to_decimal()),
            Ok("1200000000000000000000".into())
        );
        assert_eq!(nat("3").mul_pow2(70).to_decimal(), "3541774862152233910272");
        assert_eq!(nat("123456789012").div_pow10(3), (nat("123456789"), false));
        assert_eq!(nat("123456789000").div_pow10(3), (nat("123456789"), true));
        assert_eq!(nat("1200000000000").trailing_zeros(), 11);
        assert_eq!(nat("5").mul_pow10(MAX_DIGITS), Err(TooLarge));
    }

    #[test]
    fn dec_compare_and_round() {
        let a = Dec::new(false, nat("15"), 1); // 1.5
        let b = Dec::new(false, nat("2"), 0);
        assert_eq!(a.cmp_dec(&b), Ordering::Less);
        assert_eq!(a.neg().cmp_dec(&b.neg()), Ordering::Greater);
        // 1e1000000 vs 1: decided without alignment
        let huge = Dec::new(false, nat("1"), -1_000_000);
        assert_eq!(huge.cmp_dec(&b), Ordering::Greater);
        let (r, exact) = Dec::new(true, nat("1001"), 3).round_up(0).unwrap();
        assert_eq!(
            (r.negative, r.unscaled.to_decimal(), exact),
            (true, "2".into(), false)
        );
        assert_eq!(Dec::new(false, nat("5000"), 3).to_i64_exact(), Some(5));
        assert_eq!(Dec::new(false, nat("5001"), 3).to_i64_exact(), None);
        assert_eq!(
            Dec::new(true, nat("9223372036854775808"), 0).to_i64_exact(),
            Some(i64::MIN)
        );
    }
}
