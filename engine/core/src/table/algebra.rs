//! An exact set algebra over the values of one input column, and cubes (one set per
//! input column) with intersection and difference. The lints are built on it.
//!
//! Every column's values map onto one of two set representations:
//! - int, number and bool values map to `i64` keys that preserve order, so a set is a list
//!   of closed key intervals. Ints are their own keys; bools are 0 and 1; a finite `f64` maps
//!   to its position in IEEE total order, where adjacent floats have adjacent keys, so
//!   `x > 2.0` is the closed interval starting at the key after 2.0 (`-0.0` is excluded
//!   from the domain, as it is normalised to `0.0`).
//! - strings are a finite set (`Fin`) or everything but a finite set (`CoFin`).
//!
//! Each set also says whether it contains null (a missing input), which only "any" cells
//! match. Sets are always within the column's domain: its type's values, restricted to
//! `allowedValues` when given.

use std::collections::BTreeSet;

use super::cell::{CmpOp, Cond, Lit, norm_f64};
use super::spec::ColumnType;

/// The non-null values of a set.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Vals {
    /// Sorted, disjoint, non-adjacent closed intervals of keys.
    Ranges(Vec<(i64, i64)>),
    /// Exactly these strings.
    Fin(BTreeSet<String>),
    /// Every string except these.
    CoFin(BTreeSet<String>),
}

impl Vals {
    pub(super) fn is_empty(&self) -> bool {
        match self {
            Vals::Ranges(r) => r.is_empty(),
            Vals::Fin(s) => s.is_empty(),
            Vals::CoFin(_) => false,
        }
    }

    pub(super) fn intersect(&self, other: &Vals) -> Vals {
        match (self, other) {
            (Vals::Ranges(a), Vals::Ranges(b)) => Vals::Ranges(ranges_intersect(a, b)),
            (Vals::Fin(a), Vals::Fin(b)) => Vals::Fin(a.intersection(b).cloned().collect()),
            (Vals::Fin(a), Vals::CoFin(b)) | (Vals::CoFin(b), Vals::Fin(a)) => {
                Vals::Fin(a.difference(b).cloned().collect())
            }
            (Vals::CoFin(a), Vals::CoFin(b)) => Vals::CoFin(a.union(b).cloned().collect()),
            // Sets of one column always share a representation.
            (Vals::Ranges(_), _) => Vals::Ranges(Vec::new()),
            (_, Vals::Ranges(_)) => Vals::Fin(BTreeSet::new()),
        }
    }

    pub(super) fn minus(&self, other: &Vals) -> Vals {
        match (self, other) {
            (Vals::Ranges(a), Vals::Ranges(b)) => Vals::Ranges(ranges_minus(a, b)),
            (Vals::Fin(a), Vals::Fin(b)) => Vals::Fin(a.difference(b).cloned().collect()),
            (Vals::Fin(a), Vals::CoFin(b)) => Vals::Fin(a.intersection(b).cloned().collect()),
            (Vals::CoFin(a), Vals::Fin(b)) => Vals::CoFin(a.union(b).cloned().collect()),
            (Vals::CoFin(a), Vals::CoFin(b)) => Vals::Fin(b.difference(a).cloned().collect()),
            _ => self.clone(),
        }
    }

    /// Whether the sets share a value, without building the intersection.
    pub(super) fn intersects(&self, other: &Vals) -> bool {
        match (self, other) {
            (Vals::Ranges(a), Vals::Ranges(b)) => {
                let (mut i, mut j) = (0, 0);
                while let (Some(&(alo, ahi)), Some(&(blo, bhi))) = (a.get(i), b.get(j)) {
                    if ahi < blo {
                        i += 1;
                    } else if bhi < alo {
                        j += 1;
                    } else {
                        return true;
                    }
                }
                false
            }
            (Vals::Fin(a), Vals::Fin(b)) => {
                let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
                small.iter().any(|x| large.contains(x))
            }
            (Vals::Fin(a), Vals::CoFin(b)) | (Vals::CoFin(b), Vals::Fin(a)) => {
                a.iter().any(|x| !b.contains(x))
            }
            // Two co-finite string sets always share (infinitely many) strings.
            (Vals::CoFin(_), Vals::CoFin(_)) => true,
            _ => false,
        }
    }

    fn len(&self) -> usize {
        match self {
            Vals::Ranges(r) => r.len(),
            Vals::Fin(s) | Vals::CoFin(s) => s.len(),
        }
    }

