/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckr_int.h -- internals shared by the files of libckr
 */
#ifndef CKR_INT_H
#define CKR_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/types.h>

#include "ckr.h"
#include "ckr_layout.h"
#include "rio.h"
#include "rio_int.h"

#define CKR__SHARED __attribute__((visibility("hidden")))

/* the stack's one message (librio): errors and "<context>: <strerror>" */
#define ckr__err(rc, ...) rio_seterr((rc), __VA_ARGS__)
#define ckr__errno rio__errno

/* The header rules (librio hdr.c) of both of libckr's files: one policy,
 * one code for each way a header can be refused. */
#define CKR__HDR_RULE(WHAT, MAGIC)                                        \
	{                                                                 \
		.what = (WHAT), .magic = (MAGIC), .magic_len = 8,         \
		.major = CKR_MAJOR, .minor = CKR_MINOR,                   \
		.fields = RIO__HDR_INCOMPAT | RIO__HDR_COMPAT,            \
		.incompat_known = CKR_INCOMPAT_KNOWN,                     \
		.compat_known = CKR_COMPAT_KNOWN,                         \
		.code = { CKR_EBADMAGIC, CKR_ECORRUPT, CKR_EVERSION,      \
			CKR_EVERSION, CKR_ECORRUPT },                     \
	}

/* The view hdr.c checks, of either header (slot or log): the fields the
 * two share, and whether the stored checksum matched. */
#define CKR__HDR_VIEW(v, h, ok)                                           \
	do {                                                              \
		memset(&(v), 0, sizeof(v));                               \
		(v).magic = (h)->magic;                                   \
		(v).csum_ok = (ok);                                       \
		(v).major = (h)->major;                                   \
		(v).minor = (h)->minor;                                   \
		(v).incompat = (h)->incompat;                             \
		(v).compat = (h)->compat;                                 \
		(v).reserved[0].p = (h)->reserved;                        \
		(v).reserved[0].n = sizeof((h)->reserved);                \
	} while (0)

/* Stable storage: a file (pwrite + fdatasync) or a rio pool. */
struct ckr_media {
	enum ckr_storage kind;
	int fd;
	rio_pool *pool;
	char *base;    /* pool: rio_pool_base */
	uint64_t size; /* usable bytes */
	char path[4096];
};

int ckr__media_open(struct ckr_media *m, const char *dir, const char *name,
	enum ckr_storage kind, uint64_t size, uint32_t rio_flags, bool create,
	bool *created);
void ckr__media_close(struct ckr_media *m);
/* Write len bytes at off; for a pool also flush them (no drain). */
int ckr__media_write(struct ckr_media *m, uint64_t off, const void *buf,
	size_t len);
/* Make every earlier ckr__media_write of this thread durable. */
int ckr__media_sync(struct ckr_media *m);
int ckr__media_read(struct ckr_media *m, uint64_t off, void *buf, size_t len);


struct ckr {
	struct ckr__hot hot; /* first: the inline handlers read it */
	struct ckr_opts opts;
	uint32_t obj_words;
	uint64_t nobjs;
	char dir[4096];
	int lock_fd;         /* flock on <dir>/lock */

	/* algorithm state (the hot pointers point into these) */
	void *mem[4];
	size_t memsz[4];
	uint32_t *shadow;  /* NAIVE, BACOU: the period image */
	uint32_t *ck;      /* IPP: the writer's rolled-forward checkpoint */

	struct ckr_media ckpt, logm;
	uint64_t log_id;

	/* writer */
	pthread_t writer;
	pthread_mutex_t wlock;
	pthread_cond_t wcond;
	atomic_int busy;     /* 1 from a started checkpoint until complete */
	bool wstop;
	uint64_t epoch;      /* of the checkpoint started last */
	uint64_t ck_log_seq; /* its log_seq */
	uint64_t ck_lpos;    /* its log position (logical, see below) */
	uint64_t prev_lpos;  /* the last complete checkpoint's, if have_prev */
	bool have_prev;
	int next_slot;
	uint32_t *stage;     /* file storage: one chunk */
	pid_t child;         /* CKR_FORK */
	int child_pipe;
	atomic_int err;      /* sticky error */
	/* the message of the failure that set err, from the thread that
	 * failed (the writer, the logger: their messages are their own);
	 * valid once fail_msg_set */
	char fail_msg[512];
	atomic_int fail_msg_set;

	/* logger */
	pthread_t logger;
	pthread_mutex_t llock;
	pthread_cond_t lcond;  /* logger: work to do */
	pthread_cond_t ldone;  /* waiters: durable advanced or buffer free */
	bool lstop;
	char *lbuf[2];         /* lbuf[lcur] fills while the other is written */
	size_t lfill, lbufsz;
	int lcur;
	uint64_t appended;     /* records appended (next seq) */
	uint64_t durable;      /* records durable */
	uint64_t taken;        /* records the logger has taken to write */
	uint64_t lwant;        /* the most records a waiter waits for */
	uint64_t lgroup;       /* opts.log_group, at least 1 */
	uint64_t log_tail;     /* media offset of the next record (logger) */
	/* Logical log positions: byte counts that only grow, the media
	 * offset of position x being CKR_HDR_SIZE + x % capacity. */
	uint64_t app_lpos;     /* after the last appended record */
	uint64_t head_lpos;    /* of the oldest record still needed (L4) */

	struct ckr_stats st;
};

/* ckpt.c */
int ckr__slot_read_hdr(struct ckr_media *m, uint64_t nwords,
	uint32_t obj_size, int slot,
	struct ckr_slot_hdr *h, uint64_t log_id, bool check_log);
int ckr__slot_load(struct ckr_media *m, uint64_t nwords, int slot,
	const struct ckr_slot_hdr *h, uint32_t *dst);
void *ckr__writer_main(void *arg);
int ckr__fork_start(ckr *c);

/* log.c */
int ckr__log_open(ckr *c, bool create);
int ckr__log_recover(ckr *c, const struct ckr_slot_hdr *oldest,
	const struct ckr_slot_hdr *best);
int ckr__log_replay(ckr *c, const struct ckr_slot_hdr *best);
void ckr__log_release(ckr *c);
int ckr__log_start(ckr *c);
void ckr__log_stop(ckr *c);
int ckr__log_wait(ckr *c, uint64_t n);
int ckr__log_scan_media(struct ckr_media *m,
	const struct ckr_slot_hdr *oldest, uint64_t mark_seq,
	uint64_t *mark_len, uint64_t *start_off, uint64_t *tail, uint64_t *len,
	int (*fn)(void *ctx, uint64_t seq, const void *rec, size_t len),
	void *ctx, uint64_t *count, uint64_t *log_id);

static inline int
ckr__sticky(ckr *c)
{
	return atomic_load(&c->err);
}
static inline int
ckr__fail(ckr *c, int rc)
{
	int zero = 0;

	if (atomic_compare_exchange_strong(&c->err, &zero, rc)) {
		snprintf(c->fail_msg, sizeof(c->fail_msg), "%s",
			ckr_errormsg());
		/* release: the message is complete before it is read */
		atomic_store_explicit(&c->fail_msg_set, 1,
			memory_order_release);
	}
	return rc;
}

/* What failed the handle: the failing thread's message, or the code's. */
static inline const char *
ckr__fail_msg(ckr *c)
{
	return atomic_load_explicit(&c->fail_msg_set, memory_order_acquire) ?
		c->fail_msg : ckr_strerror(ckr__sticky(c));
}

#endif /* CKR_INT_H */
