/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dc_int.h -- libdc internals shared between its source files
 *
 * Two blocks of state:
 *   dc__st   what describes the process (descriptor table, handlers,
 *            timers, regions, protocol flag, counters, the registers of the
 *            last checkpoint).  Ordinary .bss: tracked, checkpointed and
 *            rolled back with the rest of the process.
 *   dc__vol  what describes this incarnation (our descriptors, the
 *            userfaultfd, the dispatch selector, log cursors, scratch, the
 *            recovery stack).  A page-aligned block that is never tracked
 *            and never restored.
 */
#ifndef DC_INT_H
#define DC_INT_H

#include <limits.h>
#include <stddef.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <termios.h>
#include <time.h>

#include "ckpt_layout.h"
#include "twopc_layout.h"
#include "held_int.h"
#include "keeper_int.h"
#include "dc.h"
#include "rio.h"
#include "linux_compat.h"
#include "rio_assert.h"
#include "rio_clock.h"

#define DC__PAGE 4096ul
#define DC__HOT 4096ul     /* first page of dc__st: copied at every commit */
#define DC__MAX_REGIONS 1024
#define DC__MAX_CHG 256
#define DC__MAX_FD 2048   /* descriptor numbers recorded: 0 .. DC__MAX_FD-1 */
#define DC__MAX_DESC 1280 /* open file descriptions (a buffered TCP server:
                           * 1,024 connections and its files) */
#define DC__MAX_OBJ 64
#define DC__MAX_PEND 32
#define DC__MAX_SELF 32   /* pipes and eventfds inside the process (kstate.c) */
#define DC__SELF_BYTES 4096 /* a self-pipe's capacity: what a checkpoint saves */
#define DC__PATH 512
#define DC__SCAN_VEC 256   /* ranges per PAGEMAP_SCAN call: the kernel's
                             * bounce buffer stays a small allocation */
#define DC__MAX_ENTS 65536 /* redo entries (page ranges) per checkpoint */
#define DC__IOV 1024
#define DC__WP_RANGES (DC__MAX_REGIONS + 64) /* protected ranges (wp) */
#define DC__WP_DIRTY 32768 /* written ranges recorded in one interval (wp);
                            * a region overflowing it is copied whole */
#define DC__MAX_SEGS 4096  /* pending redo segments */
#define DC__SEEN 16384     /* pages in a flush's dedup set (> DC_REDO_MAX
                            * / page size, plus the newest segment's) */
#define DC__PEND_ENTS 65536 /* entries of the pending segments, in memory */
#define DC__OWN_FD_BASE DC__MAX_FD /* libdc's own descriptors live at >= this
                                    * (init.c raises RLIMIT_NOFILE's soft
                                    * limit past it when it is lower) */
#define DC__TIMER_SIG (SIGRTMAX)
#define DC__STOP_SIG (SIGRTMAX - 1) /* a checkpoint stops a thread (thread.c) */
#define DC__MAX_THREADS 16 /* the main thread and 15 more (thread.c) */

/* ---- registers (ctx.S) ---- */
struct dc__ctx {
	uint64_t rbx, rbp, r12, r13, r14, r15, rsp, rip; /* 0..63 */
	uint32_t mxcsr;                                  /* 64 */
	uint16_t fpucw;                                  /* 68 */
	uint16_t pad;
	uint64_t fsbase;                                 /* 72 */
	sigset_t mask;                                   /* 80 */
};
int dc__save_ctx(struct dc__ctx *c) __attribute__((returns_twice));
__attribute__((noreturn)) void dc__resume_ctx(const struct dc__ctx *c);
long dc__sys6(long nr, long a, long b, long c, long d, long e, long f);
void dc__restorer(void);
void dc__switch_stack(void *top, void (*fn)(void)) __attribute__((noreturn));
int dc__call_on_stack(void *top, int (*fn)(void));
extern char dc__sud_begin[], dc__sud_end[];

