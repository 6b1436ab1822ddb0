# libtopocomm-accel.so bootstraps through libtopocomm-mpi.so
# (topocomm_mpi_init_ex) and sends through libtopocomm (crates/capi);
# DT_RPATH so that both are found whatever LD_LIBRARY_PATH says.
LDLIBS_accel = -L$(abspath $(@D)) -ltopocomm-mpi -L$(TOPOCOMM_LIBDIR) -ltopocomm \
	-Wl,--disable-new-dtags,-rpath,$(abspath $(@D)),-rpath,$(TOPOCOMM_LIBDIR)
$(foreach i,$(IMPLS),$(eval build/$(i)/libtopocomm-accel.so: build/$(i)/libtopocomm-mpi.so))
