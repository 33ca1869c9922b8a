//! List functions: Kubernetes' list library (`k8s.io/apiserver/pkg/cel/library/lists.go`:
//! `isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`, in every Kubernetes version)
//! and cel-go's `ext.Lists` at version 3, which Kubernetes 1.34 added to its base
//! environment (`slice`, `flatten`, `distinct`, `reverse`, `sort`, `sortBy`, `lists.range`).
//!
//! The functions are generic over the element type: the evaluator passes CEL's order,
//! equality and addition as closures, so this module knows nothing of its value type.

use std::cmp::Ordering;

/// Errors of the list functions, with Kubernetes' and cel-go's messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ListError<E> {
    /// `min()`/`max()` of an empty list: `min called on empty list`.
    #[error("{0} called on empty list")]
    Empty(&'static str),
    #[error("cannot slice({0}, {1}), negative indexes not supported")]
    SliceNegative(i64, i64),
    #[error("cannot slice({0}, {1}), start index must be less than or equal to end index")]
    SliceOrder(i64, i64),
    #[error("cannot slice({0}, {1}), list is length {2}")]
    SliceLength(i64, i64, usize),
    #[error("level must be non-negative")]
    FlattenDepth,
    #[error("lists.range: size {0} exceeds maximum allowed ({MAX_RANGE})")]
    RangeTooLarge(i64),
    #[error(
        "flatten: the result exceeds the size limit of {} elements",
        crate::limits::MAX_ELEMENTS
    )]
    TooLarge,
    #[error("list elements must be comparable")]
    NotComparable,
    #[error("list elements must have the same type")]
    MixedTypes,
    #[error(
        "@sortByAssociatedKeys() expected a list of the same size as the associated keys list, but got {0} and {1} elements respectively"
    )]
    KeysLength(usize, usize),
    /// An error of the caller's comparison or addition.
    #[error("{0}")]
    Element(E),
}

/// The largest list `lists.range` makes (cel-go's `maxRangeSize`).
pub const MAX_RANGE: i64 = 10_000_000;

/// `<list>.isSorted()`: no element is greater than the next.
pub fn is_sorted<T, E>(
    items: &[T],
    mut compare: impl FnMut(&T, &T) -> Result<Ordering, E>,
) -> Result<bool, ListError<E>> {
    for w in items.windows(2) {
        if compare(&w[0], &w[1]).map_err(ListError::Element)? == Ordering::Greater {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `<list>.sum()`: `zero` plus every element, left to right (`zero` is the sum of an empty
/// list: `0`, `0u`, `0.0` or a zero duration, by the list's type).
pub fn sum<T: Clone, E>(
    items: &[T],
    zero: T,
    mut add: impl FnMut(&T, &T) -> Result<T, E>,
) -> Result<T, ListError<E>> {
    let mut acc = zero;
    for item in items {
        acc = add(&acc, item).map_err(ListError::Element)?;
    }
    Ok(acc)
}

/// `<list>.min()`: the first of the smallest elements.
pub fn min<T, E>(
    items: &[T],
    compare: impl FnMut(&T, &T) -> Result<Ordering, E>,
) -> Result<&T, ListError<E>> {
    extreme(items, compare, Ordering::Greater, "min")
}

/// `<list>.max()`: the first of the largest elements.
pub fn max<T, E>(
    items: &[T],
    compare: impl FnMut(&T, &T) -> Result<Ordering, E>,
) -> Result<&T, ListError<E>> {
    extreme(items, compare, Ordering::Less, "max")
}

fn extreme<'a, T, E>(
    items: &'a [T],
    mut compare: impl FnMut(&T, &T) -> Result<Ordering, E>,
    replace_when: Ordering,
    name: &'static str,
) -> Result<&'a T, ListError<E>> {
    let (first, rest) = items.split_first().ok_or(ListError::Empty(name))?;
    let mut result = first;
    for item in rest {
        if compare(result, item).map_err(ListError::Element)? == replace_when {
            result = item;
        }
    }
    Ok(result)
}

/// `<list>.indexOf(x)`: the first index of an element equal to `x`, or -1.
pub fn index_of<T>(items: &[T], x: &T, mut equals: impl FnMut(&T, &T) -> bool) -> i64 {
    items
        .iter()
        .position(|i| equals(i, x))
        .map_or(-1, |i| i as i64)
}

/// `<list>.lastIndexOf(x)`: the last index of an element equal to `x`, or -1.
pub fn last_index_of<T>(items: &[T], x: &T, mut equals: impl FnMut(&T, &T) -> bool) -> i64 {
    items
        .iter()
        .rposition(|i| equals(i, x))
        .map_or(-1, |i| i as i64)
}

/// `<list>.slice(start, end)`: the elements from `start` (included) to `end` (excluded).
pub fn slice<T: Clone, E>(items: &[T], start: i64, end: i64) -> Result<Vec<T>, ListError<E>> {
    if start < 0 || end < 0 {
        return Err(ListError::SliceNegative(start, end));
    }
    if start > end {
        return Err(ListError::SliceOrder(start, end));
    }
    if (items.len() as u64) < end as u64 {
        return Err(ListError::SliceLength(start, end, items.len()));
    }
    Ok(items[start as usize..end as usize].to_vec())
}

/// `<list>.flatten()` (depth 1) and `<list>.flatten(depth)`: nested lists, as `as_list`
/// recognizes them, spliced in up to `depth` levels.
pub fn flatten<T: Clone, E>(
    items: &[T],
    depth: i64,
    as_list: &impl Fn(&T) -> Option<&[T]>,
) -> Result<Vec<T>, ListError<E>> {
    if depth < 0 {
        return Err(ListError::FlattenDepth);
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match as_list(item) {
            Some(nested) if depth > 0 => out.extend(flatten(nested, depth - 1, as_list)?),
            _ => out.push(item.clone()),
        }
        // A list can hold the same nested list many times: the result is bounded as it
        // grows, not after.
        if out.len() > crate::limits::MAX_ELEMENTS {
            return Err(ListError::TooLarge);
        }
    }
    Ok(out)
}

/// `<list>.distinct()`: the first occurrence of each value, in order.
pub fn distinct<T: Clone>(items: &[T], mut equals: impl FnMut(&T, &T) -> bool) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !out.iter().any(|seen| equals(item, seen)) {
            out.push(item.clone());
        }
    }
    out
}

