//! The optional integrations (`chrono-04`, `time-03`, `num-bigint-03`,
//! `num-bigint-04`, `bigdecimal-04`, `secrecy-10`): each type round-trips
//! through `SerializeValue` then `DeserializeValue` over its whole range,
//! encodes to the same bytes as the crate's own type for the CQL type, and
//! fails with an error (never a panic) for values it cannot represent, the
//! wrong CQL type, nulls and malformed bytes. Each module needs its
//! feature; CI runs this file with all of them.

// Without any of the features the helpers below have no caller.
#![allow(dead_code, unused_imports, unused_macros)]

use std::fmt::Debug;

use scylla_driver_cql::types::{
    ColumnType, DeserializationErrorKind, DeserializeValue, NativeType, SerializationErrorKind,
    SerializeValue, TypeCheckErrorKind, Written,
};

fn ser<T: SerializeValue + ?Sized>(v: &T, typ: &ColumnType) -> Vec<u8> {
    let mut out = Vec::new();
    assert_eq!(
        scylla_driver_cql::types::serialize::serialize_bytes(&v, typ, &mut out),
        Ok(Written::Value),
        "{typ}"
    );
    out
}

/// Type check, then deserialize `bytes` as `T`, keeping only the kind.
fn de<'a, 'm, T: DeserializeValue<'a, 'm>>(
    typ: &'m ColumnType,
    bytes: Option<&'a [u8]>,
) -> Result<T, DeserializationErrorKind> {
    T::type_check(typ).map_err(|e| DeserializationErrorKind::TypeCheck(e.kind().clone()))?;
    T::deserialize(typ, bytes).map_err(|e| e.kind().clone())
}

fn rt<T>(v: &T, typ: &ColumnType) -> T
where
    T: SerializeValue + for<'a, 'm> DeserializeValue<'a, 'm> + Debug,
{
    let bytes = ser(v, typ);
    de::<T>(typ, Some(&bytes)).expect("deserializes")
}

/// `T` refuses `typ` both ways: a type-check mismatch and a serialization
/// mismatch.
fn refuses<T>(v: &T, typ: &ColumnType)
where
    T: SerializeValue + for<'a, 'm> DeserializeValue<'a, 'm>,
{
    let e = T::type_check(typ).expect_err("type check must fail");
    assert_eq!(e.kind(), &TypeCheckErrorKind::Mismatch, "{typ}");
    let e = v
        .serialize(
            typ,
            scylla_driver_cql::types::serialize::CellWriter::new(&mut Vec::new()),
        )
        .expect_err("serialize must fail");
    assert_eq!(e.kind(), &SerializationErrorKind::Mismatch, "{typ}");
}

/// The common byte-level failures of a fixed-size type: null, empty, short.
fn rejects_bad_bytes<T>(typ: &ColumnType, len: usize)
where
    T: for<'a, 'm> DeserializeValue<'a, 'm> + Debug,
{
    assert_eq!(
        de::<T>(typ, None).expect_err("null"),
        DeserializationErrorKind::UnexpectedNull
    );
    assert_eq!(
        de::<T>(typ, Some(&[])).expect_err("empty"),
        DeserializationErrorKind::UnexpectedEmpty
    );
    let short = vec![0; len - 1];
    assert_eq!(
        de::<T>(typ, Some(&short)).expect_err("short"),
        DeserializationErrorKind::WrongLength {
            expected: len,
            actual: len - 1
        }
    );
}

#[cfg(feature = "chrono-04")]
mod chrono {
    use super::*;
    use ::chrono_04::{DateTime, Datelike, NaiveDate, NaiveTime, Timelike, Utc};
    use proptest::prelude::*;
    use scylla_driver_cql::types::{CqlDate, CqlTime, CqlTimestamp};

    fn epoch() -> NaiveDate {
        NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date")
    }

    fn any_date() -> impl Strategy<Value = NaiveDate> {
        (NaiveDate::MIN.num_days_from_ce()..=NaiveDate::MAX.num_days_from_ce())
            .prop_map(|d| NaiveDate::from_num_days_from_ce_opt(d).expect("in range"))
    }

