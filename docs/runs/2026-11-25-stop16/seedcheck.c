// One-off device check (stop 16): fadc_context_set_seed on a GPU against the
// CPU code of the same artifact: forward and vjp under several seeds, each
// twice (recorded, then replayed), a seed again after others.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fadc.h"

static int fails;
#define N 65536

static double run(fadc_context *c, fadc_model *m, int task, fadc_tensor *v, float *g)
{
	fadc_tensor *in[1] = {v}, *out[2] = {NULL, NULL};
	int nin = v ? 1 : 0, nout = v ? 2 : 1;
	if (fadc_run(m, task, in, nin, out, nout)) {
		printf("run failed: %s\n", fadc_context_error(c));
		fails++;
		return NAN;
	}
	float f = 0;
	fadc_tensor_read(out[0], &f, sizeof f);
	if (g)
		fadc_tensor_read(out[1], g, N * sizeof *g);
	return f;
}

int main(int argc, char **argv)
{
	fadc_context *cc, *gc;
	fadc_context_options go = {{FADC_DEVICE_CUDA, 0}, 0, 0};
	if (fadc_context_create(NULL, &cc) || fadc_context_create(&go, &gc)) {
		printf("context: %s\n", fadc_context_error(NULL));
		return 1;
	}
	fadc_model *cm, *gm;
	if (fadc_model_open(cc, argv[1], 0, &cm) || fadc_model_open(gc, argv[1], 0, &gm)) {
		printf("open failed\n");
		return 1;
	}
	int fwd, vjp;
	fadc_model_find_task(cm, "forward", &fwd);
	fadc_model_find_task(cm, "vjp", &vjp);
	float one = 1;
	fadc_tensor *cv, *gv;
	fadc_tensor_wrap(cc, FADC_F32, 0, NULL, &one, &cv);
	fadc_tensor_create(gc, FADC_F32, 0, NULL, &gv);
	fadc_tensor_write(gv, &one, sizeof one);
	static float gcpu[N], ggpu[N];
	const uint64_t seeds[] = {0, 0, (uint64_t)1 << 32, (uint64_t)1 << 32, ((uint64_t)5 << 32) | 7, 0, 0};
	double first = 0, f1 = 0;
	for (int i = 0; i < 7; i++) {
		fadc_context_set_seed(cc, seeds[i]);
		fadc_context_set_seed(gc, seeds[i]);
		double a = run(cc, cm, fwd, NULL, NULL), b = run(gc, gm, fwd, NULL, NULL);
		double la = run(cc, cm, vjp, cv, gcpu), lb = run(gc, gm, vjp, gv, ggpu);
		double gerr = 0, gmax = 0;
		for (int j = 0; j < N; j++) {
			gerr = fmax(gerr, fabs(gcpu[j] - ggpu[j]));
			gmax = fmax(gmax, fabs(gcpu[j]));
		}
		int ok = fabs(a - b) <= 1e-5 * fabs(a) && fabs(la - a) <= 1e-5 * fabs(a) &&
		         fabs(lb - b) <= 1e-5 * fabs(b) && gerr <= 1e-5 * gmax;
		if (i == 0)
			first = a;
		if (i == 2)
			f1 = a;
		printf("seed %#llx: forward cpu %.7g gpu %.7g, vjp loss cpu %.7g gpu %.7g, grad max diff %.3g of %.3g: %s\n",
		       (unsigned long long)seeds[i], a, b, la, lb, gerr, gmax, ok ? "ok" : "FAIL");
		fails += !ok;
	}
	fadc_device_stats st;
	fadc_context_stats(gc, &st);
	printf("graphs: recorded %llu replayed %llu re-recorded %llu eager %llu\n",
	       (unsigned long long)st.graphs_recorded, (unsigned long long)st.graphs_replayed,
	       (unsigned long long)st.graphs_rerecorded, (unsigned long long)st.eager_runs);
	if (!(f1 != first)) {
		printf("FAIL: call counter 1 drew the same masks as 0\n");
		fails++;
	}
	printf("%s\n", fails ? "FAILED" : "seedcheck: all ok");
	return fails != 0;
}
