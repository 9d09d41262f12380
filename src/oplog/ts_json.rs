//! Reading `"t:i"` strings back into [`Ts`] (`plan.json`, the oplog archive's
//! manifest, dump-oplog's resume state).
//!
//! [`Ts`] serialises itself as the string `"t:i"` (never a number, so no JSON
//! consumer loses precision); these helpers are the inverse, for
//! `#[serde(deserialize_with = ...)]` on plan fields. Parsing is strict: exactly one
//! `:` and two decimal `u32` halves, as written by pitr.

use serde::{Deserialize, Deserializer};

use crate::oplog::Ts;

/// Parses `"t:i"` strictly.
pub fn parse(s: &str) -> Option<Ts> {
    let (t, i) = s.split_once(':')?;
    let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
    if !digits(t) || !digits(i) {
        return None;
    }
    Some(Ts::new(t.parse().ok()?, i.parse().ok()?))
}

fn from_str<E: serde::de::Error>(s: &str) -> Result<Ts, E> {
    parse(s).ok_or_else(|| E::custom(format!("`{s}` is not an oplog position \"t:i\"")))
}

/// For a `Ts` field.
pub fn de<'de, D: Deserializer<'de>>(d: D) -> Result<Ts, D::Error> {
    let s = String::deserialize(d)?;
    from_str(&s)
}

/// For an `Option<Ts>` field (null or `"t:i"`).
pub fn de_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Ts>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(s) => from_str(&s).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct T {
        #[serde(deserialize_with = "de")]
        a: Ts,
        #[serde(default, deserialize_with = "de_opt")]
        b: Option<Ts>,
    }

    #[test]
    fn round_trips_and_rejects_junk() {
        let v = T {
            a: Ts::new(4294967295, 7),
            b: None,
        };
        let s = serde_json::to_string(&v).unwrap();
        assert_eq!(s, r#"{"a":"4294967295:7","b":null}"#);
        assert_eq!(serde_json::from_str::<T>(&s).unwrap(), v);
        assert_eq!(serde_json::from_str::<T>(r#"{"a":"1:2"}"#).unwrap().b, None);
        for bad in ["1", "1:", ":1", "1:2:3", "a:1", "4294967296:0", "-1:0"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
        assert!(serde_json::from_str::<T>(r#"{"a":"1"}"#).is_err());
    }
}