/* ---- memory regions (maps.c) ---- */
enum {
	DC__R_TRACKED = 1 << 0, /* private memory, content checkpointed */
	DC__R_FIXED = 1 << 1,   /* read-only file or special: verified */
	DC__R_ANON = 1 << 2,
	DC__R_HEAP = 1 << 3,
	DC__R_STACK = 1 << 4,
	DC__R_SPECIAL = 1 << 5, /* [vdso], [vvar], [vsyscall] */
	DC__R_SHARED = 1 << 6,
	DC__R_SEG = 1 << 7,     /* tracked memory moved into the persistent
	                         * segment: the shadow mapped shared at its own
	                         * offsets (UNDO, seg.c) */
	DC__R_COW = 1 << 8,     /* a private file mapping without write
	                         * permission that no longer equals its file:
	                         * written, then made read-only (the dynamic
	                         * loader's RELRO of every object, dlopen'ed
	                         * ones included); tracked (maps.c) */
};
struct dc__region {
	uint64_t start, end;
	uint64_t off;
	uint64_t dev, ino;
	uint32_t prot;  /* PROT_* */
	uint32_t kind;  /* DC__R_* */
	char path[DC__PATH];
};
struct dc__obj {
	uint64_t base;
	uint8_t build_id[20];
	uint32_t id_len;
	char name[DC__PATH];
};

/* ---- kernel state (kstate.c) ---- */
enum { DC__K_FILE = 1, DC__K_TTY, DC__K_PIPE, DC__K_SOCK, DC__K_CHR,
	DC__K_DIR, DC__K_OTHER, DC__K_EPOLL, DC__K_EVENTFD };
struct dc__desc {
	int refs;
	int kind;
	int flags;              /* open flags (O_ACCMODE | O_APPEND ...) */
	bool inherited;         /* came with the process: reuse, never reopen */
	int home_fd;            /* inherited: the number it came at */
	bool visible;           /* writes are visible events */
	bool nd;                /* reads are non-deterministic */
	int sock_type, sock_domain, sock_proto;
	int64_t offset;         /* at the last checkpoint */
	uint64_t dev, ino;
	socklen_t bind_len, peer_len;
	struct sockaddr_storage bind_addr, peer_addr;
	char path[DC__PATH];
	/* a terminal: its settings and window size at the last checkpoint
	 * (kstate.c invariant 7) */
	bool has_tio;
	struct termios tio;
	struct winsize ws;
	/* a TCP socket of a buffered program, through dc-keeper
	 * (keeper.c): enum DC__TCP_*, 0 for any other descriptor */
	uint8_t tcp;
	bool tcp_shut;          /* shutdown(SHUT_WR) */
	int tcp_backlog;
	uint64_t tcp_id;        /* listener (libdc's) or connection (the
	                         * keeper's) id */
	uint64_t tcp_rpos, tcp_wpos; /* bytes read, written */
	/* a pipe both of whose ends were made in the process, or an
	 * eventfd: slot + 1 in dc__st.self (kstate.c invariant 8), 0 for
	 * any other descriptor */
	int16_t self;
	bool proc;              /* on /proc or /sys (kstate.c invariant 9) */
};
/* The bytes a self-pipe held, or an eventfd's counter, at the last
 * checkpoint (kstate.c invariant 8). */
struct dc__self {
	uint32_t used;
	uint32_t len;           /* bytes[] in the pipe */
	uint64_t count;         /* an eventfd's counter */
	int efd_flags;          /* an eventfd's EFD_SEMAPHORE ...; -1 a pipe */
	int pad;
	char bytes[DC__SELF_BYTES];
};
struct dc__fdent {
	int16_t desc;           /* index + 1; 0 = closed */
	bool cloexec;
	bool own;               /* a descriptor of libdc */
};
struct dc__sigrec {
	uintptr_t handler;      /* the program's; SIG_DFL/SIG_IGN or function */
	unsigned long flags;
	sigset_t mask;
};
struct dc__itimer {
	bool armed;
	struct timeval interval;
	uint64_t expires_ns;    /* CLOCK_MONOTONIC */
};

/* Rolled back with the process.  The fields a checkpoint writes come
 * first, on a page of their own (DC__HOT). */
struct dc__st {
	struct dc__ctx ctx;
	uint64_t gen;           /* generation of the image being committed */
	int protocol;
	unsigned interval_ms;
	bool verbose;
	bool nd_flag;           /* non-deterministic event since commit */
	bool maps_changed;
	bool chg_overflow;
	unsigned nchg;
	unsigned npend;
	uint64_t brk_end;
	uint64_t seg_stack_lo, seg_stack_hi; /* the main stack, moved (UNDO) */
	uint64_t stack_keep_lo;  /* ... but for its top, from here (UNDO) */
	struct dc_stats stats;
	void (*on_recover)(void *);
	void (*pre_checkpoint)(void *);
	void *cb_arg;

