//! Canonical extended JSON as mongodump's Go driver writes it
//! (`bson.MarshalExtJSON(v, canonical=true, escapeHTML=false)`), for
//! `<coll>.metadata.json`: keys in document order, no spaces, and doubles formatted
//! as the Go driver's `formatDouble` (`bsonrw/extjson_writer.go`):
//! `strconv.FormatFloat(f, 'G', -1, 64)` with `.0` appended when the result has no
//! `.` (so `1.0`, `0.5`, `1E+21.0`), `Infinity`, `-Infinity`, `NaN`. Every other
//! type is the bson crate's canonical form, which is the spec's.

use bson::Bson;

/// Appends `v` as canonical extended JSON.
pub fn write_canonical(v: &Bson, out: &mut String) {
    match v {
        Bson::Document(d) => {
            out.push('{');
            for (i, (k, v)) in d.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).expect("strings serialize"));
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Bson::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        Bson::Double(f) => {
            out.push_str("{\"$numberDouble\":\"");
            out.push_str(&go_format_double(*f));
            out.push_str("\"}");
        }
        other => out.push_str(
            &serde_json::to_string(&other.clone().into_canonical_extjson())
                .expect("extended JSON serializes"),
        ),
    }
}

/// The Go driver's `formatDouble`; see the module documentation.
pub fn go_format_double(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let mut s = String::new();
    if f.is_sign_negative() {
        s.push('-');
    }
    let a = f.abs();
    if a == 0.0 {
        s.push_str("0.0");
        return s;
    }
    // Shortest round-trip digits, as Go's shortest formatting finds them.
    let e = format!("{a:e}");
    let (mant, exp) = e.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let nd = digits.len() as i32;
    let dp = exp + 1;
    // 'G' with shortest precision: %E when the exponent is < -4 or >= 6.
    if !(-4..6).contains(&exp) {
        s.push_str(&digits[..1]);
        if nd > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push('E');
        s.push(if exp < 0 { '-' } else { '+' });
        s.push_str(&format!("{:02}", exp.abs()));
    } else if dp <= 0 {
        s.push_str("0.");
        for _ in 0..-dp {
            s.push('0');
        }
        s.push_str(&digits);
    } else if dp >= nd {
        s.push_str(&digits);
        for _ in 0..dp - nd {
            s.push('0');
        }
    } else {
        s.push_str(&digits[..dp as usize]);
        s.push('.');
        s.push_str(&digits[dp as usize..]);
    }
    if !s.contains('.') {
        s.push_str(".0");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn doubles_as_go_formats_them() {
        // strconv.FormatFloat(f, 'G', -1, 64) + ".0" when there is no '.'.
        for (f, want) in [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (123456.0, "123456.0"),
            (1234567.0, "1.234567E+06"),
            (1e21, "1E+21.0"),
            (0.0001, "0.0001"),
            (0.00001, "1E-05.0"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(go_format_double(f), want, "{f}");
        }
    }

    #[test]
    fn metadata_like_mongodump() {
        // As mongodump 100.x wrote peer-data's duplicate_index_key_with_oplog/test/foo.metadata.json.
        let d = doc! {
            "indexes": [
                { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
                { "v": 2, "unique": true, "key": { "a": 1.0 }, "name": "a_1" },
            ],
            "uuid": "7429ce0a817049a39533a3c525d32dd6",
            "collectionName": "foo",
        };
        let mut s = String::new();
        write_canonical(&Bson::Document(d), &mut s);
        assert_eq!(
            s,
            r#"{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"},{"v":{"$numberInt":"2"},"unique":true,"key":{"a":{"$numberDouble":"1.0"}},"name":"a_1"}],"uuid":"7429ce0a817049a39533a3c525d32dd6","collectionName":"foo"}"#
        );
    }
}
