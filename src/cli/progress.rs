//! Progress on stderr. One reporter owns the terminal: data goes to stdout,
//! progress to stderr, and nothing of it with `--json`.
//!
//! - [`ScanProgress`]: one bar over a file's bytes, for the scans of `find-drop`,
//!   `oplog` and `plan` (not for a small input); off a terminal, a line every
//!   interval while a scan runs, and one at its end if any came before.
//! - [`PhaseProgress`]: every long phase of `pitr replay --engine embedded` (reading
//!   the backup and the oplog, reading (or writing) the slice, loading the backup's documents,
//!   applying the backup's oplog and the slice, hashing, writing the dumps). On a
//!   terminal, a bar per phase with its rate and time left; otherwise (a log, CI) a
//!   line every [`DEFAULT_INTERVAL`] (`PITR_PROGRESS_INTERVAL`: e.g. `500ms`, `0.1s`,
//!   `1m`) with the phase, done of total, rate and time left. Either way, each
//!   phase ends with one line saying what it did and how long it took, so that even
//!   a short run's log shows where the time went. Phases that run at once (the
//!   backup's documents loaded while the slice is written) have their bars one
//!   under the other, and the last line of the one run alongside comes after the
//!   other's ([`Progress::phase_alongside`]).

use std::io::{IsTerminal, Write};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{
    HumanBytes, HumanCount, MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle,
};

use crate::engine::replica::{interrupt, Meter};
use crate::plan::{Gate, Progress, Unit};
use crate::stream::ByteCounter;

/// Inputs smaller than this finish before a bar is worth drawing.
pub const MIN_BYTES_FOR_BAR: u64 = 64 * 1024 * 1024;

/// Progress over a reader's source, or nothing: a bar on a terminal; off a
/// terminal (a log, CI), a line every [`PITR_PROGRESS_INTERVAL`](INTERVAL_VAR) while the scan
/// runs, and one at its end if any came before (a scan that ends within the
/// interval, as every small one does, says nothing). The lines come from a thread
/// of their own, so that a read which waits (a bucket slow to send its first bytes,
/// a pipe) still says how far it is.
pub struct ScanProgress {
    bar: Option<ProgressBar>,
    lines: Option<ScanLines>,
    counter: ByteCounter,
}

/// The log lines of a [`ScanProgress`] off a terminal.
struct ScanLines {
    what: String,
    ticker: Ticker,
    /// A running line was printed.
    said: std::sync::Arc<std::sync::atomic::AtomicBool>,
    total: Option<u64>,
    started: Instant,
}

