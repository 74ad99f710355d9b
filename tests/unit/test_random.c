// tests/unit/test_random.c -- Philox4x32-10 and the samplers (support/random.c).
//
// Philox is checked bit for bit against the known-answer vectors that
// Random123 publishes (kat_vectors, philox4x32_10).  The samplers are
// checked statistically: 100k draws of each, mean and variance against the
// distribution's moments, with tolerances of about five standard errors
// (derived next to each check).  The generator is deterministic, so these
// checks cannot flake: they either always pass or always fail.
#include <stdint.h>

#include "ir.h"
#include "testutil.h"

#define N 100000

static void
kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1, uint32_t r0,
    uint32_t r1, uint32_t r2, uint32_t r3)
{
	uint32_t ctr[4] = {c0, c1, c2, c3}, key[2] = {k0, k1}, out[4];
	ir_philox(key, ctr, out);
	CHECK(out[0] == r0 && out[1] == r1 && out[2] == r2 && out[3] == r3);
	if (out[0] != r0 || out[1] != r1 || out[2] != r2 || out[3] != r3)
		fprintf(stderr, "  got %08x %08x %08x %08x, want %08x %08x %08x %08x\n", out[0],
		        out[1], out[2], out[3], r0, r1, r2, r3);
}

// Sample mean and (population) variance of n draws.
typedef double (*Sampler)(uint64_t index, double param);

static void
moments(Sampler f, double param, double *mean, double *var)
{
	double s = 0, s2 = 0;
	for (uint64_t i = 0; i < N; i++)
		s += f(i, param);
	*mean = s / N;
	for (uint64_t i = 0; i < N; i++) {
		double d = f(i, param) - *mean;
		s2 += d * d;
	}
	*var = s2 / N;
}

static const uint64_t SEED = 0x0123456789abcdefull, RUN = 0xfedcba9876543210ull;

static double
s_uniform(uint64_t i, double p)
{
	(void)p;
	return ir_rand_uniform(SEED, RUN, i);
}

static double
s_normal(uint64_t i, double p)
{
	(void)p;
	return ir_rand_normal(SEED, RUN, i);
}

static double
s_gamma(uint64_t i, double alpha)
{
	return ir_rand_gamma(SEED, RUN, i, alpha);
}

int
main(void)
{
	// Random123 kat_vectors: philox4x32 10 rounds.
	kat(0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
	kat(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
	    0x41c83b0e, 0xa20bc7c6, 0x6d5451fd);
	kat(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
	    0x94fdcceb, 0x5001e420, 0x24126ea1);

	// Uniform: every draw in [0, 1); mean 1/2, variance 1/12.
	// se(mean) = sqrt(1/12 / N) = 9.1e-4; se(var) = sqrt((1/80 - 1/144) / N)
	// = 2.4e-4 (the fourth central moment of U(0, 1) is 1/80).
	int inrange = 1;
	double lo = 1, hi = 0;
	for (uint64_t i = 0; i < N; i++) {
		double u = ir_rand_uniform(SEED, RUN, i);
		inrange &= u >= 0 && u < 1;
		lo = fmin(lo, u);
		hi = fmax(hi, u);
	}
	CHECK(inrange);
	CHECK(lo < 1e-3 && hi > 1 - 1e-3);
	double m, v;
	moments(s_uniform, 0, &m, &v);
	CHECK_NEAR(m, 0.5, 0.0046);
	CHECK_NEAR(v, 1.0 / 12, 0.0012);

	// Normal: mean 0, variance 1.  se(mean) = 3.2e-3, se(var) = sqrt(2 / N)
	// = 4.5e-3.
	moments(s_normal, 0, &m, &v);
	CHECK_NEAR(m, 0, 0.016);
	CHECK_NEAR(v, 1, 0.023);

	// Gamma(alpha, 1): mean alpha, variance alpha, fourth central moment
	// 3 alpha (alpha + 2), so se(var) = sqrt((3a(a+2) - a^2) / N).
	// alpha = 0.5: se(mean) = 2.2e-3, se(var) = sqrt(3.5 / N) = 5.9e-3.
	moments(s_gamma, 0.5, &m, &v);
	CHECK_NEAR(m, 0.5, 0.011);
	CHECK_NEAR(v, 0.5, 0.03);
	// alpha = 3: se(mean) = 5.5e-3, se(var) = sqrt(36 / N) = 0.019.
	moments(s_gamma, 3, &m, &v);
	CHECK_NEAR(m, 3, 0.027 / 3); // CHECK_NEAR is relative above 1
	CHECK_NEAR(v, 3, 0.095 / 3);
	int positive = 1;
	for (uint64_t i = 0; i < 1000; i++) {
		positive &= ir_rand_gamma(SEED, RUN, i, 0.5) >= 0;
		positive &= ir_rand_gamma(SEED, RUN, i, 3) > 0;
	}
	CHECK(positive);
	CHECK(isnan(ir_rand_gamma(SEED, RUN, 0, 0)) && isnan(ir_rand_gamma(SEED, RUN, 0, -1)));
	CHECK(isnan(ir_rand_gamma(SEED, RUN, 0, NAN)));

	// Determinism: a pure function of (seed, runseed, index).
	CHECK(ir_rand_uniform(1, 2, 3) == ir_rand_uniform(1, 2, 3));
	CHECK(ir_rand_normal(1, 2, 3) == ir_rand_normal(1, 2, 3));
	CHECK(ir_rand_gamma(1, 2, 3, 0.3) == ir_rand_gamma(1, 2, 3, 0.3));
	// Every part of the input matters: seed (both halves), runseed (both
	// halves) and index (both halves).
	double u = ir_rand_uniform(1, 2, 3);
	CHECK(u != ir_rand_uniform(2, 2, 3));
	CHECK(u != ir_rand_uniform(1 | (1ull << 40), 2, 3));
	CHECK(u != ir_rand_uniform(1, 3, 3));
	CHECK(u != ir_rand_uniform(1, 2 | (1ull << 40), 3));
	CHECK(u != ir_rand_uniform(1, 2, 4));
	CHECK(u != ir_rand_uniform(1, 2, 3 | (1ull << 40)));
	CHECK(ir_rand_normal(1, 2, 3) != ir_rand_normal(7, 2, 3));
	// The documented layout: uniform is u53 of words 0 and 1 of block 0.
	uint32_t key[2] = {1, 0 ^ 2}, ctr[4] = {3, 0, 0, 0}, w[4];
	ir_philox(key, ctr, w);
	CHECK(u == ((double)(w[0] >> 5) * 67108864.0 + (double)(w[1] >> 6)) / 9007199254740992.0);
	// Different seeds give different streams: no two of 1000 seeds share the
	// first draw (a collision of 53-bit values would be a 1e-10 event).
	int distinct = 1;
	for (uint64_t s = 0; s < 1000; s++)
		for (uint64_t t = 0; t < s; t++)
			distinct &= ir_rand_uniform(s, 0, 0) != ir_rand_uniform(t, 0, 0);
	CHECK(distinct);
	return TU_DONE("test_random");
}