    fn in_range_millis() -> std::ops::RangeInclusive<i64> {
        DateTime::<Utc>::MIN_UTC.timestamp_millis()..=DateTime::<Utc>::MAX_UTC.timestamp_millis()
    }

    proptest! {
        #[test]
        fn dates_round_trip_as_unix_days(d in any_date()) {
            prop_assert_eq!(rt(&d, &ColumnType::Native(NativeType::Date)), d);
            let days = d.signed_duration_since(epoch()).num_days();
            prop_assert_eq!(i64::from(CqlDate::from(d).unix_days()), days);
            prop_assert_eq!(ser(&d, &ColumnType::Native(NativeType::Date)), ser(&CqlDate::from(d), &ColumnType::Native(NativeType::Date)));
            prop_assert_eq!(NaiveDate::try_from(CqlDate::from(d)), Ok(d));
        }

        #[test]
        fn any_stored_date_reads_or_fails_cleanly(raw in any::<u32>()) {
            let bytes = raw.to_be_bytes();
            match de::<NaiveDate>(&ColumnType::Native(NativeType::Date), Some(&bytes)) {
                Ok(d) => prop_assert_eq!(CqlDate::from(d), CqlDate(raw)),
                Err(e) => {
                    prop_assert!(matches!(e, DeserializationErrorKind::InvalidValue(_)), "{e:?}");
                    let days = i64::from(CqlDate(raw).unix_days());
                    let min = NaiveDate::MIN.signed_duration_since(epoch()).num_days();
                    let max = NaiveDate::MAX.signed_duration_since(epoch()).num_days();
                    prop_assert!(days < min || days > max, "{days} is in range");
                }
            }
        }

        #[test]
        fn times_round_trip_as_nanoseconds(nanos in 0..CqlTime::NANOS_PER_DAY) {
            let t = NaiveTime::try_from(CqlTime(nanos)).expect("valid time");
            prop_assert_eq!(rt(&t, &ColumnType::Native(NativeType::Time)), t);
            prop_assert_eq!(
                i64::from(t.num_seconds_from_midnight()) * 1_000_000_000 + i64::from(t.nanosecond()),
                nanos
            );
            prop_assert_eq!(ser(&t, &ColumnType::Native(NativeType::Time)), nanos.to_be_bytes());
        }

        #[test]
        fn any_stored_time_reads_or_fails_cleanly(raw in any::<i64>()) {
            let r = de::<NaiveTime>(&ColumnType::Native(NativeType::Time), Some(&raw.to_be_bytes()));
            prop_assert_eq!(r.is_ok(), CqlTime(raw).is_valid(), "{:?}", r);
        }

        #[test]
        fn timestamps_round_trip_as_milliseconds(ms in in_range_millis()) {
            let t = DateTime::from_timestamp_millis(ms).expect("in range");
            prop_assert_eq!(rt(&t, &ColumnType::Native(NativeType::Timestamp)), t);
            prop_assert_eq!(ser(&t, &ColumnType::Native(NativeType::Timestamp)), ms.to_be_bytes());
            prop_assert_eq!(CqlTimestamp::from(t), CqlTimestamp(ms));
        }

        #[test]
        fn sub_millisecond_parts_are_dropped_towards_the_past(
            secs in -100_000_000_000i64..100_000_000_000,
            nanos in 0u32..1_000_000_000,
        ) {
            let t = DateTime::from_timestamp(secs, nanos).expect("in range");
            let back = rt(&t, &ColumnType::Native(NativeType::Timestamp));
            prop_assert_eq!(back.timestamp(), secs);
            prop_assert_eq!(back.timestamp_subsec_nanos(), nanos / 1_000_000 * 1_000_000);
            prop_assert!(back <= t);
        }

        #[test]
        fn any_stored_timestamp_reads_or_fails_cleanly(ms in any::<i64>()) {
            let r = de::<DateTime<Utc>>(&ColumnType::Native(NativeType::Timestamp), Some(&ms.to_be_bytes()));
            prop_assert_eq!(r.is_ok(), in_range_millis().contains(&ms), "{:?}", r);
        }
    }

