//! Property tests of measure's parsers (issue 19): sample lines, test and
//! size lists (p2p and characterization syntaxes), peers, cache states and
//! operations, and the `bench matrix --resume` file. Arbitrary text never
//! panics, errors are one line naming what was given, written forms parse
//! back, mutated valid files give Ok or an error.

use proptest::prelude::*;
use std::path::PathBuf;
use topocomm_measure::backends::parse_peers;
use topocomm_measure::cache::{Op, State};
use topocomm_measure::matrix::{Metric, PairResult};
use topocomm_measure::matrix_report::{class_stats, load_resume, MatrixParams, MatrixReport};
use topocomm_measure::meta::RunMeta;
use topocomm_measure::p2p::{parse_size, parse_sizes, parse_tests, size_label, Test};
use topocomm_measure::timer::TimerInfo;
use topocomm_measure::{charact, SampleLine};
use topocomm_topo::{load, TopologySpec};

#[path = "../../../tests/common/props_support.rs"]
mod support;
use support::{mutate, one_line_naming};

const WORDS: &[&str] = &[
    "0",
    "1",
    "8",
    "64",
    "4",
    "K",
    "k",
    "M",
    "G",
    "KiB",
    "MiB",
    "B",
    "iB",
    "b",
    "x",
    " ",
    ",",
    ",",
    "-",
    "latency",
    "bw",
    "bibw",
    "msgrate",
    "openmpi",
    "mpich",
    "none",
    "99999999999999999999",
    "18446744073709551615",
    "1073741824",
    "\u{e9}",
    ".",
    "e3",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), 0..12).prop_map(|v| v.concat())
}