impl ScanProgress {
    /// Shows progress when `enabled` is set: a bar when the source is known to be
    /// large (or of unknown size, e.g. stdin), lines whatever its size (a small
    /// object slow to arrive is worth them; a quick scan ends before the first).
    /// `what` names the scan (`reading oplog.bson`).
    pub fn new(
        what: &str,
        counter: ByteCounter,
        total: Option<u64>,
        enabled: bool,
    ) -> ScanProgress {
        let big = total.is_none_or(|t| t >= MIN_BYTES_FOR_BAR);
        let terminal = std::io::stderr().is_terminal();
        let bar = (enabled && big && terminal).then(|| {
            let bar = match total {
                Some(t) => ProgressBar::with_draw_target(Some(t), ProgressDrawTarget::stderr()),
                None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
            };
            let style = if total.is_some() {
                "{spinner} {msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}"
            } else {
                "{spinner} {msg} {bytes} {binary_bytes_per_sec}"
            };
            bar.set_style(
                ProgressStyle::with_template(style)
                    .expect("static template")
                    .progress_chars("=> "),
            );
            bar.set_message(what.to_string());
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        let lines = (enabled && !terminal).then(|| ScanLines::start(what, counter.clone(), total));
        ScanProgress {
            bar,
            lines,
            counter,
        }
    }

    /// Cheap enough to call every few thousand entries.
    pub fn tick(&self) {
        if let Some(b) = &self.bar {
            b.set_position(self.counter.get());
        }
    }

    pub fn finish(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        if let Some(l) = self.lines.take() {
            l.finish(self.counter.get());
        }
    }
}

impl Drop for ScanProgress {
    fn drop(&mut self) {
        self.finish();
    }
}

impl ScanLines {
    fn start(what: &str, counter: ByteCounter, total: Option<u64>) -> ScanLines {
        let what = what.to_string();
        let said = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let started = Instant::now();
        let ticker = {
            let (what, said) = (what.clone(), said.clone());
            Ticker::start(interval_from_env(true), move || {
                line(&running_line(
                    &what,
                    Unit::Bytes,
                    counter.get(),
                    (total, false),
                    started.elapsed(),
                ));
                said.store(true, std::sync::atomic::Ordering::Relaxed);
            })
        };
        ScanLines {
            what,
            ticker,
            said,
            total,
            started,
        }
    }

    /// Stops the lines; the last one says what the scan read, if a line came before.
    /// A scan may end short of its total on purpose (`oplog cat --limit`, or an
    /// error said next): the last line says what was read, not a shortfall.
    fn finish(self, done: u64) {
        drop(self.ticker);
        if self.said.load(std::sync::atomic::Ordering::Relaxed) {
            line(&finished_line(
                &self.what,
                Unit::Bytes,
                done,
                (self.total, true),
                self.started.elapsed(),
                Ended::now(false),
            ));
        }
    }
}

/// Runs `open` (a source's open: a bucket's listing and first GET, a FIFO with no
/// writer yet) and, when `enabled` and it takes a while, says so ([`Waiting`]:
/// `pitr: opening NAME: waiting, 20.00s so far`, then `opened in 23.40s` or
/// `failed after ...`, the error itself said next by the caller). An open that
/// returns sooner says nothing, as every local file's does. The scan's own progress
/// takes over once it returns.
pub fn while_opening<T, E>(
    name: &str,
    enabled: bool,
    open: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let end = opening(name, enabled);
    let opened = open();
    end(opened.is_ok());
    opened
}

/// [`while_opening`] as a start and an end (called with whether the open worked):
/// for [`Progress::opening`].
pub fn opening(name: &str, enabled: bool) -> Box<dyn FnOnce(bool)> {
    opening_in(name, enabled, None)
}

/// [`opening`], its spinner among `bars` when given.
fn opening_in(name: &str, enabled: bool, bars: Option<&MultiProgress>) -> Box<dyn FnOnce(bool)> {
    // As given: a URL is shown without what could be a secret.
    let what = format!("opening {}", crate::storage::mask_url(name));
    let waiting = Waiting::start_in(&what, enabled, bars);
    Box::new(move |ok| waiting.end(if ok { "opened in" } else { "failed after" }))
}

/// Something that may take a while before there is anything to count (a source's
/// open, a server's first answer), said while it lasts when shown: off a terminal a
/// line every interval (`pitr: WHAT: waiting, 20.00s so far`), on a terminal a
/// spinner after the first second; a log's last line says how it ended
/// ([`Waiting::end`]). Nothing at all if it ends within the first tick. Dropped
/// without `end`, it stops without a last line.
pub struct Waiting {
    what: String,
    started: Instant,
    said: std::sync::Arc<std::sync::atomic::AtomicBool>,
    spinner: std::sync::Arc<std::sync::Mutex<Option<ProgressBar>>>,
    /// The bars the spinner joined, if any.
    bars: Option<MultiProgress>,
    ticker: Option<Ticker>,
}

impl Waiting {
    /// Starts the lines or the spinner when `enabled` (not with `--json`).
    pub fn start(what: &str, enabled: bool) -> Waiting {
        Waiting::start_in(what, enabled, None)
    }

    /// [`Waiting::start`] whose spinner joins `bars` (a replay's phases), so that it
    /// is drawn with theirs rather than over them.
    fn start_in(what: &str, enabled: bool, bars: Option<&MultiProgress>) -> Waiting {
        let mut w = Waiting {
            what: what.to_string(),
            started: Instant::now(),
            said: Default::default(),
            spinner: Default::default(),
            bars: bars.cloned(),
            ticker: None,
        };
        if !enabled {
            return w;
        }
        let terminal = std::io::stderr().is_terminal();
        let every = match terminal {
            true => Duration::from_secs(1),
            false => interval_from_env(true),
        };
        let (what, said, spinner, started) =
            (w.what.clone(), w.said.clone(), w.spinner.clone(), w.started);
        let bars = bars.cloned();
        w.ticker = Some(Ticker::start(every, move || {
            if !terminal {
                let waited = crate::replay::progress::seconds(started.elapsed());
                line(&format!("pitr: {what}: waiting, {waited} so far"));
                said.store(true, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            let mut s = spinner.lock().unwrap_or_else(|p| p.into_inner());
            s.get_or_insert_with(|| {
                // Made at the first tick: its clock starts with the wait's.
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
                    .with_elapsed(started.elapsed());
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {msg}, {elapsed} so far")
                        .expect("static template"),
                );
                bar.set_message(what.clone());
                bar.enable_steady_tick(Duration::from_millis(200));
                match &bars {
                    Some(m) => m.add(bar),
                    None => bar,
                }
            });
        }));
        w
    }

    /// Stops; a log that got a waiting line gets the last one: `pitr: WHAT: HOW
    /// 12.30s` (`how` such as "opened in" or "failed after"; "interrupted after"
    /// on Ctrl-C).
    pub fn end(mut self, how: &str) {
        self.stop();
        if self.said.load(std::sync::atomic::Ordering::Relaxed) {
            let how = if interrupt::requested() {
                "interrupted after"
            } else {
                how
            };
            let waited = crate::replay::progress::seconds(self.started.elapsed());
            line(&format!("pitr: {}: {how} {waited}", self.what));
        }
    }

    fn stop(&mut self) {
        drop(self.ticker.take());
        let bar = self
            .spinner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(b) = bar {
            b.finish_and_clear();
            if let Some(m) = &self.bars {
                m.remove(&b);
            }
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.stop();
    }
}

/// [`crate::mongo::connect`], saying so while it waits when `show` ([`Waiting`]:
/// `pitr: connecting to mongodb://db1/: waiting, 10.00s so far`). A host that drops
/// the connection attempts keeps pitr waiting for the whole server selection
/// timeout (15 s by default), which said nothing before its error.
pub async fn connect_saying(
    uri: &str,
    show: bool,
) -> Result<(crate::mongo::ReadOnlyClient, crate::mongo::Topology), crate::mongo::MongoError> {
    let shown = crate::mongo::connect::redact_uri(uri);
    let waiting = Waiting::start(&format!("connecting to {shown}"), show);
    let connected = crate::mongo::connect(uri).await;
    waiting.end(match &connected {
        Ok(_) => "connected in",
        Err(_) => "failed after",
    });
    connected
}

/// A thread that calls its tick every interval until dropped; the drop waits for
/// it, so nothing it prints comes after what the dropping thread prints next.
/// (Without a thread, for instance when none can be started, nothing ticks.)
pub(crate) struct Ticker {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    pub(crate) fn start(every: Duration, mut tick: impl FnMut() + Send + 'static) -> Ticker {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("pitr-progress".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    tick();
                }
            })
            .ok();
        Ticker {
            stop: Some(stop),
            thread,
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How often a log line reports a running phase when stderr is not a terminal.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// The environment variable that changes [`DEFAULT_INTERVAL`].
pub const INTERVAL_VAR: &str = "PITR_PROGRESS_INTERVAL";

/// [`INTERVAL_VAR`], or [`DEFAULT_INTERVAL`] when it is unset; a bad value is
/// reported (when `warn`, once per run: a plan has several scans) and the default
/// kept.
pub(crate) fn interval_from_env(warn: bool) -> Duration {
    static WARNED: std::sync::Once = std::sync::Once::new();
    match std::env::var(INTERVAL_VAR) {
        Ok(v) if !v.trim().is_empty() => parse_interval(&v).unwrap_or_else(|why| {
            if warn {
                WARNED.call_once(|| {
                    eprintln!(
                        "warning: {INTERVAL_VAR}=`{v}`: {why}; progress lines every {}",
                        human_duration(DEFAULT_INTERVAL)
                    )
                });
            }
            DEFAULT_INTERVAL
        }),
        _ => DEFAULT_INTERVAL,
    }
}

/// How the phases are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A bar per phase (stderr is a terminal).
    Bars,
    /// A line every interval and one at the end of each phase.
    Lines,
    /// Nothing (`--json`).
    Off,
}

/// The reporter of an embedded replay's phases; see the module documentation.
pub struct PhaseProgress {
    mode: Mode,
    interval: Duration,
    /// The bars of phases that run at the same time (the slice written while the
    /// backup's documents load), one under the other, and the lines printed above
    /// them (`Mode::Bars` only).
    bars: Option<MultiProgress>,
}

impl PhaseProgress {
    /// Bars on a terminal, lines otherwise, nothing with `json`. Reads
    /// `PITR_PROGRESS_INTERVAL` (a bad value is reported, and the default kept).
    pub fn for_stderr(json: bool) -> PhaseProgress {
        let mode = if json {
            Mode::Off
        } else if std::io::stderr().is_terminal() {
            Mode::Bars
        } else {
            Mode::Lines
        };
        let interval = interval_from_env(mode != Mode::Off);
        let bars = (mode == Mode::Bars)
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        PhaseProgress {
            mode,
            interval,
            bars,
        }
    }

    fn start(
        &self,
        what: &str,
        unit: Unit,
        total: (Option<u64>, bool),
        source: Source,
        after: Option<&Gate>,
    ) -> Box<dyn FnMut() + '_> {
        if self.mode == Mode::Off {
            return Box::new(|| {});
        }
        let bar = self
            .bars
            .as_ref()
            .map(|m| m.add(bar_for(what, unit, total.0)));
        let ticker = {
            let bar = bar.clone();
            let source = source.clone();
            let what = what.to_string();
            let started = Instant::now();
            // A bar moves several times a second; a log gets a line per interval.
            let step = match &bar {
                Some(_) => Duration::from_millis(200),
                None => self.interval,
            };
            Ticker::start(step, move || {
                let done = source.get();
                match &bar {
                    Some(b) => b.set_position(done),
                    None => line(&running_line(&what, unit, done, total, started.elapsed())),
                }
            })
        };
        let mut running = Running {
            what: what.to_string(),
            unit,
            total,
            source,
            started: Instant::now(),
            bar,
            ticker: Some(ticker),
            after: after.cloned(),
            bars: self.bars.clone(),
        };
        Box::new(move || {
            // The thread keeps the bar moving; a tick only refreshes it sooner.
            if let Some(b) = &running.bar {
                b.set_position(running.source.get());
            }
            let _ = &mut running;
        })
    }
}

impl Progress for PhaseProgress {
    fn opening(&self, source: &str) -> Box<dyn FnOnce(bool) + '_> {
        opening_in(source, self.mode != Mode::Off, self.bars.as_ref())
    }

    fn pass(&self, what: &str, counter: ByteCounter, total: Option<u64>) -> Box<dyn FnMut() + '_> {
        self.start(
            what,
            Unit::Bytes,
            (total, false),
            Source::Bytes(counter),
            None,
        )
    }