    #[test]
    fn out_of_range_values_are_errors() {
        for raw in [0, 1, u32::MAX] {
            let e = de::<NaiveDate>(
                &ColumnType::Native(NativeType::Date),
                Some(&raw.to_be_bytes()),
            )
            .expect_err("range");
            assert!(
                matches!(e, DeserializationErrorKind::InvalidValue(_)),
                "{e:?}"
            );
        }
        for raw in [i64::MIN, -1, CqlTime::NANOS_PER_DAY, i64::MAX] {
            assert!(de::<NaiveTime>(
                &ColumnType::Native(NativeType::Time),
                Some(&raw.to_be_bytes())
            )
            .is_err());
        }
        for raw in [i64::MIN, i64::MAX] {
            let e = de::<DateTime<Utc>>(
                &ColumnType::Native(NativeType::Timestamp),
                Some(&raw.to_be_bytes()),
            )
            .expect_err("range");
            assert!(e.to_string().contains("CqlTimestamp"), "{e}");
        }
        // A leap second has no CQL time.
        let leap = NaiveTime::from_hms_nano_opt(23, 59, 59, 1_000_000_000).expect("leap second");
        let e = leap
            .serialize(
                &ColumnType::Native(NativeType::Time),
                scylla_driver_cql::types::serialize::CellWriter::new(&mut Vec::new()),
            )
            .expect_err("leap");
        assert!(
            matches!(e.kind(), SerializationErrorKind::InvalidValue(_)),
            "{e}"
        );
    }

    #[test]
    fn wrong_types_and_bad_bytes_are_errors() {
        let d = epoch();
        let t = NaiveTime::from_hms_opt(0, 0, 0).expect("midnight");
        let ts = DateTime::from_timestamp_millis(0).expect("the epoch");
        for typ in [
            ColumnType::Native(NativeType::Int),
            ColumnType::Native(NativeType::Timestamp),
            ColumnType::Native(NativeType::Text),
        ] {
            refuses(&d, &typ);
        }
        for typ in [
            ColumnType::Native(NativeType::BigInt),
            ColumnType::Native(NativeType::Timestamp),
        ] {
            refuses(&t, &typ);
        }
        for typ in [
            ColumnType::Native(NativeType::BigInt),
            ColumnType::Native(NativeType::Date),
            ColumnType::Native(NativeType::Time),
        ] {
            refuses(&ts, &typ);
        }
        rejects_bad_bytes::<NaiveDate>(&ColumnType::Native(NativeType::Date), 4);
        rejects_bad_bytes::<NaiveTime>(&ColumnType::Native(NativeType::Time), 8);
        rejects_bad_bytes::<DateTime<Utc>>(&ColumnType::Native(NativeType::Timestamp), 8);
        assert_eq!(
            de::<Option<NaiveDate>>(&ColumnType::Native(NativeType::Date), None),
            Ok(None)
        );
    }
}

#[cfg(feature = "time-03")]
mod time {
    use super::*;
    use ::time_03::{Date, Month, OffsetDateTime, Time, UtcOffset};
    use proptest::prelude::*;
    use scylla_driver_cql::types::{CqlDate, CqlTime, CqlTimestamp};

    fn epoch() -> Date {
        Date::from_calendar_date(1970, Month::January, 1).expect("valid date")
    }

    fn any_date() -> impl Strategy<Value = Date> {
        (Date::MIN.to_julian_day()..=Date::MAX.to_julian_day())
            .prop_map(|d| Date::from_julian_day(d).expect("in range"))
    }

    fn in_range_millis() -> std::ops::RangeInclusive<i64> {
        let min = Date::MIN.midnight().assume_utc().unix_timestamp() * 1000;
        let max = Date::MAX
            .with_hms_milli(23, 59, 59, 999)
            .expect("valid time")
            .assume_utc()
            .unix_timestamp()
            * 1000
            + 999;
        min..=max
    }

    fn any_offset() -> impl Strategy<Value = UtcOffset> {
        (-86_399i32..=86_399).prop_map(|s| UtcOffset::from_whole_seconds(s).expect("in range"))
    }

