//! Comparing numbers across int32, int64, double and decimal128 exactly as the server.
//!
//! Source: `BSONElement::compareElements` (`bson/bsonelement.cpp`) dispatches on the
//! pair of types to the helpers of `base/compare_numbers.h`:
//! - int/long pairs compare as integers; int vs double as doubles (`compareDoubles`);
//! - long vs double with `compareLongToDouble` (exact, including longs above 2^53 and
//!   doubles outside the long range);
//! - decimal vs anything with `compareDecimals` / `compareDecimalToDouble`: the
//!   decimal is rounded toward negative to a double and the "inexact" flag breaks the
//!   tie, which amounts to an exact comparison of the two values.
//!
//! The resulting order is the order of the extended real line, with every zero equal
//! (`-0.0 == 0`), and every NaN (double or decimal, any payload) equal to every other
//! NaN and below all other numbers (`BSONObjCompare` `NumberDouble`,
//! `NumberDecimalPosNaN`, `NumberDecimalCompareDoubleNaN` in `bson_obj_test.cpp`).
//!
//! Decimal128 values are decoded from their BID encoding (IEEE 754-2008); a
//! coefficient above 10^34 - 1 is non-canonical and, as the standard (and the Intel
//! library the server uses) requires, reads as zero.

use std::cmp::Ordering;

/// A BSON number, as stored.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Num {
    I32(i32),
    I64(i64),
    F64(f64),
    Dec([u8; 16]),
}

/// `compareDoubles`: NaN is below every number and equal to every NaN.
#[inline]
pub(crate) fn cmp_f64(a: f64, b: f64) -> Ordering {
    if a == b {
        Ordering::Equal
    } else if a < b {
        Ordering::Less
    } else if a > b {
        Ordering::Greater
    } else if a.is_nan() {
        if b.is_nan() {
            Ordering::Equal
        } else {
            Ordering::Less
        }
    } else {
        Ordering::Greater
    }
}

/// `compareLongToDouble`.
pub(crate) fn cmp_i64_f64(l: i64, d: f64) -> Ordering {
    if d.is_nan() {
        return Ordering::Greater;
    }
    const PRECISE: i64 = 1 << 53;
    if (-PRECISE..=PRECISE).contains(&l) {
        return cmp_f64(l as f64, d);
    }
    const BOUND: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if d >= BOUND {
        return Ordering::Less;
    }
    if d < -BOUND {
        return Ordering::Greater;
    }
    // Remaining doubles have an integer part that fits a long; a fractional part
    // cannot change the result because |l| > 2^53 here.
    l.cmp(&(d as i64))
}

/// Compares two numbers of any numeric BSON type.
pub(crate) fn cmp_num(a: Num, b: Num) -> Ordering {
    use Num::*;
    match (a, b) {
        (I32(x), I32(y)) => x.cmp(&y),
        (I32(x), I64(y)) => i64::from(x).cmp(&y),
        (I64(x), I32(y)) => x.cmp(&i64::from(y)),
        (I64(x), I64(y)) => x.cmp(&y),
        (I32(x), F64(y)) => cmp_f64(f64::from(x), y),
        (F64(x), I32(y)) => cmp_f64(x, f64::from(y)),
        (I64(x), F64(y)) => cmp_i64_f64(x, y),
        (F64(x), I64(y)) => cmp_i64_f64(y, x).reverse(),
        (F64(x), F64(y)) => cmp_f64(x, y),
        (Dec(x), Dec(y)) => cmp_dec(Dec128::decode(x), Dec128::decode(y)),
        (Dec(x), I32(y)) => cmp_dec(Dec128::decode(x), Dec128::from_i64(i64::from(y))),
        (I32(x), Dec(y)) => cmp_dec(Dec128::from_i64(i64::from(x)), Dec128::decode(y)),
        (Dec(x), I64(y)) => cmp_dec(Dec128::decode(x), Dec128::from_i64(y)),
        (I64(x), Dec(y)) => cmp_dec(Dec128::from_i64(x), Dec128::decode(y)),
        (Dec(x), F64(y)) => cmp_dec_f64(Dec128::decode(x), y),
        (F64(x), Dec(y)) => cmp_dec_f64(Dec128::decode(y), x).reverse(),
    }
}

/// A decoded decimal128.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dec128 {
    NaN,
    Inf {
        neg: bool,
    },
    /// `(-1)^neg * coef * 10^exp`, `coef <= 10^34 - 1`.
    Finite {
        neg: bool,
        coef: u128,
        exp: i32,
    },
}

const MAX_COEF: u128 = 10u128.pow(34) - 1;
const EXP_BIAS: i32 = 6176;