	/* From here on: tracked like any memory.  The page above (DC__HOT)
	 * is copied by every checkpoint instead: no fault, no scan. */
	unsigned nreg __attribute__((aligned(4096)));
	struct dc__region reg[DC__MAX_REGIONS];
	struct { uint64_t a, b; } chg[DC__MAX_CHG];
	unsigned nobj;
	struct dc__obj obj[DC__MAX_OBJ];
	uint64_t vdso;

	struct dc__fdent fd[DC__MAX_FD];
	struct dc__desc desc[DC__MAX_DESC];
	char cwd[PATH_MAX];
	unsigned umask;
	long vpid;              /* the process id of the first run (kstate.c) */
	struct dc__sigrec sig[65];
	rio_pool *ctl0;         /* the ctl handle of the first run */
	int ctl_fd0;            /* and its descriptor number */
	struct dc__itimer itimer[3];
	stack_t prog_altstack;
	char pend[DC__MAX_PEND][DC__PATH]; /* delete after the next commit */
	struct dc__self self[DC__MAX_SELF]; /* kstate.c invariant 8 */
};

/* The threads' state of this incarnation (thread.c). */
struct dc__thr_vol {
	volatile int lock;      /* libdc's lock: 0 free, 1 held, 2 waiters */
	int owner;              /* slot + 1 of its holder, or 0 */
	volatile uint32_t parked; /* threads stopped in this round */
	volatile uint32_t release; /* one more at the end of every round */
	volatile uint32_t ready; /* a new thread's set-up is done */
	volatile uint32_t named; /* its id is settled: it may enter */
	int child;              /* the slot of the thread being made */
	int tid[DC__MAX_THREADS]; /* each slot's thread id, this incarnation */
	volatile unsigned char sel[DC__MAX_THREADS]; /* its dispatch selector
	                                              * (slot 0: selector) */
	volatile bool stopped[DC__MAX_THREADS]; /* a round stopped it */
	/* $DC_THREAD_TIMES: the rounds' times, said every 100 checkpoints */
	bool say;
	unsigned nt;
	uint64_t t0, stop_ns, ckpt_ns;
	uint64_t mask[DC__MAX_THREADS];  /* a new thread's first mask */
	long regs[DC__MAX_THREADS][23];  /* ... and registers (gregs) */
	char stack[16384] __attribute__((aligned(16))); /* recovery: the
	                         * first stack of each thread made again */
	/* where a stopped thread waits for the release: never tracked, so
	 * it writes no tracked byte while the checkpoint copies */
	char wait_stack[DC__MAX_THREADS][8192] __attribute__((aligned(16)));
};

