//! Property tests of mpitune's readers (issue 19): MCA and environment
//! export files (text, mutations, round trip through `render`), MPI_T
//! read-back lines, `--objective`, `--mpi` and Open MPI's pml line.
//! Arbitrary text never panics; errors are one line naming the file, line
//! or value given.

use proptest::prelude::*;
use std::path::PathBuf;
use topocomm_measure::backends::MpiImpl;
use topocomm_mpitune::export::{parse_env_file, parse_mca_file, read_export, render, Entry};
use topocomm_mpitune::objective::Objective;
use topocomm_mpitune::runner::parse_selected_pml;
use topocomm_mpitune::session::parse_mpi;
use topocomm_mpitune::space::Layer;
use topocomm_mpitune::verify::parse_cvars;

#[path = "../../../tests/common/props_support.rs"]
mod support;
use support::one_line_naming;

const WORDS: &[&str] = &[
    "btl_vader_eager_limit",
    "UCX_RNDV_THRESH",
    "MPIR_CVAR_CH4_X",
    "mca_base_env_list",
    "export",
    "export ",
    " ",
    "=",
    "=",
    ";",
    "'",
    "'\\''",
    "#",
    "\n",
    "\n",
    "4096",
    "inf",
    "x-y",
    "\u{e9}",
    "\t",
    "a=b",
    "$",
    "\"",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(WORDS), 0..24).prop_map(|v| v.concat())
}

fn entries() -> impl Strategy<Value = Vec<Entry>> {
    prop::collection::vec(
        (
            "[A-Za-z][A-Za-z0-9_]{0,12}",
            "[A-Za-z0-9_.,:/+ '-]{1,10}",
            prop::collection::vec("[ -~]{0,20}", 0..3),
        ),
        0..6,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(name, value, why)| Entry { name, value, why })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn mca_files_never_panic(text in soup()) {
        if let Err(e) = parse_mca_file("x.conf", &text) {
            one_line_naming(&e, "x.conf:");
        }
    }

    #[test]
    fn env_files_never_panic(text in soup()) {
        if let Err(e) = parse_env_file("x.env", &text) {
            one_line_naming(&e, "x.env:");
        }
    }

    /// What `render` writes for each layer reads back as its entries.
    #[test]
    fn exports_round_trip(es in entries(), header in prop::collection::vec("[ -~]{0,30}", 0..3)) {
        let want: Vec<(String, String)> = es.iter().map(|e| (e.name.clone(), e.value.clone())).collect();
        // Open MPI's MCA file: `name = value` (values trimmed, as Open MPI does).
        let vader: Vec<Entry> = es.iter().map(|e| Entry { value: e.value.trim().to_string(), ..e.clone() })
            .filter(|e| !e.value.is_empty()).collect();
        let got = parse_mca_file("v.conf", &render(Layer::Vader, &header, &vader)).unwrap();
        let want_vader: Vec<(String, String)> = vader.iter().map(|e| (e.name.clone(), e.value.clone())).collect();
        prop_assert_eq!(got, want_vader);
        // MPICH's environment file, with shell quoting.
        let got = parse_env_file("m.env", &render(Layer::MpichUcx, &header, &es)).unwrap();
        prop_assert_eq!(got, want.clone());
        // UCX variables through mca_base_env_list (values without ';').
        let ucx: Vec<Entry> = es.iter().filter(|e| !e.value.contains(';') && e.value.trim() == e.value && !e.value.is_empty()).cloned().collect();
        let got = parse_mca_file("u.conf", &render(Layer::OmpiUcx, &header, &ucx)).unwrap();
        let want_ucx: Vec<(String, String)> = ucx.iter().map(|e| (e.name.clone(), e.value.clone())).collect();
        prop_assert_eq!(got, want_ucx);
    }

    #[test]
    fn cvars_never_panic(text in soup()) {
        let v = parse_cvars(&text);
        for (i, (k, _)) in v.iter().enumerate() {
            prop_assert!(!k.is_empty());
            prop_assert!(v[..i].iter().all(|(kk, _)| kk != k));
        }
    }

    #[test]
    fn objectives(text in "([0-9]{1,4}[KMG]?|-| |x|,|99999999999999999999G){0,5}") {
        match Objective::parse(&text) {
            Ok(o) => {
                prop_assert!(o.min <= o.max);
                prop_assert_eq!(Objective::parse(&o.label()).unwrap(), o);
            }
            Err(e) => assert!(!e.contains('\n'), "{e}"),
        }
    }

    #[test]
    fn mpi_names(text in "[a-z ]{0,10}") {
        match parse_mpi(&text) {
            Ok(m) => prop_assert_eq!(m.name(), text.trim()),
            Err(e) => one_line_naming(&e, &format!("--mpi '{text}'")),
        }
    }

    #[test]
    fn pml_lines(text in "(select: component |ob1|ucx| selected|\n|x| ){0,8}") {
        if let Some(p) = parse_selected_pml(&text) {
            prop_assert!(!p.contains('\n'));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn read_export_never_panics(text in soup(), mpich: bool) {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mpitune-props");
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("tuned.conf");
        std::fs::write(&p, &text).unwrap();
        let which = if mpich { MpiImpl::Mpich } else { MpiImpl::OpenMpi };
        if let Err(e) = read_export(which, &p) {
            one_line_naming(&e, &p.display().to_string());
        }
    }
}
