//! The per-machine cache of measured transport rules (docs/transport.md,
//! "Rules from measurement").
//!
//! Built-in rules are derived from cache sizes, and a cache size says little
//! about what a virtual machine's host really gives (a guest may see a 300
//! MiB L3). So the first job on a machine measures the rules (`topocomm
//! run` runs the quick tuner, bounded in time) and stores them here; later
//! jobs, `topocomm plan` and `topocomm_mpi_init` load them in milliseconds.
//!
//! One JSON file per machine key (topology fingerprint, CPU model, kernel
//! release) under `$XDG_CACHE_HOME/topocomm/` (else `~/.cache/topocomm/`).
//! Writers write a temporary file in the same folder and rename it over the
//! entry, so a reader sees the old entry or the new one, never a mix, and
//! concurrent first jobs cannot corrupt it; the measurement itself runs under
//! an exclusive `flock` so that they measure once. A file that does not
//! parse, or was written for another key, is reported in one line and
//! measured again. This module only reads and writes the cache: measuring
//! is the caller's (the CLI runs the tuner).

use crate::rules::Rules;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use topocomm_topo::Machine;

/// `format` of a cache entry, raised when what is measured changes, so
/// that older entries are measured again: 2 added the answers
/// (`lone_rendezvous_min`); 3 the single-copy chunks up to 16 MiB (the
/// entries of 2 chose theirs among 256 KiB and 1 MiB, and kept it, while
/// the built-in chunk became 16 MiB); 4 the answers measured not to pay
/// (entries of 3 left those classes to the built-in rules, which answer
/// from 8 KiB since); 5 the sender's help with single copy (`help_min`:
/// entries of 4 would load it as never); 6 the inline messages over up to
/// four cells (entries of 5 carry `inline_max = 40`, one cell).
pub const FORMAT: &str = "topocomm.rules-cache/6";
/// Environment variable that turns measuring off (`0`) or on (`1`, default).
pub const ENV: &str = "TOPOCOMM_AUTOTUNE";

/// What identifies a machine for the cache: rules measured under another
/// topology, CPU or kernel are not reused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    pub fingerprint: String,
    pub cpu_model: String,
    pub kernel: String,
}

impl Key {
    /// The key of machine `m` under the running kernel.
    pub fn of(m: &Machine) -> Key {
        Key {
            fingerprint: m.fingerprint.clone(),
            cpu_model: m.cpu_model.clone().unwrap_or_else(|| "unknown".into()),
            kernel: kernel_release(),
        }
    }

    /// File name of this key's entry: a hash of the key, so that any CPU
    /// model string gives a safe name.
    pub fn file_name(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for part in [&self.fingerprint, &self.cpu_model, &self.kernel] {
            for b in part.bytes().chain(std::iter::once(0xff)) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        format!("rules-{h:016x}.json")
    }
}

/// `uname -r`.
fn kernel_release() -> String {
    // SAFETY: uname fills the zeroed struct we own; result checked.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    let bytes: Vec<u8> = u
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// One cached measurement (docs/formats/rules-cache.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub format: String,
    pub key: Key,
    /// UTC time of the measurement, `YYYY-MM-DD HH:MM:SS`.
    pub measured_at: String,
    /// Wall time the measurement took.
    pub seconds: f64,
    /// Classes whose section was measured; the others are the built-in model.
    pub measured_classes: Vec<String>,
    /// topocomm version that measured.
    pub version: String,
    /// The rules, as a rules file (docs/formats/rules-toml.md).
    pub rules_toml: String,
}

impl Entry {
    pub fn new(key: Key, seconds: f64, measured_classes: Vec<String>, rules_toml: String) -> Entry {
        Entry {
            format: FORMAT.into(),
            key,
            measured_at: utc_now(),
            seconds,
            measured_classes,
            version: env!("CARGO_PKG_VERSION").into(),
            rules_toml,
        }
    }
}

/// A loaded entry and its rules.
#[derive(Clone, Debug)]
pub struct Cached {
    pub entry: Entry,
    pub rules: Rules,
    pub path: PathBuf,
}

/// `TOPOCOMM_AUTOTUNE`: whether jobs without a rules file use measured rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `0`: the built-in rules, nothing measured or read.
    Off,
    /// `1` (default): measured once per machine, when the machine is idle.
    On,
    /// `force`: measured once per machine even while other tasks run.
    Force,
}

/// Reads `TOPOCOMM_AUTOTUNE`; another value is an error naming the variable.
pub fn mode() -> Result<Mode, String> {
    switch(std::env::var(ENV).ok().as_deref())
}