/* Never tracked, never restored. */
struct dc__vols {
	volatile unsigned char selector; /* SYSCALL_DISPATCH_FILTER_* */
	bool active;
	bool recovered;
	bool fatal;
	bool winch_bounce;      /* recovery asked for a repaint: the next
	                         * window size asked is one row short
	                         * (kstate.c invariant 7) */
	char dir[PATH_MAX];
	char stats_path[PATH_MAX]; /* DC_STATS: counters written at exit */
	int dirfd, shadow_fd, redo_fd, ndlog_fd, fundo_fd, uffd, pagemap_fd;
	int mundo_fd;
	int events_fd;          /* DC_EVENTS (events.c), or -1 */
	volatile unsigned ticks_in; /* the interval's ticks that came inside
	                         * libdc (sud.c timer_handler, invariant 7) */
	/* the two-phase-commit protocols (twopc.c) */
	bool twopc;             /* DC_CPV_2PC or DC_CBNDV_2PC */
	bool tp_local;          /* the commit of a round: local */
	volatile bool tp_poked; /* the coordinator's datagram signalled while
	                         * libdc ran: served after the blocked call */
	bool tp_verbose;
	int tp_fd;              /* UDP socket to the coordinator, or -1 */
	uint32_t tp_part;       /* $DC_2PC_ID */
	uint64_t tp_epoch;      /* the coordinator's, at join */
	uint64_t tp_incarnation; /* random, per start: sent with JOIN */
	uint64_t tp_prepared;   /* last round taken part in */
	struct sockaddr_storage tp_coord;
	struct dc_2pc_state tp_st; /* the current state record */
	/* process trees (tree.c, dc-run --tree) */
	bool tree;              /* $DC_TREE set: a member of a tree */
	int tree_forked;        /* $DC_TREE_FORKED: 1 a fork's child, 2 made
	                         * again at recovery, 0 the root */
	bool tree_respawned;    /* its children made again (tree.c) */
	unsigned tree_gen;      /* $DC_TREE_GEN: this image's number (tree.c
	                         * E1-E5: 0 until the member's first execve) */
	char tree_dir[PATH_MAX];
	char tree_coord[64];    /* this init's $DC_2PC_COORD (a recovered
	                         * environment holds an older one) */
	struct dc__held held;   /* the buffered protocol's output (held.c) */
	struct dc__kp kp;       /* its TCP connections' keeper (keeper.c) */
	struct dc__thr_vol thr; /* the threads (thread.c) */
	uint64_t shadow_dev, shadow_ino; /* as /proc/self/maps shows them */
	bool image_mapped;      /* recovery mapped anonymous memory from the
	                         * shadow privately; some may still be
	                         * (shadow.c invariant 3) */
	bool dir_is_mem;        /* tmpfs: a write survives a process crash */
	rio_pool *ctl;
	char *ctlb;             /* user area of the ctl pool */
	uint64_t committed;     /* last committed generation */
	uint64_t incarnation;
	uint64_t nd_off, nd_seq;       /* ndlog append cursor */
	uint64_t replay_off, replay_end, replay_seq;
	bool replaying;
	uint64_t fu_off, fu_seq;       /* fundo append cursor */
	uint64_t mu_off, mu_seq;       /* mundo append cursor (seg.c) */
	int64_t mu_prev;               /* offset of its last entry, or -1 */
	char *mu_map;                  /* the log's first mu_map_len bytes,
	                                * mapped (tmpfs only; seg.c) */
	uint64_t mu_map_len;
	timer_t timer;
	bool timer_on;
	int in_commit;
	uint64_t commit_time;   /* CLOCK_REALTIME at the commit's start */
	uint64_t redo_end;      /* end of the log (redo.c) */
	uint64_t redo_max;      /* flush past this (DC_REDO_MAX) */
	unsigned redo_pending;  /* segments not in the shadow */
	bool redo_hold;         /* a 2PC prepare: the commit flushes nothing
	                         * into the shadow (redo.c invariant 5) */
	bool redo_due;          /* a held flush is due (dc__redo_settle) */
	unsigned slot_hint;     /* last shadow slot used (shadow.c) */
	struct { uint64_t off; uint32_t first, n; } segs[DC__MAX_SEGS];
	uint32_t pend_n;        /* entries in pend_ents */
	struct dc_redo_ent pend_ents[DC__PEND_ENTS];
	uint64_t seen[DC__SEEN];
	uint64_t vdso_patched;
	int ctl_fd1;            /* recovery: this run's ctl descriptor */
	const sigset_t *resume_mask; /* mask at resume; NULL: all blocked */
	bool fd_touched[DC__MAX_FD]; /* offset may have moved since the
	                              * last checkpoint */
	/* hot and cold regions (track.c), indexed like dc__st.reg */
	unsigned ncold;
	uint64_t cold_lo, cold_hi;   /* bounds of the cold regions */
	bool cold[DC__MAX_REGIONS];
	bool keep[DC__MAX_REGIONS];  /* scratch of dc__track_refold */
	bool pinned[DC__MAX_REGIONS];
	uint16_t idle[DC__MAX_REGIONS];
	/* write-protect tracking (track.c, DC_TRACK_WP): the ranges libdc
	 * protects (sorted; an open one is writable until the next
	 * checkpoint and copied whole), and the written ranges of the
	 * interval, in the order they were written */
	int tracking;
	uint64_t prog_sp;       /* the program's stack pointer while a handler
	                         * of libdc runs (sud.c), else 0 */
	unsigned nwp, ndirty;
	uint64_t fa_next;       /* WP: where a sequential writer's next
	                         * fault would be (track.c wp_fault) */
	unsigned fa_pages;      /* ... and the pages its last one opened */
	uint64_t stack_prot_lo; /* UNDO: the moved stack is protected from
	                         * here up (the live part), not below */
	struct dc__wpr { uint64_t a, b; uint32_t prot; bool open, seg; }
		wp[DC__WP_RANGES];
	struct dc__span { uint64_t a, b; }
		dirty[DC__WP_DIRTY + DC__WP_RANGES + DC__MAX_REGIONS + 8];
	/* ranges the program mprotect'ed since the last fold (maps.c:
	 * their read-only file regions are classified again) */
	struct dc__span mprot[16];
	unsigned nmprot;
	bool mprot_overflow;
	struct page_region scan[DC__SCAN_VEC];
	struct dc_redo_ent ents[DC__MAX_ENTS];
	struct iovec iov[DC__IOV];
	struct dc__st old;      /* recovery: the checkpoint's dc__st */
	struct dc__region fresh[DC__MAX_REGIONS];
	unsigned nfresh;
	uint64_t rt[8];         /* recovery: CLOCK_MONOTONIC at its phases
	                         * (recover.c rtime), said with
	                         * $DC_RECOVERY_TIMES */
	bool rt_say;
	/* $DC_CKPT_TIMES: the commit's phases (ckpt.c ct_mark), CPU and
	 * clock time in ns summed over the checkpoints since the last say */
	bool ct_say;
	uint64_t ct_cpu[5], ct_wall[5], ct_last_cpu, ct_last_wall;
	uint64_t ct_n, ct_bytes, ct_flushes;
	/* the background writer (ckpt.c invariant 8): its stack, the
	 * keeper's commit message and the staged pages, in one mapping of
	 * libdc's own (maps.c invariant 2) */
	char *bg_map;
	uint64_t bg_len;
	bool bg_off;            /* $DC_CKPT_SYNC: every commit in place */
	volatile uint32_t bg_busy; /* futex: a checkpoint is in its hands */
	volatile uint32_t bg_go;   /* futex: work for it */
	int bg_rc;              /* its last error, 0 */
	uint64_t bg_gen;        /* the generation it writes */
	unsigned bg_n;          /* entries in ents */
	uint32_t bg_kpn;        /* keeper entries, or UINT32_MAX: none */
	volatile uint64_t bg_staged; /* the newest generation taken */
	struct dc_commit bg_rec; /* the record's fields taken at the stop */
	/* ... and $DC_CKPT_TIMES of it: checkpoints written behind, in
	 * place, waits for the one before (and their clock time), and the
	 * writer's CPU and clock time for segment, record and flush */
	uint64_t bg_commits, bg_syncs, bg_waits, bg_wait_ns;
	uint64_t ct_wcpu[3], ct_wwall[3];
	const struct dc__region *rebuilding; /* recovery: the region of
	                                      * old being rebuilt (for its
	                                      * error message) */
#ifdef DC_TEST_CRASHPOINTS
	char crash_at[32];      /* DC_CRASH_AT of this incarnation */
	uint64_t rstep, rstep_kill; /* recovery steps taken; kill at this one
	                             * (recover.c dc__rstep) */
	uint64_t mu_cap;        /* DC_TEST_MUNDO_MAX (seg.c) */
	bool segv_tick;         /* DC_TEST_SEGV_TICK (sud.c segv_handler) */
	bool sig_tick;          /* DC_TEST_SIG_TICK (sud.c sig_wrapper) */
	uint64_t exit_wait_ms;  /* DC_TEST_EXIT_WAIT_MS (dc__cleanup_exit) */
	uint64_t bg_delay_ns;   /* DC_TEST_BG_DELAY_US (ckpt.c bg_main) */
	char tp_fail[256];      /* DC_TEST_2PC_FAIL: a 2PC prepare fails
	                         * while this file exists (twopc.c) */
#endif
	char buf[65536] __attribute__((aligned(64)));
	/* scratch, untracked: input replay and logging (sud.c), the undo
	 * (fundo.c), log checksums (log.c) */
	char io[1 << 20] __attribute__((aligned(64)));
	char logtmp[65536] __attribute__((aligned(64)));
	/* a flush's reads of the redo log (redo.c): the background writer
	 * flushes while the program's threads use buf */
	char rbuf[65536] __attribute__((aligned(64)));
	/* scratch of the undo log's appends (seg.c): they run in the
	 * SIGSEGV handler too, which may interrupt users of the others */
	char mu_buf[65536] __attribute__((aligned(64)));
	/* recovery runs on it, and every commit body: never tracked, so a
	 * commit writes no tracked byte between its scan and its apply */
	char stack[256 * 1024] __attribute__((aligned(16)));
};

