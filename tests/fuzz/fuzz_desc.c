// tests/fuzz/fuzz_desc.c -- libFuzzer harness over the artifact
// descriptor decoder (runtime/artifact.c; docs/ARTIFACT.md).
//
// The input is a descriptor: the bytes between an artifact's image section
// and its trailer (the seeds in tests/fuzz/corpus-desc are cut from real
// artifacts).  Fed to art_read as an artifact file, nearly every mutation
// would stop at the CRC-32 over the file and never reach the decoder, so
// the harness makes the file itself around the input and computes the
// checksums then:
//
//   1. art_desc_decode on the input (an exact-size heap buffer, so ASan
//      sees any read past its end): a descriptor or a message, never a
//      crash, a leak, UB or an allocation the bytes do not justify.  One
//      that decodes must encode back to the same bytes (art_desc_encode of
//      the version read: the format has one encoding).
//   2. art_read on a file "ELF-like prefix | input | trailer", the trailer
//      made by art_trailer_make with the file's CRC and the version the
//      input's own header claims: the trailer and CRC checks pass, so the
//      decoder and the checks after it (the trailer's version against the
//      descriptor's, the image section's place and hash) run on the input.
//      It succeeds exactly when step 1 did and the input's image section
//      (images_bytes, images_hash) matches the bytes before it: the empty
//      one, in practice.
//   3. For a descriptor that decodes with a modest image section: the file
//      again with an image section of that size before it, its FNV-1a
//      hash written into the descriptor (re-encoded), so the whole of
//      art_read runs to success and hands back the same descriptor bytes
//      and images.
#define _GNU_SOURCE // memfd_create
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
bad(const char *what, const char *err)
{
	fprintf(stderr, "fuzz_desc: %s%s%s\n", what, err ? ": " : "", err ? err : "");
	abort();
}

static const uint8_t prefix[] = "\177ELF fuzz: stands for the shared library";

// prefix | images[0..nimg) | desc[0..len) | trailer, checksummed, to the
// memory file; returns its path.
static const char *
artifact(const uint8_t *images, size_t nimg, const uint8_t *desc, size_t len, uint32_t version)
{
	size_t body = sizeof prefix + nimg + len;
	uint8_t *b = malloc(body + ART_TRAILER_SIZE);
	if (!b)
		bad("out of memory", NULL);
	memcpy(b, prefix, sizeof prefix);
	if (nimg)
		memcpy(b + sizeof prefix, images, nimg);
	if (len)
		memcpy(b + sizeof prefix + nimg, desc, len);
	art_trailer_make(b + body, version, body, len, art_crc32(0, b, body));
	const char *path = fuzz_file(b, body + ART_TRAILER_SIZE);
	free(b);
	return path;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	ArtDesc d, r;
	uint8_t *enc, *rb;
	size_t elen, rlen;

	// 1. The decoder alone.
	int ok = art_desc_decode(data, size, &d, err, sizeof err);
	if (!ok && !err[0])
		bad("a refusal without a message", NULL);
	if (ok) {
		if (!art_desc_encode(&d, &enc, &elen))
			bad("a descriptor that decodes does not encode", NULL);
		if (elen != size || memcmp(enc, data, size))
			bad("decode then encode changed the bytes", NULL);
		free(enc);
	}

	// 2. The same bytes as an artifact with good checksums.
	uint32_t version = size >= 12 ? (uint32_t)data[8] | (uint32_t)data[9] << 8 |
	                                    (uint32_t)data[10] << 16 | (uint32_t)data[11] << 24
	                              : ART_FORMAT_VERSION;
	ArtRead rc =
	    art_read(artifact(NULL, 0, data, size, version), &r, &rb, &rlen, err, sizeof err);
	// The image section is the images_bytes before the descriptor: of the
	// prefix here, so it matches when it is empty (hash ART_FNV_BASIS), or
	// in the unlikely case of the prefix's tail and its hash.
	int match = ok && d.images_bytes <= sizeof prefix &&
	            art_fnv1a64(ART_FNV_BASIS, prefix + sizeof prefix - d.images_bytes,
	                        (size_t)d.images_bytes) == d.images_hash;
	if ((rc == ART_READ_OK) != match)
		bad(match ? "art_read refuses what the decoder reads" : "art_read reads what it must refuse",
		    rc == ART_READ_OK ? NULL : err);
	if (rc == ART_READ_OK) {
		if (rlen != size || memcmp(rb, data, size) || (r.images_bytes && !r.images))
			bad("art_read handed back other descriptor bytes", NULL);
		art_desc_free(&r);
		free(rb);
	} else if (!err[0] || rc == ART_READ_IO || rc == ART_READ_NOMEM)
		bad("art_read failed on a file in memory", err);
	if (!ok)
		return 0;

	// 3. With an image section to match (the hash re-encoded into the
	// descriptor), art_read reads it all.
	if (d.images_bytes && d.images_bytes <= 1 << 16) {
		size_t nimg = (size_t)d.images_bytes;
		uint8_t *img = malloc(nimg);
		if (!img)
			bad("out of memory", NULL);
		for (size_t i = 0; i < nimg; i++)
			img[i] = (uint8_t)(i * 131 + (i >> 8));
		d.images_hash = art_fnv1a64(ART_FNV_BASIS, img, nimg);
		if (!art_desc_encode(&d, &enc, &elen))
			bad("a descriptor that decodes does not encode", NULL);
		rc = art_read(artifact(img, nimg, enc, elen, d.version), &r, &rb, &rlen, err, sizeof err);
		if (rc != ART_READ_OK)
			bad("art_read refuses a descriptor with its image section", err);
		if (rlen != elen || memcmp(rb, enc, elen) || !r.images || memcmp(r.images, img, nimg))
			bad("art_read handed back other bytes", NULL);
		art_desc_free(&r);
		free(rb);
		free(enc);
		free(img);
	}
	art_desc_free(&d);
	return 0;
}