impl Dec128 {
    /// Decodes the BID encoding (little-endian bytes as stored in BSON).
    pub(crate) fn decode(bytes: [u8; 16]) -> Dec128 {
        let v = u128::from_le_bytes(bytes);
        let neg = (v >> 127) == 1;
        let comb = (v >> 122) & 0x1F;
        if comb == 0x1F {
            return Dec128::NaN;
        }
        if comb == 0x1E {
            return Dec128::Inf { neg };
        }
        let (exp_field, coef) = if (v >> 125) & 0b11 == 0b11 {
            // "11" form: the implied coefficient is at least 2^113 > 10^34 - 1, so it
            // is non-canonical and reads as zero.
            (((v >> 111) & 0x3FFF) as i32, 0)
        } else {
            let c = v & ((1u128 << 113) - 1);
            (
                ((v >> 113) & 0x3FFF) as i32,
                if c > MAX_COEF { 0 } else { c },
            )
        };
        Dec128::Finite {
            neg,
            coef,
            exp: exp_field - EXP_BIAS,
        }
    }

    pub(crate) fn from_i64(n: i64) -> Dec128 {
        Dec128::Finite {
            neg: n < 0,
            coef: u128::from(n.unsigned_abs()),
            exp: 0,
        }
    }
}

/// Sign class of a finite value: -1, 0, 1 (every zero is 0).
fn sign(neg: bool, zero: bool) -> i8 {
    if zero {
        0
    } else if neg {
        -1
    } else {
        1
    }
}

