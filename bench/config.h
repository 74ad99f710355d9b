// bench/config.h -- fadc-bench's configuration (bench/bench.yaml): models,
// their task lists, unsupported tasks, slow lists, skips per device,
// consistency tolerances.  The schema is documented in docs/BENCH.md and at
// the top of bench/bench.yaml; only bench/config.c includes yaml.h.
#ifndef FADC_CONFIG_H
#define FADC_CONFIG_H

#include <stddef.h>

#define BENCH_MAXTASK 16
#define BENCH_MAXMODEL 32
#define BENCH_MAXDEF 16

typedef struct BenchModel {
	char name[64];
	char source[512]; // the model's .ir or .onnx (or compiled .so), relative to the configuration's folder
	char tasks[BENCH_MAXTASK][32]; // recommended tasks, in order
	int ntasks;
	char unsupported[BENCH_MAXTASK][32];
	int nunsupported;
	char reduced[BENCH_MAXDEF][64]; // -D NAME=VALUE for reduced sizes
	int nreduced;
	double rtol; // consistency tolerance (normalized error)
	int source_line, source_col; // where source: is, for messages about the file it names
} BenchModel;

typedef struct BenchConfig {
	char path[512];
	BenchModel model[BENCH_MAXMODEL]; // in run order
	int nmodel;
	char all_tasks[BENCH_MAXTASK][32]; // --run-slow-tasks uses these
	int nall;
	char slow[BENCH_MAXMODEL][64]; // the seed's slow group
	int nslow;
	char skip_cpu[BENCH_MAXMODEL][64], skip_cuda[BENCH_MAXMODEL][64];
	int nskip_cpu, nskip_cuda;
	double rtol; // default tolerance
} BenchConfig;

// Loads and validates a configuration.  Returns 0, or -1 with
// "file:line:col: error: message" in err ("file: error: message" when the
// file cannot be read); nothing is half-loaded.  The file is one YAML
// document whose mappings have no duplicate keys.
int bench_config_load(const char *path, BenchConfig *c, char *err, size_t errlen);
const BenchModel *bench_config_model(const BenchConfig *c, const char *name);
int bench_in_list(const char (*list)[64], int n, const char *name);

#endif
