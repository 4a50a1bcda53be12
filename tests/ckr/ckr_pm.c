/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckr_pm.c -- libckr's pool storage under pmemtest (suite crash-pm)
 *
 *   ckr_pm setup DIR        an empty checkpoint directory DIR on rio pools
 *                           (ckpt.pool, log.pool), closed
 *   ckr_pm run DIR          NCKPT checkpoints of the states S_1..S_NCKPT,
 *                           each started at a point of consistency and
 *                           waited for, then _exit (a crash)
 *   ckr_pm check DIR        the crash image directory DIR: every checked
 *                           slot is either incomplete or holds exactly the
 *                           state of its epoch, and recovery (ckr_open)
 *                           loads the newest complete one
 *
 * S_E (E >= 1) sets every word i to a value of E and i, so each epoch's
 * image differs from every other and from the zeroed slots of `setup`.
 * After ckr_checkpoint_wait returns for epoch E the writer declares a
 * durability point (rio_durable_point): pmemtest warns if any line of
 * slot (E - 1) % 2 is then not yet durable -- a checkpoint reported
 * complete that a power failure could lose.
 *
 * What the checker refuses, for each slot: a header that passes its
 * checks over data that does not match it (CKR_EDATA: the slot was marked
 * complete before its data was durable, ckpt.c I1), an epoch no run
 * writes, a slot of the wrong parity, or data other than S_E.  The
 * recovered state must be S_E of the newest complete slot (zero if none).
 * The broken build hdr_before_data (discount/fc/meson.build) must be
 * caught.
 *
 * The log pool, by group commit:
 *
 *   ckr_pm logrun DIR       NACT actions, committed in groups of LGROUP
 *                           (ckr_opts.log_group) with a checkpoint part
 *                           way, each group waited for (ckr_log_wait),
 *                           then _exit
 *   ckr_pm logcheck DIR     recovery replays each action exactly as
 *                           logged (a torn record of a group is never
 *                           replayed), and the state is that of the
 *                           first n actions, n the durable prefix
 *
 * Action k is act_len(k) bytes of a pattern of k and adds k + 1 to word
 * k % NWORDS (not idempotent: each replayed once).  After ckr_log_wait
 * returns for a group, a durability point on log.pool: pmemtest warns if
 * an acknowledged action could be lost.  The broken build no_rec_csum
 * (its scan skips the records' checksums, so the header of a torn record
 * passes) must be caught.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckr.h"
#include "ckr_int.h"

#define NOBJS 16
#define OBJ 256
#define NWORDS (NOBJS * OBJ / 4)
#define NCKPT 3

#define FAIL(...)                                        \
	do {                                             \
		fprintf(stderr, "ckr_pm: " __VA_ARGS__); \
		fputc('\n', stderr);                     \
		return 1;                                \
	} while (0)

static uint32_t
word(uint64_t e, uint64_t i)
{
	return e == 0 ? 0 : (uint32_t)(e << 24 | i);
}

static struct ckr_opts
opts(void)
{
	struct ckr_opts o;

	memset(&o, 0, sizeof(o));
	o.algo = CKR_IPP;
	o.storage = CKR_STORAGE_POOL;
	o.nobjs = NOBJS;
	o.obj_size = OBJ;
	o.log_capacity = 1 << 16;
	o.rio_flags = RIO_NO_SIGNALS;
	return o;
}

static int
setup(const char *dir)
{
	struct ckr_opts o = opts();
	ckr *c;
	int rc = ckr_open(dir, &o, &c);

	if (rc != 0)
		FAIL("setup %s: %s", dir, ckr_errormsg());
	if ((rc = ckr_close(c)) != 0)
		FAIL("close: %s", ckr_errormsg());
	return 0;
}