/// `<list>.reverse()`.
pub fn reverse<T: Clone>(items: &[T]) -> Vec<T> {
    items.iter().rev().cloned().collect()
}

/// `lists.range(n)`: `[0, 1, ..., n-1]`, empty for a negative `n` (cel-go v0.26 counts up
/// to `n` without checking it).
pub fn range<E>(n: i64) -> Result<Vec<i64>, ListError<E>> {
    if n > MAX_RANGE {
        return Err(ListError::RangeTooLarge(n));
    }
    Ok((0..n).collect())
}

/// `<list>.sort()` and `sortBy` (cel-go's `@sortByAssociatedKeys`): `items` ordered by their
/// `keys`. The keys must be comparable (`comparable` tells, for the first key) and of one
/// type (`same_type`); `compare` orders two keys.
///
/// The order is Go's `sort.Slice` (pdqsort, see [`go_sort`]), which is not stable: elements
/// with equal keys come in the order Kubernetes gives them.
pub fn sort_by_keys<T: Clone, K, E>(
    items: &[T],
    keys: &[K],
    comparable: impl Fn(&K) -> bool,
    same_type: impl Fn(&K, &K) -> bool,
    mut compare: impl FnMut(&K, &K) -> Ordering,
) -> Result<Vec<T>, ListError<E>> {
    if items.len() != keys.len() {
        return Err(ListError::KeysLength(items.len(), keys.len()));
    }
    let Some(first) = keys.first() else {
        return Ok(Vec::new());
    };
    if !comparable(first) {
        return Err(ListError::NotComparable);
    }
    if keys.len() > 1 && !keys.iter().all(|k| same_type(first, k)) {
        return Err(ListError::MixedTypes);
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    go_sort(&mut order, |a, b| {
        compare(&keys[*a], &keys[*b]) == Ordering::Less
    });
    Ok(order.into_iter().map(|i| items[i].clone()).collect())
}

/// Go's `sort.Slice`: pattern-defeating quicksort, insertion sort for short runs and
/// heapsort past too many bad pivots, deterministic (its pattern breaking draws from a
/// xorshift seeded with the length). Ported so that elements that compare equal end in the
/// order cel-go's `sort` and `sortBy` leave them in.
pub fn go_sort<T>(data: &mut [T], mut less: impl FnMut(&T, &T) -> bool) {
    let length = data.len();
    let limit = usize::BITS - length.leading_zeros();
    let mut sorter = GoSort {
        data,
        less: &mut less,
    };
    sorter.pdqsort(0, length, limit);
}

/// Go's `sortedHint`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hint {
    Unknown,
    Increasing,
    Decreasing,
}

