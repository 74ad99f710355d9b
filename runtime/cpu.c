// runtime/cpu.c -- which CPU features the host has, checked against what an
// artifact's code needs before it is loaded.
//
// An artifact built for x86-64-v3 (fadc's default) executes AVX2 and FMA
// instructions; on an older CPU it would die of SIGILL in the middle of a
// task.  The compiler records the features by LLVM's names in the
// descriptor; here cpuid says what the host has.  AVX-family features also
// need the operating system to save the wider registers (XGETBV, OSXSAVE),
// or they count as absent.  On other architectures no feature is known,
// and an artifact that needs any fails the check with its name.
//
// An artifact may carry code for several CPU levels (docs/ARTIFACT.md, "CPU
// levels": x86-64-v3 and x86-64-v4 by default); rt_cpu_pick takes the
// highest whose features the host has, so that one file runs everywhere
// at the best it can, or the one FADC_CPU_LEVEL names (tests, and a way to
// compare the levels' speed on one machine).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define HAVE_CPUID 1
#endif

enum { EAX, EBX, ECX, EDX };

typedef struct Feature {
	const char *name; // LLVM's
	unsigned leaf, sub;
	int reg, bit;
	int avx_state; // needs OS support of YMM (1) or ZMM (2) state
} Feature;

// clang-format off
static const Feature features[] = {
	{"sse2",     1,          0, EDX, 26, 0},
	{"sse3",     1,          0, ECX,  0, 0},
	{"ssse3",    1,          0, ECX,  9, 0},
	{"sse4.1",   1,          0, ECX, 19, 0},
	{"sse4.2",   1,          0, ECX, 20, 0},
	{"popcnt",   1,          0, ECX, 23, 0},
	{"cx16",     1,          0, ECX, 13, 0},
	{"sahf",     0x80000001, 0, ECX,  0, 0},
	{"avx",      1,          0, ECX, 28, 1},
	{"avx2",     7,          0, EBX,  5, 1},
	{"bmi",      7,          0, EBX,  3, 0},
	{"bmi2",     7,          0, EBX,  8, 0},
	{"f16c",     1,          0, ECX, 29, 1},
	{"fma",      1,          0, ECX, 12, 1},
	{"lzcnt",    0x80000001, 0, ECX,  5, 0},
	{"movbe",    1,          0, ECX, 22, 0},
	{"xsave",    1,          0, ECX, 26, 0},
	{"avx512f",  7,          0, EBX, 16, 2},
	{"avx512dq", 7,          0, EBX, 17, 2},
	{"avx512cd", 7,          0, EBX, 28, 2},
	{"avx512bw", 7,          0, EBX, 30, 2},
	{"avx512vl", 7,          0, EBX, 31, 2},
};
// clang-format on
#define NFEAT ((int)(sizeof features / sizeof features[0]))

int
rt_cpu_feature_index(const char *name)
{
	for (int i = 0; i < NFEAT; i++)
		if (!strcmp(features[i].name, name))
			return i;
	return -1;
}

const char *
rt_cpu_feature_name(int i)
{
	return i >= 0 && i < NFEAT ? features[i].name : NULL;
}

const char *
rt_cpu_arch(void)
{
#if defined(__x86_64__)
	return "x86_64";
#elif defined(__aarch64__)
	return "aarch64";
#else
	return "unknown";
#endif
}

// A comma list as a bit set; names not in the table set *unknown.
static uint64_t
parse_list(const char *s, int *unknown)
{
	uint64_t set = 0;
	char name[64];
	while (s && *s) {
		const char *c = strchr(s, ',');
		size_t n = c ? (size_t)(c - s) : strlen(s);
		if (n && n < sizeof name) {
			memcpy(name, s, n);
			name[n] = 0;
			int i = rt_cpu_feature_index(name);
			if (i >= 0)
				set |= (uint64_t)1 << i;
			else if (unknown)
				*unknown = 1;
		} else if (n && unknown)
			*unknown = 1;
		s = c ? c + 1 : NULL;
	}
	return set;
}