/// Whether measured rules are used at all (`mode()` is not `Off`).
pub fn enabled() -> Result<bool, String> {
    mode().map(|m| m != Mode::Off)
}

fn switch(value: Option<&str>) -> Result<Mode, String> {
    match value {
        None => Ok(Mode::On),
        Some(v) => match v.trim() {
            "1" | "" => Ok(Mode::On),
            "0" => Ok(Mode::Off),
            "force" => Ok(Mode::Force),
            _ => Err(format!(
                "{ENV}='{v}': expected 0 (static built-in rules), 1 (measure once per machine) or force (measure even while the machine is busy)"
            )),
        },
    }
}

/// The cache folder: `$XDG_CACHE_HOME/topocomm`, else `$HOME/.cache/topocomm`
/// (relative values are ignored, as the XDG spec says); `None` without both.
pub fn cache_dir() -> Option<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").and_then(abs) {
        return Some(x.join("topocomm"));
    }
    std::env::var_os("HOME")
        .and_then(abs)
        .map(|h| h.join(".cache").join("topocomm"))
}

/// Loads the entry of `key` from `dir`. `Ok(None)`: no entry yet. `Err`: an
/// entry exists but is unusable (unreadable, malformed, another key, rules
/// that do not load); the message names the file and says why.
pub fn load(dir: &Path, key: &Key, m: &Machine) -> Result<Option<Cached>, String> {
    let path = dir.join(key.file_name());
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let entry: Entry = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a rules cache entry ({e})", path.display()))?;
    if entry.format != FORMAT {
        return Err(format!(
            "{}: format '{}', expected '{FORMAT}'",
            path.display(),
            // Escaped: a "\n" in the file must not split the error line.
            entry.format.escape_debug()
        ));
    }
    if entry.key != *key {
        return Err(format!(
            "{}: measured for another machine or kernel ({:?})",
            path.display(),
            entry.key
        ));
    }
    let mut rules = Rules::from_toml(&path, &entry.rules_toml, m)
        .map_err(|e| format!("{}: its rules do not load: {e}", path.display()))?;
    // Only the measured sections come from the cache: the others are the
    // built-in model of this build (a cache written by an older build must
    // not keep its built-in rules once they have been improved).
    let builtin = Rules::builtin(m);
    let measured = |name: &str| entry.measured_classes.iter().any(|c| c == name);
    if !measured("default") {
        rules.default = builtin.default.clone();
    }
    for (name, p) in rules.classes.iter_mut() {
        if !measured(name) {
            if let Some(b) = builtin.classes.get(name) {
                *p = b.clone();
            }
        }
    }
    rules.source = format!(
        "measured on this machine {} UTC ({:.1} s; {})",
        entry.measured_at,
        entry.seconds,
        path.display()
    );
    Ok(Some(Cached { entry, rules, path }))
}

/// Stores `entry` in `dir` (created if needed) by writing a temporary file
/// next to it and renaming it over the entry. Returns the entry's path.
pub fn store(dir: &Path, entry: &Entry) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(entry.key.file_name());
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        entry.key.file_name(),
        std::process::id()
    ));
    let text = serde_json::to_string_pretty(entry).expect("an entry serializes");
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()
    };
    if let Err(e) = write().and_then(|()| std::fs::rename(&tmp, &path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "{}: cannot write the rules cache: {e}",
            path.display()
        ));
    }
    Ok(path)
}

/// An exclusive lock on a key's measurement, released on drop (and by the
/// kernel if the process dies).
pub struct Lock {
    _file: std::fs::File,
}