    proptest! {
        #[test]
        fn dates_round_trip_as_unix_days(d in any_date()) {
            prop_assert_eq!(rt(&d, &ColumnType::Native(NativeType::Date)), d);
            prop_assert_eq!(i64::from(CqlDate::from(d).unix_days()), (d - epoch()).whole_days());
            prop_assert_eq!(ser(&d, &ColumnType::Native(NativeType::Date)), ser(&CqlDate::from(d), &ColumnType::Native(NativeType::Date)));
            prop_assert_eq!(Date::try_from(CqlDate::from(d)), Ok(d));
        }

        #[test]
        fn any_stored_date_reads_or_fails_cleanly(raw in any::<u32>()) {
            let days = i64::from(CqlDate(raw).unix_days());
            let in_range = ((Date::MIN - epoch()).whole_days()..=(Date::MAX - epoch()).whole_days())
                .contains(&days);
            match de::<Date>(&ColumnType::Native(NativeType::Date), Some(&raw.to_be_bytes())) {
                Ok(d) => {
                    prop_assert!(in_range);
                    prop_assert_eq!(CqlDate::from(d), CqlDate(raw));
                }
                Err(e) => {
                    prop_assert!(!in_range, "{days} is in range");
                    prop_assert!(matches!(e, DeserializationErrorKind::InvalidValue(_)), "{e:?}");
                }
            }
        }

        #[test]
        fn times_round_trip_as_nanoseconds(nanos in 0..CqlTime::NANOS_PER_DAY) {
            let t = Time::try_from(CqlTime(nanos)).expect("valid time");
            prop_assert_eq!(rt(&t, &ColumnType::Native(NativeType::Time)), t);
            prop_assert_eq!((t - Time::MIDNIGHT).whole_nanoseconds(), i128::from(nanos));
            prop_assert_eq!(ser(&t, &ColumnType::Native(NativeType::Time)), nanos.to_be_bytes());
        }

        #[test]
        fn any_stored_time_reads_or_fails_cleanly(raw in any::<i64>()) {
            let r = de::<Time>(&ColumnType::Native(NativeType::Time), Some(&raw.to_be_bytes()));
            prop_assert_eq!(r.is_ok(), CqlTime(raw).is_valid(), "{:?}", r);
        }

        #[test]
        fn timestamps_round_trip_as_milliseconds(ms in in_range_millis(), offset in any_offset()) {
            let utc = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
                .expect("in range");
            prop_assert_eq!(rt(&utc, &ColumnType::Native(NativeType::Timestamp)), utc);
            prop_assert_eq!(ser(&utc, &ColumnType::Native(NativeType::Timestamp)), ms.to_be_bytes());
            // Another offset, same instant: same timestamp (when the local
            // date stays in range).
            if let Some(local) = utc.checked_to_offset(offset) {
                prop_assert_eq!(CqlTimestamp::from(local), CqlTimestamp(ms));
                prop_assert_eq!(rt(&local, &ColumnType::Native(NativeType::Timestamp)), utc);
            }
        }

        #[test]
        fn sub_millisecond_parts_are_dropped_towards_the_past(
            // About ±7900 years: inside `time`'s range without `large-dates`.
            nanos in -250_000_000_000_000_000_000i128..250_000_000_000_000_000_000,
        ) {
            let t = OffsetDateTime::from_unix_timestamp_nanos(nanos).expect("in range");
            let back = rt(&t, &ColumnType::Native(NativeType::Timestamp));
            prop_assert_eq!(back.unix_timestamp_nanos(), nanos.div_euclid(1_000_000) * 1_000_000);
        }

        #[test]
        fn any_stored_timestamp_reads_or_fails_cleanly(ms in any::<i64>()) {
            let r = de::<OffsetDateTime>(&ColumnType::Native(NativeType::Timestamp), Some(&ms.to_be_bytes()));
            prop_assert_eq!(r.is_ok(), in_range_millis().contains(&ms), "{:?}", r);
        }
    }

