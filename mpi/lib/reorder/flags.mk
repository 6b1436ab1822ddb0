# The reorder shim calls the mapping engine of libtopocomm (crates/capi),
# built by `cargo build --release` at the top of the repository. The rpath
# lets a preloaded shim find it without LD_LIBRARY_PATH. --no-as-needed:
# the shim refers to libtopocomm only through weak symbols (so it can fall
# back cleanly), which --as-needed would not count as a use.
# --disable-new-dtags writes DT_RPATH, which (unlike DT_RUNPATH) wins over
# LD_LIBRARY_PATH: the shim uses the libtopocomm it was built against even
# when another one is on the path (cargo test puts target/debug/deps there).
LDLIBS_reorder := -L$(TOPOCOMM_LIBDIR) -Wl,--no-as-needed -ltopocomm $(ORIGIN_RPATH) -Wl,--disable-new-dtags,-rpath,$(TOPOCOMM_LIBDIR)

$(foreach i,$(IMPLS),build/$(i)/libtopocomm-reorder.so): $(TOPOCOMM_LIBDIR)/libtopocomm.so