struct GoSort<'a, T, F> {
    data: &'a mut [T],
    less: &'a mut F,
}

impl<T, F: FnMut(&T, &T) -> bool> GoSort<'_, T, F> {
    fn less(&mut self, i: usize, j: usize) -> bool {
        (self.less)(&self.data[i], &self.data[j])
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.data.swap(i, j);
    }

    fn insertion_sort(&mut self, a: usize, b: usize) {
        for i in a + 1..b {
            let mut j = i;
            while j > a && self.less(j, j - 1) {
                self.swap(j, j - 1);
                j -= 1;
            }
        }
    }

    fn sift_down(&mut self, lo: usize, hi: usize, first: usize) {
        let mut root = lo;
        loop {
            let mut child = 2 * root + 1;
            if child >= hi {
                return;
            }
            if child + 1 < hi && self.less(first + child, first + child + 1) {
                child += 1;
            }
            if !self.less(first + root, first + child) {
                return;
            }
            self.swap(first + root, first + child);
            root = child;
        }
    }

    fn heap_sort(&mut self, a: usize, b: usize) {
        let first = a;
        let hi = b - a;
        for i in (0..=(hi - 1) / 2).rev() {
            self.sift_down(i, hi, first);
        }
        for i in (0..hi).rev() {
            self.swap(first, first + i);
            self.sift_down(0, i, first);
        }
    }

    fn pdqsort(&mut self, mut a: usize, mut b: usize, mut limit: u32) {
        const MAX_INSERTION: usize = 12;
        let mut was_balanced = true;
        let mut was_partitioned = true;
        loop {
            let length = b - a;
            if length <= MAX_INSERTION {
                self.insertion_sort(a, b);
                return;
            }
            if limit == 0 {
                self.heap_sort(a, b);
                return;
            }
            if !was_balanced {
                self.break_patterns(a, b);
                limit -= 1;
            }
            let (mut pivot, mut hint) = self.choose_pivot(a, b);
            if hint == Hint::Decreasing {
                self.reverse_range(a, b);
                pivot = (b - 1) - (pivot - a);
                hint = Hint::Increasing;
            }
            if was_balanced
                && was_partitioned
                && hint == Hint::Increasing
                && self.partial_insertion_sort(a, b)
            {
                return;
            }
            if a > 0 && !self.less(a - 1, pivot) {
                a = self.partition_equal(a, b, pivot);
                continue;
            }
            let (mid, already_partitioned) = self.partition(a, b, pivot);
            was_partitioned = already_partitioned;
            let (left, right) = (mid - a, b - mid);
            let balance_threshold = length / 8;
            if left < right {
                was_balanced = left >= balance_threshold;
                self.pdqsort(a, mid, limit);
                a = mid + 1;
            } else {
                was_balanced = right >= balance_threshold;
                self.pdqsort(mid + 1, b, limit);
                b = mid;
            }
        }
    }

    fn partition(&mut self, a: usize, b: usize, pivot: usize) -> (usize, bool) {
        self.swap(a, pivot);
        // Signed, as in Go: `j` may pass below `i`.
        let (mut i, mut j) = (a as isize + 1, b as isize - 1);
        let idx = |k: isize| k as usize;
        while i <= j && self.less(idx(i), a) {
            i += 1;
        }
        while i <= j && !self.less(idx(j), a) {
            j -= 1;
        }
        if i > j {
            self.swap(idx(j), a);
            return (idx(j), true);
        }
        self.swap(idx(i), idx(j));
        i += 1;
        j -= 1;
        loop {
            while i <= j && self.less(idx(i), a) {
                i += 1;
            }
            while i <= j && !self.less(idx(j), a) {
                j -= 1;
            }
            if i > j {
                break;
            }
            self.swap(idx(i), idx(j));
            i += 1;
            j -= 1;
        }
        self.swap(idx(j), a);
        (idx(j), false)
    }

    fn partition_equal(&mut self, a: usize, b: usize, pivot: usize) -> usize {
        self.swap(a, pivot);
        let (mut i, mut j) = (a as isize + 1, b as isize - 1);
        let idx = |k: isize| k as usize;
        loop {
            while i <= j && !self.less(a, idx(i)) {
                i += 1;
            }
            while i <= j && self.less(a, idx(j)) {
                j -= 1;
            }
            if i > j {
                break;
            }
            self.swap(idx(i), idx(j));
            i += 1;
            j -= 1;
        }
        idx(i)
    }

    fn partial_insertion_sort(&mut self, a: usize, b: usize) -> bool {
        const MAX_STEPS: usize = 5;
        const SHORTEST_SHIFTING: usize = 50;
        let mut i = a + 1;
        for _ in 0..MAX_STEPS {
            while i < b && !self.less(i, i - 1) {
                i += 1;
            }
            if i == b {
                return true;
            }
            if b - a < SHORTEST_SHIFTING {
                return false;
            }
            self.swap(i, i - 1);
            if i - a >= 2 {
                let mut j = i - 1;
                while j >= 1 {
                    if !self.less(j, j - 1) {
                        break;
                    }
                    self.swap(j, j - 1);
                    j -= 1;
                }
            }
            if b - i >= 2 {
                let mut j = i + 1;
                while j < b {
                    if !self.less(j, j - 1) {
                        break;
                    }
                    self.swap(j, j - 1);
                    j += 1;
                }
            }
        }
        false
    }

    fn break_patterns(&mut self, a: usize, b: usize) {
        let length = b - a;
        if length >= 8 {
            let mut random = length as u64;
            let modulus = 1usize << (usize::BITS - length.leading_zeros());
            let middle = a + (length / 4) * 2;
            for index in middle - 1..=middle + 1 {
                random ^= random << 13;
                random ^= random >> 7;
                random ^= random << 17;
                let mut other = (random as usize) & (modulus - 1);
                if other >= length {
                    other -= length;
                }
                self.swap(index, a + other);
            }
        }
    }

    fn choose_pivot(&mut self, a: usize, b: usize) -> (usize, Hint) {
        const SHORTEST_NINTHER: usize = 50;
        const MAX_SWAPS: usize = 4 * 3;
        let l = b - a;
        let mut swaps = 0;
        let mut i = a + l / 4;
        let mut j = a + l / 4 * 2;
        let mut k = a + l / 4 * 3;
        if l >= 8 {
            if l >= SHORTEST_NINTHER {
                i = self.median_adjacent(i, &mut swaps);
                j = self.median_adjacent(j, &mut swaps);
                k = self.median_adjacent(k, &mut swaps);
            }
            j = self.median(i, j, k, &mut swaps);
        }
        match swaps {
            0 => (j, Hint::Increasing),
            MAX_SWAPS => (j, Hint::Decreasing),
            _ => (j, Hint::Unknown),
        }
    }

    fn order2(&mut self, a: usize, b: usize, swaps: &mut usize) -> (usize, usize) {
        if self.less(b, a) {
            *swaps += 1;
            (b, a)
        } else {
            (a, b)
        }
    }

    fn median(&mut self, a: usize, b: usize, c: usize, swaps: &mut usize) -> usize {
        let (a, b) = self.order2(a, b, swaps);
        let (b, _) = self.order2(b, c, swaps);
        let (_, b) = self.order2(a, b, swaps);
        b
    }

    fn median_adjacent(&mut self, a: usize, swaps: &mut usize) -> usize {
        self.median(a - 1, a, a + 1, swaps)
    }

    fn reverse_range(&mut self, a: usize, b: usize) {
        let (mut i, mut j) = (a, b - 1);
        while i < j {
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
    }
}

