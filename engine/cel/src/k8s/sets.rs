//! cel-go's sets extension (`ext/sets.go`), in Kubernetes' base environment since 1.29:
//! `sets.contains`, `sets.equivalent`, `sets.intersects`, with CEL equality supplied by the
//! caller (so `sets.contains([1, 2.0, 3u], [1.0, 2u, 3])` holds when the caller's equality
//! is CEL's).

/// `sets.contains(list, sublist)`: every element of `sublist` is in `list` (true for an
/// empty `sublist`).
pub fn contains<T>(list: &[T], sublist: &[T], mut equals: impl FnMut(&T, &T) -> bool) -> bool {
    sublist.iter().all(|s| list.iter().any(|l| equals(l, s)))
}

/// `sets.equivalent(a, b)`: each contains the other (sizes and duplicates do not matter).
pub fn equivalent<T>(a: &[T], b: &[T], mut equals: impl FnMut(&T, &T) -> bool) -> bool {
    contains(a, b, &mut equals) && contains(b, a, &mut equals)
}

/// `sets.intersects(a, b)`: some element of `a` is in `b` (false when either is empty).
pub fn intersects<T>(a: &[T], b: &[T], mut equals: impl FnMut(&T, &T) -> bool) -> bool {
    a.iter().any(|x| b.iter().any(|y| equals(y, x)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CEL numeric equality across int, uint and double, for the documented examples.
    #[derive(Clone, Copy, Debug)]
    enum N {
        I(i64),
        U(u64),
        D(f64),
    }

    fn eq(a: &N, b: &N) -> bool {
        let f = |n: &N| match *n {
            N::I(i) => i as f64,
            N::U(u) => u as f64,
            N::D(d) => d,
        };
        f(a) == f(b)
    }

    #[test]
    fn documented_examples() {
        use N::*;
        assert!(contains::<N>(&[], &[], eq));
        assert!(!contains(&[], &[I(1)], eq));
        assert!(contains(&[I(1), I(2), I(3), I(4)], &[I(2), I(3)], eq));
        assert!(contains(&[I(1), D(2.0), U(3)], &[D(1.0), U(2), I(3)], eq));
        assert!(equivalent::<N>(&[], &[], eq));
        assert!(equivalent(&[I(1)], &[I(1), I(1)], eq));
        assert!(equivalent(&[I(1)], &[U(1), D(1.0)], eq));
        assert!(equivalent(&[I(1), I(2), I(3)], &[U(3), D(2.0), I(1)], eq));
        assert!(!equivalent(&[I(1), I(2)], &[I(1)], eq));
        assert!(!intersects(&[I(1)], &[], eq));
        assert!(intersects(&[I(1)], &[I(1), I(2)], eq));
        assert!(!intersects(&[I(1)], &[I(2)], eq));
    }

    #[test]
    fn nested_lists() {
        // sets.intersects([[1], [2, 3]], [[1, 2], [2, 3.0]]) == true
        let a = [vec![1.0], vec![2.0, 3.0]];
        let b = [vec![1.0, 2.0], vec![2.0, 3.0]];
        assert!(intersects(&a, &b, |x, y| x == y));
    }
}
