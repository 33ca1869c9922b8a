//! Go's parsers and formatter, with Go's answers (checked against Kubernetes' CEL).

use super::*;

#[test]
fn integers_read_as_strconv_does() {
    assert_eq!(parse_int("+1"), Some(1));
    assert_eq!(parse_int("-0"), Some(0));
    assert_eq!(parse_int("010"), Some(10));
    assert_eq!(parse_int("-9223372036854775808"), Some(i64::MIN));
    assert_eq!(parse_int("9223372036854775808"), None);
    for bad in ["", "+", "++1", "+-1", " 1", "1 ", "1_000", "0x10"] {
        assert_eq!(parse_int(bad), None, "{bad}");
    }
    assert_eq!(parse_uint("18446744073709551615"), Some(u64::MAX));
    for bad in ["+1", "-0", "18446744073709551616", ""] {
        assert_eq!(parse_uint(bad), None, "{bad}");
    }
    assert_eq!(parse_bool("F"), Some(false));
    assert_eq!(parse_bool("tRuE"), None);
}

#[test]
fn floats_read_as_strconv_does() {
    let cases: &[(&str, Option<f64>)] = &[
        ("0x1p-2", Some(0.25)),
        ("0X1P-2", Some(0.25)),
        ("0x1.8p1", Some(3.0)),
        ("0x.8p1", Some(1.0)),
        ("0x_1p0", Some(1.0)),
        ("0x1p-1074", Some(5e-324)),
        ("0x1p-1075", Some(0.0)),
        ("0x1.fffffffffffffp1023", Some(f64::MAX)),
        ("0x1.fffffffffffff8p1023", None),
        ("0x1p1024", None),
        ("0x10", None),
        ("0xp1", None),
        ("0x1p", None),
        ("1_000", Some(1000.0)),
        ("1e1_0", Some(1e10)),
        ("1_0.5", Some(10.5)),
        ("1__0", None),
        ("_1", None),
        ("1_", None),
        ("1._5", None),
        ("1_.5", None),
        ("+1.5", Some(1.5)),
        (".5", Some(0.5)),
        ("5.", Some(5.0)),
        ("1E5", Some(1e5)),
        ("1e400", None),
        ("-1e400", None),
        ("1e-400", Some(0.0)),
        ("", None),
        (" 1", None),
        ("1e", None),
        ("0b1", None),
        ("infinit", None),
        ("infinityy", None),
    ];
    for (text, want) in cases {
        assert_eq!(parse_float(text), *want, "{text}");
    }
    assert_eq!(parse_float("inf"), Some(f64::INFINITY));
    assert_eq!(parse_float("-Infinity"), Some(f64::NEG_INFINITY));
    assert!(parse_float("NaN").is_some_and(f64::is_nan));
    assert_eq!(parse_float("-nan"), None);
    assert_eq!(parse_float("+NaN"), None);
}

#[test]
fn durations_read_as_time_does() {
    assert_eq!(parse_duration("1h"), Ok(3_600_000_000_000));
    assert_eq!(parse_duration("+1h"), Ok(3_600_000_000_000));
    assert_eq!(parse_duration("-0"), Ok(0));
    assert_eq!(parse_duration(".5s"), Ok(500_000_000));
    assert_eq!(parse_duration("1.s"), Ok(1_000_000_000));
    assert_eq!(parse_duration("1\u{b5}s"), Ok(1000));
    assert_eq!(parse_duration("1\u{3bc}s"), Ok(1000));
    assert_eq!(parse_duration("1.5h30m"), Ok(7_200_000_000_000));
    assert_eq!(parse_duration("0.9999999999s"), Ok(999_999_999));
    assert_eq!(parse_duration("-9223372036854775808ns"), Ok(i64::MIN));
    assert_eq!(
        parse_duration("9223372036854775808ns"),
        Err(DurationError::Range)
    );
    assert_eq!(parse_duration("2562048h"), Err(DurationError::Range));
    for bad in ["", "1", "1H", "1d", ".s", "1e3s", " 1s", "1h-1m", "1_000s"] {
        assert_eq!(parse_duration(bad), Err(DurationError::Invalid), "{bad}");
    }
}

#[test]
fn times_read_as_time_parse_reads_rfc3339() {
    let utc = |s: &str| parse_rfc3339(s).map(|t| format_rfc3339_nano(t.seconds, t.nanos, t.offset));
    assert_eq!(
        utc("2024-06-01T12:00:00+02:00").as_deref(),
        Some("2024-06-01T12:00:00+02:00")
    );
    assert_eq!(
        parse_rfc3339("2024-06-01T12:00:00+02:00").map(|t| (t.seconds, t.offset)),
        Some((1_717_236_000, 7200))
    );
    assert_eq!(
        utc("2024-06-01T12:00:00-00:00").as_deref(),
        Some("2024-06-01T12:00:00Z")
    );
    assert_eq!(
        utc("2024-01-01T1:00:00Z").as_deref(),
        Some("2024-01-01T01:00:00Z")
    );
    assert_eq!(
        utc("2024-01-01T00:00:00,5Z").as_deref(),
        Some("2024-01-01T00:00:00.5Z")
    );
    assert_eq!(
        utc("2024-01-01T00:00:00.1234567891Z").as_deref(),
        Some("2024-01-01T00:00:00.123456789Z")
    );
    assert_eq!(
        utc("2024-01-01T00:00:00+24:00").as_deref(),
        Some("2024-01-01T00:00:00+24:00")
    );
    assert_eq!(
        utc("2024-01-01T00:00:00+01:60").as_deref(),
        Some("2024-01-01T00:00:00+02:00")
    );
    assert_eq!(
        utc("2024-02-29T00:00:00Z").as_deref(),
        Some("2024-02-29T00:00:00Z")
    );
    assert_eq!(
        utc("0001-01-01T00:00:00Z").as_deref(),
        Some("0001-01-01T00:00:00Z")
    );
    for bad in [
        "2024-01-01t00:00:00Z",
        "2024-01-01T00:00:00z",
        "2024-01-01 00:00:00Z",
        "2024-01-01T00:00:00",
        "2024-01-01T00:00:00+0200",
        "2024-1-01T00:00:00Z",
        "2024-01-01T24:00:00Z",
        "2024-02-30T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2024-01-01T00:00:60Z",
        "2024-01-01T00:00:00.Z",
        "+2024-01-01T00:00:00Z",
        "2024-01-01T00:00:00+25:00",
        "2024-01-01T00:00:00+01:61",
        "2024-01-01T00:00:00Zx",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{bad}");
    }
}

#[test]
fn times_write_as_rfc3339_nano() {
    assert_eq!(format_rfc3339_nano(0, 0, 0), "1970-01-01T00:00:00Z");
    assert_eq!(
        format_rfc3339_nano(0, 500_000_000, -3600),
        "1969-12-31T23:00:00.5-01:00"
    );
    assert_eq!(
        format_rfc3339_nano(253_402_300_799, 0, 3600),
        "10000-01-01T00:59:59+01:00"
    );
    assert_eq!(
        format_rfc3339_nano(-62_135_596_800, 1, 0),
        "0001-01-01T00:00:00.000000001Z"
    );
}
