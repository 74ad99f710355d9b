# RUN: bash %S/cpu-smoke.sh resnet18 wav2letter transformer
# The cpu smoke test (cpu-smoke.sh) over the larger fast models: `zoo` in the
# name labels it slow, so the sanitizer run leaves it out (tests/tests.cmake).