uint64_t
rt_cpu_host_features(void)
{
	const char *fake = getenv("FADC_CPU_FEATURES");
	if (fake)
		return parse_list(fake, NULL);
	uint64_t set = 0;
#ifdef HAVE_CPUID
	unsigned r[4], max = __get_cpuid_max(0, NULL), maxx = __get_cpuid_max(0x80000000, NULL);
	int ymm = 0, zmm = 0;
	if (max >= 1) {
		__cpuid_count(1, 0, r[EAX], r[EBX], r[ECX], r[EDX]);
		if (r[ECX] & (1u << 27)) { // OSXSAVE: XGETBV is usable
			unsigned lo, hi;
			__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
			ymm = (lo & 0x6) == 0x6;
			zmm = ymm && (lo & 0xe0) == 0xe0;
		}
	}
	for (int i = 0; i < NFEAT; i++) {
		const Feature *f = &features[i];
		unsigned top = f->leaf >= 0x80000000 ? maxx : max;
		if (f->leaf > top)
			continue;
		__cpuid_count(f->leaf, f->sub, r[EAX], r[EBX], r[ECX], r[EDX]);
		if (!(r[f->reg] & (1u << f->bit)))
			continue;
		if ((f->avx_state == 1 && !ymm) || (f->avx_state == 2 && !zmm))
			continue;
		set |= (uint64_t)1 << i;
	}
#endif
	return set;
}

int
rt_cpu_check(const char *required, uint64_t host, char *err, size_t errlen)
{
	char miss[512] = "";
	size_t n = 0;
	char name[64];
	for (const char *s = required; s && *s;) {
		const char *c = strchr(s, ',');
		size_t len = c ? (size_t)(c - s) : strlen(s);
		if (len) {
			if (len >= sizeof name)
				len = sizeof name - 1;
			memcpy(name, s, len);
			name[len] = 0;
			int i = rt_cpu_feature_index(name);
			if (i < 0 || !(host & ((uint64_t)1 << i))) {
				int w = snprintf(miss + n, sizeof miss - n, "%s%s%s", n ? ", " : "", name,
				                 i < 0 ? " (unknown to this runtime)" : "");
				if (w > 0 && (size_t)w < sizeof miss - n)
					n += (size_t)w;
			}
		}
		s = c ? c + 1 : NULL;
	}
	if (!n)
		return 1;
	if (errlen)
		snprintf(err, errlen, "this CPU lacks features the artifact's code needs: %s", miss);
	return 0;
}

int
rt_cpu_pick(const ArtDesc *d, uint64_t host, const char *force, char *err, size_t errlen)
{
	if (force && *force) {
		for (uint32_t i = 0; i < d->nlevel; i++)
			if (!strcmp(d->level[i].cpu, force)) {
				char why[600];
				if (rt_cpu_check(d->level[i].features, host, why, sizeof why))
					return (int)i;
				snprintf(err, errlen, "FADC_CPU_LEVEL=%s: %s", force, why);
				return -1;
			}
		size_t n = (size_t)snprintf(err, errlen, "FADC_CPU_LEVEL=%s: the artifact has no code for "
		                            "that CPU level (it has", force);
		for (uint32_t i = 0; i < d->nlevel && n < errlen; i++)
			n += (size_t)snprintf(err + n, errlen - n, " %s", d->level[i].cpu);
		if (n < errlen)
			snprintf(err + n, errlen - n, ")");
		return -1;
	}
	for (uint32_t i = d->nlevel; i-- > 1;)
		if (rt_cpu_check(d->level[i].features, host, NULL, 0))
			return (int)i;
	char why[600];
	if (rt_cpu_check(d->level[0].features, host, why, sizeof why))
		return 0;
	snprintf(err, errlen, "compiled for --cpu %s: %s", d->level[0].cpu, why);
	return -1;
}
