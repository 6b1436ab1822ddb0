//! Property tests of the transport's parsers (issue 19): rules TOML (text,
//! mutations, round trip through `to_toml`), `parse_timeout`, `--bind`,
//! `--map` files, rules cache entries and the p2p worker's arguments.
//! Arbitrary input never panics; errors are one line (the worker's usage
//! error starts with one) naming the file, option or value given.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use topocomm_topo::{load, Machine, TopologySpec};
use topocomm_transport::autotune::{self, Entry, Key};
use topocomm_transport::launch::{read_map, Bind};
use topocomm_transport::worker::p2p_spec;
use topocomm_transport::{parse_timeout, Rules};

#[path = "../../../tests/common/props_support.rs"]
mod support;
use support::{mutate, one_line_naming};

fn machine() -> Machine {
    load(&TopologySpec::Synthetic(
        "pack:2 l3:1 l2:2 core:1 pu:2".into(),
    ))
    .unwrap()
}

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("transport-props");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const SECTIONS: &[&str] = &[
    "default",
    "l3",
    "smt",
    "machine",
    "numa",
    "l2",
    "cluster",
    "group1",
    "bogus",
    "\"x\\ny\"",
    "l3.sub",
    "",
    "[l3]",
];
const KEYS: &[&str] = &[
    "inline_max",
    "eager_max",
    "fragment",
    "depth",
    "cma",
    "cma_threshold",
    "adaptive",
    "cma_chunk",
    "copy",
    "nt_threshold",
    "stream_out_min",
    "buffer_owner",
    "bogus",
    "\"a\\nb\"",
];
const VALUES: &[&str] = &[
    "0",
    "1",
    "64",
    "4096",
    "32768",
    "65536",
    "131072",
    "8",
    "-1",
    "18446744073709551615",
    "99999999999999999999",
    "1.5",
    "true",
    "false",
    "\"memcpy\"",
    "\"nontemporal\"",
    "\"sender\"",
    "\"receiver\"",
    "\"x\"",
    "[]",
    "{}",
    "nan",
    "inf",
    "",
    "\"\"\"",
    "1970-01-01",
];