    fn contains_key(&self, key: i64) -> bool {
        match self {
            Vals::Ranges(r) => r.iter().any(|&(lo, hi)| lo <= key && key <= hi),
            Vals::Fin(_) | Vals::CoFin(_) => false,
        }
    }

    /// Whether the set holds a literal of its column's type.
    pub(super) fn contains(&self, lit: &Lit) -> bool {
        match (self, lit) {
            (Vals::Fin(s), Lit::Str(x)) => s.contains(x),
            (Vals::CoFin(s), Lit::Str(x)) => !s.contains(x),
            (Vals::Ranges(_), lit) => key(lit).is_some_and(|k| self.contains_key(k)),
            _ => false,
        }
    }
}

/// A set of one column's values, possibly with null.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Set {
    pub(super) null: bool,
    pub(super) vals: Vals,
}

impl Set {
    pub(super) fn is_empty(&self) -> bool {
        !self.null && self.vals.is_empty()
    }

    pub(super) fn intersect(&self, other: &Set) -> Set {
        Set {
            null: self.null && other.null,
            vals: self.vals.intersect(&other.vals),
        }
    }

    pub(super) fn minus(&self, other: &Set) -> Set {
        Set {
            null: self.null && !other.null,
            vals: self.vals.minus(&other.vals),
        }
    }

    pub(super) fn is_subset(&self, other: &Set) -> bool {
        self.minus(other).is_empty()
    }

    pub(super) fn intersects(&self, other: &Set) -> bool {
        (self.null && other.null) || self.vals.intersects(&other.vals)
    }

    /// What an operation on this set costs and what it holds in memory, in budget units.
    pub(super) fn weight(&self) -> usize {
        1 + self.vals.len()
    }
}

/// One set per input column: the inputs a row matches, or a region of the input space.
pub(super) type Cube = Vec<Set>;

pub(super) fn cube_is_empty(cube: &Cube) -> bool {
    cube.iter().any(Set::is_empty)
}

pub(super) fn cube_intersect(a: &Cube, b: &Cube) -> Cube {
    a.iter().zip(b).map(|(x, y)| x.intersect(y)).collect()
}

/// Whether two cubes share an input; stops at the first disjoint column.
pub(super) fn cubes_intersect(a: &Cube, b: &Cube) -> bool {
    a.iter().zip(b).all(|(x, y)| x.intersects(y))
}

/// The summed weight of a cube's sets: the budget cost of reading or copying it.
pub(super) fn cube_weight(cube: &Cube) -> usize {
    cube.iter().map(Set::weight).sum()
}

pub(super) fn cube_is_subset(a: &Cube, b: &Cube) -> bool {
    cube_is_empty(a) || a.iter().zip(b).all(|(x, y)| x.is_subset(y))
}

/// `a \ b` as disjoint cubes: for each column `i`, the part of `a` that agrees with `b` on
/// columns before `i` and is outside `b` on column `i`.
pub(super) fn cube_minus(a: &Cube, b: &Cube) -> Vec<Cube> {
    if !cubes_intersect(a, b) {
        return vec![a.clone()];
    }
    let mut pieces = Vec::new();
    let mut rest = a.clone();
    for i in 0..a.len() {
        let outside = rest[i].minus(&b[i]);
        if !outside.is_empty() {
            let mut piece = rest.clone();
            piece[i] = outside;
            pieces.push(piece);
        }
        rest[i] = rest[i].intersect(&b[i]);
    }
    pieces
}

/// A bound on the work and memory of the lints, so a hostile table cannot stall or exhaust
/// `switchyard check` (or the broker, which loads packs the same way). Work is counted in
/// set elements read or written (a cell costs one plus its values), so wide cells and many
/// columns are charged what they really cost, not one unit per cube.
#[derive(Debug)]
pub(super) struct Budget {
    work_left: usize,
    /// The largest region (disjoint cubes of a difference) kept in memory, in the same units.
    max_region: usize,
    exhausted: bool,
}

impl Budget {
    pub(super) fn new(work: usize, max_region: usize) -> Self {
        Budget {
            work_left: work,
            max_region,
            exhausted: false,
        }
    }

    /// Spends `cost`; false (and stays false) once the budget is spent.
    pub(super) fn charge(&mut self, cost: usize) -> bool {
        if self.exhausted || self.work_left < cost {
            self.work_left = 0;
            self.exhausted = true;
            return false;
        }
        self.work_left -= cost;
        true
    }

