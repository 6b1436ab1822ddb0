# libtopocomm-mpi.so calls the transport of libtopocomm (crates/capi), built
# by `cargo build --release` at the top of the repository; DT_RPATH for the
# same reason as the reorder shim (it wins over LD_LIBRARY_PATH).
LDLIBS_mpi := -L$(TOPOCOMM_LIBDIR) -ltopocomm $(ORIGIN_RPATH) -Wl,--disable-new-dtags,-rpath,$(TOPOCOMM_LIBDIR) -lm
$(foreach i,$(IMPLS),build/$(i)/libtopocomm-mpi.so): $(TOPOCOMM_LIBDIR)/libtopocomm.so

# Programs using it: the node-local transport example.
PROG_LDLIBS_shm_check = -L$(abspath $(@D)) -ltopocomm-mpi -L$(TOPOCOMM_LIBDIR) -ltopocomm \
	-Wl,--disable-new-dtags,-rpath,$(abspath $(@D)),-rpath,$(TOPOCOMM_LIBDIR)
$(foreach i,$(IMPLS),$(eval build/$(i)/shm_check: build/$(i)/libtopocomm-mpi.so))
