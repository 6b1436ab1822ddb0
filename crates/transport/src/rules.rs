//! Rules (locality class -> transport parameters), their TOML form
//! (docs/formats/rules-toml.md) and the built-in cache-size model.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use topocomm_topo::{LocalityClass, Machine, ObjectKind};

/// Bytes of payload an inline message may carry in the ring's cells: 40 in
/// its first 64-byte cell (the rest is header), 56 in each of up to three
/// more (`segment::INLINE_CELLS`).
pub const CELL_PAYLOAD: usize = crate::segment::INLINE_MAX_BYTES;
/// A `cma_threshold` from which no message starts with single copy: with
/// `adaptive`, the receiver starts every rendezvous with two-copy and tries
/// single copy now and then (what measured rules write where single copy
/// never won the measurement).
pub const CMA_NEVER_FIRST: u64 = 1 << 50;
/// Built-in bytes per `process_vm_readv` call: every message up to 16 MiB
/// (the largest size `bench p2p` measures) in one call, as Open MPI's vader
/// reads it.
/// The kernel pins the remote pages 16 at a time whatever the call's length,
/// so a smaller chunk only adds calls: with 1 MiB, 4 MiB bibw on the 2-vCPU
/// Intel Xeon VM ran at 11.1 GB/s against 12.4 with 16 MiB (medians of 12
/// alternating rounds, 11 of 12 rounds faster; Open MPI 12.7), and no size
/// measured slower (docs/transport.md, "Single copy in one call").
pub const CMA_CHUNK: u64 = 16 << 20;

/// Copy routine used to move data into and out of fragment slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyKind {
    Plain,
    Nontemporal,
}

/// Which side's pages hold a channel's fragment slots (first touch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Owner {
    Sender,
    Receiver,
}

/// The transport parameters of one locality class (or of one directed pair,
/// once resolved into a [`Plan`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// Messages up to this size travel inside the ring's cells (<=
    /// [`CELL_PAYLOAD`] = 208 bytes: one cell up to 40, four at 208).
    pub inline_max: u64,
    /// Messages up to this size are copied into one fragment slot without
    /// waiting for the receiver (<= fragment).
    pub eager_max: u64,
    /// Fragment (slot) size of the pipelined two-copy protocol.
    pub fragment: u64,
    /// Number of fragment slots per channel (pipeline depth).
    pub depth: u64,
    /// Whether single copy through `process_vm_readv` may be used.
    pub cma: bool,
    /// Messages of at least this size use single copy (when `cma`); with
    /// `adaptive`, only until the channel has measured both protocols.
    pub cma_threshold: u64,
    /// Whether the receiver chooses between two-copy and single copy per
    /// message from the costs it measured on the channel (choose.rs).
    /// Only with `cma`. Missing in files written before it existed: on.
    #[serde(default = "adaptive_default")]
    pub adaptive: bool,
    /// Bytes per `process_vm_readv` call.
    pub cma_chunk: u64,
    /// Copy routine for fragments of messages >= `nt_threshold`.
    pub copy: CopyKind,
    pub nt_threshold: u64,
    /// Messages of at least this size are copied out of the slots into the
    /// receive buffer with streaming (non-temporal) stores: a destination
    /// that large would not stay in the cache anyway, and not reading it
    /// in first leaves the cache to the slots and the sender's source.
    /// Missing in files written before it existed: never.
    #[serde(default = "never")]
    pub stream_out_min: u64,
    /// Side that first-touches (and so NUMA-places) the fragment slots.
    pub buffer_owner: Owner,
    /// Messages from this size up to `eager_max` that answer the peer
    /// (since the sender's last send it took exactly one message, from
    /// that peer, and no receive from it is posted: a ping-pong's turn) go
    /// by rendezvous and ask the receiver for single copy (when `cma`): one
    /// copy across the cores instead of eager's two in a row; so do those
    /// to a peer the sender receives from (an exchange: `plan.rs`,
    /// `exchange_eager_max`). docs/transport.md, "Answers by single copy".
    /// The built-in rules: [`BUILTIN_ANSWERS_FROM`]; a value above the
    /// eager limit ([`ANSWERS_NEVER`]): never; first use measures it.
    /// `None` (never) is written as [`ANSWERS_NEVER`]: a file without the
    /// key gets the built-in rules' answers.
    #[serde(default, serialize_with = "answers_out")]
    pub lone_rendezvous_min: Option<u64>,
    /// Single-copy messages of at least this size (and at least
    /// `help::HELP_MIN`, 64 KiB) are read with the sender's help: the
    /// receiver splits them into pieces and the sender, if it waits for
    /// the read, writes some of them into the receiver's buffer
    /// (docs/transport.md, "Helped single copy"). The built-in rules: half
    /// the private cache (below it, a message the receiver copies itself
    /// stays in its cache for its next use). Missing where a whole
    /// `Params` is read (not a rules file, whose sections overlay the
    /// built-in rules): [`HELP_NEVER`].
    #[serde(default = "help_never")]
    pub help_min: u64,
}

