/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pmemtest_int.h -- the driver side of pmemtest: trace reader, persistence
 * model, crash images, checker runner, report
 */
#ifndef PMEMTEST_INT_H
#define PMEMTEST_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "rio_clock.h"
#include "trace_layout.h"

/* ---- trace_read.c ---- */

struct pmt_trace {
	const uint8_t *data;
	size_t size;
	size_t end;         /* offset just past the last whole record */
	size_t off;         /* cursor */
	bool complete;      /* END present and checksum good */
	int end_signal;
	uint32_t pid;
	uint32_t flags;     /* PMT_TRACE_* */
};
int pmt_trace_open(const char *path, struct pmt_trace *t);
void pmt_trace_close(struct pmt_trace *t);
void pmt_trace_rewind(struct pmt_trace *t);
/* 1 and the record, or 0 at the end. */
int pmt_trace_next(struct pmt_trace *t, const struct pmt_rec **rec,
	const uint8_t **payload);

/* ---- model.c: the persistence model, replayed from a trace ---- */

#define PMT_PAGE 4096u
#define PMT_LINES_PER_PAGE (PMT_PAGE / PMT_LINE)

/* A line of some pool, and (in an image) which of its pending values:
 * ver 0 its current content, ver v >= 1 the v-th oldest value it held
 * since its durable one (model.c M6). */
struct pmt_lref {
	uint32_t pool;
	uint32_t ver;
	uint64_t line;
};

#define PMT_LI_FLUSHED 1u /* flushed since its content last changed */
#define PMT_LI_CLEAN 2u   /* flushed, and not stored to since (per line
			     with per-store capture, else per page) */

struct pmt_line_info {
	uint64_t hcur[2];     /* line hashes of cur and dur (model.c) */
	uint64_t hdur[2];
	uint32_t store_epoch; /* fences seen when its change was logged */
	uint32_t store_flush; /* stack of the flush that logged it, or 0 */
	uint32_t flush_stack; /* last flush of the line, 0 if none */
	uint32_t flush_epoch;
	uint32_t pend_pos;    /* 1 + index in the pending array, 0 if not */
	uint32_t flags;
	uint32_t store_rec; /* record number of its last LINE record */
	uint32_t hist;      /* 1 + index of its value history, 0 if none */
	uint32_t store_stack; /* the store that made cur (per-store capture) */
	uint32_t cur_seq;   /* changes of cur so far */
	uint32_t flush_rec; /* record number of its last flush */
	uint32_t flush_seq; /* cur_seq at that flush */
};

/* A value a pending line held between its durable and its current one
 * (model.c M6). */
struct pmt_hval {
	uint8_t data[PMT_LINE];
	uint64_t h[2];
	uint32_t seq;   /* the line's cur_seq while it held this value */
	uint32_t stack; /* the store that wrote it, or 0 */
	uint32_t store_rec;
	uint32_t epoch; /* fences seen when it was stored */
	uint8_t torn;   /* a tear of the store `stack` (model.c M7): this
			   many of its changed 8-byte words, or 0 */
	uint8_t wide;   /* ... of that many */
};
struct pmt_hist {
	struct pmt_hval *v;
	uint32_t n, cap;
	uint32_t dropped; /* older values forgotten (PMT_HIST_MAX) */
	uint32_t next_free;
};
#define PMT_HIST_MAX 32

struct pmt_pool {
	uint32_t id;
	char *path;           /* as traced (canonical) */
	char *name;           /* file name inside an image directory */
	uint64_t size;
	uint64_t nlines;
	uint8_t *cur;         /* content now */
	uint8_t *dur;         /* content that is surely durable */
	struct pmt_line_info *li;
	uint64_t hpresent[2]; /* hash term of the pool's existence */
	uint64_t hsum[2];     /* sum of li.hdur */
	uint16_t *nz;         /* [page]: non-zero lines of dur (model.c M5) */
	uint64_t npages;
	bool known;           /* POOL record seen (or pre-pass: existed) */
	bool present;         /* part of crash images now */
	bool existed;
};