    pub(super) fn exhausted(&self) -> bool {
        self.exhausted
    }
}

/// `target` minus the union of `by`, as disjoint cubes; `None` when the budget runs out.
pub(super) fn remainder<'a>(
    target: &Cube,
    by: impl IntoIterator<Item = &'a Cube>,
    budget: &mut Budget,
) -> Option<Vec<Cube>> {
    let mut region = if cube_is_empty(target) {
        Vec::new()
    } else {
        vec![target.clone()]
    };
    for b in by {
        if region.is_empty() {
            break;
        }
        let b_weight = cube_weight(b);
        let mut next = Vec::with_capacity(region.len());
        let mut next_weight = 0_usize;
        for cube in &region {
            // One split copies the cube at most once per column: bounded, so charged after.
            let pieces = cube_minus(cube, b);
            let pieces_weight: usize = pieces.iter().map(cube_weight).sum();
            if !budget.charge(cube_weight(cube) + b_weight + pieces_weight) {
                return None;
            }
            next_weight += pieces_weight;
            next.extend(pieces);
            if next_weight > budget.max_region {
                budget.exhausted = true;
                budget.work_left = 0;
                return None;
            }
        }
        region = next;
    }
    Some(region)
}

/// The order-preserving key of an int, number or bool literal.
pub(super) fn key(lit: &Lit) -> Option<i64> {
    match lit {
        Lit::Int(i) => Some(*i),
        Lit::Num(f) => Some(fkey(*f)),
        Lit::Bool(b) => Some(i64::from(*b)),
        Lit::Str(_) => None,
    }
}

/// The position of a finite float in IEEE total order, as `f64::total_cmp` computes it.
pub(super) fn fkey(f: f64) -> i64 {
    let bits = norm_f64(f).to_bits().cast_signed();
    bits ^ (((bits >> 63).cast_unsigned() >> 1).cast_signed())
}

/// The inverse of [`fkey`].
pub(super) fn fval(key: i64) -> f64 {
    let bits = key ^ (((key >> 63).cast_unsigned() >> 1).cast_signed());
    f64::from_bits(bits.cast_unsigned())
}

