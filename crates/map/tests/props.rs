//! Property tests of map's readers (issue 19): communication matrices (CSV,
//! .mat, .prof), perm files, costs JSON and the option names. Arbitrary
//! text never panics, errors are one line naming the file (and line), what
//! the writers produce parses back, mutated valid files give Ok or an error.

use proptest::prelude::*;
use std::path::PathBuf;
use topocomm_map::output::{parse_perm, perm, Format};
use topocomm_map::parse::{parse_csv, parse_mat, parse_prof, read_inputs};
use topocomm_map::{CommMatrix, Costs, Metric, Slot, Strategy as MapStrategy};

#[path = "../../../tests/common/props_support.rs"]
mod support;
use support::{mutate, one_line_naming};

/// Lines made of the tokens the formats use, so that cases get past the
/// first field often.
fn line_soup() -> impl Strategy<Value = String> {
    // A fixed vocabulary: regex strategies cost ~10 ms a case in debug builds.
    const WORDS: &[&str] = &[
        "0",
        "1",
        "2",
        "3",
        "7",
        "12",
        "-1",
        "1e3",
        "nan",
        "inf",
        ",",
        ",",
        "#",
        " ",
        " ",
        "\t",
        "src",
        "E",
        "I",
        "S",
        "C",
        "bytes",
        "msgs",
        "sent",
        "\n",
        "\n",
        "\r\n",
        "99999999999",
        "16777216",
        "0.5",
        "x",
        "\u{e9}",
    ];
    prop::collection::vec(prop::sample::select(WORDS), 0..40).prop_map(|v| v.concat())
}

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("map-props");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const CSV: &str = "src,dst,bytes,msgs\n0,1,1024,4\n1,0,2048,8\n# comment\n2,3,4096,1\n";
const MAT: &str = "0 10 0\n10 0 5\n0 5 0\n";
const PROF: &str = "# POINT TO POINT\nE\t0\t1\t4096 bytes\t4 msgs sent\t0,0,1\nI\t1\t0\t512 bytes\t2 msgs sent\t0\nC\t0\t1\t9 bytes\t1 msgs sent\n";
const COSTS: &str = r#"{"schema": "topocomm.costs/1", "classes": {"l3": {"latency_us": 0.3, "bandwidth_gbs": 15}, "numa": {"latency_us": 0.5, "bandwidth_gbs": 10}}, "size": 65536}"#;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn csv_never_panics(text in line_soup(), ranks in prop::option::of(0usize..8)) {
        if let Err(e) = parse_csv("m.csv", &text, ranks) {
            one_line_naming(&e.to_string(), "m.csv:");
        }
    }

    #[test]
    fn mat_never_panics(text in line_soup()) {
        if let Err(e) = parse_mat("m.mat", &text) {
            one_line_naming(&e.to_string(), "m.mat:");
        }
    }

    #[test]
    fn prof_never_panics(text in line_soup(), ranks in prop::option::of(0usize..8)) {
        if let Err(e) = parse_prof("m.prof", &text, ranks) {
            one_line_naming(&e.to_string(), "m.prof:");
        }
    }

    #[test]
    fn perm_never_panics(text in line_soup()) {
        if let Err(e) = parse_perm("p.txt", &text) {
            one_line_naming(&e.to_string(), "p.txt:");
        }
    }

    #[test]
    fn costs_never_panic(text in "\\PC{0,60}") {
        if let Err(e) = Costs::from_json("c.json", &text) {
            one_line_naming(&e.to_string(), "c.json");
        }
    }

    /// Class names and values from the file, with JSON escapes, stay on one
    /// line in errors (parse and the check against the target's classes).
    #[test]
    fn costs_class_names(name in "[a-z0-9\n\t\"\\\\]{1,8}", lat in "(-1|0\\.5|\"x\"|null)", unknown: bool) {
        let mut class = serde_json::json!({ "latency_us": serde_json::from_str::<serde_json::Value>(&lat).unwrap(), "bandwidth_gbs": 10 });
        if unknown {
            class[name.as_str()] = serde_json::json!(1);
        }
        let doc = serde_json::json!({ "classes": { name.clone(): class } });
        match Costs::from_json("k.json", &doc.to_string()) {
            Ok(c) => {
                if let Err(e) = c.check_classes(&["l3".to_string()]) {
                    one_line_naming(&e.to_string(), "k.json");
                }
            }
            Err(e) => one_line_naming(&e.to_string(), "k.json"),
        }
    }

    #[test]
    fn valid_files_mutated(op in 0u8..5, at: usize, with in "(,|-1|x|\n|#|nan| |9{12}|\"|\\}|null)") {
        for (name, good) in [("m.csv", CSV), ("m.mat", MAT), ("m.prof", PROF), ("c.json", COSTS), ("p.txt", "0 1\n0 3\n")] {
            let text = mutate(good, op, at, &with);
            let r = match name {
                "m.csv" => parse_csv(name, &text, None).map(drop),
                "m.mat" => parse_mat(name, &text).map(drop),
                "m.prof" => parse_prof(name, &text, Some(4)).map(drop),
                "c.json" => Costs::from_json(name, &text).map(drop),
                _ => parse_perm(name, &text).map(drop),
            };
            if let Err(e) = r {
                one_line_naming(&e.to_string(), name);
            }
        }
    }

    /// Edges written as CSV read back as the same edges.
    #[test]
    fn csv_round_trips(edges in prop::collection::vec((0u32..1000, 0u32..1000, 0u32..1_000_000, 0u32..1000), 0..20), header: bool) {
        let mut text = if header { "src,dst,bytes,msgs\n".to_string() } else { String::new() };
        for (s, d, b, m) in &edges {
            text.push_str(&format!("{s}, {d},{b},{m}\n"));
        }
        let back = parse_csv("m.csv", &text, None).unwrap();
        prop_assert_eq!(back.len(), edges.len());
        for (e, (s, d, b, m)) in back.iter().zip(&edges) {
            prop_assert_eq!((e.src, e.dst, e.bytes, e.msgs), (*s, *d, f64::from(*b), f64::from(*m)));
        }
    }

    /// A square matrix written as .mat reads back as its off-diagonal non-zeros.
    #[test]
    fn mat_round_trips(n in 1usize..8, vals in prop::collection::vec(0u32..5, 64)) {
        let v = |r: usize, c: usize| vals[r * 8 + c];
        let text: String = (0..n)
            .map(|r| (0..n).map(|c| v(r, c).to_string()).collect::<Vec<_>>().join(" ") + "\n")
            .collect();
        let (size, edges) = parse_mat("m.mat", &text).unwrap();
        prop_assert_eq!(size, n);
        let want: Vec<(u32, u32, f64)> = (0..n)
            .flat_map(|r| (0..n).map(move |c| (r, c)))
            .filter(|&(r, c)| r != c && v(r, c) > 0)
            .map(|(r, c)| (r as u32, c as u32, f64::from(v(r, c))))
            .collect();
        let got: Vec<(u32, u32, f64)> = edges.iter().map(|e| (e.src, e.dst, e.bytes)).collect();
        prop_assert_eq!(got, want);
    }

    /// What `perm` writes, `parse_perm` reads back.
    #[test]
    fn perm_round_trips(slots in prop::collection::vec((0u32..64, any::<u32>()), 0..40)) {
        let slots: Vec<Slot> = slots.into_iter().map(|(node, pu)| Slot { node, pu }).collect();
        prop_assert_eq!(parse_perm("p.txt", &perm(&slots)).unwrap(), slots);
    }

    #[test]
    fn option_names(text in "[a-z-]{0,16}") {
        match text.parse::<MapStrategy>() {
            Ok(s) => prop_assert!(s.name() == text || text == "rr"),
            Err(e) => one_line_naming(&e, &format!("'{text}'")),
        }
        if let Err(e) = text.parse::<Metric>() {
            one_line_naming(&e, &format!("'{text}'"));
        }
        if let Err(e) = text.parse::<Format>() {
            one_line_naming(&e, &format!("'{text}'"));
        }
    }
}

proptest! {
    // Each case writes and reads files.
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `read_inputs` over any text under each extension: a matrix with an
    /// in-range rank count, or an error naming the file.
    #[test]
    fn read_inputs_never_panics(text in line_soup(), ext in "(csv|mat|prof|txt|dat)", ranks in prop::option::of(1usize..6)) {
        let p = scratch(&format!("in.{ext}"), &text);
        match read_inputs(std::slice::from_ref(&p), ranks) {
            Ok(parsed) => {
                let m: &CommMatrix = &parsed.matrix;
                prop_assert!(m.edges.iter().all(|e| (e.src as usize) < m.n && (e.dst as usize) < m.n));
                if let Some(r) = ranks {
                    prop_assert_eq!(m.n, r);
                }
            }
            Err(e) => one_line_naming(&e.to_string(), &p.display().to_string()),
        }
    }
}
