//! The oplog position `t:i`: seconds since the epoch plus an ordinal within that second.
//!
//! This is the unit of every limit pitr computes. It orders exactly like the server's
//! BSON Timestamp (seconds first, then ordinal) and prints the way mongorestore's
//! `--oplogLimit` reads it.

use std::fmt;

use chrono::{DateTime, Utc};

/// An oplog `ts` value. Both halves are unsigned 32-bit, as on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ts {
    /// Seconds since the Unix epoch (the high 32 bits of the BSON Timestamp).
    pub t: u32,
    /// Ordinal within the second (the low 32 bits).
    pub i: u32,
}

impl Ts {
    pub const ZERO: Ts = Ts { t: 0, i: 0 };
    pub const MAX: Ts = Ts {
        t: u32::MAX,
        i: u32::MAX,
    };

    pub const fn new(t: u32, i: u32) -> Ts {
        Ts { t, i }
    }

    /// The 64-bit value the server stores (`t << 32 | i`).
    pub const fn as_u64(self) -> u64 {
        ((self.t as u64) << 32) | self.i as u64
    }

    pub const fn from_u64(v: u64) -> Ts {
        Ts {
            t: (v >> 32) as u32,
            i: v as u32,
        }
    }

    /// The next possible position: the smallest `Ts` strictly greater than `self`
    /// (saturating at [`Ts::MAX`]).
    pub const fn successor(self) -> Ts {
        if self.i == u32::MAX {
            if self.t == u32::MAX {
                Ts::MAX
            } else {
                Ts {
                    t: self.t + 1,
                    i: 0,
                }
            }
        } else {
            Ts {
                t: self.t,
                i: self.i + 1,
            }
        }
    }

    /// The second `t` as a UTC instant (the ordinal has no wall-clock meaning).
    pub fn to_utc(self) -> DateTime<Utc> {
        DateTime::from_timestamp(self.t as i64, 0)
            .expect("u32 seconds are always in chrono's range")
    }

    /// `t` as RFC 3339 UTC, e.g. `2026-11-21T03:12:00Z`.
    pub fn utc_string(self) -> String {
        self.to_utc()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }
}

impl fmt::Display for Ts {
    /// `t:i`, the form mongorestore's `--oplogLimit` accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.t, self.i)
    }
}

impl From<bson::Timestamp> for Ts {
    fn from(ts: bson::Timestamp) -> Ts {
        Ts {
            t: ts.time,
            i: ts.increment,
        }
    }
}

impl From<Ts> for bson::Timestamp {
    fn from(ts: Ts) -> bson::Timestamp {
        bson::Timestamp {
            time: ts.t,
            increment: ts.i,
        }
    }
}

impl serde::Serialize for Ts {
    /// Serialised as the string `"t:i"` so that JSON consumers never lose precision.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_seconds_then_ordinal() {
        assert!(Ts::new(5, 9) < Ts::new(6, 0));
        assert!(Ts::new(5, 1) < Ts::new(5, 2));
        assert_eq!(Ts::new(5, 1).as_u64(), (5u64 << 32) | 1);
        assert_eq!(Ts::from_u64(Ts::new(7, 3).as_u64()), Ts::new(7, 3));
    }

    #[test]
    fn successor_rolls_into_next_second_and_saturates() {
        assert_eq!(Ts::new(5, 1).successor(), Ts::new(5, 2));
        assert_eq!(Ts::new(5, u32::MAX).successor(), Ts::new(6, 0));
        assert_eq!(Ts::MAX.successor(), Ts::MAX);
    }

    #[test]
    fn displays_as_oplog_limit() {
        assert_eq!(Ts::new(1616670362, 1).to_string(), "1616670362:1");
        assert_eq!(Ts::new(1616670362, 1).utc_string(), "2021-03-25T11:06:02Z");
        assert_eq!(
            serde_json::to_string(&Ts::new(1, 2)).unwrap(),
            "\"1:2\"".to_string()
        );
    }
}