/// Takes the measurement lock of `key` in `dir`, waiting at most `wait`.
/// `Ok(None)` when another process still holds it after `wait`.
pub fn lock(dir: &Path, key: &Key, wait: Duration) -> Result<Option<Lock>, String> {
    use std::os::fd::AsRawFd;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!(".{}.lock", key.file_name()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let start = Instant::now();
    loop {
        // SAFETY: flock on a descriptor we own; non-blocking, result checked.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(Some(Lock { _file: file }));
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(format!("{}: flock: {e}", path.display()));
        }
        if start.elapsed() >= wait {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The rules of a job started without the launcher and without a rules
/// file (`topocomm_mpi_init`): this machine's cached measurement when
/// measuring is on and one exists, else the built-in model. It never
/// measures (a library does not start benchmark jobs); `topocomm plan
/// --measure` or the first `topocomm run` fills the cache.
pub fn cached_or_builtin(m: &Machine) -> Rules {
    let cached = match (enabled(), cache_dir()) {
        (Ok(true), Some(dir)) if topocomm_measure::target::require_live(m).is_ok() => {
            load(&dir, &Key::of(m), m).ok().flatten()
        }
        _ => None,
    };
    cached.map_or_else(|| Rules::builtin(m), |c| c.rules)
}

/// `YYYY-MM-DD HH:MM:SS` in UTC.
fn utc_now() -> String {
    utc(topocomm_measure::meta::unix_now())
}

fn utc(secs: i64) -> String {
    let (y, m, d, hh, mm, ss) = topocomm_measure::meta::civil_utc(secs);
    format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}:{ss:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        topocomm_topo::load(&"synthetic:pack:1 l3:1 l2:2 core:1 pu:1".parse().unwrap()).unwrap()
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tc-autotune-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc(1_795_392_000 + 3661), "2026-11-23 01:01:01");
    }

    #[test]
    fn an_entry_round_trips_and_a_bad_one_is_refused_with_its_reason() {
        let m = machine();
        let dir = tmpdir("roundtrip");
        let key = Key::of(&m);
        assert!(load(&dir, &key, &m).unwrap().is_none(), "empty cache");
        let rules = Rules::builtin(&m).to_toml();
        let e = Entry::new(key.clone(), 1.5, vec!["l2".into()], rules);
        let path = store(&dir, &e).unwrap();
        let c = load(&dir, &key, &m).unwrap().expect("stored");
        assert_eq!(c.entry, e);
        assert!(c.rules.source.starts_with("measured on this machine"));
        // Nothing but the entry (and no temporary file) is left.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|f| f.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![key.file_name()]);
        // Another kernel: stale.
        let mut other = key.clone();
        other.kernel = "0.0.0-other".into();
        std::fs::copy(&path, dir.join(other.file_name())).unwrap();
        let err = load(&dir, &other, &m).unwrap_err();
        assert!(err.contains("another machine or kernel"), "{err}");
        // Garbage: refused with the file name.
        std::fs::write(&path, "{ not json").unwrap();
        let err = load(&dir, &key, &m).unwrap_err();
        assert!(
            err.contains(&key.file_name()) && err.contains("not a rules cache entry"),
            "{err}"
        );
        // Sections not measured are this build's built-in rules, whatever
        // the entry says (it may come from an older build).
        let mut stale = Rules::builtin(&m);
        stale.default.cma_threshold = 7 << 20;
        let measured = stale.classes.keys().next().cloned();
        if let Some(c) = &measured {
            stale.classes.get_mut(c).unwrap().cma_threshold = 5 << 20;
        }
        let old = Entry::new(
            key.clone(),
            1.0,
            measured.iter().cloned().collect(),
            stale.to_toml(),
        );
        store(&dir, &old).unwrap();
        let c = load(&dir, &key, &m).unwrap().expect("stored");
        assert_eq!(c.rules.default, Rules::builtin(&m).default);
        if let Some(name) = &measured {
            assert_eq!(c.rules.classes[name].cma_threshold, 5 << 20);
        }
        // An entry of the previous format (its chunk chosen among 256 KiB
        // and 1 MiB): refused, so measured again.
        let mut older = e.clone();
        older.format = "topocomm.rules-cache/2".into();
        store(&dir, &older).unwrap();
        let err = load(&dir, &key, &m).unwrap_err();
        assert!(err.contains("format 'topocomm.rules-cache/2'"), "{err}");
        // Rules that do not load.
        let mut bad = e.clone();
        bad.rules_toml = "[l2]\ndepth = 0\n".into();
        store(&dir, &bad).unwrap();
        let err = load(&dir, &key, &m).unwrap_err();
        assert!(err.contains("its rules do not load"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_lock_is_exclusive_and_released_on_drop() {
        let m = machine();
        let dir = tmpdir("lock");
        let key = Key::of(&m);
        let first = lock(&dir, &key, Duration::ZERO).unwrap().expect("free");
        // flock locks belong to the open file description: a second open
        // in the same process contends like another process would.
        assert!(lock(&dir, &key, Duration::from_millis(50))
            .unwrap()
            .is_none());
        drop(first);
        assert!(lock(&dir, &key, Duration::ZERO).unwrap().is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_environment_switch_is_checked() {
        assert_eq!(switch(None), Ok(Mode::On));
        assert_eq!(switch(Some("1")), Ok(Mode::On));
        assert_eq!(switch(Some(" 0 ")), Ok(Mode::Off));
        assert_eq!(switch(Some("force")), Ok(Mode::Force));
        let e = switch(Some("off")).unwrap_err();
        assert!(e.starts_with("TOPOCOMM_AUTOTUNE='off': expected 0"), "{e}");
    }
}