fn answers_out<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(v.unwrap_or(ANSWERS_NEVER))
}

/// Partial parameters as written in a rules file section.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamsFile {
    inline_max: Option<u64>,
    eager_max: Option<u64>,
    fragment: Option<u64>,
    depth: Option<u64>,
    cma: Option<bool>,
    cma_threshold: Option<u64>,
    adaptive: Option<bool>,
    cma_chunk: Option<u64>,
    copy: Option<CopyKind>,
    nt_threshold: Option<u64>,
    stream_out_min: Option<u64>,
    buffer_owner: Option<Owner>,
    lone_rendezvous_min: Option<u64>,
    help_min: Option<u64>,
}

fn adaptive_default() -> bool {
    true
}

/// `lone_rendezvous_min` of the built-in rules. Open MPI's shared memory
/// reads every message above its 4 KiB eager limit by single copy; with
/// no answers, the built-in rules sent a 12-16 KiB ping-pong eagerly, two
/// copies in a row, in 1.35-1.53x Open MPI's time on a 2-vCPU Intel Xeon
/// VM (model 167; 0.69-0.73x with answers from 8 KiB, 2026-11-30). Where
/// single copy costs more (a 2-vCPU AMD EPYC VM: 3.8-4.4x the eager time
/// at 8-16 KiB), this is what Open MPI does there too, and the first-use
/// measurement turns answers off ([`ANSWERS_NEVER`]).
pub const BUILTIN_ANSWERS_FROM: u64 = 8 << 10;

/// A `lone_rendezvous_min` above any eager limit (which a fragment, at
/// most 64 MiB, bounds): answers never go by single copy. What the
/// first-use measurement writes for a class where they did not pay, so
/// that the built-in [`BUILTIN_ANSWERS_FROM`] does not come back on load.
pub const ANSWERS_NEVER: u64 = 1 << 30;

fn never() -> u64 {
    u64::MAX
}

/// A `help_min` no message reaches (a TOML integer, unlike `u64::MAX`):
/// single copy is never helped.
pub const HELP_NEVER: u64 = 1 << 50;

fn help_never() -> u64 {
    HELP_NEVER
}

impl Params {
    fn overlay(&mut self, f: &ParamsFile) {
        macro_rules! set {
            ($($k:ident),*) => { $( if let Some(v) = f.$k.clone() { self.$k = v; } )* };
        }
        set!(
            inline_max,
            eager_max,
            fragment,
            depth,
            cma,
            cma_threshold,
            adaptive,
            cma_chunk,
            copy,
            nt_threshold,
            stream_out_min,
            buffer_owner,
            help_min
        );
        if f.lone_rendezvous_min.is_some() {
            self.lone_rendezvous_min = f.lone_rendezvous_min;
        }
        // A smaller fragment set alone carries the eager limit down with it.
        if f.fragment.is_some() && f.eager_max.is_none() {
            self.eager_max = self.eager_max.min(self.fragment);
        }
    }

    /// The protocols for messages above the eager limit, in words; `size`
    /// renders a byte count, `cma_ok` says whether single copy works here.
    pub fn mechanism(&self, cma_ok: bool, size: &dyn Fn(u64) -> String) -> String {
        match (self.cma, cma_ok, self.adaptive) {
            (true, true, true) if self.cma_threshold >= CMA_NEVER_FIRST => {
                "two-copy or CMA by measured cost (start: two-copy)".into()
            }
            (true, true, true) => format!(
                "two-copy or CMA by measured cost (start: CMA from {})",
                size(self.cma_threshold)
            ),
            (true, true, false) => {
                format!(
                    "two-copy, single copy (CMA) from {}",
                    size(self.cma_threshold)
                )
            }
            (true, false, _) => "two-copy (CMA wanted but unavailable)".into(),
            (false, _, _) => "two-copy".into(),
        }
    }