/// A rules document built from the real section and key names (and a few
/// wrong ones), each value drawn from valid and invalid TOML values.
fn rules_doc() -> impl Strategy<Value = String> {
    prop::collection::vec(
        (
            prop::sample::select(SECTIONS),
            prop::collection::vec(
                (prop::sample::select(KEYS), prop::sample::select(VALUES)),
                0..5,
            ),
        ),
        0..4,
    )
    .prop_map(|secs| {
        let mut s = String::new();
        for (name, kvs) in secs {
            s.push_str(&format!("[{name}]\n"));
            for (k, v) in kvs {
                s.push_str(&format!("{k} = {v}\n"));
            }
            s.push('\n');
        }
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rules_text_never_panics(text in "\\PC{0,60}") {
        let m = machine();
        if let Err(e) = Rules::from_toml(Path::new("r.toml"), &text, &m) {
            one_line_naming(&e, "r.toml: ");
        }
    }

    /// Documents of real and wrong sections, keys and values: Ok rules that
    /// validate and survive `to_toml` unchanged, or one line naming the file.
    #[test]
    fn rules_documents(doc in rules_doc()) {
        let m = machine();
        match Rules::from_toml(Path::new("rules.toml"), &doc, &m) {
            Ok(r) => {
                r.default.validate().unwrap();
                for p in r.classes.values() {
                    p.validate().unwrap();
                }
                let again = Rules::from_toml(Path::new("again.toml"), &r.to_toml(), &m).unwrap();
                prop_assert_eq!(&again.default, &r.default);
                prop_assert_eq!(&again.classes, &r.classes);
            }
            Err(e) => one_line_naming(&e, "rules.toml: "),
        }
    }

    /// The built-in rules written out, then cut, with a few bytes replaced,
    /// or a line deleted or duplicated.
    #[test]
    fn rules_mutated(op in 0u8..5, at: usize, with in "(-1|\"|\\[|\\]|=|\n|99999999999999999999|x|true|\\{)") {
        let m = machine();
        let text = mutate(&Rules::builtin(&m).to_toml(), op, at, &with);
        if let Err(e) = Rules::from_toml(Path::new("cut.toml"), &text, &m) {
            one_line_naming(&e, "cut.toml: ");
        }
    }

    #[test]
    fn timeouts(text in "(-?[0-9]{0,8}(\\.[0-9]{0,4})?(e-?[0-9]{1,3})?|nan|inf|-inf|x| )") {
        match parse_timeout("--timeout", &text) {
            Ok(d) => prop_assert!((1e-3..=1e6).contains(&(d.as_secs_f64() * (1.0 + 1e-12)))),
            Err(e) => one_line_naming(&e, &format!("--timeout='{text}'")),
        }
    }

    #[test]
    fn timeouts_round_trip(s in 1e-3f64..1e6) {
        let d = parse_timeout("TOPOCOMM_TIMEOUT", &s.to_string()).unwrap();
        prop_assert!((d.as_secs_f64() - s).abs() <= s * 1e-9);
    }

    #[test]
    fn binds(text in "(none|core|pu|[0-9]{1,11}|,| |-|x){0,8}") {
        match Bind::from_str(&text) {
            Ok(Bind::List(v)) => {
                let back = v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
                prop_assert_eq!(Bind::from_str(&back).unwrap(), Bind::List(v));
            }
            Ok(_) => {}
            Err(e) => one_line_naming(&e, &format!("--bind '{text}'")),
        }
    }

    #[test]
    fn worker_args(args in prop::collection::vec(
        "(--tests|--sizes|--cache|--llc|--samples|--min-time-ms|--window|--probe|--bogus|latency,bw|hot,cold|warm|8,65536|-1|1e9|nan|18446744073709551616|0|,)", 0..6)) {
        match p2p_spec(&args) {
            Ok(_) => {}
            Err(e) => {
                let e = e.to_string();
                let first = e.lines().next().unwrap_or("");
                // Names one of the options or values it was given.
                prop_assert!(args.iter().any(|a| !a.is_empty() && first.contains(a.as_str())), "{e}");
            }
        }
    }
}

proptest! {
    // File system round trips: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn map_files(lines in prop::collection::vec("(0|1|2|7|99|-1|x| |#|\t){0,6}", 0..6), n in 0usize..6) {
        let m = machine();
        let p = scratch("ranks.map", &lines.join("\n"));
        match read_map(&p, &m, n) {
            Ok(pus) => {
                prop_assert_eq!(pus.len(), n);
                prop_assert!(pus.iter().all(|pu| pu.is_some_and(|pu| m.pu_position(pu).is_some())));
            }
            Err(e) => one_line_naming(&e, &p.display().to_string()),
        }
    }

    /// A rules cache entry of this machine, cut or with bytes replaced:
    /// Ok(Some) with rules that validate, or one line naming the entry.
    #[test]
    fn cache_entries(op in 0u8..5, at: usize, with in "(-1|\"|\\[|\\]|null|\\\\n|x|1e999|\\{|,)") {
        let m = machine();
        let key = Key::of(&m);
        let entry = Entry::new(key.clone(), 2.5, vec!["l3".into()], "[l3]\ndepth = 4\n".into());
        let text = serde_json::to_string_pretty(&entry).unwrap();
        let text = mutate(&text, op, at, &with);
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("transport-props-cache");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(key.file_name());
        std::fs::write(&path, &text).unwrap();
        match autotune::load(&dir, &key, &m) {
            Ok(Some(c)) => {
                for p in c.rules.classes.values() {
                    p.validate().unwrap();
                }
            }
            Ok(None) => prop_assert!(false, "an existing entry read as absent"),
            Err(e) => one_line_naming(&e, &path.display().to_string()),
        }
    }
}