extern struct dc__st dc__st;
/* the bytes of the first page that hold fields (the rest is padding) */
#define DC__HOT_USED ((offsetof(struct dc__st, cb_arg) + sizeof(void *) + 63) & \
	~(size_t)63)
/* dc__vol fills whole pages of its own, so cutting it out of tracking
 * never cuts out a neighbour. */
union dc__vol_pages {
	struct dc__vols v;
	char pages[(sizeof(struct dc__vols) + DC__PAGE - 1) & ~(DC__PAGE - 1)];
};
extern union dc__vol_pages dc__volp;
#define dc__vol (dc__volp.v)

/* The checkpoint writer's stack: the first bytes of bg_map (ckpt.c). */
#define DC__BG_STACK (256u * 1024u)
/* On the checkpoint writer's stack?  It is made by clone3 with no TLS of
 * its own, so dc__sel() there reads the main thread's selector: a libc
 * entry libdc wraps (direct.c) must go straight to the kernel from it.
 * False while there is no writer (bg_map NULL: no stack is that low). */
static inline bool
dc__on_writer(void)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	return sp - (uintptr_t)dc__vol.bg_map < DC__BG_STACK;
}

/* The generation of the interval the program runs in: the committed one
 * + 1, or the one after the generation the background writer still
 * writes (ckpt.c invariant 8).  Both only grow, so any order of the two
 * reads gives the right one. */