    fn pass_about(
        &self,
        what: &str,
        counter: ByteCounter,
        about: Option<u64>,
    ) -> Box<dyn FnMut() + '_> {
        self.start(
            what,
            Unit::Bytes,
            (about, true),
            Source::Bytes(counter),
            None,
        )
    }

    fn phase(
        &self,
        what: &str,
        unit: Unit,
        total: Option<u64>,
        meter: &Meter,
    ) -> Box<dyn FnMut() + '_> {
        self.start(
            what,
            unit,
            (total, false),
            Source::Meter(meter.clone()),
            None,
        )
    }

    fn phase_alongside(
        &self,
        what: &str,
        unit: Unit,
        total: Option<u64>,
        meter: &Meter,
        after: &Gate,
    ) -> Box<dyn FnMut() + '_> {
        self.start(
            what,
            unit,
            (total, false),
            Source::Meter(meter.clone()),
            Some(after),
        )
    }

    /// Said whatever the output mode (also with --json: it goes to stderr): what the
    /// restore replays and leaves out is not progress, it is the verdict to come.
    fn at_stake(
        &self,
        stake: &crate::plan::stake::Stake,
        timeline: &crate::plan::glance::Points<'_>,
    ) {
        let text = super::plan::stake_text(stake, timeline);
        match &self.bars {
            // Another phase's bar may be on screen: cleared, the text, drawn again.
            Some(m) => m.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }
}

