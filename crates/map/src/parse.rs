//! Readers of communication matrices (docs/formats/comm-matrix.md):
//! - CSV edge lists `src,dst,bytes,msgs` (header line allowed, `#` comments);
//! - TreeMatch `.mat`: a whitespace-separated square matrix of one metric
//!   (taken as bytes; each non-zero entry counts as one message);
//! - Open MPI monitoring `.prof` files (`--mca pml_monitoring_enable 1|2`).
//!
//! Every error names the file, line and column.

use crate::error::MapError;
use crate::matrix::{CommMatrix, Edge};
use std::path::{Path, PathBuf};

/// What was read, with notes for the user (e.g. "symmetrized").
#[derive(Debug)]
pub struct Parsed {
    pub matrix: CommMatrix,
    pub notes: Vec<String>,
}

/// Reads one or several inputs. A directory stands for all its `*.prof`
/// files. `ranks`, when given, is the number of ranks: ids at or above it are
/// rejected, and ranks that never communicate still count.
pub fn read_inputs(inputs: &[PathBuf], ranks: Option<usize>) -> Result<Parsed, MapError> {
    let mut files = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut profs: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| io_err(p, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "prof"))
                .collect();
            if profs.is_empty() {
                return Err(MapError::Io {
                    path: p.display().to_string(),
                    reason: "directory holds no .prof files".into(),
                });
            }
            profs.sort();
            files.extend(profs);
        } else {
            files.push(p.clone());
        }
    }
    if files.is_empty() {
        return Err(MapError::Invalid("no input file given".into()));
    }
    if let Some(r) = ranks.filter(|&r| r > MAX_RANKS) {
        return Err(MapError::Invalid(format!(
            "--ranks {r}: at most {MAX_RANKS} ranks are supported"
        )));
    }
    let kinds: Vec<&str> = files.iter().map(|f| kind_of(f)).collect();
    let mut edges = Vec::new();
    let mut n = ranks.unwrap_or(0);
    for (f, kind) in files.iter().zip(&kinds) {
        let text = std::fs::read_to_string(f).map_err(|e| io_err(f, e))?;
        let shown = f.display().to_string();
        match *kind {
            "csv" => edges.extend(parse_csv(&shown, &text, ranks)?),
            "mat" => {
                if files.len() > 1 {
                    return Err(MapError::Invalid(format!(
                        "{shown}: a .mat file is a whole matrix and cannot be combined with other inputs"
                    )));
                }
                let (size, e) = parse_mat(&shown, &text)?;
                if let Some(r) = ranks {
                    if r != size {
                        return Err(MapError::Invalid(format!(
                            "{shown}: matrix is {size} x {size} but --ranks says {r}"
                        )));
                    }
                }
                n = n.max(size);
                edges.extend(e);
            }
            "prof" => edges.extend(parse_prof(&shown, &text, ranks)?),
            _ => {
                return Err(MapError::Invalid(format!(
                    "{shown}: unknown input format (expected a .csv edge list, a .mat matrix, .prof files or a directory of .prof files)"
                )))
            }
        }
    }
    let matrix = CommMatrix::from_edges(n, edges);
    let mut notes = Vec::new();
    let asym = matrix.asymmetric_pairs();
    if asym > 0 {
        notes.push(format!(
            "the matrix is asymmetric ({asym} of {} ordered pairs differ from their reverse); it is symmetrized (A + A^T) since a pair's cost does not depend on the direction",
            matrix.edges.len()
        ));
    }
    Ok(Parsed { matrix, notes })
}

fn kind_of(p: &Path) -> &'static str {
    match p
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("csv") | Some("txt") => "csv",
        Some("mat") => "mat",
        Some("prof") => "prof",
        _ => "?",
    }
}

fn io_err(p: &Path, e: std::io::Error) -> MapError {
    MapError::Io {
        path: p.display().to_string(),
        reason: match e.kind() {
            std::io::ErrorKind::NotFound => "no such file".into(),
            std::io::ErrorKind::InvalidData => "not UTF-8 text".into(),
            _ => e.to_string(),
        },
    }
}

