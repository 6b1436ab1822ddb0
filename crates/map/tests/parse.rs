//! Parsers: good input, and bad input reported with file, line and column.

use std::path::PathBuf;
use topocomm_map::parse::{parse_csv, parse_mat, parse_prof, read_inputs};
use topocomm_map::{Costs, MapError};

fn pos(e: MapError) -> (usize, usize, String) {
    match e {
        MapError::Syntax {
            line,
            column,
            reason,
            ..
        } => (line, column, reason),
        other => panic!("expected a positioned error, got {other}"),
    }
}

#[test]
fn csv_with_header_comments_and_duplicates() {
    let e = parse_csv(
        "a.csv",
        "src,dst,bytes,msgs\n# x\n0,1,100,2\n\n1, 0 ,50,1\n0,1,1e3,3\n",
        None,
    )
    .unwrap();
    assert_eq!(e.len(), 3);
    let m = topocomm_map::CommMatrix::from_edges(0, e);
    assert_eq!(m.n, 2);
    assert_eq!(m.edges[0].bytes, 1100.0);
    assert_eq!(m.edges[0].msgs, 5.0);
    assert_eq!(m.asymmetric_pairs(), 2);
}

#[test]
fn csv_errors_name_line_and_column() {
    let (l, c, r) = pos(parse_csv("a.csv", "0,1,100,2\n0,1,-5,1\n", None).unwrap_err());
    assert_eq!((l, c), (2, 5), "{r}");
    assert!(r.contains("negative"));
    let (l, c, r) = pos(parse_csv("a.csv", "0,1,NaN,2\n", None).unwrap_err());
    assert_eq!((l, c), (1, 5), "{r}");
    let (l, c, _) = pos(parse_csv("a.csv", "0,1,1\n", None).unwrap_err());
    assert_eq!((l, c), (1, 6));
    let (l, c, r) = pos(parse_csv("a.csv", "0,7,1,1\n", Some(4)).unwrap_err());
    assert_eq!((l, c), (1, 3));
    assert!(r.contains("out of range"), "{r}");
    let e = parse_csv("a.csv", "0,x,1,1\n", None).unwrap_err();
    assert!(e.to_string().starts_with("a.csv:1:3:"), "{e}");
    // A rank id past the supported count says so (not "not a rank").
    let (l, c, r) = pos(parse_csv("a.csv", "0,1099511627776,1,1\n", None).unwrap_err());
    assert_eq!((l, c), (1, 3));
    assert!(
        r.contains("above the largest rank id supported, 16777215"),
        "{r}"
    );
    parse_csv("a.csv", "0,16777215,1,1\n", None).unwrap();
}

#[test]
fn mat_square_and_errors() {
    let (n, e) = parse_mat("m.mat", "0 5 0\n5 0 1\n0 2 0\n").unwrap();
    assert_eq!(n, 3);
    assert_eq!(e.len(), 4);
    let (l, c, r) = pos(parse_mat("m.mat", "0 1\n1 0 3\n").unwrap_err());
    assert_eq!((l, c), (2, 5), "{r}");
    assert!(r.contains("square"));
    let (l, c, _) = pos(parse_mat("m.mat", "0 1\n-1 0\n").unwrap_err());
    assert_eq!((l, c), (2, 1));
    let (l, c, _) = pos(parse_mat("m.mat", "0 nan\n1 0\n").unwrap_err());
    assert_eq!((l, c), (1, 3));
}

#[test]
fn prof_counts_collectives_once() {
    let text = "# POINT TO POINT\n\
        E\t0\t1\t800 bytes\t2 msgs sent\t0,0,1,1\n\
        I\t0\t2\t64 bytes\t1 msgs sent\t0,1\n\
        # OSC\n\
        S\t0\t3\t10 bytes\t1 msgs sent\n\
        R\t0\t3\t10 bytes\t1 msgs sent\n\
        # COLLECTIVES\n\
        C\t0\t2\t64 bytes\t1 msgs sent\n\
        D\tMPI COMM_WORLD\tprocs: 0 1 2 3\n";
    let e = parse_prof("p.0.prof", text, None).unwrap();
    let total: f64 = e.iter().map(|x| x.bytes).sum();
    assert_eq!(total, 874.0, "{e:?}");
    let (l, c, _) =
        pos(parse_prof("p.prof", "E\t0\t1\t-8 bytes\t2 msgs sent\n", None).unwrap_err());
    assert_eq!((l, c), (1, 7));
    let (l, _, r) = pos(parse_prof("p.prof", "E\t0\t1\t8 B\n", None).unwrap_err());
    assert_eq!(l, 1, "{r}");
}

#[test]
fn read_inputs_reports_asymmetry_and_unknown_formats() {
    let dir = std::env::temp_dir().join(format!("tc-map-parse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("x.csv");
    std::fs::write(&f, "0,1,10,1\n").unwrap();
    let p = read_inputs(std::slice::from_ref(&f), Some(4)).unwrap();
    assert_eq!(p.matrix.n, 4);
    assert!(p.notes.iter().any(|n| n.contains("symmetrized")));
    let g = dir.join("x.weird");
    std::fs::write(&g, "0").unwrap();
    assert!(read_inputs(&[g], None)
        .unwrap_err()
        .to_string()
        .contains("unknown input format"));
    assert!(read_inputs(&[PathBuf::from("/nonexistent/a.csv")], None)
        .unwrap_err()
        .to_string()
        .contains("no such file"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn costs_file() {
    let c = Costs::from_json(
        "c.json",
        r#"{"classes":{"l3":{"latency_us":0.5,"bandwidth_gbs":20}}}"#,
    )
    .unwrap();
    assert_eq!(c.get("l3").latency_us, 0.5);
    assert_eq!(
        c.get("network"),
        topocomm_map::Costs::defaults().get("network")
    );
    assert!(Costs::from_json(
        "c.json",
        r#"{"classes":{"l3":{"latency_us":0.5,"bandwidth_gbs":0}}}"#
    )
    .is_err());
    let e = Costs::from_json("c.json", "{\n \"class\": 1}").unwrap_err();
    assert!(e.to_string().starts_with("c.json:2:"), "{e}");
}