/// Where a phase's count comes from.
#[derive(Clone)]
enum Source {
    Bytes(ByteCounter),
    Meter(Meter),
}

impl Source {
    fn get(&self) -> u64 {
        match self {
            Source::Bytes(c) => c.get(),
            Source::Meter(m) => m.get(),
        }
    }

    fn cut_short(&self) -> bool {
        matches!(self, Source::Meter(m) if m.was_cut_short())
    }
}

/// A phase being shown; dropped when it ends, which prints its last line.
struct Running {
    what: String,
    unit: Unit,
    /// And whether it is only an estimate ([`Progress::pass_about`]).
    total: (Option<u64>, bool),
    source: Source,
    started: Instant,
    bar: Option<ProgressBar>,
    /// The thread moving the bar or printing the lines (stopped first when the
    /// phase ends, so that no running line comes after the last one).
    ticker: Option<Ticker>,
    /// A phase run alongside others ([`Progress::phase_alongside`]): its last line
    /// waits for this gate (the time it gives is the phase's own).
    after: Option<Gate>,
    bars: Option<MultiProgress>,
}

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.ticker.take());
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
            if let Some(m) = &self.bars {
                m.remove(&b);
            }
        }
        let text = finished_line(
            &self.what,
            self.unit,
            self.source.get(),
            self.total,
            self.started.elapsed(),
            Ended::now(self.source.cut_short()),
        );
        if let Some(g) = &self.after {
            g.wait();
        }
        match &self.bars {
            // Above the bars still running, which stay whole.
            Some(m) => {
                let _ = m.println(&text);
            }
            None => line(&text),
        }
    }
}