    /// Checks the invariants the protocols rely on; the error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.help_min < 65536 {
            return Err((
                "help_min",
                "must be >= 65536 (two pieces of at least 32 KiB)".into(),
            ));
        }
        if self.inline_max > CELL_PAYLOAD as u64 {
            return Err((
                "inline_max",
                format!("must be <= {CELL_PAYLOAD} (four cells)"),
            ));
        }
        if !(4096..=(64 << 20)).contains(&self.fragment) {
            return Err(("fragment", "must be between 4096 and 67108864".into()));
        }
        if !(1..=64).contains(&self.depth) {
            return Err(("depth", "must be between 1 and 64".into()));
        }
        if self.eager_max > self.fragment {
            return Err((
                "eager_max",
                format!("must be <= fragment ({})", self.fragment),
            ));
        }
        if self.eager_max < self.inline_max {
            return Err((
                "eager_max",
                format!("must be >= inline_max ({})", self.inline_max),
            ));
        }
        if self.cma_chunk < 4096 {
            return Err(("cma_chunk", "must be >= 4096".into()));
        }
        if self
            .lone_rendezvous_min
            .is_some_and(|v| v <= self.inline_max)
        {
            return Err((
                "lone_rendezvous_min",
                format!(
                    "must be > inline_max ({}): inline messages travel in the cell",
                    self.inline_max
                ),
            ));
        }
        Ok(())
    }
}

/// A rules table: `default` plus per-class parameters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rules {
    pub default: Params,
    pub classes: BTreeMap<String, Params>,
    /// Where the rules came from (`built-in model` or a file path).
    pub source: String,
}

/// Data cache shared by the two PUs of a class, if any (bytes).
fn class_shared_cache(m: &Machine, class: &LocalityClass) -> Option<u64> {
    match class {
        LocalityClass::SamePu | LocalityClass::Smt => m.cache_size(1).or(m.cache_size(2)),
        LocalityClass::Cache(l) => m.cache_size(*l),
        _ => None,
    }
}

/// Largest cache private to one core (what the sender's freshly written
/// fragments live in before the receiver pulls them).
fn private_cache(m: &Machine) -> u64 {
    let mut best = 0;
    for o in &m.objects {
        if o.kind == ObjectKind::Cache {
            if let Some(c) = &o.cache {
                let mut cores: Vec<Option<u32>> = m
                    .pus
                    .iter()
                    .filter(|p| o.cpuset.contains(p.os_index))
                    .map(|p| p.core)
                    .collect();
                cores.dedup();
                let cores_below = cores.len();
                if cores_below <= 1 && c.size > best {
                    best = c.size;
                }
            }
        }
    }
    if best == 0 {
        256 << 10
    } else {
        best
    }
}

fn pow2_floor(x: u64) -> u64 {
    if x == 0 {
        0
    } else {
        1u64 << (63 - x.leading_zeros())
    }
}

