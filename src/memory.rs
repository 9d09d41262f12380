//! The memory the embedded engine may keep documents in (`--memory`), when the user
//! does not say: a share of the memory available when pitr starts, so a restore
//! whose documents fit comfortably in RAM never takes the (several times slower)
//! on-disk path, and one that does not fit moves to disk before the machine swaps
//! or the kernel kills it.
//!
//! The rule ([`default_budget`], a pure function of what the kernel says is
//! available, so it is tested without the machine): half of `MemAvailable`
//! (`/proc/meminfo`: free memory plus the page cache the kernel can drop without
//! swapping), at least 64 MiB, at most 64 GiB. Half, because the budget bounds an
//! estimate of the documents' bytes, not the process: on the 1 GiB bench the peak RSS
//! was 1.05x the store's estimate (allocator and B-tree overhead, read buffers), and
//! the restore's own reads and writes need page cache too (see
//! docs/performance.md). The cap keeps a large host's other tenants (a spare
//! mongod's cache, the production server beside it) their memory; past it a restore
//! still works, on disk. Where the kernel does not say (no `/proc/meminfo`), the
//! budget is the fixed [`FALLBACK`].

use std::fmt;

/// The budget where the available memory is unknown (pitr's default before it was
/// measured).
pub const FALLBACK: u64 = 384 << 20;
/// The smallest budget the rule gives (and `--memory` accepts).
pub const MIN: u64 = 64 << 20;
/// The largest budget the rule gives.
pub const CAP: u64 = 64 << 30;

/// A budget and where it came from (printed with it, so the user knows what to change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub bytes: u64,
    pub source: Source,
}

/// Where a [`Budget`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--memory`.
    Flag,
    /// Half of this many bytes available at start (possibly capped or raised to
    /// [`MIN`]).
    Available(u64),
    /// The available memory is unknown: [`FALLBACK`].
    Unknown,
}

/// The default budget given the bytes available (None: unknown); see the module
/// documentation.
pub fn default_budget(available: Option<u64>) -> Budget {
    match available {
        Some(a) => Budget {
            bytes: (a / 2).clamp(MIN, CAP),
            source: Source::Available(a),
        },
        None => Budget {
            bytes: FALLBACK,
            source: Source::Unknown,
        },
    }
}

/// `--memory` when given, else [`default_budget`] of what is available now.
pub fn budget(flag: Option<u64>) -> Budget {
    match flag {
        Some(bytes) => Budget {
            bytes,
            source: Source::Flag,
        },
        None => default_budget(available()),
    }
}

/// `MemAvailable` from `/proc/meminfo`, in bytes (None off Linux, or on a kernel
/// older than 3.14, which does not estimate it).
pub fn available() -> Option<u64> {
    parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// The `MemAvailable:` line of a `/proc/meminfo` text (in kB, as the kernel writes
/// it: kibibytes), in bytes.
pub fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line["MemAvailable:".len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        _ => None,
    }
}

impl fmt::Display for Budget {
    /// `10.7 GiB (half of the 21.5 GiB available when pitr started; --memory sets it)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = crate::size::human(self.bytes);
        match self.source {
            Source::Flag => write!(f, "{b} (--memory)"),
            Source::Available(a) => {
                let why = if self.bytes == CAP && a / 2 > CAP {
                    format!(
                        "half of the {} available when pitr started, capped",
                        crate::size::human(a)
                    )
                } else if self.bytes == MIN && a / 2 < MIN {
                    format!(
                        "the least it takes, with only {} available when pitr started",
                        crate::size::human(a)
                    )
                } else {
                    format!(
                        "half of the {} available when pitr started",
                        crate::size::human(a)
                    )
                };
                write!(f, "{b} ({why}; --memory sets it)")
            }
            Source::Unknown => write!(
                f,
                "{b} (the available memory is unknown here; --memory sets it)"
            ),
        }
    }
}

impl Source {
    /// For report.json: `flag`, `available`, `unknown`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Source::Flag => "flag",
            Source::Available(_) => "available",
            Source::Unknown => "unknown",
        }
    }
}

/// Gives the heap freed so far back to the system. glibc gives each thread a malloc
/// arena of its own, and the pages of chunks freed in one thread's arena stay
/// resident until that arena reuses them: when the documents move to disk past
/// `--memory` (freed on the thread that spills, allocated by the loading thread or
/// the writer threads), later allocations on another thread do not reuse them, and
/// the process keeps the budget's worth of freed memory beside the on-disk path's
/// own. Measured on the 1 GiB bench: `--memory 64MiB` peaked at 140 MiB instead of
/// 86 MiB (`MALLOC_ARENA_MAX=1`), and `--memory 1300MiB` (crossed during the apply)
/// at 1,816 MiB instead of 1,412 MiB, far past the budget's + 100 MB. `malloc_trim(0)`
/// releases the free pages of every arena (glibc `malloc/malloc.c`, `mtrim`,
/// which `madvise`s free chunks away): 6 ms after a 64 MiB spill. Elsewhere than
/// glibc, nothing to do.
pub fn give_back_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system; it takes the
    // arenas' locks itself and touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    #[test]
    fn half_of_what_is_available() {
        // This machine when it was measured: 21.5 GiB available.
        let b = default_budget(Some(22 * GIB));
        assert_eq!(b.bytes, 11 * GIB);
        assert_eq!(b.source, Source::Available(22 * GIB));
        assert_eq!(
            b.to_string(),
            "11.0 GiB (half of the 22.0 GiB available when pitr started; --memory sets it)"
        );
        assert_eq!(default_budget(Some(3 * GIB)).bytes, 1536 * MIB);
    }

    #[test]
    fn capped_and_floored() {
        let big = default_budget(Some(512 * GIB));
        assert_eq!(big.bytes, CAP);
        assert!(big.to_string().contains("capped"), "{big}");
        assert_eq!(default_budget(Some(2 * CAP)).bytes, CAP);
        assert_eq!(default_budget(Some(2 * CAP - 2)).bytes, CAP - 1);
        let tiny = default_budget(Some(100 * MIB));
        assert_eq!(tiny.bytes, MIN);
        assert!(tiny.to_string().contains("the least it takes"), "{tiny}");
        assert_eq!(default_budget(Some(0)).bytes, MIN);
    }

    #[test]
    fn unknown_falls_back_and_the_flag_wins() {
        assert_eq!(
            default_budget(None),
            Budget {
                bytes: FALLBACK,
                source: Source::Unknown
            }
        );
        assert_eq!(budget(Some(64 * MIB)).source, Source::Flag);
        assert_eq!(budget(Some(64 * MIB)).to_string(), "64.0 MiB (--memory)");
    }

    #[test]
    fn meminfo() {
        let text = "MemTotal:       24684092 kB\nMemFree:        13516508 kB\n\
                    MemAvailable:   23039628 kB\nBuffers:          243624 kB\n";
        assert_eq!(parse_meminfo(text), Some(23039628 * 1024));
        // Before Linux 3.14 there is no MemAvailable line.
        assert_eq!(parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: lots\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: 12 MB\n"), None);
    }
}