fn line(text: &str) {
    let mut e = std::io::stderr().lock();
    let _ = writeln!(e, "{text}");
}

fn bar_for(what: &str, unit: Unit, total: Option<u64>) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
    let template = match total {
        Some(_) => "{spinner} {msg} [{bar:30}] {done}/{all} {rate} eta {eta}",
        None => "{spinner} {msg}: {count} so far, {rate}",
    };
    let style = ProgressStyle::with_template(template)
        .expect("static template")
        .progress_chars("=> ")
        .with_key(
            "done",
            move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", amount(unit, s.pos(), false));
            },
        )
        .with_key(
            "count",
            move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", amount(unit, s.pos(), true));
            },
        )
        .with_key(
            "all",
            move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", amount(unit, s.len().unwrap_or(0), true));
            },
        )
        .with_key(
            "rate",
            move |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", rate(unit, s.per_sec()));
            },
        );
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// `1.2 GiB`, `1,234 documents`, `1 entry`; `with_unit` false leaves the noun out
/// of counts (`1,234`, for the left side of `done/total`).
fn amount(unit: Unit, n: u64, with_unit: bool) -> String {
    let noun = |one: &str, many: &str| {
        let count = HumanCount(n).to_string();
        match (with_unit, n) {
            (false, _) => count,
            (true, 1) => format!("{count} {one}"),
            (true, _) => format!("{count} {many}"),
        }
    };
    match unit {
        Unit::Bytes => HumanBytes(n).to_string(),
        Unit::Documents => noun("document", "documents"),
        Unit::Entries => noun("entry", "entries"),
    }
}

/// `120.0 MiB/s`, `150,000 documents/s`.
fn rate(unit: Unit, per_sec: f64) -> String {
    let per_sec = if per_sec.is_finite() { per_sec } else { 0.0 };
    match unit {
        Unit::Bytes => format!("{}/s", HumanBytes(per_sec as u64)),
        Unit::Documents => format!("{} documents/s", HumanCount(per_sec as u64)),
        Unit::Entries => format!("{} entries/s", HumanCount(per_sec as u64)),
    }
}

/// `2s`, `1m 5s`, `1h 2m`: whole seconds, as a person says a time left.
fn human_duration(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}