    #[test]
    fn out_of_range_values_are_errors() {
        for raw in [0, u32::MAX] {
            let e = de::<Date>(
                &ColumnType::Native(NativeType::Date),
                Some(&raw.to_be_bytes()),
            )
            .expect_err("range");
            assert!(
                matches!(e, DeserializationErrorKind::InvalidValue(_)),
                "{e:?}"
            );
        }
        for raw in [i64::MIN, -1, CqlTime::NANOS_PER_DAY] {
            assert!(de::<Time>(
                &ColumnType::Native(NativeType::Time),
                Some(&raw.to_be_bytes())
            )
            .is_err());
        }
        let e = de::<OffsetDateTime>(
            &ColumnType::Native(NativeType::Timestamp),
            Some(&i64::MAX.to_be_bytes()),
        )
        .expect_err("range");
        assert!(e.to_string().contains("CqlTimestamp"), "{e}");
    }

    #[test]
    fn wrong_types_and_bad_bytes_are_errors() {
        refuses(&epoch(), &ColumnType::Native(NativeType::Timestamp));
        refuses(&epoch(), &ColumnType::Native(NativeType::Int));
        refuses(&Time::MIDNIGHT, &ColumnType::Native(NativeType::BigInt));
        refuses(
            &OffsetDateTime::UNIX_EPOCH,
            &ColumnType::Native(NativeType::BigInt),
        );
        refuses(
            &OffsetDateTime::UNIX_EPOCH,
            &ColumnType::Native(NativeType::Date),
        );
        rejects_bad_bytes::<Date>(&ColumnType::Native(NativeType::Date), 4);
        rejects_bad_bytes::<Time>(&ColumnType::Native(NativeType::Time), 8);
        rejects_bad_bytes::<OffsetDateTime>(&ColumnType::Native(NativeType::Timestamp), 8);
    }
}

/// The same tests for each num-bigint major version.
macro_rules! bigint_tests {
    ($module:ident, $krate:ident) => {
        mod $module {
            use super::*;
            use ::$krate::BigInt;
            use proptest::prelude::*;
            use scylla_driver_cql::types::CqlVarint;

            proptest! {
                #[test]
                fn bigints_round_trip_as_varints(
                    bytes in proptest::collection::vec(any::<u8>(), 1..64),
                ) {
                    let v = BigInt::from_signed_bytes_be(&bytes);
                    prop_assert_eq!(rt(&v, &ColumnType::Native(NativeType::Varint)), v.clone());
                    let cql = CqlVarint::from(v.clone());
                    // Same (normalised) bytes as the crate's own varint.
                    prop_assert_eq!(&cql, &CqlVarint::from_signed_bytes_be_slice(&bytes));
                    prop_assert_eq!(ser(&v, &ColumnType::Native(NativeType::Varint)), ser(&cql, &ColumnType::Native(NativeType::Varint)));
                    prop_assert_eq!(BigInt::from(&cql), v.clone());
                    prop_assert_eq!(BigInt::from(cql), v);
                }

                #[test]
                fn any_stored_varint_reads(bytes in proptest::collection::vec(any::<u8>(), 1..64)) {
                    let v: BigInt = de(&ColumnType::Native(NativeType::Varint), Some(&bytes)).expect("any bytes");
                    prop_assert_eq!(CqlVarint::from(v), CqlVarint::from_signed_bytes_be_slice(&bytes));
                }

                #[test]
                fn small_values_match_i128(n in any::<i128>()) {
                    prop_assert_eq!(CqlVarint::from(BigInt::from(n)), CqlVarint::from(n));
                }
            }

            #[test]
            fn wrong_types_and_bad_bytes_are_errors() {
                let v = BigInt::from(7);
                refuses(&v, &ColumnType::Native(NativeType::BigInt));
                refuses(&v, &ColumnType::Native(NativeType::Decimal));
                assert_eq!(
                    de::<BigInt>(&ColumnType::Native(NativeType::Varint), None),
                    Err(DeserializationErrorKind::UnexpectedNull)
                );
                assert_eq!(
                    de::<BigInt>(&ColumnType::Native(NativeType::Varint), Some(&[])),
                    Err(DeserializationErrorKind::UnexpectedEmpty)
                );
                assert_eq!(ser(&BigInt::from(0), &ColumnType::Native(NativeType::Varint)), [0]);
                assert_eq!(ser(&BigInt::from(-129), &ColumnType::Native(NativeType::Varint)), [0xFF, 0x7F]);
            }
        }
    };
}

