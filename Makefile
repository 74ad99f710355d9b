# fadc -- two commands do everything on a fresh Debian machine:
#   make demo   set up, build, and run the main job on a bundled model
#   make test   set up, build, and pass the whole test suite
#   make install [PREFIX=/usr/local] [DESTDIR=]   build, then install
#               (docs/INSTALL.md); make uninstall with the same two removes it
# Set-up installs missing Debian packages with apt-get when run as root
# (scripts/deps.sh), configures with CMake and builds into build/.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: demo test deps build clean install install-built uninstall

deps:
	@sh scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@sh scripts/demo.sh $(BUILD)

test: build
	@bash tests/run-all.sh $(BUILD)

install: build
	@$(MAKE) --no-print-directory install-built

# The install of what $(BUILD) holds, without building (tests/install uses
# it on the tree under test).  cmake/manifest.cmake writes the manifest
# that uninstall reads.
install-built:
	@case "$(PREFIX)" in /*) ;; *) echo "fadc: PREFIX must be an absolute path: $(PREFIX)" >&2; exit 2;; esac
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"
	@# The dynamic loader's cache learns of libfadc.so.1 (a real install as root).
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

uninstall:
	@case "$(PREFIX)" in /*) ;; *) echo "fadc: PREFIX must be an absolute path: $(PREFIX)" >&2; exit 2;; esac
	@m="$(DESTDIR)$(PREFIX)/share/fadc/install-manifest.txt"; test -f "$$m" || \
	  { echo "fadc: $$m: no such file: fadc is not installed under $(DESTDIR)$(PREFIX)" >&2; exit 1; }
	@cmake -DROOT="$(DESTDIR)$(PREFIX)" -P cmake/uninstall.cmake

clean:
	rm -rf $(BUILD) build-asan