/* A line flushed by a thread and not yet fenced by it. */
struct pmt_flushed {
	struct pmt_lref l;
	uint64_t h[2];
	uint32_t stack;
	uint32_t seq;   /* the line's cur_seq at the flush */
	uint8_t data[PMT_LINE];
};

struct pmt_thread {
	uint32_t id;
	struct pmt_flushed *v;
	size_t n, cap;
};

struct pmt_frame_sym;

struct pmt_stack {
	uint32_t depth;
	struct pmt_frame *frames;
};

/* Where the model is asked for crash images. */
enum pmt_cp_kind { PMT_CP_FENCE = 1, PMT_CP_END = 2 };
struct pmt_cp {
	enum pmt_cp_kind kind;
	uint32_t fence;  /* 1-based fence number; for END, fences + 1 */
	uint32_t stack;  /* the fence's call site */
	uint32_t thread;
};

/* Lints, aggregated by call site. */
enum pmt_lint_kind {
	PMT_LINT_REDUNDANT = 0, /* flushed again with no store between */
	PMT_LINT_UNFENCED = 1,  /* flush never followed by a fence */
	PMT_LINT_DPOINT = 2,    /* modified, not durable at a durability point */
	PMT_LINT_END = 3,       /* modified, never made durable */
	PMT_LINT_KINDS
};
struct pmt_lint {
	enum pmt_lint_kind kind;
	uint32_t stack;         /* flush site, or durability point site */
	uint32_t store_stack;   /* for DPOINT/END: the line's last flush, or
				   the fence closing the epoch it was stored */
	uint64_t count;         /* lines (per occurrence) */
	struct pmt_lref first;
	uint32_t first_epoch;
	char *what;             /* durability point description */
};

struct pmt_model;
typedef void (*pmt_cp_fn)(struct pmt_model *m, const struct pmt_cp *cp,
	void *arg);

struct pmt_model {
	struct pmt_trace tr;
	struct pmt_pool *pools;
	unsigned npools;
	struct pmt_lref *pend;   /* lines whose cur != dur */
	size_t npend, pend_cap;
	struct pmt_thread *threads;
	unsigned nthreads;
	uint64_t hdur[2];        /* hash of the durable image (all present) */
	uint32_t fences;
	uint32_t *fence_stack;   /* [fence number] */
	size_t fence_cap;
	struct pmt_stack *stacks; /* [stack id] */
	uint32_t nstacks;
	char **modules;          /* [module id] */
	uint32_t nmodules;
	struct pmt_lint *lints;
	size_t nlints;
	bool lints_on;
	uint64_t flushes, records;
	struct pmt_hist *hists;  /* [li.hist - 1] */
	uint32_t nhists, free_hist; /* free_hist: 1 + first free, 0 none */
	uint64_t store_recs;     /* PMT_LINE_STORE records */
	uint64_t coarse_pages;   /* TOUCH pages under per-store capture */
	uint64_t hist_dropped;   /* values forgotten past PMT_HIST_MAX */
	bool tear;               /* tear stores wider than 8 bytes (M7) */
	uint64_t torn_stores;    /* stores torn */
};

int pmt_model_open(struct pmt_model *m, const char *trace_path);
void pmt_model_close(struct pmt_model *m);
/* Replay the whole trace, calling fn at every crash point (every fence,
 * before it takes effect, and at the end). */
int pmt_model_run(struct pmt_model *m, pmt_cp_fn fn, void *arg);
struct pmt_line_info *pmt_model_li(struct pmt_model *m, struct pmt_lref l);
const uint8_t *pmt_model_cur(struct pmt_model *m, struct pmt_lref l);
/* The content and line hash of l at version l.ver. */
const uint8_t *pmt_model_data(struct pmt_model *m, struct pmt_lref l);
const uint64_t *pmt_model_hash(struct pmt_model *m, struct pmt_lref l);
/* Intermediate values of a pending line (versions 1..n). */
uint32_t pmt_model_nvers(struct pmt_model *m, struct pmt_lref l);
/* The history entry of l.ver >= 1. */
const struct pmt_hval *pmt_model_hval(struct pmt_model *m, struct pmt_lref l);
/* The site to show for a line's last store: the flush that logged it, or
 * the fence that closed the epoch in which it was stored. */
