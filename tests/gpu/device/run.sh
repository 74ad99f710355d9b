#!/usr/bin/env bash
# tests/gpu/device/run.sh -- run on the GPU machine from the repository root, with
# the payload of tests/gpu/device/payload.sh in .gpu/:  bash .gpu/run.sh [STEPS]
# STEPS (default "check bench peer"): check = the CUDA-graph suite
# (cudagraph_check) and gpu_check on every artifact (graphs on, then off);
# zoo = only check's zoo/ and zoo64/ artifacts (the models at reduced sizes);
# profile = FADC_CUDA_PROFILE=1 of the full-size models' vjp (PROF_MODELS,
# PROF_TASKS); bench = fadc-bench --gpu 0 over the ppl models
# (every task) and multiheadattn; peer = the seed's PyTorch benchmark on
# the same models, in the same call; cpu = the CPU thread pool on that
# machine's cores: fadc-bench --gpu -1 at 1 and all threads (wav2letter at
# full size, resnet18 at N=4) beside JAX's CPU wav2letter at 1 and all threads;
# full = the zoo at full size on the GPU, fadc-bench and PyTorch's benchmark;
# compiled = the torch.compile training-step peer on the large models
# (bench/peers/torch_compile_step.py; COMPILED_* choose what runs).  Logs go to $OUT (or /tmp/out): at
# most 8 files (the device tool's limit).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/out}
mkdir -p "$out"
steps=${1:-check bench peer}
iters=${ITERS:-100}
export FADC_REQUIRE_GPU=1
export LD_LIBRARY_PATH="$here/bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # payload.sh: libprotobuf-c
echo "== $(date -u +%FT%TZ) $(hostname)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
[ -d "$here/fgpu" ] && rm -rf /tmp/fgpu && cp -r "$here/fgpu" /tmp/fgpu
case " $steps " in *" check "*)
	echo "== cudagraph_check (tests/gpu/cudagraph)"
	timeout 120 "$here/bin/cudagraph_check" "$here/cg" 2>&1 | tee "$out/cudagraph.log"
	echo "rc=${PIPESTATUS[0]}"
	echo "== gpu_check (graphs on)"
	timeout 300 "$here/bin/gpu_check" --time 1000 "$here"/check/*.so 2>&1 | tee "$out/check.log"
	echo "rc=${PIPESTATUS[0]}"
	if [ -d "$here/mma" ]; then
		# The 3xTF32 GEMM kernels (tests/gpu/mma.ir): every strict f32 GEMM record
		# forced to each tile (and each choice to its GEMM), then timed against cuBLAS.
		for t in 128 64 auto; do
			echo "== gpu_check mma.so FADC_CUDA_MMA=$t"
			FADC_CACHE_DIR=$(mktemp -d) FADC_CUDA_MMA=$t FADC_CUDA_CHOICE=$([ $t = auto ] && echo auto || echo 1) \
				timeout 60 "$here/bin/gpu_check" --time 20 "$here/mma/mma.so" 2>&1 | tee -a "$out/check.log"
			echo "rc=${PIPESTATUS[0]}"
		done
	fi
	;;
esac
case " $steps " in *" check "*|*" zoo "*)
	echo "== gpu_check (graphs on): the zoo at reduced sizes, scans, a host step"
	timeout 420 "$here/bin/gpu_check" --time 20 --assign-nan "$here/zoo/assign.so" \
		--index "$here/zoo/index.so" --index "$here/zoo/index-scan.so" "$here"/zoo/*.so \
		>"$out/check-zoo.log" 2>&1
	echo "rc=$?"
	grep -E "FAIL|worst|passed|failed|NaN cost|bad labels" "$out/check-zoo.log"
	if [ -d "$here/zoo64" ]; then
		# resnet18, fcn_resnet, detr computing in f64 (--f64): f32 batch norm over
		# two tiny images is too ill-conditioned for a 1e-4 comparison of two
		# f32 codes (up to 3.8e-3 apart); in f64 the same kernels agree to 1e-6
		# (measured: resnet18 1.2e-13, fcn_resnet 2.6e-8).
		echo "== gpu_check (graphs on): the batch-norm nets computing in f64"
		timeout 420 "$here/bin/gpu_check" --time 5 --tol 1e-6 "$here"/zoo64/*.so \
			>"$out/check-zoo64.log" 2>&1
		echo "rc=$?"
		grep -E "FAIL|worst|passed|failed" "$out/check-zoo64.log"
	fi
	;;
esac
case " $steps " in *" check "*)
	if [ -d "$here/choice" ]; then
		# Choices (docs/CUDA.md, "Choices measured on the GPU"): each candidate
		# forced, then timed into a fresh cache, then a second process reading
		# it (every choice cached, none timed); the medians and the cache file.
		echo "== gpu_check: choices forced (0: printed kernels, 1: cuBLAS), timed, cached"
		cache=$(mktemp -d)
		for how in 0 1 timed cached; do
			case $how in
			0 | 1) env="FADC_CUDA_CHOICE=$how" arg=forced ;;
			*) env="FADC_CUDA_CHOICE_LOG=1" arg=$how ;;
			esac
			echo "-- $env --choices $arg"
			env FADC_CACHE_DIR="$cache" $env timeout 120 "$here/bin/gpu_check" --time 200 \
				--choices $arg "$here/choice/choice.so" 2>&1 | tee -a "$out/check-choice.log"
			echo "rc=${PIPESTATUS[0]}"
		done
		cat "$cache/cuda-choices"
		rm -rf "$cache"
	fi
	if [ -d "$here/conv" ]; then
		# cuDNN convolutions (docs/CUDA.md, "cuDNN convolutions"): strict and
		# TF32, each candidate forced (0: the convolution's launches, 1: cuDNN),
		# then timed into a fresh cache (every choice timed: cuDNN was a
		# candidate of each).
		echo "== gpu_check: convolutions forced (0: im2col + GEMM, 1: cuDNN), timed"
		cache=$(mktemp -d)
		for so in conv conv_tf32 conv_direct csum_tf32; do
			for how in 0 1 timed; do
				case $how in
				0 | 1) env="FADC_CUDA_CHOICE=$how" arg=forced ;;
				*) env="FADC_CUDA_CHOICE_LOG=1" arg=$how ;;
				esac
				echo "-- $so $env --choices $arg"
				env FADC_CACHE_DIR="$cache" $env timeout 120 "$here/bin/gpu_check" --time 100 \
					--choices $arg "$here/conv/$so.so" 2>&1 | tee -a "$out/check-choice.log"
				echo "rc=${PIPESTATUS[0]}"
			done
		done
		# The sums side by side with their epilogues (tests/gpu/csum-multi.ir),
		# split and not, with the convolutions' launches (its header says why
		# not cuDNN).
		for so in csum_multi_tf32 csum_multi_nosplit_tf32; do
			echo "-- $so FADC_CUDA_CHOICE=0 --choices forced"
			env FADC_CACHE_DIR="$cache" FADC_CUDA_CHOICE=0 timeout 120 "$here/bin/gpu_check" \
				--time 100 --choices forced "$here/conv/$so.so" 2>&1 | tee -a "$out/check-choice.log"
			echo "rc=${PIPESTATUS[0]}"
		done
		# Batch norm's statistics in one pass (tests/gpu/bn1pass.ir): strict
		# (relaid) each way, at 1e-3: at some input draws the model's f32
		# gradients differ from the CPU code's by up to 4.3e-4 with or
		# without the one pass (H200, 2026-11-29, h-g20s); TF32 (its 1e-2)
		# with the launches, as csum-multi above.
		for so in bn1pass_nhwc bn1pass_tf32; do
			hows="0 1"
			[ $so = bn1pass_tf32 ] && hows=0
			for how in $hows; do
				echo "-- $so FADC_CUDA_CHOICE=$how --choices forced"
				env FADC_CACHE_DIR="$cache" FADC_CUDA_CHOICE=$how timeout 120 "$here/bin/gpu_check" \
					--time 100 --tol 1e-3 --choices forced "$here/conv/$so.so" 2>&1 |
					tee -a "$out/check-choice.log"
				echo "rc=${PIPESTATUS[0]}"
			done
		done
		rm -rf "$cache"
	fi
	echo "== gpu_check (FADC_DISABLE_CUDA_GRAPHS=1)"
	FADC_DISABLE_CUDA_GRAPHS=1 timeout 120 "$here/bin/gpu_check" --time 1000 \
		--assign-nan "$here/zoo/assign.so" --index "$here/zoo/index.so" \
		--index "$here/zoo/index-scan.so" \
		"$here/check/ppl_simple_reg.so" "$here/check/floor.so" "$here/zoo/assign.so" \
		"$here/zoo/index.so" "$here/zoo/index-scan.so" "$here/zoo/scan-rnn.so" \
		"$here/zoo/scan-persist.so" 2>&1 | tee "$out/check-nographs.log"
	echo "rc=${PIPESTATUS[0]}"
	echo "== gpu_check (FADC_CUDA_FORCE_PTX=1: the embedded PTX, as a newer GPU would load it)"
	FADC_CUDA_FORCE_PTX=1 timeout 300 "$here/bin/gpu_check" --time 20 "$here/check/ppl_simple_reg.so" \
		"$here/check/transformer.so" "$here/zoo/scan-persist.so" 2>&1 | tee -a "$out/check-nographs.log"
	echo "rc=${PIPESTATUS[0]}"
	;;
esac
case " $steps " in *" bench "*)
	echo "== fadc-bench --gpu 0"
	timeout 300 "$here/bin/fadc-bench" --gpu 0 --run-slow-tasks --num-iters "$iters" \
		--config /tmp/fgpu/bench/bench.yaml --artifacts /tmp/fgpu/artifacts \
		--model-filter ppl_simple_reg,ppl_robust_reg \
		--output "$out/fadc-ppl.md" --json /tmp/fadc-ppl.json 2>&1 | grep -v "^Results"
	timeout 300 "$here/bin/fadc-bench" --gpu 0 --num-iters "$iters" \
		--config /tmp/fgpu/bench/bench.yaml --artifacts /tmp/fgpu/artifacts \
		--model-filter multiheadattn \
		--output "$out/fadc-mha.md" --json /tmp/fadc-mha.json 2>&1 | grep -v "^Results"
	cat "$out"/fadc-*.md
	;;
esac
case " $steps " in *" peer "*)
	echo "== PyTorch: functional_autograd_benchmark.py (the seed) --gpu 0"
	cd "$here/peer"
	export PYTHONUNBUFFERED=1
	python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
	timeout 400 python3 functional_autograd_benchmark.py --gpu 0 --run-slow-tasks \
		--num-iters "$iters" --model-filter ppl_simple_reg --output "$out/torch-simple.md" >"/tmp/torch-simple.log" 2>&1
	echo "rc=$?"; grep -iE "error|Traceback" "/tmp/torch-simple.log" | tail -n 3
	timeout 600 python3 functional_autograd_benchmark.py --gpu 0 --run-slow-tasks --seed 1 \
		--num-iters "$iters" --model-filter ppl_robust_reg --output "$out/torch-robust.md" >"/tmp/torch-robust.log" 2>&1
	echo "rc=$?"; grep -iE "error|Traceback" "/tmp/torch-robust.log" | tail -n 3
	timeout 300 python3 functional_autograd_benchmark.py --gpu 0 \
		--num-iters "$iters" --model-filter multiheadattn --output "$out/torch-mha.md" >"/tmp/torch-mha.log" 2>&1
	echo "rc=$?"; grep -iE "error|Traceback" "/tmp/torch-mha.log" | tail -n 3
	cat "$out"/torch-*.md
	echo "== JAX: bench/peers/jax_ppl.py on the GPU (jax.jit, block_until_ready)"
	sed 's/"jax_platform_name", "cpu"/"jax_platform_name", "cuda"/' "$here/peer/jax_ppl.py" >/tmp/jax_ppl_gpu.py
	timeout 300 python3 /tmp/jax_ppl_gpu.py --iters 300 >"$out/jax-ppl.md" 2>/tmp/jax.log
	echo "rc=$?"; grep -iE "error|Traceback" /tmp/jax.log | tail -n 3
	python3 -c 'import jax; print("jax", jax.__version__, jax.devices())'
	cat "$out/jax-ppl.md"
	;;
esac
case " $steps " in *" compiled "*)
	# The compiled training-step peer (issue 19): torch.compile(model), loss,
	# torch.autograd.grad over the parameters, for every large model, modes
	# eager/default/reduce-overhead (COMPILED_MODES; COMPILED_AUTOTUNE=1 adds
	# max-autotune-no-cudagraphs), TF32 COMPILED_TF32 (off, default, on, or a
	# comma list); each cell in its own process under COMPILED_TIMEOUT seconds,
	# each model under COMPILED_MODEL_TIMEOUT.  bench/peers/torch_compile_step.py.
	echo "== PyTorch: torch_compile_step.py (torch.compile training steps)"
	cd "$here/peer"
	export PYTHONUNBUFFERED=1
	at=""; [ "${COMPILED_AUTOTUNE:-0}" = 1 ] && at=--max-autotune
	python3 torch_compile_step.py \
		--models "${COMPILED_MODELS:-multiheadattn,wav2letter,resnet18,transformer,deepspeech,fcn_resnet,detr}" \
		--modes "${COMPILED_MODES:-eager,default,reduce-overhead}" $at \
		--tf32 "${COMPILED_TF32:-default}" --iters "${COMPILED_ITERS:-20}" \
		--timeout "${COMPILED_TIMEOUT:-240}" --model-timeout "${COMPILED_MODEL_TIMEOUT:-600}" \
		--json "$out/compiled.json" 2>&1 | tee "$out/compiled.log"
	echo "rc=${PIPESTATUS[0]}"
	cd - >/dev/null
	;;
esac
case " $steps " in *" full "*)
	# The zoo at full size on the GPU (issue 7's table): fadc-bench --gpu 0 over
	# every model's recommended tasks (the artifacts of payload.sh's full list,
	# in /tmp/fgpu), then PyTorch's own benchmark on the same models and tasks.
	# FULL_MODELS, FULL_ITERS (default 10, the seed's) and FULL_TIMEOUT (per
	# model and side, seconds) choose what runs.
	fi=${FULL_ITERS:-10}
	ft=${FULL_TIMEOUT:-240}
	for m in ${FULL_MODELS:-multiheadattn wav2letter transformer resnet18 deepspeech fcn_resnet detr}; do
		echo "-- fadc-bench --gpu 0 $m (full size, $fi iterations)"
		timeout "$ft" "$here/bin/fadc-bench" --gpu 0 --num-iters "$fi" \
			--config /tmp/fgpu/bench/bench.yaml --artifacts /tmp/fgpu/artifacts \
			--model-filter "$m" --output "/tmp/full-fadc-$m.md" --json "/tmp/full-fadc-$m.json" \
			>"/tmp/full-fadc-$m.log" 2>&1
		echo "rc=$?"
		python3 -c 'import json, sys
for c in json.load(open(sys.argv[1]))["cells"]:
    print("consistency", c["model"], c["task"], c.get("consistency_error"), c.get("consistent"))' \
			"/tmp/full-fadc-$m.json" 2>/dev/null
		grep -E "fadc-bench:|error|inconsistent" "/tmp/full-fadc-$m.log" | grep -v compiling | tail -n 8
		cat "/tmp/full-fadc-$m.md" 2>/dev/null
	done >"$out/full-fadc.log" 2>&1
	cat "$out/full-fadc.log"
	cd "$here/peer"
	export PYTHONUNBUFFERED=1
	python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
	python3 -c 'import torchvision, scipy; print("torchvision", torchvision.__version__, "scipy", scipy.__version__)' 2>&1 | tail -n 1
	for m in ${PEER_MODELS:-${FULL_MODELS:-multiheadattn wav2letter transformer resnet18 deepspeech fcn_resnet detr}}; do
		echo "-- PyTorch functional_autograd_benchmark.py --gpu 0 $m ($fi iterations)"
		timeout "$ft" python3 functional_autograd_benchmark.py --gpu 0 --num-iters "$fi" \
			--model-filter "$m" --output "/tmp/full-torch-$m.md" >"/tmp/full-torch-$m.log" 2>&1
		echo "rc=$?"; grep -iE "error|Traceback|Exception" "/tmp/full-torch-$m.log" | tail -n 3
		cat "/tmp/full-torch-$m.md" 2>/dev/null
	done >"$out/full-torch.log" 2>&1
	cat "$out/full-torch.log"
	cd - >/dev/null
	;;
esac
case " $steps " in *" profile "*)
	# Where the full-size models' time goes on the GPU: PROF_TASKS (default vjp)
	# of PROF_MODELS run eagerly with an event around each launch
	# (FADC_CUDA_PROFILE=1; the first run not counted), the bench tree's
	# artifacts (run.sh full's).
	for m in ${PROF_MODELS:-resnet18 deepspeech fcn_resnet transformer detr}; do
		for a in /tmp/fgpu/artifacts/"$m"-*.cuda.so; do
			echo "-- profile $m ($a)"
			GPU_CHECK_TASKS=${PROF_TASKS:-vjp} FADC_CUDA_PROFILE=1 timeout 120 \
				"$here/bin/gpu_check" --run-only 3 "$a" 2>&1 | head -n 70
		done
	done >"$out/profile.log" 2>&1
	cat "$out/profile.log"
	;;
esac
case " $steps " in *" cpu "*)
	echo "== CPU: $(lscpu | grep 'Model name' | sed 's/  */ /g'), $(nproc) CPUs"
	for t in 1 $(nproc); do
		echo "-- fadc-bench --gpu -1 --num-threads $t"
		timeout 240 "$here/bin/fadc-bench" --gpu -1 --num-threads "$t" --num-iters 5 \
			--config /tmp/fgpu/bench/bench.yaml --artifacts /tmp/fgpu/artifacts \
			--model-filter wav2letter,resnet18 --task-filter vjp -D resnet18:N=4 \
			--output "$out/cpu-t$t.md" 2>&1 | grep -v "^Results"
		cat "$out/cpu-t$t.md"
	done
	echo "-- JAX CPU wav2letter (N LIN C CW NCLS = 10 700 250 2000 28), 1 thread then all"
	XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
		timeout 240 taskset -c 0 python3 "$here/peer/jax_wav2letter.py" 10 700 250 2000 28 2>&1 | tail -3
	timeout 240 python3 "$here/peer/jax_wav2letter.py" 10 700 250 2000 28 2>&1 | tail -3
	;;
esac
