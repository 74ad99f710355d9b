// bench/exec.h -- how fadc-bench runs one task of one model: a backend
// prepares the task once (compile or load, bind params, place inputs) and
// then runs it as often as it is timed.  The reference interpreter is one
// backend (reduced sizes, and the oracle of --check); compiled artifacts
// through the runtime are the other (issue 4).
#ifndef FADC_EXEC_H
#define FADC_EXEC_H

#include <stddef.h>
#include <stdint.h>

// A tensor as the runner sees it: float64 values, row-major.
typedef struct BTensor {
	char name[128];
	int rank;
	int64_t dim[8];
	double *data;
	int64_t n;
} BTensor;

typedef struct Prepared Prepared;

typedef struct Backend {
	const char *name;
	// Prepares `task` of the model at `source` with sizes defs[] and run
	// seed; the task's extra inputs (v) are named in vnames[] with their
	// shapes after preparing.
	Prepared *(*prepare)(const char *source, const char *const *defs, int ndefs, const char *task,
	                     uint64_t seed, char *err, size_t errlen);
	// The task's extra inputs (v, v.<p>): filled by the caller before runs.
	int (*ninputs)(Prepared *p);
	BTensor *(*input)(Prepared *p, int i);
	// One run; outputs readable afterwards.
	int (*run)(Prepared *p, char *err, size_t errlen);
	int (*noutputs)(Prepared *p);
	const BTensor *(*output)(Prepared *p, int i); // copied back after each run
	void (*release)(Prepared *p);
} Backend;

extern const Backend backend_interp;

#endif