uint32_t pmt_model_store_site(struct pmt_model *m,
	const struct pmt_line_info *li);

/* ---- images.c: which crash images a crash point yields ---- */

struct pmt_imgset;
struct pmt_imgset *pmt_imgset_new(void);
void pmt_imgset_free(struct pmt_imgset *s);
/* true if the key was not there (and adds it). */
bool pmt_imgset_add(struct pmt_imgset *s, const uint64_t k[2]);
/* The pages a checked image's recovery read ((pool, page) pairs, page
 * PMT_READS_MAPPED: the pool was mapped; reads.c), kept with its key
 * (first word); n = SIZE_MAX: unknown.  Takes p. */
void pmt_imgset_set_reads(struct pmt_imgset *s, uint64_t k0, uint32_t *p,
	size_t n);

struct pmt_enum_opts {
	unsigned k;              /* every subset of at most k pending lines */
	unsigned random;         /* plus this many random larger subsets */
	uint64_t max_per_cp;     /* subsets tried per crash point at most */
	uint64_t seed;
	unsigned missing;        /* every image with all but <= this many
				    pending lines (images.c) */
	unsigned exhaustive;     /* every state of a crash point that has at
				    most 2^exhaustive of them */
	unsigned max_versions;   /* intermediate values tried per crash
				    point (images.c) */
	/* Read-driven exploration (images.c): where set, a crash point with
	 * more than 2^exhaustive states branches only on the pending lines
	 * its images' recoveries read.  wait(arg) returns once every image
	 * handed to the image callback has been checked and its reads are
	 * in the image set (pmt_imgset_set_reads). */
	bool reads;
	void (*wait)(void *arg);
	/* At a crash point read-driven exploration may branch on, images
	 * record their reads: want(arg, true) before its first image,
	 * want(arg, false) after its last.  probe() has an image checked
	 * again for its reads alone (one checked where they were not
	 * recorded). */
	void (*want)(void *arg, bool on);
	void (*probe)(const struct pmt_lref *chosen, size_t n,
		const struct pmt_lref *pending, size_t npending, void *arg);
};
struct pmt_enum_stats {
	uint64_t generated;      /* subsets tried */
	uint64_t duplicates;     /* images already seen */
	uint64_t truncated_cps;  /* crash points cut by max_per_cp */
	size_t max_pending;
	/* Coverage: the crash states of every crash point (dur plus any
	 * choice of one pending value, or none, per pending line). */
	double space;            /* states, summed over crash points */
	double covered;          /* of them tried (images seen before count) */
	uint64_t cps;            /* crash points enumerated */
	uint64_t full_cps;       /* ... whose every state was tried */
	uint64_t version_images; /* images with an intermediate value */
	uint64_t read_cps;       /* crash points explored by reads */
	uint64_t read_runs;      /* images those explorations checked */
	uint64_t read_cut;       /* ... of them stopped at max_per_cp */
};
/* Calls fn for every new image of the crash point: the chosen pending
 * lines (those that reached memory) sorted; `pending` is every pending line
 * sorted.  fn returns false to stop. */
typedef bool (*pmt_image_fn)(const struct pmt_lref *chosen, size_t n,
	const struct pmt_lref *pending, size_t npending, void *arg);
void pmt_enumerate(struct pmt_model *m, struct pmt_imgset *seen,
	const struct pmt_enum_opts *o, struct pmt_enum_stats *st,
	pmt_image_fn fn, void *arg);
/* The image key of dur + chosen. */
void pmt_image_key(struct pmt_model *m, const struct pmt_lref *chosen,
	size_t n, uint64_t k[2]);

/* ---- reads.c: the pages a library checker touched ---- */

#define PMT_READS_MAPPED 0xffffffffu
struct pmt_reads_file {
	dev_t dev;
	ino_t ino;
	uint32_t pool;
};
/* Can this process record a checker's reads (userfaultfd minor faults on
 * shared memory)? */
