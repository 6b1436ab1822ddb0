//! `make install` (docs/install.md): installs the release build into a
//! staging DESTDIR, moves the installed tree elsewhere (relocation), then
//! uses only the installed files: the binary, its man pages and completions,
//! pkg-config and CMake builds of the C example, and the per-MPI libraries
//! found relative to the installed binary. Then `make uninstall` of a
//! second install removes exactly what it wrote.
//!
//! Needs the release build (`make build`; `make test` runs it before the
//! tests): skipped with a notice when target/release lacks it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{have, mpi_impls, output_isolated};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn run(cmd: &mut Command) -> Output {
    let out = output_isolated(cmd).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `make -C <root> <target> PREFIX=/usr/local DESTDIR=<dest>`, outside any
/// outer make's variables.
fn make(target: &str, dest: &Path) -> Output {
    run(Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(root())
        .arg(target)
        .arg("PREFIX=/usr/local")
        .arg(format!("DESTDIR={}", dest.display()))
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL"))
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn install_relocate_use_and_uninstall() {
    let rel = root().join("target/release");
    if ["topocomm", "topocomm-worker", "libtopocomm.so"]
        .iter()
        .any(|f| !rel.join(f).is_file())
    {
        eprintln!(
            "notice: the release build is missing (run `make build`), skipping the install test"
        );
        return;
    }
    let tmp = std::env::temp_dir().join(format!("topocomm-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();

    // Install into a staging folder, then move the prefix: nothing may
    // depend on /usr/local or on the staging path.
    let stage = tmp.join("stage");
    make("install-files", &stage);
    let prefix = tmp.join("moved");
    std::fs::rename(stage.join("usr/local"), &prefix).unwrap();
    let work = tmp.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let bin = prefix.join("bin/topocomm");

    // The binary.
    let out = run(Command::new(&bin).arg("--version"));
    assert_eq!(
        text(&out).trim(),
        format!("topocomm {}", env!("CARGO_PKG_VERSION"))
    );
    let out = run(Command::new(&bin)
        .args(["topo", "--topology", "synthetic:pack:2 core:2 pu:2"])
        .env("TOPOCOMM_AUTOTUNE", "0")
        .current_dir(&work));
    assert!(text(&out).contains("8 PUs"), "{}", text(&out));

    check_man(&prefix, &bin);
    check_completions(&prefix);
    check_c_builds(&prefix, &work);
    check_mpi_libraries(&prefix, &work);

    // Uninstall removes what install wrote, and only that.
    let stage2 = tmp.join("stage2");
    let theirs = stage2.join("usr/local/share/man/man1/other.1");
    std::fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    std::fs::write(&theirs, ".TH other 1\n").unwrap();
    make("install-files", &stage2);
    let out = make("uninstall", &stage2);
    assert!(text(&out).contains("uninstall: removed"), "{}", text(&out));
    assert_eq!(
        files_under(&stage2),
        vec![PathBuf::from("usr/local/share/man/man1/other.1")]
    );
    assert!(!stage2.join("usr/local/lib").exists());
    let _ = std::fs::remove_dir_all(&tmp);
}

/// One page per visible command, nested ones included, rendered by man.
fn check_man(prefix: &Path, bin: &Path) {
    let man1 = prefix.join("share/man/man1");
    for page in [
        "topocomm.1",
        "topocomm-map.1",
        "topocomm-bench-p2p.1",
        "topocomm-completions.1",
    ] {
        let text =
            std::fs::read_to_string(man1.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        let name = page.trim_end_matches(".1");
        assert!(text.contains(&format!(".TH {name} 1")), "{page}: {text}");
    }
    // No page for the hidden commands.
    assert!(!man1.join("topocomm-bench-worker.1").exists());
    assert!(!man1.join("topocomm-manpages.1").exists());
    // The subcommands of the page list match `topocomm --help`.
    let help = text(&run(Command::new(bin).arg("--help")));
    for page in std::fs::read_dir(&man1).unwrap() {
        let name = page.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(sub) = name
            .strip_prefix("topocomm-")
            .and_then(|n| n.strip_suffix(".1"))
        {
            let first = sub.split('-').next().unwrap();
            assert!(
                help.contains(&format!("  {first} ")),
                "{name}: '{first}' not in --help"
            );
        }
    }
    if have("man") {
        let out = run(Command::new("man")
            .arg("topocomm-map")
            .env("MANPATH", prefix.join("share/man"))
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("MANWIDTH", "100"));
        let t = text(&out);
        assert!(t.contains("topocomm-map") && t.contains("OPTIONS"), "{t}");
    } else if have("groff") {
        let out = run(Command::new("groff")
            .args(["-man", "-Tutf8"])
            .arg(man1.join("topocomm-map.1")));
        assert!(text(&out).contains("topocomm-map"), "{}", text(&out));
    } else {
        eprintln!("notice: neither man nor groff installed, man pages not rendered");
    }
}

/// bash completes `topocomm <TAB>` with the commands; zsh and fish files
/// are there and name the command.
fn check_completions(prefix: &Path) {
    let share = prefix.join("share");
    let bash = share.join("bash-completion/completions/topocomm");
    let script = format!(
        "source '{}'; COMP_WORDS=(topocomm ''); COMP_CWORD=1; COMP_LINE='topocomm '; COMP_POINT=9; \
         _topocomm topocomm '' topocomm; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        bash.display()
    );
    let out = run(Command::new("bash").arg("-c").arg(&script));
    let words: Vec<String> = text(&out).lines().map(str::to_string).collect();
    for w in ["topo", "map", "trace", "accel", "bench", "completions"] {
        assert!(
            words.iter().any(|x| x == w),
            "'{w}' not completed: {words:?}"
        );
    }
    assert!(
        !words.iter().any(|x| x == "manpages" || x == "bench-worker"),
        "{words:?}"
    );
    let zsh = std::fs::read_to_string(share.join("zsh/site-functions/_topocomm")).unwrap();
    assert!(
        zsh.starts_with("#compdef topocomm"),
        "{}",
        &zsh[..80.min(zsh.len())]
    );
    let fish =
        std::fs::read_to_string(share.join("fish/vendor_completions.d/topocomm.fish")).unwrap();
    assert!(fish.contains("complete -c topocomm"));
}

/// The C example built with `pkg-config` and with CMake's
/// `find_package(topocomm)`, both run against the installed library.
fn check_c_builds(prefix: &Path, work: &Path) {
    let pc_path = prefix.join("lib/pkgconfig");
    let flags = run(Command::new("pkg-config")
        .args(["--cflags", "--libs", "topocomm"])
        .env("PKG_CONFIG_PATH", &pc_path));
    let flags = String::from_utf8_lossy(&flags.stdout).trim().to_string();
    assert!(
        flags.contains(&format!("-I{}", pc_path.join("../../include").display())),
        "{flags}"
    );
    let example = prefix.join("share/doc/topocomm/examples/c/topo_classes.c");
    let exe = work.join("topo_classes_pc");
    run(Command::new("sh").arg("-c").arg(format!(
        "cc -Wall -Wextra -Werror -o '{}' '{}' {flags}",
        exe.display(),
        example.display()
    )));
    let expect_lib = prefix.join("lib/libtopocomm.so").canonicalize().unwrap();
    let mut exes = vec![exe];
    if have("cmake") {
        exes.push(cmake_build(prefix, work));
    } else {
        eprintln!(
            "notice: cmake not found (scripts/setup.sh installs it), skipping the CMake example"
        );
    }
    for exe in exes {
        let out = run(Command::new(&exe)
            .args(["synthetic:pack:2 core:2 pu:2", "0", "1", "0", "2"])
            .env_remove("LD_LIBRARY_PATH"));
        let t = text(&out);
        assert!(
            t.contains(&format!("topocomm {}, 8 PUs", env!("CARGO_PKG_VERSION"))),
            "{t}"
        );
        assert!(t.contains("0,1 smt\n") && t.contains("0,2 "), "{t}");
        // It runs the installed libtopocomm, not the checkout's.
        let (ldd, used) = resolved_by_ldd(&exe, "libtopocomm.so");
        assert_eq!(
            used.as_deref(),
            Some(expect_lib.as_path()),
            "{exe:?}: {ldd}"
        );
    }
}

/// `ldd FILE` (without LD_LIBRARY_PATH) and the canonical path it resolves
/// the library named `lib` (e.g. `libtopocomm.so`) to, if any.
fn resolved_by_ldd(file: &Path, lib: &str) -> (String, Option<PathBuf>) {
    let ldd = text(&run(Command::new("ldd")
        .arg(file)
        .env_remove("LD_LIBRARY_PATH")));
    let used = ldd
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{lib} ")))
        .and_then(|l| l.split("=>").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|p| Path::new(p).canonicalize().ok());
    (ldd, used)
}

fn cmake_build(prefix: &Path, work: &Path) -> PathBuf {
    let src = prefix.join("share/doc/topocomm/examples/cmake");
    let build = work.join("cmake-build");
    let out = run(Command::new("cmake")
        .arg("-S")
        .arg(&src)
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())));
    assert!(text(&out).contains("topocomm 0.1"), "{}", text(&out));
    run(Command::new("cmake").arg("--build").arg(&build));
    build.join("topo_classes")
}

/// `topocomm accel` run from the installed binary, in a folder without
/// mpi/build and without $TOPOCOMM_MPI_BUILD: it preloads the installed
/// per-MPI library, which finds the installed libtopocomm beside it.
fn check_mpi_libraries(prefix: &Path, work: &Path) {
    let impls = mpi_impls();
    if !impls.contains(&"openmpi") {
        return;
    }
    let dir = prefix.join("lib/topocomm/openmpi");
    let accel = dir.join("libtopocomm-accel.so");
    if !accel.is_file() {
        eprintln!(
            "notice: {} was not installed (mpi/build not built), skipping the MPI check",
            accel.display()
        );
        return;
    }
    for p in [
        "tc_mpibench",
        "tc_mpit_cvars",
        "std_coll",
        "libtopocomm-trace.so",
        "libtopocomm-fortran.so",
    ] {
        assert!(
            dir.join(p).is_file(),
            "{p} not installed in {}",
            dir.display()
        );
    }
    for lib in ["libtopocomm.so", "libtopocomm-mpi.so"] {
        let (ldd, used) = resolved_by_ldd(&accel, lib);
        assert!(
            used.as_deref()
                .is_some_and(|u| u.starts_with(prefix.canonicalize().unwrap())),
            "{lib} of the installed accel library resolves outside {}: {ldd}",
            prefix.display()
        );
    }
    let src = work.join("two.c");
    std::fs::write(
        &src,
        "#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) {\n  int r, x = 7;\n  \
         MPI_Init(&c, &v);\n  MPI_Comm_rank(MPI_COMM_WORLD, &r);\n  \
         if (r == 0) MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);\n  \
         else { MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); printf(\"got %d\\n\", x); }\n  \
         MPI_Finalize();\n  return 0;\n}\n",
    )
    .unwrap();
    let prog = work.join("two");
    run(Command::new("mpicc.openmpi").arg("-o").arg(&prog).arg(&src));
    let out = run(Command::new(prefix.join("bin/topocomm"))
        .args([
            "accel",
            "-v",
            "--",
            "mpirun.openmpi",
            "--oversubscribe",
            "-n",
            "2",
        ])
        .arg(&prog)
        .current_dir(work)
        .env_remove("TOPOCOMM_MPI_BUILD")
        .env_remove("LD_LIBRARY_PATH")
        .env("TOPOCOMM_AUTOTUNE", "0")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"));
    let t = text(&out);
    assert!(t.contains("got 7"), "{t}");
    assert!(
        t.contains("transport 1 msgs 4 bytes sent"),
        "the send did not go through the installed accelerator: {t}"
    );
}
