//! `PITR_TIMING=1`: how long each phase of a plan (and of the embedded engine's run)
//! took, wall and CPU, printed on stderr for the benchmarks
//! (`scripts/bench-engine.sh`) and for finding where time goes on a large oplog.

use std::time::Instant;

/// Prints each phase's wall and CPU seconds (user + sys of every thread: above the
/// wall time when the phase used several cores) when `PITR_TIMING=1`.
pub struct PhaseTimer {
    on: bool,
    last: std::cell::Cell<(Instant, f64)>,
}

impl PhaseTimer {
    pub fn start() -> PhaseTimer {
        let on = std::env::var_os("PITR_TIMING").is_some_and(|v| v == "1");
        PhaseTimer {
            on,
            last: std::cell::Cell::new((
                Instant::now(),
                if on { cpu_seconds(Scope::Process) } else { 0.0 },
            )),
        }
    }

    /// A line of its own (counts of the phase just marked).
    pub fn note(&self, what: &str) {
        if self.on {
            eprintln!("pitr timing: {what}");
        }
    }

    pub fn mark(&self, what: &str) {
        if self.on {
            let (now, cpu) = (Instant::now(), cpu_seconds(Scope::Process));
            let (then, cpu_then) = self.last.get();
            eprintln!(
                "pitr timing: {:>8.3} s  {:>8.3} s cpu  {what}",
                (now - then).as_secs_f64(),
                cpu - cpu_then
            );
            self.last.set((now, cpu));
        }
    }
}

/// Wall and CPU time of the calling thread since [`ThreadClock::start`] (for a
/// phase that runs on a thread of its own beside another).
pub(super) struct ThreadClock {
    wall: Instant,
    cpu: f64,
}

impl ThreadClock {
    pub(super) fn start() -> ThreadClock {
        ThreadClock {
            wall: Instant::now(),
            cpu: cpu_seconds(Scope::Thread),
        }
    }

    /// `(wall, cpu)` seconds.
    pub(super) fn took(&self) -> (f64, f64) {
        (
            self.wall.elapsed().as_secs_f64(),
            cpu_seconds(Scope::Thread) - self.cpu,
        )
    }
}

/// Whose CPU time [`cpu_seconds`] reads.
#[derive(Clone, Copy)]
enum Scope {
    /// Every thread of the process.
    Process,
    /// The calling thread.
    Thread,
}

/// CPU seconds (user + sys) so far of `scope`; 0 when the clock cannot be read.
fn cpu_seconds(scope: Scope) -> f64 {
    let clock = match scope {
        Scope::Process => libc::CLOCK_PROCESS_CPUTIME_ID,
        Scope::Thread => libc::CLOCK_THREAD_CPUTIME_ID,
    };
    // SAFETY: clock_gettime only writes the struct it is given.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    if unsafe { libc::clock_gettime(clock, &mut t) } != 0 {
        return 0.0;
    }
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's clock counts its own work, and the process's at least as much.
    #[test]
    fn cpu_clocks_advance_with_work() {
        let (p0, clock) = (cpu_seconds(Scope::Process), ThreadClock::start());
        let mut x = 0u64;
        while clock.took().1 < 0.02 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let (wall, cpu) = clock.took();
        assert!(cpu >= 0.02 && wall >= cpu * 0.5, "wall {wall}, cpu {cpu}");
        assert!(cpu_seconds(Scope::Process) - p0 >= 0.02);
    }
}