/// The cache-size model of seed 000 (justified in docs/formats/rules-toml.md),
/// made conservative where it lost to the MPIs' defaults on a machine it
/// was not written on:
/// - classes sharing a cache keep `depth * fragment` (the slot ring) inside
///   a quarter of that shared cache but larger than the receiver's private
///   cache (4x): a slot the sender reuses has then left the receiver's
///   private cache, so the sender's stores do not wait for invalidations in
///   the peer core (measured: 2.5 GB/s with a 512 KiB ring, 8-13 GB/s with
///   2-4 MiB on the dev machine). Fragments stay at most 128 KiB and
///   messages from 32 KiB take single copy, as Open MPI and MPICH do by
///   default: with 256 KiB fragments and two-copy up to 4x the LLC, a
///   32 KiB-1 MiB ping-pong took 1.4-2.5x the MPIs' time on a 2-vCPU Intel Xeon VM
///   (a fragment is copied in whole before the receiver starts), and
///   single copy from 32 KiB brought it to parity or better. The measured
///   rules (autotune) may still choose two-copy where it wins;
/// - classes without a shared cache (NUMA, die, package, machine) use
///   receiver-side slots, non-temporal copies for large messages, and single
///   copy from 256 KiB, since two-copy crosses the interconnect twice;
/// - every class answers a ping-pong from 8 KiB by single copy
///   ([`BUILTIN_ANSWERS_FROM`]), as Open MPI's shared memory reads every
///   message above 4 KiB.
pub fn model_params(m: &Machine, class: Option<&LocalityClass>) -> Params {
    let llc = m.llc_size().unwrap_or(8 << 20);
    let private = private_cache(m);
    let shared = class.and_then(|c| class_shared_cache(m, c));
    match shared {
        Some(sh) => {
            let depth = 32u64;
            let ring = (4 * private).min(sh / 4).max(depth * (16 << 10));
            let fragment = pow2_floor(ring / depth).clamp(16 << 10, 128 << 10);
            Params {
                inline_max: CELL_PAYLOAD as u64,
                eager_max: fragment.min(16 << 10),
                fragment,
                depth,
                cma: true,
                cma_threshold: 32 << 10,
                adaptive: true,
                cma_chunk: CMA_CHUNK,
                copy: CopyKind::Plain,
                nt_threshold: 4 * llc,
                stream_out_min: llc / 4,
                buffer_owner: Owner::Sender,
                lone_rendezvous_min: Some(BUILTIN_ANSWERS_FROM),
                help_min: builtin_help_min(private),
            }
        }
        None => {
            let depth = 8u64;
            let cross_numa = !matches!(class, Some(LocalityClass::Numa) | None);
            let fragment = pow2_floor(private / 2 / depth).clamp(16 << 10, 256 << 10);
            Params {
                inline_max: CELL_PAYLOAD as u64,
                eager_max: fragment.min(8 << 10),
                fragment,
                depth,
                cma: true,
                // Unbound ranks (no class) may share a cache or not, and
                // move between cores: single copy from 32 KiB, as the MPIs
                // do by default (two-copy up to 1 MiB took 2x Open MPI's
                // time at 64 KiB for two unbound ranks, docs/formats/rules-toml.md).
                cma_threshold: match class {
                    None => 32 << 10,
                    Some(_) if cross_numa => 256 << 10,
                    Some(_) => 1 << 20,
                },
                adaptive: true,
                cma_chunk: CMA_CHUNK,
                copy: if cross_numa {
                    CopyKind::Nontemporal
                } else {
                    CopyKind::Plain
                },
                nt_threshold: llc / 2,
                stream_out_min: llc / 4,
                buffer_owner: if cross_numa {
                    Owner::Receiver
                } else {
                    Owner::Sender
                },
                lone_rendezvous_min: Some(BUILTIN_ANSWERS_FROM),
                help_min: builtin_help_min(private),
            }
        }
    }
}

/// `help_min` of the built-in rules: half the private cache, at least
/// 64 KiB. A message the receiver reads alone ends in its own cache;
/// pieces the sender writes end in the sender's, and the receiver's next
/// use of them crosses the cores again. Where the receiver's buffers were
/// hot (a 2-member `MPI_Reduce` over Open MPI in a loop, 2-vCPU Intel Xeon
/// VM with a 2 MiB L2) the help took the 64 KiB reduce from 4.4 to 8.3 us
/// and the 256 KiB one from 14.6 to 17.7; from 1 MiB, where the data
/// outgrows that cache anyway, it took 1 MiB from 102 to 84 us and 4 MiB
/// from 460 to 370 (docs/transport.md, "Helped single copy").
fn builtin_help_min(private: u64) -> u64 {
    (private / 2).max(64 << 10)
}

/// Classes that may appear in a rules file although not present here.
fn known_class(name: &str) -> bool {
    topocomm_topo::is_known_class_name(name)
}

/// 1-based line of `key` inside `[section]` of `text` (best effort).
fn locate(text: &str, section: &str, key: Option<&str>) -> Option<usize> {
    let mut in_section = false;
    let mut section_line = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            in_section = t.trim_start_matches('[').trim_end_matches(']').trim() == section;
            if in_section {
                section_line = Some(i + 1);
            }
            continue;
        }
        if in_section {
            if let Some(k) = key {
                if t.split('=').next().map(str::trim) == Some(k) {
                    return Some(i + 1);
                }
            }
        }
    }
    section_line
}