static int
run(const char *dir)
{
	struct ckr_opts o = opts();
	ckr *c;
	int rc = ckr_open(dir, &o, &c);

	if (rc != 0)
		FAIL("open %s: %s", dir, ckr_errormsg());
	for (uint64_t e = 1; e <= NCKPT; e++) {
		for (uint64_t i = 0; i < NWORDS; i++)
			ckr_write(c, i, word(e, i));
		if (ckr_point_of_consistency(c, CKR_POC_WAIT) != 1)
			FAIL("point of consistency %llu: %s",
				(unsigned long long)e, ckr_errormsg());
		/* the next period's writes race the writer */
		for (uint64_t i = 0; i < NWORDS; i += 7)
			ckr_write(c, i, 0xdead0000u | (uint32_t)i);
		if ((rc = ckr_checkpoint_wait(c)) != 0)
			FAIL("checkpoint %llu: %s", (unsigned long long)e,
				ckr_errormsg());
		/* Reported complete: every line of its slot is durable. */
		rio_durable_point(c->ckpt.pool, "ckr_checkpoint_wait returned");
	}
	_exit(0); /* a crash after the last checkpoint */
}

static int
check(const char *dir)
{
	struct ckr_opts o = opts();
	struct ckr_stats st;
	uint64_t newest = 0;
	ckr *c;
	int rc;

	for (int s = 0; s < 2; s++) {
		uint64_t e = 0, ls = 0;
		struct ckr_media m;
		uint32_t *data;
		bool created;

		rc = ckr_slot_check(dir, CKR_STORAGE_POOL, s, &e, &ls);
		if (rc == CKR_EBADMAGIC || rc == CKR_ECORRUPT)
			continue; /* incomplete: never chosen */
		if (rc != 0)
			FAIL("slot %d: %s: %s", s, ckr_err_name(rc),
				ckr_errormsg());
		if (e < 1 || e > NCKPT || (int)((e - 1) % 2) != s || ls != 0)
			FAIL("slot %d holds epoch %llu (log_seq %llu)", s,
				(unsigned long long)e, (unsigned long long)ls);
		if (ckr__media_open(&m, dir, "ckpt", CKR_STORAGE_POOL, 0,
			    RIO_NO_SIGNALS, false, &created) != 0)
			FAIL("ckpt.pool: %s", ckr_errormsg());
		data = (uint32_t *)(m.base + (uint64_t)s *
			ckr__slot_size(NWORDS) + CKR_HDR_SIZE);
		for (uint64_t i = 0; i < NWORDS; i++)
			if (data[i] != word(e, i)) {
				ckr__media_close(&m);
				FAIL("slot %d (epoch %llu): word %llu is %08x, "
					"not %08x", s, (unsigned long long)e,
					(unsigned long long)i, data[i],
					word(e, i));
			}
		ckr__media_close(&m);
		if (e > newest)
			newest = e;
	}
	if ((rc = ckr_open(dir, &o, &c)) != 0)
		FAIL("recovery: %s: %s", ckr_err_name(rc), ckr_errormsg());
	ckr_stats(c, &st);
	for (uint64_t i = 0; i < NWORDS; i++)
		if (ckr_read(c, i) != word(newest, i)) {
			ckr_close(c);
			FAIL("recovered epoch %llu (newest complete %llu): word "
				"%llu is %08x", (unsigned long long)st.recovered_epoch,
				(unsigned long long)newest, (unsigned long long)i,
				ckr_read(c, i));
		}
	if (st.recovered_epoch != newest)
		FAIL("recovered epoch %llu, the newest complete slot is %llu",
			(unsigned long long)st.recovered_epoch,
			(unsigned long long)newest);
	ckr_close(c);
	return 0;
}

#define NACT 24
#define LGROUP 5
#define ACT_CKPT 12 /* a checkpoint after this many actions */

static size_t
act_len(uint64_t k)
{
	return 8 + (size_t)(k * 37 % 150);
}

static void
act_fill(uint64_t k, uint8_t *p)
{
	memcpy(p, &k, 8);
	for (size_t j = 8; j < act_len(k); j++)
		p[j] = (uint8_t)(k * 31 + j);
}