/// `in 1.23s`, `in 2m 5s`, `in under 0.01s` (never "in 0 s").
fn took(d: Duration) -> String {
    crate::replay::progress::took_time(d)
}

/// The line a log gets while a phase runs:
/// `pitr: applying the oplog slice: 1.2 GiB of 3.4 GiB (35%), 120.0 MiB/s, about 18s left`.
fn running_line(
    what: &str,
    unit: Unit,
    done: u64,
    (total, about): (Option<u64>, bool),
    elapsed: Duration,
) -> String {
    let secs = elapsed.as_secs_f64();
    let per_sec = if secs > 0.0 { done as f64 / secs } else { 0.0 };
    match total {
        Some(t) if t > 0 => {
            let pct = (done as f64 * 100.0 / t as f64).min(100.0);
            let left = match (t - done.min(t)) as f64 / per_sec {
                s if !s.is_finite() || done >= t => String::new(),
                s if s < 1.0 => ", less than a second left".into(),
                s => format!(
                    ", about {} left",
                    human_duration(Duration::from_secs_f64(s))
                ),
            };
            format!(
                "pitr: {what}: {} of {}{} ({pct:.0}%), {}{left}",
                amount(unit, done, unit == Unit::Bytes),
                if about { "about " } else { "" },
                amount(unit, t, true),
                rate(unit, per_sec)
            )
        }
        _ => format!(
            "pitr: {what}: {} so far, {}",
            amount(unit, done, true),
            rate(unit, per_sec)
        ),
    }
}

/// How a phase or scan ended, for its last line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// It ran to its end (or, with a total, as far as it got: short of a total
    /// that is not an estimate reads as stopped).
    Ran,
    /// By Ctrl-C.
    Interrupted,
    /// By an error, said next by the caller ([`Meter::cut_short`]).
    CutShort,
}

impl Ended {
    /// As things stand now: interrupted if a Ctrl-C came, else as `cut_short` says.
    fn now(cut_short: bool) -> Ended {
        match (interrupt::requested(), cut_short) {
            (true, _) => Ended::Interrupted,
            (false, true) => Ended::CutShort,
            (false, false) => Ended::Ran,
        }
    }
}

/// The line that ends a phase: what it did and how long it took
/// (`pitr: hashing: 1,234,567 documents in 4.20s (293,944 documents/s)`), or where
/// it stopped (`... interrupted at 1,234 of 5,678 documents after 1.20s`).
fn finished_line(
    what: &str,
    unit: Unit,
    done: u64,
    (total, about): (Option<u64>, bool),
    elapsed: Duration,
    ended: Ended,
) -> String {
    // Short of an estimate is no shortfall: the estimate was high.
    let short = ended == Ended::CutShort || (!about && total.is_some_and(|t| done < t));
    let interrupted = ended == Ended::Interrupted;
    if interrupted || short {
        let of = match total {
            Some(t) => format!(
                "{} of {}{}",
                amount(unit, done, unit == Unit::Bytes),
                if about { "about " } else { "" },
                amount(unit, t, true)
            ),
            None => amount(unit, done, true),
        };
        let how = if interrupted {
            "interrupted"
        } else {
            "stopped"
        };
        // `after 1.20s`; within the first 10 ms, `within 0.01s` (not "after under").
        let after = match took(elapsed).strip_prefix("in under ") {
            Some(d) => format!("within {d}"),
            None => took(elapsed).replacen("in ", "after ", 1),
        };
        return format!("pitr: {what}: {how} at {of} {after}");
    }
    let secs = elapsed.as_secs_f64();
    let speed = if secs >= 0.05 && done > 0 {
        format!(" ({})", rate(unit, done as f64 / secs))
    } else {
        String::new()
    };
    format!(
        "pitr: {what}: {} {}{speed}",
        amount(unit, done, true),
        took(elapsed)
    )
}

