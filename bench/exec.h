// bench/exec.h -- how fadc-bench runs one task of one model: a backend
// prepares the task once (compile or load, bind params, place inputs) and
// then runs it as often as it is timed.  The reference interpreter is one
// backend (reduced sizes, and the oracle of --check); compiled artifacts
// through the runtime are the other (bench/exec_cpu.c).
#ifndef FADC_EXEC_H
#define FADC_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h" // IR_MAXDIM

// A tensor as the runner sees it: float64 values, row-major, with its name
// (the interpreter's Tensor has no name and its dtype; the runner needs the
// one and not the other).  Its rank bound is the IR's.
typedef struct BTensor {
	char name[128];
	int rank;
	int64_t dim[IR_MAXDIM];
	double *data;
	int64_t n;
} BTensor;

typedef struct Prepared Prepared;

// What a compiled backend needs to know of the run (the interpreter needs
// none of it).
typedef struct BackendOptions {
	const char *artifacts; // --artifacts; NULL: build/artifacts beside build/bin/fadc-bench
	const char *compiler; // --fadc; NULL: fadc beside fadc-bench
	int compile; // --compile: build missing or stale artifacts
	int num_threads;
	uint64_t seed; // the run seed of initializers and samplers
	int gpu; // -1: the CPU; N: CUDA device N (artifacts compiled with --target cuda)
	int compile_only; // open_model builds the artifact and stops (no context, no run)
	int device_time; // --device-time: runs are timed by device events (device_seconds)
	// --gpus: the GPUs of a data-parallel run (docs/MULTIGPU.md), gpus[0]
	// the one `gpu` names; ngpus 0 without the option.
	const int *gpus;
	int ngpus;
} BackendOptions;

typedef struct Backend {
	const char *name;
	// Prepares `task` of the model at `source` with sizes defs[] and run
	// seed; the task's extra inputs (v) are named in vnames[] with their
	// shapes after preparing.
	Prepared *(*prepare)(const char *source, const char *const *defs, int ndefs, const char *task,
	                     uint64_t seed, char *err, size_t errlen);
	// The task's extra inputs (v, v.<p>): filled by the caller after
	// prepare and before the first run, which is when a compiled backend
	// reads them (timed runs copy nothing).
	int (*ninputs)(Prepared *p);
	BTensor *(*input)(Prepared *p, int i);
	// One run; outputs readable afterwards.
	int (*run)(Prepared *p, char *err, size_t errlen);
	int (*noutputs)(Prepared *p);
	// The last run's values: the interpreter copies them after each run, a
	// compiled backend converts them when they are read, so that timed runs
	// leave them where the runtime wrote them.
	const BTensor *(*output)(Prepared *p, int i);
	void (*release)(Prepared *p);
	// With BackendOptions.device_time: the last run's time as the device
	// measured it (seconds).  NULL where there is no device.
	double (*device_seconds)(Prepared *p);
	// Peak memory: reset_peak starts the runtime's high-water mark again
	// from what its context holds now (the model's declarations, earlier
	// cells' arenas); peak_memory reads it (fadc_context_memory: the
	// device pool's blocks on a GPU, the runtime's host allocations on the
	// CPU), -1 where the backend has none (the interpreter: NULL hooks).
	void (*reset_peak)(void);
	int64_t (*peak_memory)(void);
	// With --gpus: one run of the task on GPU gpus[0] alone (an ordinary
	// context, the full batch), as run times it on the GPUs: the
	// baseline of the speed-up.  NULL where there is none.
	int (*run_single)(Prepared *p, char *err, size_t errlen);
} Backend;

// The hooks of a backend that works on one compiled model at a time.  They
// are a table of their own, not members of Backend, so that the
// interpreter's table, which needs none, stays as it is; and they keep the
// open model as the backend's own state, because prepare takes the model's
// source as the interpreter's does: prepare must name the model that
// open_model opened.
typedef struct ModelHooks {
	int (*configure)(const BackendOptions *o, char *err, size_t errlen);
	// Called once per model before its cells, with every task the run will
	// prepare: the cells' tasks and their consistency partners, so that one
	// artifact holds them all.  -1 with err: the model's cells are skipped;
	// 1 (--compile-only): the artifact is built, its path in err, nothing
	// is open.
	int (*open_model)(const char *source, const char *const *defs, int ndefs,
	                  const char *const *tasks, int ntasks, char *err, size_t errlen);
	void (*close_model)(void);
	// Facts for the JSON, NULL when unknown: of the open model "artifact"
	// (its path), "artifact_hash" (the descriptor's source hash),
	// "artifact_file_hash" (of its bytes) and "artifact_options"; of the run "runtime", "compiler" and
	// "compiler_version".
	const char *(*info)(const char *key);
} ModelHooks;

// Whether a model's source is a compiled artifact (`.so`): only a compiled
// backend runs it, as it is (bench/exec_cpu.c).
int bench_is_artifact(const char *source);

extern const Backend backend_interp;
extern const Backend backend_cpu;
extern const ModelHooks backend_cpu_hooks;

#endif