/// `section.key` of the `key = value` line holding byte `off` of `text`
/// (the TOML parser's own errors, e.g. a number too large, name no field).
fn field_at(text: &str, off: usize) -> Option<String> {
    let off = off.min(text.len());
    let start = text[..off].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let key = line.split_once('=')?.0.trim();
    let section = text[..start]
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix('['))
        .map(|s| s.trim_end_matches(']').trim().to_string());
    Some(match section {
        Some(s) => format!("{s}.{key}"),
        None => key.to_string(),
    })
}

/// A section or key name as it goes into a one-line error: a quoted TOML
/// key may hold a newline (`"a\nb" = 1`), shown escaped as it was written.
fn shown(name: &str) -> String {
    topocomm_topo::text::one_line(name)
}

fn line_of_offset(text: &str, off: usize) -> usize {
    text[..off.min(text.len())].matches('\n').count() + 1
}

impl Rules {
    /// The built-in rules of machine `m`: a `default` section (used for
    /// unbound ranks) and one section per class present.
    pub fn builtin(m: &Machine) -> Rules {
        let mut classes = BTreeMap::new();
        for c in topocomm_topo::ClassMatrix::new(m).classes() {
            classes.insert(c.class.to_string(), model_params(m, Some(&c.class)));
        }
        Rules {
            default: model_params(m, None),
            classes,
            source: "built-in model".into(),
        }
    }

    /// Parameters for a class: the class section, else `default`.
    pub fn params_for(&self, class: Option<&str>) -> &Params {
        class
            .and_then(|c| self.classes.get(c))
            .unwrap_or(&self.default)
    }