fn sample_line() -> impl Strategy<Value = SampleLine> {
    (
        "[a-z]{1,8}",
        prop::sample::select(vec!["latency", "bw", "bibw", "msgrate"]),
        any::<u64>(),
        prop::sample::select(vec!["hot", "cold"]),
        // Binary fractions: serde_json (without `float_roundtrip`) may read
        // a printed f64 back one ulp off, which is no fault of the parser.
        prop::collection::vec((0u32..1 << 26).prop_map(|v| f64::from(v) / 64.0), 1..6),
        any::<bool>(),
    )
        .prop_map(|(i, t, size, cache, samples, probe)| SampleLine {
            implementation: i,
            test: t.into(),
            size,
            cache: cache.into(),
            unit: "us".into(),
            probe_us: probe.then(|| samples.clone()),
            samples,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sample_lines_never_panic(text in "\\PC{0,80}") {
        if let Err(e) = SampleLine::parse_all(&text, "worker on 0,1") {
            one_line_naming(&e.to_string(), "worker on 0,1: line ");
        }
    }

    /// Lines written by serde read back equal, among noise lines.
    #[test]
    fn sample_lines_round_trip(lines in prop::collection::vec(sample_line(), 0..6)) {
        let mut text = String::from("banner\n");
        for l in &lines {
            text.push_str(&serde_json::to_string(l).unwrap());
            text.push_str("\nwarning: noise\n");
        }
        prop_assert_eq!(SampleLine::parse_all(&text, "t").unwrap(), lines);
    }

    /// A valid sample line cut, with a few bytes replaced, or a comma doubled.
    #[test]
    fn sample_lines_mutated(l in sample_line(), op in 0u8..5, at: usize, with in "(-1|\\[\\]|null|\"|\\}|1e999|,)") {
        let text = mutate(&serde_json::to_string(&l).unwrap(), op, at, &with);
        if let Err(e) = SampleLine::parse_all(&text, "mpich job") {
            one_line_naming(&e.to_string(), "mpich job: line 1");
        }
    }

    #[test]
    fn tests_lists(text in soup()) {
        match parse_tests(&text) {
            Ok(v) => prop_assert!(!v.is_empty()),
            Err(e) => assert!(!e.to_string().contains('\n')),
        }
    }

    #[test]
    fn tests_round_trip(v in prop::sample::subsequence(Test::ALL.to_vec(), 1..=4)) {
        let text = v.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",");
        prop_assert_eq!(parse_tests(&text).unwrap(), v);
    }

    #[test]
    fn sizes_never_panic(text in soup()) {
        if let Err(e) = parse_size(&text) {
            one_line_naming(&e.to_string(), &format!("'{text}'"));
        }
        match parse_sizes(&text) {
            Ok(v) => prop_assert!(v.iter().all(|&s| (1..=1 << 30).contains(&s))),
            Err(e) => assert!(!e.to_string().contains('\n')),
        }
        if let Err(e) = charact::parse_size(&text) {
            one_line_naming(&e.to_string(), &format!("'{text}'"));
        }
        if let Ok(v) = charact::parse_sizes(&text) {
            prop_assert!(v.iter().all(|&s| s > 0));
        }
    }

    /// Sizes as `size_label` prints them parse back to the same numbers.
    #[test]
    fn sizes_round_trip(v in prop::collection::vec(1u64..=1 << 30, 1..10)) {
        let text = v.iter().map(|&s| size_label(s)).collect::<Vec<_>>().join(",");
        prop_assert_eq!(parse_sizes(&text).unwrap(), v.clone());
        let text = v.iter().map(|&s| charact::size_label(s)).collect::<Vec<_>>().join(",");
        if let Ok(back) = charact::parse_sizes(&text) {
            // The table label rounds (1.5K); whatever it gives back is close.
            for (a, b) in back.iter().zip(&v) {
                prop_assert!((*a as f64 - *b as f64).abs() <= *b as f64 * 0.05, "{a} vs {b} from {text}");
            }
        }
    }

    #[test]
    fn exact_sizes_round_trip(n in 1u64..1 << 20, unit in prop::sample::select(vec![("", 1u64), ("K", 1 << 10), ("KiB", 1 << 10), ("M", 1 << 20), ("MB", 1 << 20), ("G", 1 << 30)])) {
        let text = format!("{n}{}", unit.0);
        let want = n.checked_mul(unit.1).unwrap();
        prop_assert_eq!(charact::parse_size(&text).unwrap(), want);
        prop_assert_eq!(parse_size(&text).unwrap(), want);
    }

    #[test]
    fn peers_states_ops(text in soup()) {
        match parse_peers(&text) {
            Ok(v) => prop_assert!(v.len() <= 2),
            Err(e) => assert!(!e.to_string().contains('\n')),
        }
        if let Err(e) = text.parse::<State>() {
            one_line_naming(&e.to_string(), &format!("'{text}'"));
        }
        match text.parse::<Op>() {
            Ok(op) => prop_assert_eq!(op.to_string(), text.trim()),
            Err(e) => one_line_naming(&e.to_string(), &format!("'{text}'")),
        }
        if let Err(e) = text.parse::<Test>() {
            one_line_naming(&e.to_string(), &format!("'{text}'"));
        }
    }
}

fn resume_file() -> (topocomm_topo::Machine, MatrixParams, String) {
    let m = load(&TopologySpec::Synthetic("pack:2 core:2 pu:2".into())).unwrap();
    let params = MatrixParams {
        selection: "all".into(),
        size: 64,
        samples: 2,
        rounds: 1,
        quick: true,
        transport: false,
    };
    let pair = |p, q, v: f64| PairResult {
        p,
        q,
        class: "l3".into(),
        metrics: vec![Metric::new("c2c_latency", "ns", vec![v, v]).unwrap()],
    };
    let pairs = vec![pair(0, 1, 100.0), pair(0, 2, 300.0)];
    let r = MatrixReport {
        schema: "topocomm.bench-matrix/1".into(),
        meta: RunMeta::new(
            &m,
            TimerInfo {
                resolution_ns: 1.0,
                overhead_ns: 1.0,
            },
        ),
        params: params.clone(),
        pus: vec![0, 1, 2],
        planned: vec![(0, 1), (0, 2), (1, 2)],
        classes: class_stats(&pairs),
        pairs,
        omitted: Vec::new(),
        complete: false,
    };
    let text = serde_json::to_string_pretty(&r).unwrap();
    (m, params, text)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `bench matrix --resume FILE`: a valid partial file cut, with a few
    /// bytes replaced or a comma doubled loads or fails naming the file;
    /// what loads gives class statistics and costs without a panic.
    #[test]
    fn resume_file_mutated(op in 0u8..5, at: usize, with in "(-1|\\[\\]|null|\"|\\}|1e999|,|0|\"x\")") {
        let (m, params, text) = resume_file();
        let text = mutate(&text, op, at, &with);
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("measure-props");
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("matrix.json");
        std::fs::write(&p, &text).unwrap();
        match load_resume(&p, &m, &params) {
            Ok(r) => {
                let _ = class_stats(&r.pairs);
                let _ = r.costs();
            }
            Err(e) => one_line_naming(&e.to_string(), &p.display().to_string()),
        }
    }
}