bool pmt_reads_available(void);
/* In a checker's child: record every page of the files it maps through
 * librio, as (pool, page) pairs written to out_fd. */
void pmt_reads_begin(int out_fd, const struct pmt_reads_file *files,
	unsigned nfiles);

/* ---- materialize.c: crash images as pool files ---- */

/* Write dur + chosen lines of every present pool into dir/<name>, and
 * remove other files there; sparse (zero pages skipped). */
int pmt_image_write(struct pmt_model *m, const struct pmt_lref *chosen,
	size_t n, const char *dir);

/* ---- symbolize.c ---- */

/* "func (file:line)" lines of one stack, innermost first, resolved with
 * addr2line; cached.  Returns a string owned by the cache. */
const char *pmt_symbolize_site(struct pmt_model *m, uint32_t stack,
	unsigned max_frames);
/* One short line: the innermost program frame. */
const char *pmt_symbolize_short(struct pmt_model *m, uint32_t stack);
void pmt_symbolize_free(void);

/* ---- util.c ---- */
void pmt_die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
	noreturn));
void *pmt_xmalloc(size_t n);
void *pmt_xcalloc(size_t n, size_t sz);
void *pmt_xrealloc(void *p, size_t n);
char *pmt_xstrdup(const char *s);
char *pmt_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1,
	2)));
/* Zeroed, huge-page backed where possible (cheap to fork); pmt_big_free
 * with the same size. */
void *pmt_xbig(size_t n);
void pmt_big_free(void *p, size_t n);
int pmt_mkdir_p(const char *path);
int pmt_rm_rf(const char *path);
/* splitmix64 */
uint64_t pmt_rand(uint64_t *state);

#endif /* PMEMTEST_INT_H */

/* ---- check.c: run the checker on crash images, in parallel ---- */

typedef int (*pmt_check_fn)(const char *image, const char *dir);
struct pmt_job;
typedef void (*pmt_fail_fn)(struct pmt_job *job, void *arg); /* owns job */

struct pmt_check_opts {
	const char *cmd;      /* shell command with {image} and {dir}, or */
	pmt_check_fn fn;      /* a library checker */
	unsigned jobs;        /* children at once */
	bool twice;           /* run recovery twice (idempotence) */
	unsigned timeout_s;   /* per image; 0 = none */
	const char *workdir;  /* slot directories go here */
	unsigned image_pool;  /* {image} = this pool's file */
	bool reads;           /* record the library checker's reads */
	const char *server_lib; /* preload library of a fork server per slot
				   for a plain command (check.c F1), or NULL */
	pmt_fail_fn on_done;  /* every job, before on_fail or freeing; does
				 not own it */
	void *done_arg;
};

/* What the report needs to know about one line of an image. */
struct pmt_line_desc {
	struct pmt_lref l;
	struct pmt_line_info li;
	uint32_t store_site; /* pmt_model_store_site() when submitted */
	uint32_t ver_stack;  /* the store that wrote the value in the image
				(l.ver's, or cur's), 0 if unknown */
	uint32_t ver_rec;    /* and its record number */
	uint32_t ver_epoch;  /* and the fences seen before it */
	uint64_t delta;      /* image key change of this line at l.ver (or,
				lost, at cur) over its durable value */
	uint64_t delta_cur;  /* the same at cur */
	uint32_t nvers;      /* intermediate values the line had */
	uint8_t torn, wide;  /* l.ver is a tear (pmt_hval) */
};

/* One checked image. */
struct pmt_job {
	uint64_t seq;          /* 1, 2, ... in submission order */
	struct pmt_cp cp;
	struct pmt_lref *chosen;
	size_t nchosen;
	struct pmt_line_desc *desc; /* chosen first, then up to 8 lost */
	size_t ndesc;
	size_t npending;
	int status;            /* wait status */
	bool timed_out;
	char *output;          /* checker's output (failures only) */
	uint64_t key;          /* image content key (first word) */
	uint64_t sig;          /* failure signature */
	char *saved;           /* saved image directory, or NULL */
	uint32_t *reads;       /* pages its checker read (reads.c), or */
	size_t nreads;         /* SIZE_MAX: unknown */
	unsigned flags;        /* PMT_SUBMIT_* */
};