    /// Parses a rules file over the built-in rules of `m`: a section
    /// overrides the listed keys of the built-in class parameters, and
    /// `[default]` overrides keys of every class. Errors are one line naming
    /// the file, line and field.
    pub fn from_toml(path: &Path, text: &str, m: &Machine) -> Result<Rules, String> {
        // toml's message on one line, a value it echoes cut short (a
        // float like 1e308 is printed with its 309 digits).
        fn toml_message(e: &toml::de::Error) -> String {
            let msg = e.message().trim().replace('\n', " ");
            match msg.char_indices().nth(160) {
                Some((i, _)) => format!("{}...", &msg[..i]),
                None => msg,
            }
        }
        let file = path.display();
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e
                .span()
                .map(|s| {
                    let field = field_at(text, s.start)
                        .map(|f| format!("{f}: "))
                        .unwrap_or_default();
                    format!("line {}: {field}", line_of_offset(text, s.start))
                })
                .unwrap_or_default();
            format!("{file}: {line}{}", toml_message(&e))
        })?;
        let mut sections: BTreeMap<String, ParamsFile> = BTreeMap::new();
        for (name, value) in table {
            let name_shown = shown(&name);
            let at = |key: Option<&str>| {
                locate(text, &name, key)
                    .map(|l| format!("line {l}: "))
                    .unwrap_or_default()
            };
            if name != "default" && !known_class(&name) {
                return Err(format!(
                    "{file}: {}unknown locality class [{name_shown}] (expected default, self, smt, l1..l5, numa, die, package, machine, network, groupN or cluster)",
                    at(None)
                ));
            }
            let toml::Value::Table(t) = value else {
                return Err(format!(
                    "{file}: {}'{name_shown}' must be a table like [{name_shown}] with parameter keys",
                    at(None)
                ));
            };
            // Key by key, so a type error names its key and line.
            for (k, v) in &t {
                let mut one = toml::Table::new();
                one.insert(k.clone(), v.clone());
                toml::Value::Table(one).try_into::<ParamsFile>().map_err(
                    |e: toml::de::Error| {
                        format!(
                            "{file}: {}[{name_shown}] {}: {}",
                            at(Some(k)),
                            shown(k),
                            toml_message(&e)
                        )
                    },
                )?;
            }
            let parsed: ParamsFile =
                toml::Value::Table(t)
                    .try_into()
                    .map_err(|e: toml::de::Error| {
                        format!("{file}: [{name_shown}]: {}", toml_message(&e))
                    })?;
            sections.insert(name, parsed);
        }
        let mut rules = Rules::builtin(m);
        rules.source = path.display().to_string();
        let dflt = sections.remove("default").unwrap_or_default();
        rules.default.overlay(&dflt);
        for p in rules.classes.values_mut() {
            p.overlay(&dflt);
        }
        for (name, f) in &sections {
            let p = rules
                .classes
                .entry(name.clone())
                .or_insert_with(|| rules.default.clone());
            p.overlay(f);
        }
        let all = std::iter::once(("default".to_string(), &rules.default))
            .chain(rules.classes.iter().map(|(k, v)| (k.clone(), v)));
        for (name, p) in all {
            if let Err((field, why)) = p.validate() {
                let line = locate(text, &name, Some(field))
                    .or_else(|| locate(text, "default", Some(field)))
                    .map(|l| format!("line {l}: "))
                    .unwrap_or_default();
                return Err(format!("{file}: {line}[{name}] {field} {why}"));
            }
        }
        Ok(rules)
    }

    /// Reads and parses a rules file.
    pub fn load(path: &Path, m: &Machine) -> Result<Rules, String> {
        if let Some(w) = topocomm_topo::others_can_write(path) {
            crate::say!("{w}");
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read rules file: {e}", path.display()))?;
        Rules::from_toml(path, &text, m)
    }

    /// Writes the rules as a TOML rules file.
    pub fn to_toml(&self) -> String {
        let mut t = toml::Table::new();
        let v = |p: &Params| toml::Value::try_from(p).expect("params serialize");
        t.insert("default".into(), v(&self.default));
        for (k, p) in &self.classes {
            t.insert(k.clone(), v(p));
        }
        toml::to_string(&t).expect("rules serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        topocomm_topo::load(&"synthetic:pack:2 l3:1 l2:2 core:1 pu:2".parse().unwrap()).unwrap()
    }

    #[test]
    fn builtin_has_every_class_and_validates() {
        let m = machine();
        let r = Rules::builtin(&m);
        for c in ["smt", "l3", "machine"] {
            assert!(
                r.classes.contains_key(c),
                "{c} missing: {:?}",
                r.classes.keys()
            );
        }
        for p in r.classes.values() {
            p.validate().unwrap();
        }
        // Cross-package pairs use receiver-side buffers, shared-L3 pairs do not.
        assert_eq!(r.classes["machine"].buffer_owner, Owner::Receiver);
        assert_eq!(r.classes["l3"].buffer_owner, Owner::Sender);
        // Single copy from 32 KiB within a shared cache (the MPIs' default
        // regime), from 256 KiB across packages (two-copy crosses twice).
        assert_eq!(r.classes["l3"].cma_threshold, 32 << 10);
        assert_eq!(r.classes["machine"].cma_threshold, 256 << 10);
        assert!(r.classes["l3"].fragment <= 128 << 10);
    }

    #[test]
    fn the_mechanism_says_where_the_choice_starts_and_a_never_first_threshold_loads() {
        let m = machine();
        let mut p = Rules::builtin(&m).classes["l3"].clone();
        let kib = |b: u64| format!("{}KB", b >> 10);
        assert!(p.mechanism(true, &kib).ends_with("(start: CMA from 32KB)"));
        p.cma_threshold = CMA_NEVER_FIRST;
        p.validate().unwrap();
        assert_eq!(
            p.mechanism(true, &kib),
            "two-copy or CMA by measured cost (start: two-copy)"
        );
        // Written and read back through a rules file (TOML integers are i64).
        let mut r = Rules::builtin(&m);
        r.classes.insert("l3".into(), p.clone());
        let back = Rules::from_toml(Path::new("t.toml"), &r.to_toml(), &m).unwrap();
        assert_eq!(back.classes["l3"].cma_threshold, CMA_NEVER_FIRST);
    }

    #[test]
    fn overlay_and_roundtrip() {
        let m = machine();
        let text = "[default]\ndepth = 4\n\n[l3]\nfragment = 32768\ncopy = \"nontemporal\"\n";
        let r = Rules::from_toml(Path::new("r.toml"), text, &m).unwrap();
        assert_eq!(r.classes["l3"].fragment, 32768);
        assert_eq!(r.classes["l3"].depth, 4);
        assert_eq!(r.classes["smt"].depth, 4);
        assert_eq!(r.classes["l3"].copy, CopyKind::Nontemporal);
        let again = Rules::from_toml(Path::new("x"), &r.to_toml(), &m).unwrap();
        assert_eq!(again.classes, r.classes);
    }

    #[test]
    fn answers_start_at_8_kib_unless_set_and_round_trip() {
        let m = machine();
        let b = Rules::builtin(&m);
        assert!(b
            .classes
            .values()
            .all(|p| p.lone_rendezvous_min == Some(BUILTIN_ANSWERS_FROM)));
        let r = Rules::from_toml(
            Path::new("r.toml"),
            &format!(
                "[l3]\nlone_rendezvous_min = 16384\n[smt]\nlone_rendezvous_min = {ANSWERS_NEVER}\n"
            ),
            &m,
        )
        .unwrap();
        assert_eq!(r.classes["l3"].lone_rendezvous_min, Some(16384));
        assert_eq!(r.classes["smt"].lone_rendezvous_min, Some(ANSWERS_NEVER));
        // A section that does not set it keeps the built-in answers.
        assert_eq!(
            r.classes["machine"].lone_rendezvous_min,
            Some(BUILTIN_ANSWERS_FROM)
        );
        let again = Rules::from_toml(Path::new("x"), &r.to_toml(), &m).unwrap();
        assert_eq!(again.classes, r.classes);
        let e = Rules::from_toml(Path::new("r.toml"), "[l3]\nlone_rendezvous_min = 40\n", &m)
            .unwrap_err();
        assert!(
            e.contains("line 2") && e.contains("lone_rendezvous_min must be > inline_max"),
            "{e}"
        );
    }

    #[test]
    fn help_starts_at_half_the_private_cache_unless_set_and_round_trips() {
        let m = machine();
        let b = Rules::builtin(&m);
        let half = (private_cache(&m) / 2).max(64 << 10);
        assert!(b.classes.values().all(|p| p.help_min == half), "{half}");
        let r = Rules::from_toml(
            Path::new("r.toml"),
            &format!("[l3]\nhelp_min = 65536\n[smt]\nhelp_min = {HELP_NEVER}\n"),
            &m,
        )
        .unwrap();
        assert_eq!(r.classes["l3"].help_min, 65536);
        assert_eq!(r.classes["smt"].help_min, HELP_NEVER);
        assert_eq!(r.classes["machine"].help_min, half);
        let again = Rules::from_toml(Path::new("x"), &r.to_toml(), &m).unwrap();
        assert_eq!(again.classes, r.classes);
        let e = Rules::from_toml(Path::new("r.toml"), "[l3]\nhelp_min = 4096\n", &m).unwrap_err();
        assert!(
            e.contains("line 2") && e.contains("help_min must be >= 65536"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let m = machine();
        let e = Rules::from_toml(Path::new("r.toml"), "[l3]\nfragment = \n", &m).unwrap_err();
        assert!(e.starts_with("r.toml: line 2"), "{e}");
        let e = Rules::from_toml(Path::new("r.toml"), "[L3]\nfragment = 4096\n", &m).unwrap_err();
        assert!(
            e.contains("line 1") && e.contains("unknown locality class"),
            "{e}"
        );
        let e = Rules::from_toml(Path::new("r.toml"), "[l3]\nfragmnt = 4096\n", &m).unwrap_err();
        assert!(e.contains("fragmnt"), "{e}");
        let e = Rules::from_toml(Path::new("r.toml"), "[l3]\ndepth = 0\n", &m).unwrap_err();
        assert!(e.contains("line 2") && e.contains("depth"), "{e}");
        let e = Rules::from_toml(Path::new("r.toml"), "[l3]\ndepth = \"x\"\n", &m).unwrap_err();
        assert!(e.contains("line 2") && e.contains("depth"), "{e}");
        assert!(!e.contains('\n'));
        // The parser's own errors name the field too.
        let text = "[default]\ndepth = 4\n[l3]\neager_max = 99999999999999999999999\n";
        let e = Rules::from_toml(Path::new("r.toml"), text, &m).unwrap_err();
        assert!(e.starts_with("r.toml: line 4: l3.eager_max: "), "{e}");
        // A float where a byte count goes: named, and not echoed in full.
        let e = Rules::from_toml(Path::new("r.toml"), "[l3]\nfragment = 1e308\n", &m).unwrap_err();
        assert!(
            e.starts_with("r.toml: line 2: [l3] fragment: invalid type: floating point"),
            "{e}"
        );
        assert!(e.len() < 220 && e.ends_with("..."), "{e}");
    }
}
