// support/random.c -- the counter-based random number generator and samplers.
//
// Every random op of the IR draws from Philox4x32-10 (Salmon, Moraes, Dror
// and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// generator of Random123, cuRAND and PyTorch's CUDA backend.  Philox is a
// keyed bijection of a 128-bit counter, so element i of a tensor is a pure
// function of (key, counter) and no state is carried from one element to
// the next: the interpreter, the LLVM code and a CUDA thread that owns
// element i all compute the same number independently, in any order.
//
// How a sampler forms the Philox input (every backend must do the same):
//
//   key[0] = seed bits 0..31
//   key[1] = seed bits 32..63  XOR  runseed bits 0..31
//   ctr[0] = index bits 0..31        ctr[1] = index bits 32..63
//   ctr[2] = draw                    ctr[3] = runseed bits 32..63
// runseed's two words are the run's seed (low, keyed) and the call counter
// (high, counted): see docs/IR.md, "Random numbers".
//
// `seed` is the op's attribute, `runseed` the run's seed and `index` the
// element's flat (row-major) index in the result.  `draw` numbers the
// 128-bit blocks one element consumes: uniform and normal use block 0;
// gamma uses one block per rejection iteration (and one more in front of
// them for alpha < 1).  Nothing here touches global state or libc's rand.
//
// Conversions from 32-bit words to doubles:
//   u53(a, b) = ((a >> 5) * 2^26 + (b >> 6)) * 2^-53, a multiple of 2^-53
//               in [0, 1) (the genrand_res53 construction of MT19937);
//   u32(a)    = a * 2^-32, in [0, 1); u32o(a) = (a + 0.5) * 2^-32, in (0, 1).
#include <math.h>

#include "support.h"

// Constants of Philox4x32: the round multipliers and the Weyl sequence that
// bumps the key between rounds (golden ratio and sqrt(3) - 1, in 32 bits).
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static const double TWO_PI = 6.283185307179586476925286766559;

// One round: two 32x32->64 multiplies; the high halves are mixed with the
// other two words and the key, the low halves are passed on (a Feistel-like
// S-P network whose S-box is the multiply).
static void
philox_round(uint32_t c[4], const uint32_t k[2])
{
	uint64_t p0 = (uint64_t)PHILOX_M0 * c[0];
	uint64_t p1 = (uint64_t)PHILOX_M1 * c[2];
	uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
	uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
	uint32_t r0 = hi1 ^ c[1] ^ k[0], r2 = hi0 ^ c[3] ^ k[1];
	c[0] = r0;
	c[1] = lo1;
	c[2] = r2;
	c[3] = lo0;
}

void
ir_philox(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4])
{
	uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
	uint32_t k[2] = {key[0], key[1]};
	// Ten rounds, the key bumped between consecutive rounds (nine bumps),
	// exactly as Random123's philox4x32_R(10, ...).
	for (int r = 0; r < 10; r++) {
		if (r > 0) {
			k[0] += PHILOX_W0;
			k[1] += PHILOX_W1;
		}
		philox_round(c, k);
	}
	out[0] = c[0];
	out[1] = c[1];
	out[2] = c[2];
	out[3] = c[3];
}

// The block `draw` of element `index` (see the layout at the top).
static void
block(uint64_t seed, uint64_t runseed, uint64_t index, uint32_t draw, uint32_t out[4])
{
	uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32) ^ (uint32_t)runseed};
	uint32_t ctr[4] = {(uint32_t)index, (uint32_t)(index >> 32), draw,
	                   (uint32_t)(runseed >> 32)};
	ir_philox(key, ctr, out);
}

static double
u53(uint32_t a, uint32_t b)
{
	return ((double)(a >> 5) * 67108864.0 + (double)(b >> 6)) * (1.0 / 9007199254740992.0);
}

static double
u32(uint32_t a)
{
	return (double)a * (1.0 / 4294967296.0);
}