#[cfg(feature = "num-bigint-03")]
bigint_tests!(bigint_03, num_bigint_03);
#[cfg(feature = "num-bigint-04")]
bigint_tests!(bigint_04, num_bigint_04);

#[cfg(feature = "bigdecimal-04")]
mod bigdecimal {
    use super::*;
    use ::bigdecimal_04::num_bigint::BigInt;
    use ::bigdecimal_04::BigDecimal;
    use proptest::prelude::*;
    use scylla_driver_cql::types::{CqlDecimal, CqlVarint};

    proptest! {
        #[test]
        fn decimals_round_trip_exactly(
            bytes in proptest::collection::vec(any::<u8>(), 1..48),
            scale in any::<i32>(),
        ) {
            let d = BigDecimal::new(BigInt::from_signed_bytes_be(&bytes), i64::from(scale));
            let back = rt(&d, &ColumnType::Native(NativeType::Decimal));
            // Digits and scale, not only the numeric value (1.0 == 1.00).
            prop_assert_eq!(back.as_bigint_and_exponent(), d.as_bigint_and_exponent());
            let cql = CqlDecimal {
                unscaled: CqlVarint::from_signed_bytes_be_slice(&bytes),
                scale,
            };
            prop_assert_eq!(ser(&d, &ColumnType::Native(NativeType::Decimal)), ser(&cql, &ColumnType::Native(NativeType::Decimal)));
            prop_assert_eq!(CqlDecimal::try_from(&d), Ok(cql.clone()));
            prop_assert_eq!(CqlDecimal::try_from(d.clone()), Ok(cql.clone()));
            prop_assert_eq!(BigDecimal::from(&cql).as_bigint_and_exponent(), d.as_bigint_and_exponent());
            prop_assert_eq!(BigDecimal::from(cql).as_bigint_and_exponent(), d.as_bigint_and_exponent());
        }

        #[test]
        fn scales_beyond_i32_are_errors(
            unscaled in any::<i64>(),
            scale in prop_oneof![i64::MIN..i64::from(i32::MIN), i64::from(i32::MAX) + 1..i64::MAX],
        ) {
            let d = BigDecimal::new(BigInt::from(unscaled), scale);
            prop_assert!(CqlDecimal::try_from(&d).is_err());
            let e = d.serialize(&ColumnType::Native(NativeType::Decimal), scylla_driver_cql::types::serialize::CellWriter::new(&mut Vec::new())).expect_err("scale");
            prop_assert!(matches!(e.kind(), SerializationErrorKind::InvalidValue(_)), "{e}");
        }

        #[test]
        fn any_stored_bytes_read_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let r = de::<BigDecimal>(&ColumnType::Native(NativeType::Decimal), Some(&bytes));
            prop_assert_eq!(r.is_ok(), bytes.len() >= 5, "{:?}", r);
        }
    }

    #[test]
    fn known_answers_and_errors() {
        let d: BigDecimal = "-12.345".parse().expect("decimal");
        assert_eq!(
            ser(&d, &ColumnType::Native(NativeType::Decimal)),
            [0, 0, 0, 3, 0xCF, 0xC7] // scale 3, unscaled -12345
        );
        refuses(&d, &ColumnType::Native(NativeType::Double));
        refuses(&d, &ColumnType::Native(NativeType::Varint));
        assert_eq!(
            de::<BigDecimal>(
                &ColumnType::Native(NativeType::Decimal),
                Some(&[0, 0, 0, 1])
            ),
            Err(DeserializationErrorKind::InvalidValue(
                "decimal shorter than 5 bytes"
            ))
        );
        assert_eq!(
            de::<BigDecimal>(&ColumnType::Native(NativeType::Decimal), None),
            Err(DeserializationErrorKind::UnexpectedNull)
        );
    }
}