static void
act_apply(ckr *c, uint64_t k)
{
	ckr_write(c, k % NWORDS, ckr_read(c, k % NWORDS) + (uint32_t)k + 1);
}

static struct ckr_opts
log_opts(void)
{
	struct ckr_opts o = opts();

	o.log_group = LGROUP;
	return o;
}

static int
logrun(const char *dir)
{
	struct ckr_opts o = log_opts();
	uint8_t buf[256];
	ckr *c;
	int rc = ckr_open(dir, &o, &c);

	if (rc != 0)
		FAIL("open %s: %s", dir, ckr_errormsg());
	for (uint64_t k = 0; k < NACT; k++) {
		act_fill(k, buf);
		if ((rc = ckr_log_append(c, buf, act_len(k), NULL)) != 0)
			FAIL("append %llu: %s", (unsigned long long)k,
				ckr_errormsg());
		act_apply(c, k);
		if (k + 1 == ACT_CKPT &&
		    ckr_point_of_consistency(c, CKR_POC_WAIT) != 1)
			FAIL("point of consistency: %s", ckr_errormsg());
		if ((k + 1) % LGROUP == 0 || k + 1 == NACT) {
			if ((rc = ckr_log_wait(c, k + 1)) != 0)
				FAIL("ckr_log_wait %llu: %s",
					(unsigned long long)(k + 1),
					ckr_errormsg());
			/* Acknowledged: every line of these records is
			 * durable. */
			rio_durable_point(c->logm.pool, "ckr_log_wait returned");
		}
	}
	if ((rc = ckr_checkpoint_wait(c)) != 0)
		FAIL("checkpoint: %s", ckr_errormsg());
	_exit(0); /* a crash after the last group */
}

static int
replay_check(void *ctx, ckr *c, uint64_t seq, const void *rec, size_t len)
{
	uint8_t want[256];

	(void)ctx;
	act_fill(seq, want);
	if (len != act_len(seq) || memcmp(rec, want, len) != 0) {
		fprintf(stderr, "ckr_pm: action %llu replayed as logged? no: "
			"%zu bytes, %zu expected, content %s\n",
			(unsigned long long)seq, len, act_len(seq),
			len == act_len(seq) ? "differs" : "-");
		return 1;
	}
	act_apply(c, seq);
	return 0;
}

static int
logcheck(const char *dir)
{
	struct ckr_opts o = log_opts();
	struct ckr_stats st;
	uint32_t ref[NWORDS] = { 0 };
	ckr *c;
	int rc;

	o.replay = replay_check;
	if ((rc = ckr_open(dir, &o, &c)) != 0)
		FAIL("recovery: %s: %s", ckr_err_name(rc), ckr_errormsg());
	ckr_stats(c, &st);
	if (st.log_durable > NACT) {
		ckr_close(c);
		FAIL("%llu actions durable, the run logged %d",
			(unsigned long long)st.log_durable, NACT);
	}
	for (uint64_t k = 0; k < st.log_durable; k++)
		ref[k % NWORDS] += (uint32_t)k + 1;
	for (uint64_t i = 0; i < NWORDS; i++)
		if (ckr_read(c, i) != ref[i]) {
			uint32_t v = ckr_read(c, i);

			ckr_close(c);
			FAIL("word %llu is %08x after %llu durable actions "
				"(checkpoint epoch %llu), not %08x",
				(unsigned long long)i, v,
				(unsigned long long)st.log_durable,
				(unsigned long long)st.recovered_epoch, ref[i]);
		}
	ckr_close(c);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "logrun"))
		return logrun(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "logcheck"))
		return logcheck(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "setup"))
		return setup(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "run"))
		return run(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "check"))
		return check(argv[2]);
	fprintf(stderr, "usage: ckr_pm setup|run|check|logrun|logcheck DIR\n");
	return 2;
}