static inline uint64_t
dc__open_gen(void)
{
	uint64_t s = dc__vol.bg_staged, c = dc__vol.committed;
	return (s > c ? s : c) + 1;
}

/* thread.c: this thread's slot (0: the main thread), in its own TLS */
extern __thread int dc__thr_me __attribute__((tls_model("initial-exec")));
/* this thread's syscall-dispatch selector (sud.c invariant 1) */
static inline volatile unsigned char *
dc__sel(void)
{
	return dc__thr_me ? &dc__vol.thr.sel[dc__thr_me] : &dc__vol.selector;
}

/* err.c */
/* Set the stack's thread-local message (rio_seterr); returns rc. */
#define dc__err(rc, ...) rio_seterr((rc), __VA_ARGS__)
void dc__say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dc__refuse(const char *what);
void dc__refuse_call(const char *what, const char *why, int err);
/* An invariant failed: say which with a raw write(2), then end the
 * process with a raw exit_group(134) -- no libc, no signal a program's
 * handler could catch: libdc may be running while libc's memory is being
 * replaced (recovery, a checkpoint's commit). */
__attribute__((cold, noreturn)) void dc__assert_fail(const char *label,
	const char *cond, const char *file, int line);
/* DC_ASSERT(cond, "label"): discount's RIO_ASSERT (rio_assert.h), with
 * raw system calls for its failure path. */