/// `PITR_PROGRESS_INTERVAL`: a duration (`500ms`, `10s`, `1m`) or seconds, with
/// or without `s` (`0.1s`, `2`); at least 10 ms.
fn parse_interval(v: &str) -> Result<Duration, String> {
    let t = v.trim();
    let d = match humantime::parse_duration(t) {
        Ok(d) => d,
        Err(_) => {
            let secs: f64 = t
                .strip_suffix('s')
                .unwrap_or(t)
                .trim()
                .parse()
                .map_err(|_| "not a duration (e.g. `500ms`, `0.1s`, `10s`)".to_string())?;
            if !secs.is_finite() || secs < 0.0 {
                return Err("not a duration (e.g. `500ms`, `0.1s`, `10s`)".into());
            }
            Duration::from_secs_f64(secs)
        }
    };
    if d < Duration::from_millis(10) {
        return Err("at least 10ms".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("0.1s"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_interval(" 1m "), Ok(Duration::from_secs(60)));
        assert!(parse_interval("1ms").is_err());
        assert!(parse_interval("soon").is_err());
        assert!(parse_interval("-1").is_err());
    }

    #[test]
    fn lines_read_as_a_person_writes_them() {
        let s = Duration::from_secs;
        assert_eq!(
            finished_line(
                "hashing",
                Unit::Documents,
                1,
                (Some(1), false),
                Duration::ZERO,
                Ended::Ran
            ),
            "pitr: hashing: 1 document in under 0.01s"
        );
        assert_eq!(
            finished_line(
                "hashing",
                Unit::Documents,
                3000,
                (Some(3000), false),
                s(2),
                Ended::Ran
            ),
            "pitr: hashing: 3,000 documents in 2.00s (1,500 documents/s)"
        );
        assert_eq!(
            finished_line(
                "hashing",
                Unit::Documents,
                10,
                (Some(3000), false),
                s(2),
                Ended::Interrupted
            ),
            "pitr: hashing: interrupted at 10 of 3,000 documents after 2.00s"
        );
        assert_eq!(
            finished_line(
                "reading the oplog",
                Unit::Bytes,
                1 << 20,
                (Some(2 << 20), false),
                s(90),
                Ended::Ran
            ),
            "pitr: reading the oplog: stopped at 1.00 MiB of 2.00 MiB after 1m 30s"
        );
        assert_eq!(
            running_line(
                "applying",
                Unit::Bytes,
                1 << 30,
                (Some(4 << 30), false),
                s(10)
            ),
            "pitr: applying: 1.00 GiB of 4.00 GiB (25%), 102.40 MiB/s, about 30s left"
        );
        assert_eq!(
            running_line(
                "reading the backup",
                Unit::Documents,
                1,
                (None, false),
                s(1)
            ),
            "pitr: reading the backup: 1 document so far, 1 documents/s"
        );
        // Of an estimate: "about", and ending short of it is the end.
        assert_eq!(
            running_line(
                "applying",
                Unit::Bytes,
                1 << 30,
                (Some(4 << 30), true),
                s(10)
            ),
            "pitr: applying: 1.00 GiB of about 4.00 GiB (25%), 102.40 MiB/s, about 30s left"
        );
        assert_eq!(
            finished_line(
                "applying",
                Unit::Bytes,
                3 << 30,
                (Some(4 << 30), true),
                s(10),
                Ended::Ran
            ),
            "pitr: applying: 3.00 GiB in 10.00s (307.20 MiB/s)"
        );
        assert_eq!(
            finished_line(
                "applying",
                Unit::Bytes,
                1 << 30,
                (Some(4 << 30), true),
                s(10),
                Ended::Interrupted
            ),
            "pitr: applying: interrupted at 1.00 GiB of about 4.00 GiB after 10.00s"
        );
        // Cut short by an error, with no total to fall short of.
        assert_eq!(
            finished_line(
                "reading the backup",
                Unit::Documents,
                1200,
                (None, false),
                s(3),
                Ended::CutShort
            ),
            "pitr: reading the backup: stopped at 1,200 documents after 3.00s"
        );
        assert_eq!(
            finished_line(
                "reading the backup",
                Unit::Documents,
                3,
                (None, false),
                Duration::ZERO,
                Ended::CutShort
            ),
            "pitr: reading the backup: stopped at 3 documents within 0.01s"
        );
        assert_eq!(human_duration(s(3725)), "1h 2m");
    }
}
