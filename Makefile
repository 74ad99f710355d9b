# fadc -- two commands do everything on a fresh Debian machine:
#   make demo   set up, build, and run the main job on a bundled model
#   make test   set up, build, and pass the whole test suite
# Set-up installs missing Debian packages with apt-get when run as root
# (scripts/deps.sh), configures with CMake and builds into build/.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: demo test deps build clean

deps:
	@sh scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@sh scripts/demo.sh $(BUILD)

test: build
	@bash tests/run-all.sh $(BUILD)

clean:
	rm -rf $(BUILD) build-asan
