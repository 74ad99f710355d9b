// runtime/choice.h -- the cache of choices measured on the GPU
// (docs/CUDA.md, "Choices measured on the GPU"): which candidate of a
// choice record (artifact format 6) ran faster, per artifact, GPU, task
// and choice, kept in one text file so that the next process on the same
// GPU with the same artifact does not time it again.
//
// Plain C and files, no CUDA: runtime/cuda.c uses it, and
// tests/unit/test_choice_cache.c tests it on any machine.  The cache is an
// optimisation, never a requirement: a missing, unwritable or corrupt
// cache is no error (the choice is timed again), a bad line is ignored
// (and dropped by the next store), and a store writes a temporary file in
// the cache's directory and renames it over the old one, so a reader sees
// the old file or the new one, never half of one.
#ifndef FADC_CHOICE_H
#define FADC_CHOICE_H

#include <stddef.h>
#include <stdint.h>

// What a decision is cached under.  The file holds one line per key:
//   <artifact: 16 hex digits> <gpu> <task> <choice> <candidate>
typedef struct RtChoiceKey {
	uint64_t artifact; // the artifact's identity: FNV-1a 64 of its descriptor
	const char *gpu; // rt_choice_gpu's text: printable, no spaces, < RT_CHOICE_GPU_MAX
	uint32_t task; // the task's index in the descriptor
	uint32_t choice; // the choice's index among the task's choice records
} RtChoiceKey;

#define RT_CHOICE_GPU_MAX 256
#define RT_CHOICE_FILE "cuda-choices" // the file's name in the cache directory

// The cache file's path into buf: <dir>/cuda-choices, dir being
// $FADC_CACHE_DIR, else $XDG_CACHE_HOME/fadc, else $HOME/.cache/fadc (empty
// variables count as unset).  0 when none is set or the path does not fit.
int rt_choice_path(char *buf, size_t len);
// The GPU's part of the key: its name with every byte that is not a
// letter, digit, '-', '.' or '_' as '_', then, when uuid (16 bytes) is
// given, ':' and the UUID in hex ("NVIDIA_H200:9c1e...").  The name alone
// cannot tell two GPUs of a kind apart; the UUID can.
void rt_choice_gpu(char buf[RT_CHOICE_GPU_MAX], const char *name, const uint8_t *uuid);
// FADC_CUDA_CHOICE's value: "0", "1", ... force that candidate (a test's
// way to run each); NULL, "" or "auto" is -1: time, or use the cache.
// Anything else is -2 (the caller warns and times).
int rt_choice_forced(const char *env);
// The candidate the file at path holds for key, or -1 (no file, no line
// for key, or only bad ones).
int rt_choice_lookup(const char *path, const RtChoiceKey *key);
// Records candidate (0 .. 255) for key: the file's good lines but key's,
// then key's, written to a temporary file beside it and renamed over it;
// the directory and its parents are made (0700) if missing.  1 on
// success; 0 on any failure, with the file as it was and no temporary
// file left behind.
int rt_choice_store(const char *path, const RtChoiceKey *key, int candidate);

#endif