static POW10: [u128; 39] = {
    let mut t = [1u128; 39];
    let mut i = 1;
    while i < 39 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// Number of decimal digits of `c` (0 for 0).
pub(crate) fn digits(c: u128) -> i32 {
    let mut d = 0;
    while d < 39 && c >= POW10[d] {
        d += 1;
    }
    d as i32
}

/// `compareDecimals`: IEEE comparison, NaN below everything and equal to NaN.
pub(crate) fn cmp_dec(a: Dec128, b: Dec128) -> Ordering {
    use Dec128::*;
    match (a, b) {
        (NaN, NaN) => Ordering::Equal,
        (NaN, _) => Ordering::Less,
        (_, NaN) => Ordering::Greater,
        (Inf { neg: x }, Inf { neg: y }) => y.cmp(&x),
        (Inf { neg }, _) => inf_vs_finite(neg),
        (_, Inf { neg }) => inf_vs_finite(neg).reverse(),
        (
            Finite {
                neg: an,
                coef: ac,
                exp: ae,
            },
            Finite {
                neg: bn,
                coef: bc,
                exp: be,
            },
        ) => {
            let (sa, sb) = (sign(an, ac == 0), sign(bn, bc == 0));
            if sa != sb || sa == 0 {
                return sa.cmp(&sb);
            }
            let mag = cmp_dec_magnitude(ac, ae, bc, be);
            if sa < 0 {
                mag.reverse()
            } else {
                mag
            }
        }
    }
}

fn inf_vs_finite(neg: bool) -> Ordering {
    if neg {
        Ordering::Less
    } else {
        Ordering::Greater
    }
}

/// Compares `ac * 10^ae` with `bc * 10^be`, both coefficients non-zero.
fn cmp_dec_magnitude(ac: u128, ae: i32, bc: u128, be: i32) -> Ordering {
    let (da, db) = (digits(ac), digits(bc));
    // value in [10^(adj-1), 10^adj)
    let (adj_a, adj_b) = (ae + da, be + db);
    if adj_a != adj_b {
        return adj_a.cmp(&adj_b);
    }
    // Same magnitude: scale the shorter coefficient to the longer one's digit count
    // (at most 34 digits, which fits a u128).
    if da < db {
        (ac * POW10[(db - da) as usize]).cmp(&bc)
    } else {
        ac.cmp(&(bc * POW10[(da - db) as usize]))
    }
}

/// A double split as `(-1)^neg * m * 2^e`, `m < 2^53`; `None` for NaN and infinities.
pub(crate) fn split_f64(d: f64) -> Option<(bool, u64, i32)> {
    if !d.is_finite() {
        return None;
    }
    let bits = d.to_bits();
    let neg = (bits >> 63) == 1;
    let exp_field = ((bits >> 52) & 0x7FF) as i32;
    let mant = bits & ((1u64 << 52) - 1);
    Some(if exp_field == 0 {
        (neg, mant, -1074)
    } else {
        (neg, mant | (1u64 << 52), exp_field - 1075)
    })
}

/// `compareDecimalToDouble`, as an exact comparison (see the module comment).
pub(crate) fn cmp_dec_f64(a: Dec128, d: f64) -> Ordering {
    if d.is_nan() {
        return if a == Dec128::NaN {
            Ordering::Equal
        } else {
            Ordering::Greater
        };
    }
    match a {
        Dec128::NaN => Ordering::Less,
        Dec128::Inf { neg } => {
            if d.is_infinite() && (d < 0.0) == neg {
                Ordering::Equal
            } else {
                inf_vs_finite(neg)
            }
        }
        Dec128::Finite { neg, coef, exp } => {
            if d.is_infinite() {
                return if d > 0.0 {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
            }
            let (dneg, m, e) = split_f64(d).expect("finite");
            let (sa, sb) = (sign(neg, coef == 0), sign(dneg, m == 0));
            if sa != sb || sa == 0 {
                return sa.cmp(&sb);
            }
            let mag = cmp_dec_f64_magnitude(coef, exp, m, e);
            if sa < 0 {
                mag.reverse()
            } else {
                mag
            }
        }
    }
}

/// Compares `c * 10^q` with `m * 2^e` (both non-zero) exactly.
fn cmp_dec_f64_magnitude(c: u128, q: i32, m: u64, e: i32) -> Ordering {
    const LOG2_10: f64 = std::f64::consts::LOG2_10;
    let dc = digits(c);
    let bm = 64 - m.leading_zeros() as i32;
    // D in [10^(q+dc-1), 10^(q+dc)), F in [2^(e+bm-1), 2^(e+bm)).
    let d_hi = f64::from(q + dc) * LOG2_10;
    let d_lo = f64::from(q + dc - 1) * LOG2_10;
    let (f_lo, f_hi) = (f64::from(e + bm - 1), f64::from(e + bm));
    if d_hi <= f_lo - 1e-6 {
        return Ordering::Less;
    }
    if d_lo >= f_hi + 1e-6 {
        return Ordering::Greater;
    }
    // Close in magnitude: compare c * 10^max(q,0) * 2^max(-e,0) with
    // m * 2^max(e,0) * 10^max(-q,0) as big integers. Close magnitudes keep both
    // below ~1400 bits.
    let mut lhs = Big::from_u128(c);
    let mut rhs = Big::from_u128(u128::from(m));
    let ok = lhs.mul_pow10(q.max(0) as u32)
        && lhs.shl(e.min(0).unsigned_abs())
        && rhs.shl(e.max(0) as u32)
        && rhs.mul_pow10(q.min(0).unsigned_abs());
    if ok {
        lhs.cmp(&rhs)
    } else {
        // Unreachable for values this close; a deterministic answer regardless.
        cmp_f64(d_lo, f_lo)
    }
}

/// A fixed-capacity unsigned big integer (little-endian 64-bit limbs).
#[derive(Clone)]
struct Big {
    limbs: [u64; 40],
    len: usize,
}

impl Big {
    fn from_u128(v: u128) -> Big {
        let mut limbs = [0u64; 40];
        limbs[0] = v as u64;
        limbs[1] = (v >> 64) as u64;
        let len = if limbs[1] != 0 { 2 } else { 1 };
        Big { limbs, len }
    }

    /// Multiplies by a small factor; false on overflow.
    fn mul_small(&mut self, f: u64) -> bool {
        let mut carry: u128 = 0;
        for i in 0..self.len {
            let p = u128::from(self.limbs[i]) * u128::from(f) + carry;
            self.limbs[i] = p as u64;
            carry = p >> 64;
        }
        if carry != 0 {
            if self.len == self.limbs.len() {
                return false;
            }
            self.limbs[self.len] = carry as u64;
            self.len += 1;
        }
        true
    }

    fn mul_pow10(&mut self, mut k: u32) -> bool {
        const TEN19: u64 = 10_000_000_000_000_000_000;
        while k >= 19 {
            if !self.mul_small(TEN19) {
                return false;
            }
            k -= 19;
        }
        k == 0 || self.mul_small(10u64.pow(k))
    }

    fn shl(&mut self, bits: u32) -> bool {
        let (words, rem) = ((bits / 64) as usize, bits % 64);
        if self.len + words + 1 > self.limbs.len() {
            return false;
        }
        if rem != 0 {
            let mut carry = 0u64;
            for i in 0..self.len {
                let v = self.limbs[i];
                self.limbs[i] = (v << rem) | carry;
                carry = v >> (64 - rem);
            }
            if carry != 0 {
                self.limbs[self.len] = carry;
                self.len += 1;
            }
        }
        if words > 0 {
            for i in (0..self.len).rev() {
                self.limbs[i + words] = self.limbs[i];
            }
            for l in self.limbs.iter_mut().take(words) {
                *l = 0;
            }
            self.len += words;
        }
        true
    }

    fn cmp(&self, other: &Big) -> Ordering {
        let top = |b: &Big| {
            let mut n = b.len;
            while n > 1 && b.limbs[n - 1] == 0 {
                n -= 1;
            }
            n
        };
        let (na, nb) = (top(self), top(other));
        if na != nb {
            return na.cmp(&nb);
        }
        for i in (0..na).rev() {
            match self.limbs[i].cmp(&other.limbs[i]) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        Ordering::Equal
    }
}

/// The canonical form of a number for hashing: equal numbers (by [`cmp_num`]) give
/// equal keys, whatever their BSON types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NumKey {
    NaN,
    /// An integer within the int64 range.
    Int(i64),
    /// A value exactly representable as a double (and not an int64): its bits.
    Double(u64),
    /// Anything else (only decimals get here): normalized coefficient and exponent.
    Decimal {
        neg: bool,
        coef: u128,
        exp: i32,
    },
}

pub(crate) fn num_key(n: Num) -> NumKey {
    match n {
        Num::I32(i) => NumKey::Int(i64::from(i)),
        Num::I64(i) => NumKey::Int(i),
        Num::F64(d) => f64_key(d),
        Num::Dec(b) => dec_key(Dec128::decode(b)),
    }
}

fn f64_key(d: f64) -> NumKey {
    if d.is_nan() {
        return NumKey::NaN;
    }
    const BOUND: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if d.fract() == 0.0 && (-BOUND..BOUND).contains(&d) {
        return NumKey::Int(d as i64);
    }
    NumKey::Double(d.to_bits())
}

fn dec_key(d: Dec128) -> NumKey {
    let (neg, coef, exp) = match d {
        Dec128::NaN => return NumKey::NaN,
        Dec128::Inf { neg } => {
            return f64_key(if neg {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        Dec128::Finite { coef: 0, .. } => return NumKey::Int(0),
        Dec128::Finite { neg, coef, exp } => (neg, coef, exp),
    };
    // Normalize: strip trailing zeros of the coefficient.
    let (mut c, mut q) = (coef, exp);
    while c % 10 == 0 {
        c /= 10;
        q += 1;
    }
    if q >= 0 {
        // An integer: does it fit an int64?
        if q <= 18 {
            if let Some(v) = c.checked_mul(POW10[q as usize]) {
                if v <= i64::MAX as u128 {
                    let i = v as i64;
                    return NumKey::Int(if neg { -i } else { i });
                }
                if neg && v == 1u128 << 63 {
                    return NumKey::Int(i64::MIN);
                }
            }
        }
        // A larger integer: a double iff its odd part times 5^q fits 53 bits.
        let twos = c.trailing_zeros() as i32;
        let odd = c >> twos;
        if let Some(o) = pow5(q as u32).and_then(|p| odd.checked_mul(p)) {
            if let Some(d) = exact_double(o, twos + q) {
                return f64_key(if neg { -d } else { d });
            }
        }
    } else {
        // c * 10^q with 10 not dividing c: not an integer. It is a double iff
        // 5^-q divides c (the value is then dyadic) and the rest fits 53 bits.
        if let Some(p) = pow5((-q) as u32) {
            if c % p == 0 {
                let n = c / p;
                let twos = n.trailing_zeros() as i32;
                if let Some(d) = exact_double(n >> twos, twos + q) {
                    return f64_key(if neg { -d } else { d });
                }
            }
        }
    }
    NumKey::Decimal {
        neg,
        coef: c,
        exp: q,
    }
}

fn pow5(k: u32) -> Option<u128> {
    let mut v: u128 = 1;
    for _ in 0..k {
        v = v.checked_mul(5)?;
    }
    Some(v)
}

/// `odd * 2^e` as a double if exactly representable.
fn exact_double(odd: u128, e: i32) -> Option<f64> {
    if odd >= (1u128 << 53) || e < -1074 {
        return None;
    }
    let bits = 128 - odd.leading_zeros() as i32;
    if e + bits > 1024 {
        return None;
    }
    // odd < 2^53 and e >= -1074: scaling by powers of two is exact (split to stay in
    // range of the intermediate factors).
    let mut v = odd as f64;
    let mut e = e;
    while e > 0 {
        let s = e.min(1000);
        v *= 2f64.powi(s);
        e -= s;
    }
    while e < 0 {
        let s = e.max(-1000);
        v *= 2f64.powi(s);
        e -= s;
    }
    Some(v)
}
