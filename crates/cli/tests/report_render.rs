//! The report as people see it: `topocomm report --from` redraws the page
//! of a real run (tests/data/report-2pu.json, written by `topocomm report`
//! on the 2-core dev VM), and headless Chromium renders it at 800 and 1400
//! px: no horizontal overflow, every chart legend inside its chart, no
//! console errors. Screenshots are kept in target/report-render/ (CI
//! artifacts, docs/testing.md). Skipped with a notice without Chromium.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    topocomm_topo::testdata::repo_root()
}

/// Draws the saved report into `dir` and returns the page.
fn draw(dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_topocomm"))
        .arg("report")
        .arg("--from")
        .arg(root().join("tests/data/report-2pu.json"))
        .arg("--out")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(dir.join("index.html")).unwrap()
}

fn out_dir() -> PathBuf {
    let d = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
        .join("report-render");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn page_from_json_has_the_verdict_first_and_the_header() {
    let dir = std::env::temp_dir().join(format!("tc-render-{}", std::process::id()));
    let page = draw(&dir);
    // The verdict is the first section, with its figure and verdict tables.
    let first = page.find("<section id=").unwrap();
    assert!(page[first..].starts_with("<section id=\"verdict\">"));
    for h in [
        "<th>Open MPI % of limit</th>",
        "<th>what to change</th>",
        "<th>files to use</th>",
        // This run's Open MPI streamed at 7% of the copy limit at 1 MiB.
        "tune it: <code>topocomm tune --mpi openmpi --out tuned.conf</code>",
    ] {
        assert!(page.contains(h), "{h} missing");
    }
    for fact in [
        "date (UTC)",
        "host",
        "CPU",
        "kernel",
        "Open MPI",
        "MPICH",
        "topocomm",
        "report runtime",
    ] {
        assert!(
            page.contains(&format!("<tr><th>{fact}</th>")),
            "header fact {fact} missing"
        );
    }
    // CI bands on the bandwidth charts; no heatmap for 2 PUs.
    assert!(page.contains("<polygon class=\"band\""));
    assert!(page.contains("Heatmaps are drawn from 4 PUs on"));
    // Drawing again gives the same page, and the JSON is kept as it was.
    let dir2 = dir.join("again");
    assert_eq!(draw(&dir2), page);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn from_a_file_that_is_not_a_report_is_one_line() {
    let dir = std::env::temp_dir().join(format!("tc-render-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("x.json");
    std::fs::write(&f, "{\"schema\": \"other\"}").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_topocomm"))
        .args(["report", "--out"])
        .arg(dir.join("o"))
        .arg("--from")
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("x.json") && err.contains("schema topocomm.report/1"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Installed early in <head>: records errors and console.error calls.
const PROBE_HEAD: &str = "<script>window.__errs=[];\
addEventListener('error',function(e){__errs.push(String(e.message||(e.target&&e.target.outerHTML)))},true);\
(function(){var o=console.error;console.error=function(){__errs.push([].join.call(arguments,' '));o.apply(console,arguments)}})();</script>";

/// At the end of <body>: measures the page and writes the result as JSON
/// into <pre id="probe">.
const PROBE_TAIL: &str = "<script>(function(){var W=innerWidth,d=document.documentElement,wide=[],bad=[];\
document.querySelectorAll('body *').forEach(function(e){var r=e.getBoundingClientRect();\
if(r.right>W+1&&!e.closest('.svgbox,.tbl'))wide.push(e.tagName+'.'+e.className+' '+Math.round(r.right))});\
var lg=document.querySelectorAll('svg g.legend');lg.forEach(function(g){var s=g.ownerSVGElement.getBoundingClientRect(),r=g.getBoundingClientRect();\
if(r.left<s.left-1||r.right>s.right+1||r.top<s.top-1||r.bottom>s.bottom+1)bad.push(g.textContent.slice(0,60)+' '+Math.round(r.right)+'>'+Math.round(s.right))});\
var p=document.createElement('pre');p.id='probe';p.textContent=JSON.stringify({width:W,scroll:d.scrollWidth,wide:wide.slice(0,5),legends:lg.length,clipped:bad,errors:__errs});\
document.body.appendChild(p)})()</script>";

fn chromium() -> Option<String> {
    let names = ["chromium", "chromium-browser", "google-chrome"];
    let path = std::env::var_os("PATH")?;
    names
        .into_iter()
        .map(String::from)
        .find(|n| std::env::split_paths(&path).any(|d| d.join(n).is_file()))
}

/// Runs Chromium headless at `width` px on `url` with `args`; stdout.
fn headless(bin: &str, width: u32, args: &[String], url: &str, profile: &Path) -> String {
    let mut child = Command::new(bin)
        .args([
            "--headless=new",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size={width},2000"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).ok();
        s
    });
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("{bin} did not finish within 90 s at {width} px");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap()
}

#[test]
fn chromium_renders_without_overflow_clipped_legends_or_errors() {
    let Some(bin) = chromium() else {
        eprintln!(
            "notice: chromium not found (apt-get install chromium); skipping the render test"
        );
        return;
    };
    let out = out_dir();
    let page = draw(&out.join("page"));
    let profile = std::env::temp_dir().join(format!("tc-chromium-{}", std::process::id()));
    for width in [800u32, 1400] {
        let probe = page
            .replacen("<head>", &format!("<head>{PROBE_HEAD}"), 1)
            .replacen("</body>", &format!("{PROBE_TAIL}</body>"), 1);
        let probe_file = out.join(format!("probe-{width}.html"));
        std::fs::write(&probe_file, probe).unwrap();
        let dom = headless(
            &bin,
            width,
            &["--dump-dom".into()],
            &format!("file://{}", probe_file.display()),
            &profile,
        );
        let start = dom
            .find("<pre id=\"probe\">")
            .expect("probe result in the DOM")
            + 16;
        let end = start + dom[start..].find("</pre>").unwrap();
        let text = dom[start..end]
            .replace("&gt;", ">")
            .replace("&lt;", "<")
            .replace("&amp;", "&");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        eprintln!("{width} px: {v}");
        assert_eq!(v["width"].as_u64(), Some(width as u64), "{v}");
        assert!(
            v["scroll"].as_u64() <= v["width"].as_u64(),
            "horizontal overflow at {width} px: {v}"
        );
        assert_eq!(
            v["wide"].as_array().unwrap().len(),
            0,
            "wider than {width} px: {v}"
        );
        assert!(
            v["legends"].as_u64() >= Some(1),
            "no chart legend found: {v}"
        );
        assert_eq!(
            v["clipped"].as_array().unwrap().len(),
            0,
            "clipped legend at {width} px: {v}"
        );
        assert_eq!(
            v["errors"].as_array().unwrap().len(),
            0,
            "console errors at {width} px: {v}"
        );

        let shot = out.join(format!("report-{width}.png"));
        let _ = std::fs::remove_file(&shot);
        headless(
            &bin,
            width,
            &[format!("--screenshot={}", shot.display())],
            &format!("file://{}", out.join("page/index.html").display()),
            &profile,
        );
        let png = std::fs::read(&shot).unwrap_or_default();
        assert!(
            png.starts_with(b"\x89PNG"),
            "no screenshot at {}",
            shot.display()
        );
    }
    let _ = std::fs::remove_dir_all(&profile);
}
