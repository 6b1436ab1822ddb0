# The two commands of the README:
#   make report   set up, build, and write the report of this machine
#   make test     set up, then run the whole test suite (fmt, clippy, C warnings, tests)
# Everything else is a building block of those two.

CARGO ?= cargo
REPORT_DIR ?= topocomm-report
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: setup build report test lint test-rust clean

setup:
	@bash scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace
	$(MAKE) -C mpi


report: build
	./target/release/topocomm topo
	./target/release/topocomm report --out $(REPORT_DIR)

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test-rust: setup
	$(CARGO) test --workspace

test: lint build test-rust

clean:
	$(CARGO) clean
	rm -rf $(REPORT_DIR)