#ifdef NDEBUG
#define DC_ASSERT(cond, label) ((void)sizeof(!(cond)))
#else
#define DC_ASSERT(cond, label) \
	(__builtin_expect(!!(cond), 1) ? (void)0 : \
	    dc__assert_fail(label, #cond, __FILE__, __LINE__))
#endif

/* maps.c */
int dc__maps_read(struct dc__region *out, unsigned max, unsigned *n);
void dc__maps_classify(struct dc__region *r, unsigned n);
void dc__maps_note_mprotect(uint64_t a, uint64_t b);
void dc__maps_folded(void);
int dc__objs_read(struct dc__obj *out, unsigned max, unsigned *n);
uint64_t dc__arg_start(void);

/* track.c */
int dc__track_open(void);
int dc__track_register(uint64_t a, uint64_t b);
int dc__track_protect(uint64_t a, uint64_t b);
bool dc__track_wp(void);
bool dc__track_undo(void);
void dc__track_cut(uint64_t a, uint64_t b);
void dc__track_will_write(uint64_t a, uint64_t b);
void dc__track_suspend(void);
unsigned dc__track_take(void);
int dc__track_arm(bool whole);
void dc__track_release(uint64_t a, uint64_t b, bool log);
void dc__track_will_protect(uint64_t a, uint64_t b, int prot);
long dc__track_scan(uint64_t a, uint64_t b, bool written, bool protect,
	struct page_region *vec, size_t vlen, uint64_t *walk_end);
void dc__track_pin(void);
uint64_t dc__track_rseq_page(void);
void dc__track_interval(void);
unsigned dc__track_warm_range(uint64_t a, uint64_t b);
unsigned dc__track_warm_all(void);
bool dc__track_fault(uint64_t addr, bool write);
void dc__track_warm_args(long nr, const long *a);
bool dc__track_efault(void);
void dc__track_note(unsigned i, bool written);
bool dc__track_refold(struct dc__region *nw, unsigned nn);

/* shadow.c */
int dc__shadow_write(const void *src, uint64_t len, uint64_t a);
int dc__shadow_punch(uint64_t a, uint64_t len);
int dc__shadow_read(void *dst, uint64_t len, uint64_t a);
long dc__shadow_copy_in(uint64_t a, uint64_t b);
long dc__shadow_copy_over(uint64_t a, uint64_t b);
int64_t dc__shadow_off(uint64_t a);
long dc__shadow_map(uint64_t a, uint64_t b, int prot);
long dc__shadow_map_private(uint64_t a, uint64_t b, int prot);
bool dc__shadow_is_private(const struct dc__region *r);
long dc__shadow_extents(uint64_t a, uint64_t b,
	long (*fn)(void *arg, uint64_t a, uint64_t b), void *arg);

/* seg.c */
int dc__seg_identify(void);
bool dc__seg_is(const struct dc__region *r);
int dc__seg_convert(struct dc__region *r, bool log_old, uint64_t map_lo);
bool dc__seg_any(uint64_t a, uint64_t b);
int dc__seg_privatize(uint64_t a, uint64_t b, bool zero);
int dc__seg_privatize_image(void);
void dc__map_changed(uint64_t a, uint64_t len);
int dc__mu_map(void);
int dc__mu_log_mem(uint64_t a, uint64_t b);
int dc__mu_log_shadow(uint64_t a, uint64_t b);
void dc__mu_restart(void);
int dc__mu_undo(void);

/* redo.c */
struct dc_redo_seg {
	uint64_t off, len, csum;
	bool punch;
};
int dc__redo_append(uint64_t gen, unsigned n, const char *data,
	struct dc_redo_seg *out);
int dc__redo_committed(uint64_t gen, unsigned n, const char *data,
	const struct dc_redo_seg *seg);
int dc__redo_flush_pending(void);
int dc__redo_settle(void);
struct dc_commit;
int dc__redo_recover(const struct dc_commit *cm);

/* ckpt.c */
int dc__files_create(const char *dir);
int dc__files_open(const char *dir, bool *have);
int dc__commit(void);
int dc__commit_first(void);
#ifdef DC_TEST_CRASHPOINTS
void dc__crashpoint_init(void);
void dc__crashpoint(const char *point, uint64_t gen);
#else
#define dc__crashpoint_init() ((void)0)
#define dc__crashpoint(point, gen) ((void)0)
#endif
void dc__cleanup_exit(void);
int dc__sync_fd(int fd);
int dc__bg_wait(void);
int dc__own_fd(int fd);
const struct dc_commit *dc__last_commit(void);

/* recover.c */
int dc__recover(void);
int dc__ctl_fd(void);
#ifdef DC_TEST_CRASHPOINTS
/* One step of recovery (or of the delayed deletions after it): the test
 * build kills the process at step N of its recovery run when DC_CRASH_AT
 * is "rstep:N".  Uses nothing but dc__vol and raw system calls. */
void dc__rstep(void);
#else
#define dc__rstep() ((void)0)
#endif

/* sud.c */
int dc__sud_start(void);
int dc__vdso_patch(void);
int dc__timer_start(void);
long dc__dispatch(long nr, long *a, void *uc);
/* sud.c invariant 8: the work of one call without the trap (direct.c) */
long dc__direct(long nr, long *a);
/* a call that may block, made as sud.c makes it (held.c invariant 7) */
long dc__blocking(long nr, const long *a, void *uc);
void dc__nd_event(void);
void dc__install_handler(int sig);
void dc__sud_altstack(uint64_t *a, uint64_t *b);

/* The mask libdc runs with: every signal but SIGSEGV, which must be taken
 * anywhere (a write into a cold region, track.c). */
#define DC__SIGS_BLOCKED (~(1ull << (SIGSEGV - 1)))

/* events.c */
int dc__events_open(const char *path);
void dc__event(long nr, const long *a, long r);

/* kstate.c */
void dc__k_init(void);
void dc__k_before_commit(void);
int dc__k_restore(int keep_fd);
long dc__k_syscall(long nr, long *a, void *uc, bool *handled);
int dc__desc_of(int fd);
void dc__k_after_commit(void);
void dc__k_repaint(void);
int dc__k_exit_list(const char *dir);
void dc__k_exit_deletes(const char *dir);

/* fundo.c */
int dc__fu_before_write(int fd, int64_t off, uint64_t len);
int dc__fu_log(int type, int64_t a, const char *p1, const char *p2,
	const void *data, uint64_t len);
int dc__fu_undo(void);

/* ndlog.c */
int dc__nd_append(int type, int64_t a, int64_t b, int64_t c,
	const void *d1, uint64_t l1, const void *d2, uint64_t l2);
int dc__nd_scan(uint64_t gen, uint64_t *end, uint64_t *count,
	uint64_t *stdin_bytes);
struct dc_log_ent;
int dc__nd_next(struct dc_log_ent *e, void *payload, uint64_t max);

/* log.c: the entry format of ndlog, fundo and mundo (ckpt_layout.h) --
 * one writer, one reader, one undo walk */
/* Payload bytes per checksum piece of a log entry. */
#define DC__LOG_CHUNK 65536u
/* Bytes an entry with len payload bytes takes: header, payload, pad to 8. */
static inline uint64_t dc__log_span(uint64_t len)
{
	return sizeof(struct dc_log_ent) + ((len + 7) & ~7ull);
}
int dc__log_append(int fd, char *win, uint64_t win_len, uint64_t *off,
	uint64_t *seq, struct dc_log_ent *h, const void *d1, uint64_t l1,
	const void *d2, uint64_t l2);
int dc__log_read(int fd, uint64_t off, uint64_t gen, uint64_t seq,
	const uint64_t *inc, struct dc_log_ent *e, void *payload,
	uint64_t max);
int dc__log_undo(int fd, uint64_t gen, uint64_t inc, uint64_t max,
	int (*apply)(const struct dc_log_ent *e, const char *payload),
	const char *what, uint64_t *n);
int dc__log_undo_pop(int fd, uint64_t gen, uint64_t inc, uint64_t max,
	int (*apply)(const struct dc_log_ent *e, const char *payload),
	const char *what, uint64_t *n);

#define DC__PROT_LOG(p) ((p) == DC_CAND_LOG || (p) == DC_CBNDVS_LOG)

/* The kernel's struct sigaction (rt_sigaction), for libdc's own
 * handlers (sud.c, thread.c). */
struct ksigaction {
	uintptr_t handler;
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

/* twopc.c */
bool dc__twopc_parse(const char *name, enum dc_protocol *out);
int dc__twopc_setup(int protocol);
int dc__twopc_first(void);
int dc__twopc_round(void);
void dc__twopc_exit(int status);
void dc__twopc_serve(void);
/* a datagram to the coordinator and the next one from it (twopc.c) */
void dc__twopc_send(int type, uint64_t round, int32_t status, int32_t code,
	uint64_t gen);
int dc__twopc_recv(struct dc_2pc_msg *m, int ms);
/* DIR's files (the committed part) into a new directory, durable */
int dc__twopc_copy_dir(const char *from, const char *to);

/* thread.c: threads made by clone3, stopped at every checkpoint, made
 * again at recovery */
bool dc__thr_on(void);
bool dc__thr_is_thread(long nr, const long *a);
long dc__thr_clone(long nr, const long *a, void *uc);
long dc__thr_exit(const long *a);
void dc__thr_lock(void);
bool dc__thr_unlock(void);
int dc__thr_stop(void);
void dc__thr_go(void);
bool dc__thr_was_stopped(void);
void dc__thr_clear_stopped(void);
long dc__thr_gettid(void);
long dc__thr_real_tid(long tid);
int dc__thr_recreate(void);
/* A checkpoint's write of the process's memory to a file: raw system
 * calls, all of it or -errno (thread.c invariant 6). */
int dc__pwrite_mem(int fd, const void *buf, size_t n, off_t off);

/* tree.c (dc-run --tree) */
int dc__tree_setup(void);
long dc__tree_fork(long nr, const long *a, void *uc);
void dc__tree_exit(long status);
int dc__tree_before_change(void);
void dc__tree_waited(long nr, const long *a, long r);
void dc__tree_resumed(void);
void dc__tree_recovering(void);
long dc__tree_pipe(long nr, const long *a);
long dc__tree_exec(long nr, const long *a, const void *uc);
void dc__tree_adopt(void);
int dc__tree_pipe_reopen(struct dc__desc *x, int fd);
int dc__tree_inherited_reopen(const struct dc__desc *x);
bool dc__tree_internal(int fd);
/* kstate.c: describe a descriptor made elsewhere */
int dc__k_track_new(int fd, const char *path, int flags);
/* kstate.c invariants 8 and 9: pipes and eventfds inside the process,
 * /proc and /sys files */
long dc__k_self_make(long nr, const long *a);
bool dc__k_internal(int fd);
bool dc__k_proc(int fd);
void dc__k_proc_write(int fd, const void *buf, size_t n);
void dc__k_proc_restore(void);
/* thread.c: a thread's name (kstate.c invariant 9), by its program id */
void dc__thr_name(long vtid, const char *name, size_t n);
void dc__thr_names_restore(void);

#endif /* DC_INT_H */
