//! Randomness: the seeded main stream and the per-document content streams.
//!
//! Everything the generator decides comes from one `ChaCha8Rng` seeded with
//! `seed_from_u64(seed)`, consumed in a fixed order, so a seed always gives the same
//! bytes. A document's *content* is instead derived from its identity alone
//! ([`DocRng::for_doc`]): the insert entry and the backup's copy of the document are
//! written from the same stream without the generator having to keep documents in
//! memory.

use rand::{Rng, RngCore};

/// The main random stream.
pub type MainRng = rand_chacha::ChaCha8Rng;

/// SplitMix64: tiny and fast; used for document contents.
#[derive(Clone, Debug)]
pub struct DocRng(u64);

/// The SplitMix64 finaliser: a good 64-bit mixing function.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl DocRng {
    pub fn new(state: u64) -> DocRng {
        DocRng(mix(state))
    }

    /// The content stream of one document: a function of the run's seed, the
    /// collection's number and the document's id hash.
    pub fn for_doc(seed: u64, coll: usize, id_hash: u64) -> DocRng {
        DocRng::new(mix(seed ^ 0x5eed_c0de).wrapping_add(mix(coll as u64 + 1) ^ id_hash))
    }
}

impl RngCore for DocRng {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// One element of a non-empty slice.
pub fn pick<T: Copy, R: Rng + ?Sized>(rng: &mut R, xs: &[T]) -> T {
    xs[rng.random_range(0..xs.len())]
}

/// A random index of `xs`, weighted by `weight` (all zero: index 0).
pub fn weighted<T, R: Rng + ?Sized>(rng: &mut R, xs: &[T], weight: impl Fn(&T) -> u32) -> usize {
    let total: u32 = xs.iter().map(&weight).sum();
    if total == 0 {
        return 0;
    }
    let mut x = rng.random_range(0..total);
    for (i, t) in xs.iter().enumerate() {
        let w = weight(t);
        if x < w {
            return i;
        }
        x -= w;
    }
    xs.len() - 1
}

/// A Poisson-distributed count with mean `lambda` (Knuth for small means, a rounded
/// normal approximation for large ones).
pub fn poisson<R: Rng + ?Sized>(rng: &mut R, lambda: f64) -> u32 {
    if lambda <= 0.0 {
        return 0;
    }
    if lambda < 30.0 {
        let l = (-lambda).exp();
        let mut k = 0u32;
        let mut p = 1.0;
        loop {
            p *= rng.random::<f64>();
            if p <= l {
                return k;
            }
            k += 1;
        }
    }
    // Box-Muller.
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (lambda + z * lambda.sqrt()).round().max(0.0) as u32
}

/// A random version-4 UUID.
pub fn uuid<R: Rng + ?Sized>(rng: &mut R) -> [u8; 16] {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    b
}

/// `n` lowercase hex characters of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn doc_streams_are_stable_and_distinct() {
        let take = |mut r: DocRng| (0..4).map(|_| r.next_u64()).collect::<Vec<_>>();
        let (a, b, c) = (
            take(DocRng::for_doc(7, 1, 99)),
            take(DocRng::for_doc(7, 1, 99)),
            take(DocRng::for_doc(7, 2, 99)),
        );
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn poisson_mean_is_about_right() {
        let mut rng = MainRng::seed_from_u64(1);
        for lambda in [0.4, 5.0, 3000.0] {
            let n = 2000;
            let sum: u64 = (0..n).map(|_| poisson(&mut rng, lambda) as u64).sum();
            let mean = sum as f64 / n as f64;
            assert!(
                (mean - lambda).abs() < lambda * 0.1 + 0.1,
                "lambda {lambda}: mean {mean}"
            );
        }
    }

    #[test]
    fn uuids_are_version_4() {
        let mut rng = MainRng::seed_from_u64(3);
        let u = uuid(&mut rng);
        assert_eq!(u[6] >> 4, 4);
        assert_eq!(u[8] >> 6, 2);
        assert_eq!(hex(&u).len(), 32);
    }

    #[test]
    fn weighted_respects_zero_weights() {
        let mut rng = MainRng::seed_from_u64(5);
        for _ in 0..100 {
            assert_eq!(weighted(&mut rng, &[0u32, 3, 0], |w| *w), 1);
        }
    }
}