fn normalize(mut ranges: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    ranges.retain(|(lo, hi)| lo <= hi);
    ranges.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

fn ranges_intersect(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if lo <= hi {
            out.push((lo, hi));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

fn ranges_minus(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for &(lo, hi) in a {
        let mut start = Some(lo);
        for &(blo, bhi) in b {
            let Some(s) = start else { break };
            if bhi < s {
                continue;
            }
            if blo > hi {
                break;
            }
            if blo > s {
                out.push((s, blo - 1));
            }
            // bhi < hi <= i64::MAX, so bhi + 1 does not overflow.
            start = if bhi >= hi { None } else { Some(bhi + 1) };
        }
        if let Some(s) = start {
            out.push((s, hi));
        }
    }
    out
}

/// One input column's domain: its type's values, restricted to the allowed values.
#[derive(Debug, Clone)]
pub(super) struct Domain {
    ty: ColumnType,
    /// The non-null values an input may take.
    vals: Vals,
    /// The values in display order when the domain is finite (allowed values, or bools).
    values: Option<Vec<Lit>>,
}

impl Domain {
    pub(super) fn new(ty: ColumnType, allowed: Option<&[Lit]>) -> Domain {
        let universe = match ty {
            ColumnType::String => Vals::CoFin(BTreeSet::new()),
            ColumnType::Int => Vals::Ranges(vec![(i64::MIN, i64::MAX)]),
            // Every finite float but -0.0: up to the negative float closest to zero, then
            // from 0.0 on.
            ColumnType::Number => Vals::Ranges(vec![
                (fkey(-f64::MAX), fkey(-f64::from_bits(1))),
                (fkey(0.0), fkey(f64::MAX)),
            ]),
            ColumnType::Bool => Vals::Ranges(vec![(0, 1)]),
        };
        match allowed {
            Some(values) => Domain {
                ty,
                vals: universe.intersect(&points(ty, values)),
                values: Some(values.to_vec()),
            },
            None => Domain {
                ty,
                vals: universe,
                values: (ty == ColumnType::Bool).then(|| vec![Lit::Bool(false), Lit::Bool(true)]),
            },
        }
    }

    /// The values in display order, when the domain is finite.
    pub(super) fn values(&self) -> Option<&[Lit]> {
        self.values.as_deref()
    }

    /// The whole domain, with or without null.
    pub(super) fn full(&self, null: bool) -> Set {
        Set {
            null,
            vals: self.vals.clone(),
        }
    }

    /// The inputs of this column a condition matches.
    pub(super) fn set(&self, cond: &Cond) -> Set {
        let vals = match cond {
            Cond::Any => return self.full(true),
            Cond::In(values) => points(self.ty, values),
            Cond::Ne(v) => self.vals.minus(&points(self.ty, std::slice::from_ref(v))),
            Cond::Cmp(op, v) => match key(v) {
                Some(k) => Vals::Ranges(match op {
                    CmpOp::Lt => k
                        .checked_sub(1)
                        .map(|h| (i64::MIN, h))
                        .into_iter()
                        .collect(),
                    CmpOp::Le => vec![(i64::MIN, k)],
                    CmpOp::Gt => k
                        .checked_add(1)
                        .map(|l| (l, i64::MAX))
                        .into_iter()
                        .collect(),
                    CmpOp::Ge => vec![(k, i64::MAX)],
                }),
                None => Vals::Fin(BTreeSet::new()),
            },
            Cond::Range(lo, hi) => match (key(lo), key(hi)) {
                (Some(lo), Some(hi)) => Vals::Ranges(normalize(vec![(lo, hi)])),
                _ => Vals::Fin(BTreeSet::new()),
            },
        };
        Set {
            null: false,
            vals: self.vals.intersect(&vals),
        }
    }

    fn lit(&self, key: i64) -> Lit {
        match self.ty {
            ColumnType::Number => Lit::Num(fval(key)),
            ColumnType::Bool => Lit::Bool(key != 0),
            ColumnType::Int | ColumnType::String => Lit::Int(key),
        }
    }

    /// A short description of some non-null inputs in `set`, for messages: `=Weighted`,
    /// `=3`, `!=x`, ` not in [a, b]`. `None` when the set is empty or holds null (it does
    /// not constrain the column).
    pub(super) fn witness(&self, set: &Set) -> Option<String> {
        if set.null || set.is_empty() {
            return None;
        }
        let from_values = self
            .values
            .as_ref()
            .and_then(|values| values.iter().find(|v| set.vals.contains(v)));
        if let Some(v) = from_values {
            return Some(format!("={v}"));
        }
        match &set.vals {
            Vals::Fin(s) => s.iter().next().map(|v| format!("={v}")),
            Vals::CoFin(s) => {
                let items: Vec<&str> = s.iter().map(String::as_str).collect();
                Some(match items.as_slice() {
                    [] => " has any value".to_string(),
                    [one] => format!("!={one}"),
                    many => format!(" not in [{}]", many.join(", ")),
                })
            }
            Vals::Ranges(ranges) => self
                .range_witness(ranges)
                .map(|k| format!("={}", self.lit(k))),
        }
    }

    /// A readable key in `ranges`: 0 if present, else a whole-number bound, else any bound.
    fn range_witness(&self, ranges: &[(i64, i64)]) -> Option<i64> {
        let vals = Vals::Ranges(ranges.to_vec());
        let mut candidates = vec![0_i64];
        let (lo_end, hi_end) = match &self.vals {
            Vals::Ranges(u) => (
                u.first().map_or(i64::MIN, |r| r.0),
                u.last().map_or(i64::MAX, |r| r.1),
            ),
            _ => (i64::MIN, i64::MAX),
        };
        if self.ty == ColumnType::Number {
            candidates[0] = fkey(0.0);
            for &(lo, _) in ranges.iter().filter(|r| r.0 > lo_end) {
                candidates.push(fkey(fval(lo).ceil()));
            }
            for &(_, hi) in ranges.iter().filter(|r| r.1 < hi_end) {
                candidates.push(fkey(fval(hi).floor()));
            }
        }
        candidates.extend(ranges.iter().filter(|r| r.0 > lo_end).map(|r| r.0));
        candidates.extend(ranges.iter().filter(|r| r.1 < hi_end).map(|r| r.1));
        candidates.extend(ranges.first().map(|r| r.0));
        candidates.into_iter().find(|&k| vals.contains_key(k))
    }
}

/// The set of exactly these values.
fn points(ty: ColumnType, values: &[Lit]) -> Vals {
    if ty == ColumnType::String {
        Vals::Fin(
            values
                .iter()
                .filter_map(|v| match v {
                    Lit::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
        )
    } else {
        Vals::Ranges(normalize(
            values.iter().filter_map(key).map(|k| (k, k)).collect(),
        ))
    }
}
