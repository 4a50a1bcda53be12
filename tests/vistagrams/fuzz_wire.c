/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_wire.c -- libFuzzer harness for the datagram parser (wire.c)
 *
 * Each input is parsed twice: as it is, and with its checksum made right
 * (W3 recomputed here, independently of wire.c), so that the fuzzer gets
 * past the checksum into the field checks.  Whatever the parser accepts
 * must lie inside the input and seal back to the very same bytes; anything
 * else is a bug (abort).  Built with clang -fsanitize=fuzzer,address,
 * undefined by tests/common/fuzz_parser.sh; with -DVG_FUZZ_SEEDS it is
 * instead a program that writes a seed corpus of valid datagrams.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vg_int.h"

#define MAX_MESSAGE 1024u

static void
check_accepted(const uint8_t *data, size_t size, const struct vg__wire *w)
{
	uint64_t acks[VG_WIRE_MAX_ACKS];
	struct vg_wire_hdr h;

	if (w->acks != data + sizeof(h) ||
	    w->payload != w->acks + (size_t)w->nacks * 8 ||
	    w->payload + w->payload_len != data + size ||
	    w->payload_len > MAX_MESSAGE || w->nacks > VG_WIRE_MAX_ACKS)
		abort();
	memcpy(acks, w->acks, (size_t)w->nacks * 8);
	vg__wire_seal(&h, w, acks,
		vg__wire_payload_csum(w->payload, w->payload_len));
	if (memcmp(&h, data, sizeof(h)) != 0)
		abort(); /* accepted bytes are not canonical */
}

/* W3, recomputed from the header's own claims. */
static void
fix_checksum(uint8_t *b, size_t size)
{
	struct vg_wire_hdr h;
	size_t body, na;

	memcpy(&h, b, sizeof(h));
	body = size - sizeof(h);
	na = (size_t)h.nacks * 8 < body ? (size_t)h.nacks * 8 : body;
	uint64_t c = vg__wire_payload_csum(b + sizeof(h) + na, body - na);
	c = rio_checksum(na ? b + sizeof(h) : (const uint8_t *)"", na, c);
	h.checksum = rio_checksum(&h, offsetof(struct vg_wire_hdr, checksum),
		c);
	memcpy(b, &h, sizeof(h));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vg__wire w;

	if (vg__wire_parse(data, size, MAX_MESSAGE, &w) == VG__WIRE_OK)
		check_accepted(data, size, &w);
	if (size >= sizeof(struct vg_wire_hdr)) {
		uint8_t *copy = malloc(size);
		if (copy == NULL)
			return 0;
		memcpy(copy, data, size);
		fix_checksum(copy, size);
		if (vg__wire_parse(copy, size, MAX_MESSAGE, &w) == VG__WIRE_OK)
			check_accepted(copy, size, &w);
		free(copy);
	}
	return 0;
}

#ifdef VG_FUZZ_SEEDS
static void
seed(const char *dir, int n, uint8_t type, uint16_t flags, uint16_t nacks,
	uint32_t plen)
{
	uint8_t buf[sizeof(struct vg_wire_hdr) + 8 * VG_WIRE_MAX_ACKS +
		MAX_MESSAGE];
	uint64_t acks[VG_WIRE_MAX_ACKS];
	struct vg__wire w = { 0 };
	struct vg_wire_hdr h;
	char path[4096];

	for (unsigned i = 0; i < nacks; i++)
		acks[i] = 100 + i;
	memset(buf + sizeof(h) + (size_t)nacks * 8, 'p', plen);
	w.type = type;
	w.flags = flags;
	w.nacks = nacks;
	w.payload_len = plen;
	w.src_node = type == VG_PKT_RESPONSE ? 2 : 1;
	w.src_inc = type == VG_PKT_RESPONSE ? 22 : 11;
	w.req_node = 1;
	w.req_inc = 11;
	w.seq = type == VG_PKT_ACK ? 0 : 200;
	w.low = type == VG_PKT_RESPONSE ? 0 : 150;
	vg__wire_seal(&h, &w, acks,
		vg__wire_payload_csum(buf + sizeof(h) + (size_t)nacks * 8, plen));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), acks, (size_t)nacks * 8);
	snprintf(path, sizeof(path), "%s/seed-%d", dir, n);
	FILE *f = fopen(path, "wb");
	if (f == NULL) {
		perror(path);
		exit(1);
	}
	fwrite(buf, 1, sizeof(h) + (size_t)nacks * 8 + plen, f);
	fclose(f);
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	seed(argv[1], 0, VG_PKT_REQUEST, 0, 0, 0);
	seed(argv[1], 1, VG_PKT_REQUEST, VG_PKT_F_RETRANS, 3, 40);
	seed(argv[1], 2, VG_PKT_RESPONSE, 0, 0, 100);
	seed(argv[1], 3, VG_PKT_ACK, 0, 5, 0);
	seed(argv[1], 4, VG_PKT_REQUEST, 0, VG_WIRE_MAX_ACKS, MAX_MESSAGE);
	return 0;
}
#endif