#[cfg(feature = "secrecy-10")]
mod secrecy {
    use super::*;
    use ::secrecy_10::{ExposeSecret, SecretBox, SecretSlice, SecretString};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn secret_strings_round_trip_as_text(s in "\\PC{1,40}") {
            let secret = SecretString::from(s.clone());
            prop_assert_eq!(ser(&secret, &ColumnType::Native(NativeType::Text)), s.as_bytes());
            let back: SecretString = de(&ColumnType::Native(NativeType::Text), Some(s.as_bytes())).expect("text");
            prop_assert_eq!(back.expose_secret(), s.as_str());
            // Debug shows the type, never the value.
            prop_assert_eq!(format!("{:?}", back), "SecretBox<str>([REDACTED])");
        }

        #[test]
        fn secret_boxes_round_trip_as_their_inner_type(n in any::<i64>(), s in "[a-z]{1,20}") {
            let secret = SecretBox::new(Box::new(n));
            prop_assert_eq!(ser(&secret, &ColumnType::Native(NativeType::BigInt)), n.to_be_bytes());
            let back: SecretBox<i64> =
                de(&ColumnType::Native(NativeType::BigInt), Some(&n.to_be_bytes())).expect("bigint");
            prop_assert_eq!(*back.expose_secret(), n);

            let secret = SecretBox::new(Box::new(s.clone()));
            let back: SecretBox<String> = de(&ColumnType::Native(NativeType::Ascii), Some(&ser(&secret, &ColumnType::Native(NativeType::Ascii))))
                .expect("ascii");
            prop_assert_eq!(back.expose_secret(), &s);
        }
    }

    proptest! {
        #[test]
        fn secret_slices_round_trip_as_blobs(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let secret = SecretSlice::from(b.clone());
            prop_assert_eq!(ser(&secret, &ColumnType::Native(NativeType::Blob)), b.clone());
            let back: SecretSlice<u8> = de(&ColumnType::Native(NativeType::Blob), Some(&b)).expect("blob");
            prop_assert_eq!(back.expose_secret(), &b[..]);
        }
    }

    #[test]
    fn errors_never_show_the_secret() {
        let secret = SecretString::from("hunter2-é");
        let mut out = Vec::new();
        let e = secret
            .serialize(
                &ColumnType::Native(NativeType::Int),
                scylla_driver_cql::types::serialize::CellWriter::new(&mut out),
            )
            .expect_err("int");
        assert_eq!(e.kind(), &SerializationErrorKind::Mismatch);
        let e2 = secret
            .serialize(
                &ColumnType::Native(NativeType::Ascii),
                scylla_driver_cql::types::serialize::CellWriter::new(&mut out),
            )
            .expect_err("not ascii");
        assert_eq!(e2.kind(), &SerializationErrorKind::NotAscii);
        for msg in [
            e.to_string(),
            e2.to_string(),
            format!("{e:?}"),
            format!("{secret:?}"),
        ] {
            assert!(!msg.contains("hunter2"), "{msg}");
        }
        // A failed value leaves at most its length placeholder (which the
        // request builder discards), never the secret's bytes.
        assert!(!out.windows(7).any(|w| w == b"hunter2"), "{out:?}");

        let e =
            <SecretString as DeserializeValue>::type_check(&ColumnType::Native(NativeType::Blob))
                .expect_err("blob");
        assert_eq!(e.kind(), &TypeCheckErrorKind::Mismatch);
        let e = de::<SecretString>(
            &ColumnType::Native(NativeType::Ascii),
            Some("hunter2-é".as_bytes()),
        )
        .expect_err("ascii");
        assert_eq!(e, DeserializationErrorKind::NotAscii);
        assert!(!e.to_string().contains("hunter2"));
        assert_eq!(
            de::<SecretBox<i64>>(&ColumnType::Native(NativeType::BigInt), None).expect_err("null"),
            DeserializationErrorKind::UnexpectedNull
        );
        assert!(
            <SecretBox<i64> as DeserializeValue>::type_check(&ColumnType::Native(NativeType::Text))
                .is_err()
        );
        assert!(
            <SecretSlice<u8> as DeserializeValue>::type_check(&ColumnType::Native(
                NativeType::Text
            ))
            .is_err()
        );
        assert_eq!(
            de::<SecretSlice<u8>>(&ColumnType::Native(NativeType::Blob), None).expect_err("null"),
            DeserializationErrorKind::UnexpectedNull
        );
    }
}
