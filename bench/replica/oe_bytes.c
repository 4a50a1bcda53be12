/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * oe_bytes.c -- where order-entry's replicated bytes come from
 *
 *   vr-oe-bytes [-n TRANSACTIONS] [-s DB_BYTES]
 *
 * Runs tpcbench's order-entry (bench/tpcb_tpcc/wl_order_entry.c) on a
 * database in DRAM, behind a backend that keeps each transaction's
 * before-images at set_ranges and, at commit, diffs every declared range
 * against them as the active primary's hook does (vr_diff, gap 16: runs
 * of fewer than 16 equal bytes are sent along), and byte for byte (gap
 * 1).  An abort puts the before-images back and counts nothing.  Per
 * transaction type (new-order: its second range is the 872-byte order;
 * delivery: its first two are the clock and a district's no_head;
 * payment otherwise) and per range, it prints the bytes declared, the
 * bytes that changed, the data bytes a REDO record carries (gap 16), its
 * pieces, and the record's size (40-byte header, 8 bytes per piece, the
 * data padded to 8), and the whole mix at gaps 1, 4, 8 and 16.  Within new-order's order row it splits the changed
 * bytes by field, since the order slot of a ring is reused.
 * Default: 200,000 transactions on a 50 MB database, as tpcbench's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpcbench.h"
#include "vista_replica.h"

#define MAXR 64
#define NTYPE 3
#define NCLASS 8

static const char *tname[NTYPE] = { "new-order", "payment", "delivery" };
/* Range classes per type, by position (see classify). */
static const char *cname[NTYPE][NCLASS] = {
	{ "district", "order", "new-order row", "clock", "stock" },
	{ "warehouse ytd", "district ytd", "customer", "history", "header",
	  "customer data (BC)" },
	{ "clock", "district no_head", "order", "customer" },
};

struct acc {
	double declared, changed, sent, pieces, records, tx;
};

struct ctx {
	char *before;          /* the before-images, back to back */
	size_t nr;
	struct tb_range r[MAXR];
	size_t off[MAXR];      /* each range's image in before */
	struct acc type[NTYPE];
	struct acc cls[NTYPE][NCLASS];
	/* new-order's order row, changed bytes by field */
	double o_hdr, o_line[4], o_old;
	uint64_t *ol;
	/* the whole mix, data bytes and pieces at each gap of gaps[] */
	double gsent[4], gpieces[4];
};
static const size_t gaps[4] = { 1, 4, 8, 16 };

static struct ctx C;

static int
b_begin(void *ctx)
{
	(void)ctx;
	C.nr = 0;
	return 0;
}

static int
b_set_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	size_t at = C.nr ? C.off[C.nr - 1] + C.r[C.nr - 1].len : 0;
	(void)ctx;
	for (size_t i = 0; i < n && C.nr < MAXR; i++) {
		C.r[C.nr] = r[i];
		C.off[C.nr] = at;
		memcpy(C.before + at, r[i].addr, r[i].len);
		at += r[i].len;
		C.nr++;
	}
	return 0;
}

static int
b_abort(void *ctx)
{
	(void)ctx;
	for (size_t i = C.nr; i-- > 0;)
		memcpy(C.r[i].addr, C.before + C.off[i], C.r[i].len);
	C.nr = 0;
	return 0;
}

static int
classify(int *cls)
{
	if (C.nr >= 2 && C.r[1].len == 872) {
		for (size_t i = 0; i < C.nr; i++)
			cls[i] = i < 4 ? (int)i : 4;
		return 0;
	}
	if (C.nr >= 2 && C.r[0].len == 8 && C.r[1].len == 4) {
		for (size_t i = 0; i < C.nr; i++)
			cls[i] = i == 0 ? 0 : 1 + (int)((i - 1) % 3);
		return 2;
	}
	for (size_t i = 0; i < C.nr; i++)
		cls[i] = (int)i;
	return 1;
}

/* Changed bytes of [a, a + len) of range i. */
static size_t
changed(size_t i, size_t a, size_t len)
{
	const char *b = C.before + C.off[i], *c = C.r[i].addr;
	size_t k = 0;
	for (size_t j = a; j < a + len && j < C.r[i].len; j++)
		k += b[j] != c[j];
	return k;
}

static int
b_commit(void *ctx)
{
	int cls[MAXR], t = classify(cls);
	size_t data = 0, np = 0;
	struct acc *ta = &C.type[t];
	(void)ctx;
	for (size_t i = 0; i < C.nr; i++) {
		struct acc *ca = &C.cls[t][cls[i]];
		size_t ch = changed(i, 0, C.r[i].len), sent = 0;
		int k = vr_diff(C.before + C.off[i], C.r[i].addr, C.r[i].len,
			16, C.ol, 4096);
		for (int j = 0; j < k; j++)
			sent += C.ol[2 * j + 1];
		for (int g = 0; g < 4; g++) {
			int kg = vr_diff(C.before + C.off[i], C.r[i].addr,
				C.r[i].len, gaps[g], C.ol, 4096);
			for (int j = 0; j < kg; j++)
				C.gsent[g] += (double)C.ol[2 * j + 1];
			C.gpieces[g] += kg;
		}
		k = vr_diff(C.before + C.off[i], C.r[i].addr, C.r[i].len, 16,
			C.ol, 4096);
		ca->declared += (double)C.r[i].len;
		ca->changed += (double)ch;
		ca->sent += (double)sent;
		ca->pieces += k;
		ca->tx++;
		ta->declared += (double)C.r[i].len;
		ta->changed += (double)ch;
		ta->sent += (double)sent;
		ta->pieces += k;
		data += sent;
		np += (size_t)k;
		if (t == 0 && cls[i] == 1) {
			/* the order row: 32-byte header, 56-byte lines
			 * {i_id, supply, qty, pad: 16; amount 8;
			 * delivery_d 8; dist_info 24} */
			uint32_t cnt;
			memcpy(&cnt, (char *)C.r[i].addr + 20, 4);
			C.o_hdr += (double)changed(i, 0, 32);
			for (uint32_t l = 0; l < 15; l++) {
				size_t a = 32 + 56 * (size_t)l;
				if (l >= cnt) {
					C.o_old += (double)changed(i, a, 56);
					continue;
				}
				C.o_line[0] += (double)changed(i, a, 16);
				C.o_line[1] += (double)changed(i, a + 16, 8);
				C.o_line[2] += (double)changed(i, a + 24, 8);
				C.o_line[3] += (double)changed(i, a + 32, 24);
			}
		}
	}
	if (np) {
		ta->records++;
		ta->pieces += 0;
	}
	ta->tx++;
	(void)data;
	C.nr = 0;
	return 0;
}