/// Splits a line into tokens with their 1-based columns.
fn tokens(line: &str, sep: impl Fn(char) -> bool) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        if sep(c) {
            if let Some(s) = start.take() {
                out.push((s, &line[s..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((s, &line[s..]));
    }
    out.into_iter()
        .map(|(s, t)| (line[..s].chars().count() + 1, t))
        .collect()
}

/// Most ranks a communication matrix may name (rank ids 0 to
/// `MAX_RANKS - 1`): the mapper's memory is linear in the rank count (about
/// 200 bytes a rank), so this bounds one run to a few GiB.
pub const MAX_RANKS: usize = 1 << 24;

fn rank_id(
    path: &str,
    line: usize,
    (col, tok): (usize, &str),
    what: &str,
    ranks: Option<usize>,
) -> Result<u32, MapError> {
    let v: u64 = tok.parse().map_err(|_| {
        MapError::syntax(
            path,
            line,
            col,
            format!("{what} '{tok}' is not a rank (a non-negative integer)"),
        )
    })?;
    if v >= MAX_RANKS as u64 {
        return Err(MapError::syntax(
            path,
            line,
            col,
            format!(
                "{what} {v} is above the largest rank id supported, {} (at most {MAX_RANKS} ranks)",
                MAX_RANKS - 1
            ),
        ));
    }
    let v = v as u32;
    if let Some(r) = ranks {
        if v as usize >= r {
            return Err(MapError::syntax(
                path,
                line,
                col,
                format!(
                    "{what} {v} is out of range (ranks are 0..{})",
                    r.saturating_sub(1)
                ),
            ));
        }
    }
    Ok(v)
}

/// One edge from its four located tokens (source, destination, bytes,
/// messages), each named as the format calls it in errors.
fn edge(
    path: &str,
    line: usize,
    [src, dst, bytes, msgs]: [(usize, &str); 4],
    [src_n, dst_n, bytes_n, msgs_n]: [&str; 4],
    ranks: Option<usize>,
) -> Result<Edge, MapError> {
    Ok(Edge {
        src: rank_id(path, line, src, src_n, ranks)?,
        dst: rank_id(path, line, dst, dst_n, ranks)?,
        bytes: amount(path, line, bytes, bytes_n)?,
        msgs: amount(path, line, msgs, msgs_n)?,
    })
}

fn amount(path: &str, line: usize, (col, tok): (usize, &str), what: &str) -> Result<f64, MapError> {
    let v: f64 = tok.parse().map_err(|_| {
        MapError::syntax(path, line, col, format!("{what} '{tok}' is not a number"))
    })?;
    if !v.is_finite() {
        return Err(MapError::syntax(
            path,
            line,
            col,
            format!("{what} is {tok}; expected a finite number"),
        ));
    }
    if v < 0.0 {
        return Err(MapError::syntax(
            path,
            line,
            col,
            format!("{what} {tok} is negative"),
        ));
    }
    Ok(v)
}

/// CSV edge list `src,dst,bytes,msgs`; an optional header line whose first
/// field is not a number; blank lines and `#` comments are skipped.
pub fn parse_csv(path: &str, text: &str, ranks: Option<usize>) -> Result<Vec<Edge>, MapError> {
    let mut edges = Vec::new();
    let mut seen_data = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("");
        if content.trim().is_empty() {
            continue;
        }
        let fields: Vec<(usize, &str)> = split_csv(content);
        if !seen_data && fields[0].1.parse::<f64>().is_err() {
            seen_data = true; // header
            continue;
        }
        seen_data = true;
        if fields.len() != 4 {
            let col = fields.get(4).map_or(content.chars().count() + 1, |f| f.0);
            return Err(MapError::syntax(
                path,
                line,
                col,
                format!("{} fields, expected 4: src,dst,bytes,msgs", fields.len()),
            ));
        }
        let f = [fields[0], fields[1], fields[2], fields[3]];
        edges.push(edge(path, line, f, ["src", "dst", "bytes", "msgs"], ranks)?);
    }
    Ok(edges)
}

fn split_csv(content: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in content
        .char_indices()
        .chain(std::iter::once((content.len(), ',')))
    {
        if c == ',' {
            let field = &content[start..i];
            let lead = field.len() - field.trim_start().len();
            let col = content[..start + lead].chars().count() + 1;
            out.push((col, field.trim()));
            start = i + 1;
        }
    }
    out
}

/// Dense TreeMatch matrix: `n` lines of `n` non-negative numbers.
pub fn parse_mat(path: &str, text: &str) -> Result<(usize, Vec<Edge>), MapError> {
    let rows: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(i, l)| (i + 1, l))
        .collect();
    let n = rows.len();
    if n == 0 {
        return Err(MapError::syntax(path, 1, 1, "empty matrix"));
    }
    let mut edges = Vec::new();
    for (r, (line, l)) in rows.iter().enumerate() {
        let toks = tokens(l, char::is_whitespace);
        if toks.len() != n {
            let col = toks.get(n).map_or(l.chars().count() + 1, |t| t.0);
            return Err(MapError::syntax(
                path,
                *line,
                col,
                format!("row {r} has {} values but the matrix has {n} rows; a .mat matrix must be square", toks.len()),
            ));
        }
        for (c, t) in toks.iter().enumerate() {
            let v = amount(path, *line, *t, "entry")?;
            if v > 0.0 && r != c {
                edges.push(Edge {
                    src: r as u32,
                    dst: c as u32,
                    bytes: v,
                    msgs: 1.0,
                });
            }
        }
    }
    Ok((n, edges))
}

/// Open MPI monitoring output. Counted: `E` (application point-to-point),
/// `I` (point-to-point messages issued by collectives, written when
/// `pml_monitoring_enable=2` separates them) and `S` (one-sided puts/gets
/// sent). Ignored: `C` lines, which re-count at collective level the same
/// bytes the `I`/`E` lines already hold (counting them would count every
/// collective twice), `R` (one-sided received: the sender's `S` line has it),
/// and the per-communicator summaries.
pub fn parse_prof(path: &str, text: &str, ranks: Option<usize>) -> Result<Vec<Edge>, MapError> {
    let mut edges = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        let toks = tokens(l, char::is_whitespace);
        let Some(&(_, kind)) = toks.first() else {
            continue;
        };
        if !matches!(kind, "E" | "I" | "S") {
            continue;
        }
        if toks.len() < 6 || toks[4].1 != "bytes" || toks.get(6).map(|t| t.1) != Some("msgs") {
            return Err(MapError::syntax(
                path,
                line,
                toks.get(3).map_or(1, |t| t.0),
                format!("expected '{kind} <me> <peer> <bytes> bytes <count> msgs sent ...'"),
            ));
        }
        let f = [toks[1], toks[2], toks[3], toks[5]];
        edges.push(edge(
            path,
            line,
            f,
            ["sender", "peer", "bytes", "message count"],
            ranks,
        )?);
    }
    Ok(edges)
}