static double
u32o(uint32_t a)
{
	return ((double)a + 0.5) * (1.0 / 4294967296.0);
}

double
ir_rand_uniform(uint64_t seed, uint64_t runseed, uint64_t index)
{
	uint32_t w[4];
	block(seed, runseed, index, 0, w);
	return u53(w[0], w[1]);
}

// Box-Muller, cosine branch: with U1, U2 independent uniforms,
// sqrt(-2 ln U1) cos(2 pi U2) is N(0, 1).  U1 = 1 - u53(w0, w1) lies in
// (0, 1], so the log is finite; U2 = u53(w2, w3).  The sine branch (a
// second, independent normal) is not used: one element, one block.
double
ir_rand_normal(uint64_t seed, uint64_t runseed, uint64_t index)
{
	uint32_t w[4];
	block(seed, runseed, index, 0, w);
	double r = sqrt(-2.0 * log(1.0 - u53(w[0], w[1])));
	return r * cos(TWO_PI * u53(w[2], w[3]));
}

// Gamma(alpha, rate 1) by Marsaglia and Tsang, "A simple method for
// generating gamma variables" (ACM TOMS 2000).  With d = alpha - 1/3 and
// c = 1 / sqrt(9d), draw x ~ N(0, 1) and u ~ U(0, 1); v = (1 + c x)^3 is
// accepted when v > 0 and
//     u < 1 - 0.0331 x^4   (the squeeze, no logs)  or
//     ln u < x^2 / 2 + d (1 - v + ln v),
// and then d v ~ Gamma(alpha).  Each iteration uses one block: the normal
// by Box-Muller from u32o(w0) and u32(w1) (32-bit uniforms are plenty:
// they cut the normal's tail only beyond 6.7 sigma, a mass of ~2e-11),
// and u = u53(w2, w3).  The expected number of iterations is below 1.05.
//
// For alpha < 1 the method needs alpha >= 1, so it uses the boost
// Gamma(alpha) = Gamma(alpha + 1) * U^(1 / alpha), U = 1 - u53(w0, w1) of
// block 0 in (0, 1]; the iterations then start at block 1.
double
ir_rand_gamma(uint64_t seed, uint64_t runseed, uint64_t index, double alpha)
{
	if (!(alpha > 0))
		return NAN; // also NaN alpha
	if (isinf(alpha))
		return INFINITY;
	uint32_t w[4], draw = 0;
	double boost = 1;
	if (alpha < 1) {
		block(seed, runseed, index, draw++, w);
		boost = pow(1.0 - u53(w[0], w[1]), 1.0 / alpha);
		alpha += 1;
	}
	double d = alpha - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
	// The loop ends with probability one; the cap only keeps a corrupted
	// caller from spinning (rejecting 1000 times in a row has probability
	// below 0.05^1000).
	for (int it = 0; it < 1000; it++) {
		block(seed, runseed, index, draw++, w);
		double x = sqrt(-2.0 * log(u32o(w[0]))) * cos(TWO_PI * u32(w[1]));
		double v = 1 + c * x;
		if (v <= 0)
			continue;
		v = v * v * v;
		double u = u53(w[2], w[3]);
		if (u < 1 - 0.0331 * (x * x) * (x * x))
			return d * v * boost;
		if (log(u) < 0.5 * x * x + d * (1 - v + log(v)))
			return d * v * boost;
	}
	return NAN;
}

// The key of a named stream: FNV-1a 64 of the name, xor that of a salt.
// The tasks' own inputs (v, v.<p>) are U[0, 1) draws of
// ir_rand_uniform(ir_rand_name_key(input, "v"), runseed, i), in `fadc run`
// and fadc-bench alike, so that every backend and both tools see one v.
static uint64_t
fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

uint64_t
ir_rand_name_key(const char *name, const char *salt)
{
	return fnv1a(name) ^ fnv1a(salt);
}
