/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_wire.c -- libFuzzer harness for sbml's datagram parser (wire.c)
 *
 * Each input is parsed as it is and with its checksum made right (S3
 * recomputed here from the header's own claims, independently of
 * wire.c), so that the fuzzer gets past the checksum into the field
 * checks.  Whatever the parser accepts must lie inside the input, keep
 * the limits, and seal back to the very same bytes; anything else is a
 * bug (abort).  Built with clang -fsanitize=fuzzer,address,undefined by
 * tests/common/fuzz_parser.sh; with -DSBML_FUZZ_SEEDS it is instead a
 * program writing a seed corpus of valid datagrams of every type.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbml_int.h"

#define MAX_MESSAGE 1024u

static void
check_accepted(const uint8_t *data, size_t size, const struct sbml__wire *w)
{
	static uint8_t again[72 + 16 * SBML_WIRE_MAX_RSNS +
		8 * SBML_WIRE_MAX_ACKS + MAX_MESSAGE];
	struct sbml_wire_rsn rsns[SBML_WIRE_MAX_RSNS];
	uint64_t acks[SBML_WIRE_MAX_ACKS];

	if (w->rsns != data + sizeof(struct sbml_wire_hdr) ||
	    w->acks != w->rsns + (size_t)w->nrsn * 16 ||
	    w->payload != w->acks + (size_t)w->nack * 8 ||
	    w->payload + w->payload_len != data + size ||
	    w->payload_len > MAX_MESSAGE || w->nrsn > SBML_WIRE_MAX_RSNS ||
	    w->nack > SBML_WIRE_MAX_ACKS || w->src == w->dst || w->inc == 0)
		abort();
	memcpy(rsns, w->rsns, (size_t)w->nrsn * 16);
	memcpy(acks, w->acks, (size_t)w->nack * 8);
	size_t n = sbml__wire_seal(again, w, rsns, acks, w->payload);
	if (n != size || memcmp(again, data, size) != 0)
		abort(); /* accepted bytes are not canonical */
}

/* S3, recomputed from the header's own claims. */
static void
fix_checksum(uint8_t *b, size_t size)
{
	struct sbml_wire_hdr h;

	memcpy(&h, b, sizeof(h));
	uint64_t c = rio_checksum(size > sizeof(h) ? b + sizeof(h)
						   : (const uint8_t *)"",
		size - sizeof(h), SBML_WIRE_SEED);
	h.checksum = rio_checksum(&h, offsetof(struct sbml_wire_hdr, checksum),
		c);
	memcpy(b, &h, sizeof(h));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sbml__wire w;

	if (sbml__wire_parse(data, size, MAX_MESSAGE, &w) == SBML__WIRE_OK)
		check_accepted(data, size, &w);
	if (size >= sizeof(struct sbml_wire_hdr)) {
		uint8_t *copy = malloc(size);
		if (copy == NULL)
			return 0;
		memcpy(copy, data, size);
		fix_checksum(copy, size);
		if (sbml__wire_parse(copy, size, MAX_MESSAGE, &w) ==
		    SBML__WIRE_OK)
			check_accepted(copy, size, &w);
		free(copy);
	}
	return 0;
}

#ifdef SBML_FUZZ_SEEDS
static void
seed(const char *dir, int n, uint8_t type, uint16_t nrsn, uint16_t nack,
	uint32_t plen)
{
	static uint8_t buf[72 + 16 * SBML_WIRE_MAX_RSNS +
		8 * SBML_WIRE_MAX_ACKS + MAX_MESSAGE];
	static uint8_t payload[MAX_MESSAGE];
	struct sbml_wire_rsn rsns[SBML_WIRE_MAX_RSNS];
	uint64_t acks[SBML_WIRE_MAX_ACKS];
	struct sbml__wire w = { 0 };
	char path[4096];

	for (unsigned i = 0; i < nrsn; i++)
		rsns[i] = (struct sbml_wire_rsn){ 10 + i, i };
	for (unsigned i = 0; i < nack; i++)
		acks[i] = 100 + i;
	memset(payload, 'p', plen);
	w.type = type;
	w.src = 1;
	w.dst = 2;
	w.nrsn = nrsn;
	w.nack = nack;
	w.payload_len = plen;
	w.group = 1;
	w.inc = 1234;
	w.ssn = type == SBML_PKT_DATA || type == SBML_PKT_REPLAY ? 5 : 0;
	w.sii = 7;
	w.arg = type == SBML_PKT_REPLAY ? 9 : 0;
	w.ckpt = 3;
	size_t len = sbml__wire_seal(buf, &w, rsns, acks, payload);
	snprintf(path, sizeof(path), "%s/seed-%d", dir, n);
	FILE *f = fopen(path, "wb");
	if (f == NULL) {
		perror(path);
		exit(1);
	}
	fwrite(buf, 1, len, f);
	fclose(f);
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	seed(argv[1], 0, SBML_PKT_DATA, 0, 0, 0);
	seed(argv[1], 1, SBML_PKT_DATA, 3, 2, 40);
	seed(argv[1], 2, SBML_PKT_CTRL, 1, 1, 0);
	seed(argv[1], 3, SBML_PKT_REPLAY_REQ, 0, 0, 0);
	seed(argv[1], 4, SBML_PKT_REPLAY, 0, 0, 100);
	seed(argv[1], 5, SBML_PKT_REPLAY_END, 0, 0, 0);
	seed(argv[1], 6, SBML_PKT_DONE, 0, 0, 0);
	seed(argv[1], 7, SBML_PKT_DATA, SBML_WIRE_MAX_RSNS,
		SBML_WIRE_MAX_ACKS, MAX_MESSAGE);
	return 0;
}
#endif