static const struct tb_backend mem = {
	.name = "diff", .can_abort = true, .begin = b_begin,
	.set_ranges = b_set_ranges, .commit = b_commit, .abort = b_abort,
};

int
main(int argc, char **argv)
{
	uint64_t n = 200000;
	size_t size = 50u << 20;
	struct tb_opts o;
	void *wl, *db;
	double all_tx = 0, all_decl = 0, all_ch = 0, all_sent = 0, all_p = 0;
	int c;

	while ((c = getopt(argc, argv, "n:s:")) != -1) {
		if (c == 'n')
			n = strtoull(optarg, NULL, 0);
		else if (c == 's')
			size = strtoull(optarg, NULL, 0);
		else {
			fprintf(stderr, "usage: vr-oe-bytes [-n TX] "
				"[-s DB_BYTES]\n");
			return 2;
		}
	}
	memset(&o, 0, sizeof(o));
	db = calloc(1, size);
	C.before = malloc(1 << 20);
	C.ol = malloc(2 * 4096 * sizeof(*C.ol));
	if (db == NULL || C.before == NULL || C.ol == NULL ||
	    tb_order_entry.init(&o, size, 1, &wl))
		return 1;
	tb_order_entry.populate(wl, db);
	for (uint64_t i = 0; i < n; i++)
		if (tb_order_entry.tx(wl, db, &mem, NULL) < 0)
			return 1;
	{
		char why[256];
		if (tb_order_entry.check(wl, db, why, sizeof(why))) {
			fprintf(stderr, "vr-oe-bytes: check: %s\n", why);
			return 1;
		}
	}
	for (int t = 0; t < NTYPE; t++) {
		all_tx += C.type[t].tx;
		all_decl += C.type[t].declared;
		all_ch += C.type[t].changed;
		all_sent += C.type[t].sent;
		all_p += C.type[t].pieces;
	}
	printf("order-entry, %llu transactions, %zu-byte database; bytes per "
		"transaction of the whole mix (share of the mix's changed "
		"bytes)\n", (unsigned long long)n, size);
	printf("%-26s %6s %9s %9s %9s %7s\n", "type / range", "mix%",
		"declared", "changed", "sent(16)", "pieces");
	for (int t = 0; t < NTYPE; t++) {
		struct acc *a = &C.type[t];
		printf("%-26s %6.1f %9.1f %9.1f %9.1f %7.2f  (%.0f%%)\n",
			tname[t], 100 * a->tx / all_tx, a->declared / all_tx,
			a->changed / all_tx, a->sent / all_tx,
			a->pieces / all_tx, 100 * a->changed / all_ch);
		for (int k = 0; k < NCLASS && cname[t][k]; k++) {
			struct acc *ca = &C.cls[t][k];
			if (ca->tx == 0)
				continue;
			printf("  %-24s %6s %9.1f %9.1f %9.1f %7.2f\n",
				cname[t][k], "", ca->declared / all_tx,
				ca->changed / all_tx, ca->sent / all_tx,
				ca->pieces / all_tx);
		}
	}
	printf("%-26s %6s %9.1f %9.1f %9.1f %7.2f\n", "all", "100",
		all_decl / all_tx, all_ch / all_tx, all_sent / all_tx,
		all_p / all_tx);
	printf("record bytes (40 + 8 x pieces + data), per transaction: "
		"%.1f; metadata %.1f\n", (40 * (C.type[0].tx + C.type[1].tx +
		C.type[2].tx) + 8 * all_p + all_sent) / all_tx,
		(40 * all_tx + 8 * all_p) / all_tx);
	printf("new-order's order row, changed bytes per new-order: header "
		"%.1f; its lines: ids/qty %.1f, amount %.1f, delivery_d %.1f, "
		"dist_info %.1f; the slot's older lines zeroed %.1f\n",
		C.o_hdr / C.type[0].tx, C.o_line[0] / C.type[0].tx,
		C.o_line[1] / C.type[0].tx, C.o_line[2] / C.type[0].tx,
		C.o_line[3] / C.type[0].tx, C.o_old / C.type[0].tx);
	printf("the whole mix by the diff's gap (runs of fewer equal bytes "
		"sent along), per transaction:\n");
	for (int g = 0; g < 4; g++)
		printf("  gap %2zu: data %.1f, pieces %.2f, record %.1f "
			"(data + 8 x pieces + 40)\n", gaps[g],
			C.gsent[g] / all_tx, C.gpieces[g] / all_tx,
			(C.gsent[g] + 8 * C.gpieces[g]) / all_tx + 40);
	tb_order_entry.fini(wl);
	return 0;
}
