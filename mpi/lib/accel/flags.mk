# libtopocomm-accel.so bootstraps through libtopocomm-mpi.so
# (topocomm_mpi_init_ex) and sends through libtopocomm (crates/capi);
# DT_RPATH so that both are found whatever LD_LIBRARY_PATH says.
# -Bsymbolic-functions: calls between the library's own functions (acc_*,
# and its MPI_ wrappers calling each other) bind inside it, with no PLT
# indirection on the per-message path; the MPI_ symbols stay exported, and
# preloaded first they are still what the application calls.
LDLIBS_accel = -L$(abspath $(@D)) -ltopocomm-mpi -L$(TOPOCOMM_LIBDIR) -ltopocomm $(ORIGIN_RPATH) \
	-Wl,--disable-new-dtags,-rpath,$(abspath $(@D)),-rpath,$(TOPOCOMM_LIBDIR) \
	-Wl,-Bsymbolic-functions
$(foreach i,$(IMPLS),$(eval build/$(i)/libtopocomm-accel.so: build/$(i)/libtopocomm-mpi.so))