/// `<list>.includes(x)` (the Kubernetes list library's version 1, used by DRA, not in the
/// base environment): whether `target` is a list with an element equal to `x`, or equals
/// `x` itself.
#[allow(dead_code)] // not in Kubernetes' base environment: not registered
pub fn includes<T>(
    target: &T,
    x: &T,
    as_list: impl Fn(&T) -> Option<&[T]>,
    mut equals: impl FnMut(&T, &T) -> bool,
) -> bool {
    match as_list(target) {
        Some(items) => items.iter().any(|i| equals(i, x)),
        None => equals(target, x),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type R<T> = Result<T, ListError<String>>;

    #[test]
    fn go_sort_orders_equal_keys_as_go_does() {
        // Kubernetes' answer to `[6, 4, 5, 6, 3, 13, ..., 113].sortBy(x, x % 3)`.
        let mut items: Vec<i64> = vec![6, 4, 5, 6, 3];
        items.extend((1..12).map(|i| i * 10 + 3));
        go_sort(&mut items, |a, b| a % 3 < b % 3);
        assert_eq!(
            items,
            [33, 93, 63, 6, 3, 6, 43, 13, 73, 4, 103, 23, 53, 5, 83, 113]
        );
        // Long inputs (past insertion sort, the ninther and pattern breaking) still sort.
        let mut long: Vec<i64> = (0..1000).map(|i| (i * 7919) % 1009).collect();
        go_sort(&mut long, |a, b| a < b);
        assert!(long.windows(2).all(|w| w[0] <= w[1]));
        let mut reversed: Vec<i64> = (0..500).rev().collect();
        go_sort(&mut reversed, |a, b| a < b);
        assert_eq!(reversed, (0..500).collect::<Vec<i64>>());
    }

    fn cmp(a: &i64, b: &i64) -> Result<Ordering, String> {
        Ok(a.cmp(b))
    }

    #[test]
    fn kubernetes_list_library() {
        assert_eq!(is_sorted(&[1, 2, 3], cmp), Ok(true));
        assert_eq!(
            is_sorted(&["a", "b", "b", "c"], |a, b| Ok::<_, String>(a.cmp(b))),
            Ok(true)
        );
        assert_eq!(
            is_sorted(&[2.0, 1.0], |a: &f64, b: &f64| Ok::<_, String>(
                a.total_cmp(b)
            )),
            Ok(false)
        );
        assert_eq!(is_sorted(&[1], cmp), Ok(true));
        assert_eq!(is_sorted(&[] as &[i64], cmp), Ok(true));
        assert_eq!(sum(&[1, 3], 0, |a, b| Ok::<_, String>(a + b)), Ok(4));
        assert_eq!(
            sum(&[1.0, 3.0], 0.0, |a, b| Ok::<_, String>(a + b)),
            Ok(4.0)
        );
        assert_eq!(sum(&[] as &[i64], 0, |a, b| Ok::<_, String>(a + b)), Ok(0));
        let overflow: R<i64> = sum(&[i64::MAX, 1], 0, |a, b| {
            a.checked_add(*b)
                .ok_or("return error for overflow".to_string())
        });
        assert_eq!(
            overflow.unwrap_err().to_string(),
            "return error for overflow"
        );
        assert_eq!(min(&[1, 3], cmp), Ok(&1));
        assert_eq!(max(&[1, 3], cmp), Ok(&3));
        assert_eq!(min(&[1], cmp), Ok(&1));
        assert_eq!(
            min(&[] as &[i64], cmp).unwrap_err().to_string(),
            "min called on empty list"
        );
        assert_eq!(
            max(&[] as &[i64], cmp).unwrap_err().to_string(),
            "max called on empty list"
        );
        // ties keep the first (cel-go replaces only on a strict order)
        let pairs = [(1, 'a'), (1, 'b')];
        assert_eq!(
            min(&pairs, |x, y| Ok::<_, String>(x.0.cmp(&y.0))),
            Ok(&(1, 'a'))
        );
        assert_eq!(
            max(&pairs, |x, y| Ok::<_, String>(x.0.cmp(&y.0))),
            Ok(&(1, 'a'))
        );
        assert_eq!(index_of(&[1, 2, 2, 3], &2, |a, b| a == b), 1);
        assert_eq!(last_index_of(&["a", "b", "b", "c"], &"b", |a, b| a == b), 2);
        assert_eq!(index_of(&[1.0], &1.1, |a, b| a == b), -1);
        assert_eq!(index_of(&[] as &[&str], &"string", |a, b| a == b), -1);
    }

    #[derive(Clone, Debug, PartialEq)]
    enum V {
        I(i64),
        L(Vec<V>),
    }

    fn as_list(v: &V) -> Option<&[V]> {
        match v {
            V::L(items) => Some(items),
            V::I(_) => None,
        }
    }

    #[test]
    fn ext_lists() {
        assert_eq!(slice::<_, String>(&[1, 2, 3, 4], 1, 3), Ok(vec![2, 3]));
        assert_eq!(slice::<_, String>(&[1, 2, 3, 4], 2, 4), Ok(vec![3, 4]));
        assert_eq!(
            slice::<i64, String>(&[1, 2], -1, 1)
                .unwrap_err()
                .to_string(),
            "cannot slice(-1, 1), negative indexes not supported"
        );
        assert_eq!(
            slice::<i64, String>(&[1, 2], 2, 1).unwrap_err().to_string(),
            "cannot slice(2, 1), start index must be less than or equal to end index"
        );
        assert_eq!(
            slice::<i64, String>(&[1, 2], 0, 3).unwrap_err().to_string(),
            "cannot slice(0, 3), list is length 2"
        );
        let l = |v: Vec<V>| V::L(v);
        let i = V::I;
        // [1,[2,3],[4]].flatten() == [1, 2, 3, 4]
        let x = vec![i(1), l(vec![i(2), i(3)]), l(vec![i(4)])];
        assert_eq!(
            flatten::<_, String>(&x, 1, &as_list),
            Ok(vec![i(1), i(2), i(3), i(4)])
        );
        // [1,[2,[3,4]]].flatten() == [1, 2, [3, 4]]
        let x = vec![i(1), l(vec![i(2), l(vec![i(3), i(4)])])];
        assert_eq!(
            flatten::<_, String>(&x, 1, &as_list),
            Ok(vec![i(1), i(2), l(vec![i(3), i(4)])])
        );
        // [1,2,[],[],[3,4]].flatten() == [1, 2, 3, 4]
        let x = vec![i(1), i(2), l(vec![]), l(vec![]), l(vec![i(3), i(4)])];
        assert_eq!(
            flatten::<_, String>(&x, 1, &as_list),
            Ok(vec![i(1), i(2), i(3), i(4)])
        );
        // [1,[2,[3,[4]]]].flatten(2) == [1, 2, 3, [4]]
        let x = vec![i(1), l(vec![i(2), l(vec![i(3), l(vec![i(4)])])])];
        assert_eq!(
            flatten::<_, String>(&x, 2, &as_list),
            Ok(vec![i(1), i(2), i(3), l(vec![i(4)])])
        );
        assert_eq!(
            flatten::<_, String>(&x, -1, &as_list)
                .unwrap_err()
                .to_string(),
            "level must be non-negative"
        );
        assert_eq!(distinct(&[1, 2, 2, 3, 3, 3], |a, b| a == b), vec![1, 2, 3]);
        assert_eq!(
            distinct(&["b", "b", "c", "a", "c"], |a, b| a == b),
            vec!["b", "c", "a"]
        );
        assert_eq!(reverse(&[5, 3, 1, 2]), vec![2, 1, 3, 5]);
        assert_eq!(range::<String>(5), Ok(vec![0, 1, 2, 3, 4]));
        assert_eq!(range::<String>(0), Ok(vec![]));
        assert_eq!(range::<String>(-1), Ok(vec![]));
        assert_eq!(range::<String>(i64::MIN), Ok(vec![]));
        assert_eq!(
            range::<String>(MAX_RANGE + 1).unwrap_err().to_string(),
            "lists.range: size 10000001 exceeds maximum allowed (10000000)"
        );
    }

    #[test]
    fn sorting() {
        let yes = |_: &i64| true;
        let same = |_: &i64, _: &i64| true;
        assert_eq!(
            sort_by_keys::<_, _, String>(&[3, 2, 1], &[3, 2, 1], yes, same, |a, b| a.cmp(b)),
            Ok(vec![1, 2, 3])
        );
        assert_eq!(
            sort_by_keys::<_, _, String>(&["foo", "bar", "baz"], &[3, 1, 2], yes, same, |a, b| a
                .cmp(b)),
            Ok(vec!["bar", "baz", "foo"])
        );
        assert_eq!(
            sort_by_keys::<i64, i64, String>(&[], &[], yes, same, |a, b| a.cmp(b)),
            Ok(vec![])
        );
        let err = sort_by_keys::<_, _, String>(&[1, 2], &[1, 2], |_| false, same, |a, b| a.cmp(b))
            .unwrap_err();
        assert_eq!(err.to_string(), "list elements must be comparable");
        let err =
            sort_by_keys::<_, _, String>(&[1, 2], &[1, 2], yes, |_, _| false, |a, b| a.cmp(b))
                .unwrap_err();
        assert_eq!(err.to_string(), "list elements must have the same type");
        let err =
            sort_by_keys::<_, _, String>(&[1, 2], &[1], yes, same, |a, b| a.cmp(b)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "@sortByAssociatedKeys() expected a list of the same size as the associated keys list, but got 2 and 1 elements respectively"
        );
        // stable on ties
        assert_eq!(
            sort_by_keys::<_, _, String>(&['a', 'b', 'c'], &[1, 0, 1], yes, same, |a, b| a.cmp(b)),
            Ok(vec!['b', 'a', 'c'])
        );
    }

    #[test]
    fn includes_v1() {
        let x = V::L(vec![V::I(1), V::I(2), V::I(3)]);
        assert!(includes(&x, &V::I(2), as_list, |a, b| a == b));
        assert!(!includes(&x, &V::I(4), as_list, |a, b| a == b));
        assert!(includes(&V::I(4), &V::I(4), as_list, |a, b| a == b));
    }
}
