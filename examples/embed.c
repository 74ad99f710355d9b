// examples/embed.c -- fadc's runtime embedded in a C program, built against
// an installed fadc (docs/INSTALL.md):
//
//   fadc PREFIX/share/fadc/models/ppl_simple_reg.ir -o model.so --tasks vjp
//   cc embed.c $(pkg-config --cflags --libs fadc) -lm -o embed
//   ./embed model.so [params.safetensors]
//
// It loads the compiled model, binds the parameters (and constants) that
// the .safetensors file names, computes the rest from the model's seeded
// initializers (run seed 0, as `fadc run` without --seed), runs the task
// vjp with every input of the caller set to 1 (v = 1: the gradient of f
// itself when f is a scalar) and prints the norm of each gradient, then
// of all of them together:
//
//   grad.beta_value: norm 3.01234567
//   gradient norm: 3.01234567
//
// The norm is sqrt(sum of g_i^2) over every element of every output named
// grad.<param>, accumulated in double.  `fadc run model.so --task vjp --v
// v=ones.npy` writes the same gradients as .npy files (tests/install/
// compares the two).  Exit status: 0, 1 when a call of the runtime fails
// (its message is printed), 2 for a usage error.
#include <fadc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Every call of the runtime returns a status; the context holds the
// message of the last failure.
static int
check(fadc_status st, fadc_context *ctx, const char *what)
{
	if (st == FADC_OK)
		return 1;
	fprintf(stderr, "embed: %s: %s: %s\n", what, fadc_status_name(st), fadc_context_error(ctx));
	return 0;
}

// Sets every element of t (on the CPU, or a device: written through a host
// copy) to 1; integer and bool inputs (a model's labels) to 0, an index
// that is always in range.
static int
fill_ones(fadc_context *ctx, fadc_tensor *t)
{
	size_t bytes = fadc_tensor_bytes(t);
	int64_t n = fadc_tensor_numel(t);
	unsigned char *buf = calloc(bytes ? bytes : 1, 1);
	if (!buf) {
		fprintf(stderr, "embed: out of memory\n");
		return 0;
	}
	for (int64_t i = 0; i < n; i++) {
		if (fadc_tensor_dtype(t) == FADC_F32)
			((float *)buf)[i] = 1.0f;
		else if (fadc_tensor_dtype(t) == FADC_F64)
			((double *)buf)[i] = 1.0;
	}
	int ok = check(fadc_tensor_write(t, buf, bytes), ctx, "fadc_tensor_write");
	free(buf);
	return ok;
}

// The sum of squares of a float tensor's elements, read to the host.
static int
sum_squares(fadc_context *ctx, const fadc_tensor *t, double *sum)
{
	size_t bytes = fadc_tensor_bytes(t);
	int64_t n = fadc_tensor_numel(t);
	void *buf = malloc(bytes ? bytes : 1);
	if (!buf) {
		fprintf(stderr, "embed: out of memory\n");
		return 0;
	}
	if (!check(fadc_tensor_read(t, buf, bytes), ctx, "fadc_tensor_read")) {
		free(buf);
		return 0;
	}
	*sum = 0;
	for (int64_t i = 0; i < n; i++) {
		double x = fadc_tensor_dtype(t) == FADC_F32 ? ((float *)buf)[i] : ((double *)buf)[i];
		*sum += x * x;
	}
	free(buf);
	return 1;
}

int
main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || argv[1][0] == '-') {
		fprintf(stderr, "usage: embed MODEL.so [PARAMS.safetensors]\n");
		return 2;
	}
	fadc_context *ctx = NULL;
	fadc_model *m = NULL;
	fadc_tensor *in[64] = {0};
	int nin = 0, rc = 1;
	if (!check(fadc_context_create(NULL, &ctx), NULL, "fadc_context_create"))
		return 1;
	if (!check(fadc_model_open(ctx, argv[1], 0, &m), ctx, argv[1]))
		goto done;
	if (argc == 3) {
		int nbound = 0;
		if (!check(fadc_model_bind_file(m, argv[2], &nbound), ctx, argv[2]))
			goto done;
		printf("bound %d declarations from %s\n", nbound, argv[2]);
	}
	// The declarations left unbound, from their initializers.
	if (!check(fadc_model_init(m, 0), ctx, "fadc_model_init"))
		goto done;

	int task;
	fadc_task_info info;
	if (!check(fadc_model_find_task(m, "vjp", &task), ctx, "task vjp") ||
	    !check(fadc_task_info_get(m, task, &info), ctx, "fadc_task_info_get"))
		goto done;
	if (info.ncaller > (int)(sizeof in / sizeof in[0])) {
		fprintf(stderr, "embed: vjp takes %d inputs, more than this example's %d\n", info.ncaller,
		        (int)(sizeof in / sizeof in[0]));
		goto done;
	}
	// The caller's inputs are the last ncaller of the task's inputs.
	for (; nin < info.ncaller; nin++) {
		fadc_tensor_desc d;
		if (!check(fadc_task_input(m, task, info.ninputs - info.ncaller + nin, &d), ctx,
		           "fadc_task_input") ||
		    !check(fadc_tensor_create(ctx, d.dtype, d.rank, d.dim, &in[nin]), ctx,
		           "fadc_tensor_create") ||
		    !fill_ones(ctx, in[nin]))
			goto done;
	}
	fadc_tensor *out[64] = {0};
	if (info.noutputs > (int)(sizeof out / sizeof out[0])) {
		fprintf(stderr, "embed: vjp has %d outputs, more than this example's %d\n", info.noutputs,
		        (int)(sizeof out / sizeof out[0]));
		goto done;
	}
	// Outputs NULL: the model owns them (valid until vjp runs again).
	if (!check(fadc_run(m, task, in, nin, out, info.noutputs), ctx, "fadc_run vjp"))
		goto done;

	double total = 0;
	int ngrad = 0;
	for (int i = 0; i < info.noutputs; i++) {
		fadc_tensor_desc d;
		if (!check(fadc_task_output(m, task, i, &d), ctx, "fadc_task_output"))
			goto done;
		if (strncmp(d.name, "grad.", 5))
			continue; // f's own outputs
		double s;
		if (!sum_squares(ctx, out[i], &s))
			goto done;
		printf("%s: norm %.9g\n", d.name, sqrt(s));
		total += s;
		ngrad++;
	}
	if (!ngrad) {
		fprintf(stderr, "embed: %s: vjp has no grad.<param> output\n", argv[1]);
		goto done;
	}
	printf("gradient norm: %.9g\n", sqrt(total));
	rc = 0;
done:
	for (int i = 0; i < (int)(sizeof in / sizeof in[0]); i++)
		fadc_tensor_release(in[i]); // NULL: ignored
	fadc_model_close(m);
	fadc_context_destroy(ctx);
	return rc;
}