struct pmt_runner;
struct pmt_runner *pmt_runner_new(const struct pmt_check_opts *o,
	pmt_fail_fn on_fail, void *arg);
/* Check dur + chosen of the model's present pools (forks; returns when a
 * child has started). */
#define PMT_SUBMIT_READS 1u /* record the checker's reads (reads.c) */
#define PMT_SUBMIT_PROBE 2u /* for its reads only: checked before, its
			       failure (if it fails) not reported again */
void pmt_runner_submit(struct pmt_runner *r, struct pmt_model *m,
	const struct pmt_cp *cp, const struct pmt_lref *chosen, size_t n,
	const struct pmt_lref *pending, size_t npending, unsigned flags);
void pmt_runner_wait_all(struct pmt_runner *r);
uint64_t pmt_runner_checked(const struct pmt_runner *r);
void pmt_runner_free(struct pmt_runner *r);
void pmt_job_free(struct pmt_job *j);
/* Expand {image} and {dir} in a command template. */
char *pmt_expand_cmd(const char *tmpl, const char *image, const char *dir);

/* ---- report.c ---- */

struct pmt_report_opts {
	const char *outdir;     /* saved images go here */
	unsigned save_max;      /* images saved at most */
	bool verbose;           /* every inconsistent image, not one a group */
	const char *check_desc; /* "cmd:<template>" or "lib:<lib.so:fn>" */
	const char *image_name; /* the {image} pool's file name */
	bool twice;
	const char *trace_path;
	bool group_keys;        /* print each group's keys (nested runs) */
	bool tear;              /* the model tears wide stores (M7) */
};
struct pmt_report;
struct pmt_report *pmt_report_new(struct pmt_model *m,
	const struct pmt_report_opts *o);
/* pmt_fail_fn */
void pmt_report_fail(struct pmt_job *job, void *arg);
uint64_t pmt_report_failures(const struct pmt_report *r);
/* Print every group, save images (replaying the trace again), print the
 * lints; returns the number of unique failures. */
uint64_t pmt_report_print(struct pmt_report *r, FILE *out);
void pmt_report_lints(struct pmt_model *m, FILE *out);
void pmt_report_free(struct pmt_report *r);

/* ---- recovery.c: crash the recovery itself ---- */

struct pmt_recovery;
struct pmt_recovery_args {
	const char *check_cmd;   /* or */
	const char *check_lib;
	unsigned image_pool;
	uint64_t seed;
	unsigned k, jobs, timeout_s;
	bool tear;
	const char *outdir;
	bool (*failed)(uint64_t seq, void *arg); /* image itself failed? */
	void *arg;
};
struct pmt_recovery_totals {
	uint64_t images;     /* images whose recovery was crashed */
	uint64_t checked, inconsistent;
	uint64_t unique;     /* groups across the nested runs (Y3) */
	uint64_t reported;   /* groups as each nested run counted them */
};
struct pmt_recovery *pmt_recovery_new(unsigned n, uint64_t seed,
	const char *workdir);
/* Offer image `seq` (dur + chosen of m) to the sample. */
void pmt_recovery_offer(struct pmt_recovery *r, struct pmt_model *m,
	const struct pmt_cp *cp, uint64_t seq, const struct pmt_lref *chosen,
	size_t n);
/* Run the nested pmemtest on every sampled image; returns the worst exit
 * status (0, 1, 2). */
int pmt_recovery_run(struct pmt_recovery *r, struct pmt_model *m,
	const struct pmt_recovery_args *a, FILE *out,
	struct pmt_recovery_totals *t);
void pmt_recovery_free(struct pmt_recovery *r);
/* report.c: was image seq inconsistent? */
bool pmt_report_failed(const struct pmt_report *r, uint64_t seq);
