/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log_layout.h -- on-media layout of the vista log pool
 *
 * The log is a rio pool (layout name "vista.log") whose user area holds
 *
 *   +0        log header (4096 bytes, written once at create)
 *   +4096     segment table: VISTA_MAX_SEGMENTS entries of 64 bytes
 *   +lanes_off  nlanes lanes of lane_size bytes each (page aligned)
 *
 * A lane is a 64-byte lane header, a 64-byte commit line (two commit
 * records), then the record area.  The lane header's `gen` is the
 * generation floor: records of a generation below it are dead.  A record
 * belongs to the lane's current transaction iff its tag is the tag of
 * (generation, position) and its check verifies.  Records are appended at
 * 64-byte aligned positions and each is made durable before the next is
 * written, so the valid records of a transaction form one run of the
 * record area, which begins with the record whose `prev` is 0 (anywhere in
 * the area: a transaction starts where the one before it ended, or at the
 * start of the area).
 *
 * Commit records (major 4).  A commit that touched one segment writes the
 * commit record {gen, checksum of the after-images of every range its
 * records describe} into slot gen & 1 of the commit line, writes it back
 * with the data and fences once.  Until a later fence, a crash finds the
 * records of gen alive beside it; recovery keeps the transaction if the
 * segment's bytes match the commit checksum and rolls it back otherwise.
 * The generation of the lane's newest valid commit record, C, says the
 * lane's transactions up to C ended: records of C + 1 that carry their tag
 * are a transaction in flight (rolled back) and make C final, since they
 * are durable only after C's fence and before C + 1 stores anything.
 * So the next transaction's first record is the truncation of C and its
 * commit record overwrites the record of C - 1, never C's.  An instance of
 * one lane therefore stores no truncation at all on this path; with more
 * lanes another thread may change bytes C's record vouches for before this
 * lane writes again, so the commit also stores gen + 1 into the header
 * with no fence of its own: the next fence of any lane (or vista_unmap,
 * vista_fini) makes it durable.  Aborts, commits of several segments or of
 * heap operations, and recovery store the floor with a fence of their own.
 *
 * Torn or corrupt (major 5).  A record is written whole -- tag included,
 * stored last in program order -- written back and fenced once, before
 * the program stores to what it describes.  Lines (and the 8-byte words
 * of a line) persist in any order, so a crash may leave a record whose
 * tag is there but whose check fails: it is torn if nothing of its
 * transaction follows it -- no record of its generation further on, no
 * commit record of it (both are written only after it is durable) -- and
 * corrupt (VISTA_ECORRUPT) otherwise.  A torn record stored nothing: the
 * fence after it never completed.  A first record found torn still ends
 * the generation before it (it was written after that one's commit
 * fence), and recovery moves the floor past its own generation, whose
 * tag is on media.  A tag within VISTA_TAG_SLACK bits of the expected
 * one counts as present and flipped: corrupt; stale content from another
 * generation or position is ~32 bits away.
 *
 * docs/FORMAT.md has the tables, the persist orders and what a torn write of
 * each part leaves behind.  All fields are little-endian.
 *
 * Versioning: a reader refuses another major version and unknown incompat
 * features (VISTA_ELAYOUT); reserved bytes must be zero.
 */
#ifndef VISTA_LOG_LAYOUT_H
#define VISTA_LOG_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define VISTA_LOG_LAYOUT "vista.log" /* rio pool layout name */
#define VISTA_LOG_MAGIC "VISTALG"    /* 7 chars + NUL */
#define VISTA_LOG_MAJOR 5 /* 1: seal without images, unprotected gen;
				   2: no commit record, fenced truncation;
				   3: one commit record, truncation stored
				   by every commit, 16-byte descriptors;
				   4: a record's tag stored after a fence
				   of its own (a present tag = complete) */
#define VISTA_LOG_MINOR 1 /* 1: new ranges (VISTA_LOG_INCOMPAT_NEW) */
#define VISTA_LOG_HDR_SIZE 4096u

#define VISTA_LOG_COMPAT_KNOWN 0u
/* Records may end in descriptors of new ranges, with no data (vista_rec
 * `nnew`).  Set in every log this version creates: a reader of 5.0 would
 * take such a record's nonzero `nnew` for a torn header, and so refuses
 * the log for the unknown feature instead.  A log of 5.0 (bit clear)
 * holds no such record and is read by the same code. */
#define VISTA_LOG_INCOMPAT_NEW (1u << 0)
#define VISTA_LOG_INCOMPAT_KNOWN VISTA_LOG_INCOMPAT_NEW
#define VISTA_LOG_RO_COMPAT_KNOWN 0u

#define VISTA_LOG_CSUM_SEED 0x5649535441484452ull    /* "VISTAHDR" */
#define VISTA_SEGENT_CSUM_SEED 0x5649535441534547ull /* "VISTASEG" */
#define VISTA_LANE_CSUM_SEED 0x564953544c414e45ull   /* "VISTLANE" */
#define VISTA_COMMIT_CSUM_SEED 0x56495354434d4954ull /* "VISTCMIT" */
#define VISTA_TAG_SLACK 4u /* flipped bits under which a tag is present */

#define VISTA_MAX_SEGMENTS 256u /* segment table entries */
#define VISTA_SEGTAB_OFF VISTA_LOG_HDR_SIZE
#define VISTA_LANES_OFF (VISTA_SEGTAB_OFF + VISTA_MAX_SEGMENTS * 64u)
#define VISTA_MIN_LANE_SIZE (16u * 1024u)
#define VISTA_REC_ALIGN 64u

struct vista_log_hdr {
	char magic[8];      /* 0    "VISTALG\0" */
	uint16_t major;     /* 8    */
	uint16_t minor;     /* 10   */
	uint32_t hdr_size;  /* 12   VISTA_LOG_HDR_SIZE */
	uint32_t compat;    /* 16   */
	uint32_t incompat;  /* 20   */
	uint32_t ro_compat; /* 24   */
	uint32_t nlanes;    /* 28   */
	uint64_t lane_size; /* 32   bytes per lane, multiple of 4096 */
	uint64_t lanes_off; /* 40   offset of lane 0 from this header */
	uint64_t segtab_off; /* 48  offset of the segment table */
	uint32_t segtab_len; /* 56  entries (VISTA_MAX_SEGMENTS) */
	uint32_t reserved0;  /* 60  zero */
	uint64_t salt;       /* 64  random: seeds record checks and seals */
	uint8_t reserved[VISTA_LOG_HDR_SIZE - 72 - 8]; /* 72 zero */
	uint64_t checksum;   /* 4088 rio_checksum(bytes 0..4087) */
};

/*
 * One segment known to the log: records name segments by their index in
 * this table.  An all-zero entry is free.  An entry is written (and made
 * durable) by vista_map() before any record can name it, and is reused for
 * another segment only when no record of any lane can name it any more.
 */
struct vista_segent {
	uint8_t uuid[16];  /* 0   the segment's rio pool uuid */
	uint64_t base;     /* 16  address the segment maps at */
	uint64_t size;     /* 24  pool size in bytes */
	uint64_t serial;   /* 32  registration counter (informational) */
	uint8_t reserved[16]; /* 40 zero */
	uint64_t checksum; /* 56  rio_checksum(bytes 0..55, seed ^ index) */
};

/*
 * Lane header: one cache line.  `gen` is the generation floor (the
 * truncation word of aborts, slow commits and recovery).  done_gen /
 * done[] record partial recovery: when done_gen is the generation being
 * recovered (the floor, or one the commit line names), bit i of done[]
 * says the records of segment-table entry i have been rolled back already
 * and must never be applied again.
 *
 * Both parts carry a check, and the check decides:
 *   gen_check  = vista_lane_gen_check(seed, gen);
 *   done_check = vista_lane_done_check(seed, done_gen, done[]).
 * A truncation stores gen_check and gen in one line with one fence, so a
 * crash may leave either new: the reader takes the generation within one
 * of gen whose check is stored (gen - 1, gen or gen + 1).  With one lane
 * the floor may jump past lazy commits (to a commit record's generation
 * plus 0, 1 or 2, above gen); such a store fences its check before gen
 * changes, and a reader finding the check of one of those completes it.
 * mark_done stores
 * done_check and fences before it stores the words it covers: a reader
 * finding the check of done[] plus one bit, or of {gen, one bit}, completes
 * that update.  Anything else is VISTA_ECORRUPT.  One flipped bit therefore
 * never turns a pending transaction into a committed one: it yields the
 * state before the flip, or an error.
 */
struct vista_lane_hdr {
	uint64_t gen;      /* 0   generation floor, >= 1 */
	uint64_t done_gen; /* 8   generation done[] applies to */
	uint64_t done[VISTA_MAX_SEGMENTS / 64]; /* 16 recovered segments */
	uint64_t gen_check;  /* 48 check of gen */
	uint64_t done_check; /* 56 check of done_gen and done[] */
};

/*
 * Commit record: one of two slots of the line after the lane header; the
 * transaction of generation g writes slot g & 1, so the record of g - 1
 * stays whole while g's is written.  Valid for generation g iff gen == g,
 * g & 1 is its slot, g >= the lane header's gen, the reserved bytes are
 * zero and check verifies; it then says "the transaction of g committed if
 * segment-table entry seg holds, in the ranges its records describe
 * (record order, descriptor order), bytes whose rio_checksum chain is
 * csum".  Written only by a commit, fenced together with the data; a torn
 * slot fails its check (not committed).
 */
struct vista_commit_slot {
	uint64_t gen;  /* 0   generation committed */
	uint64_t csum; /* 8   vista__after_csum() of the described ranges */
	uint16_t seg;  /* 16  the one segment the transaction touched */
	uint8_t reserved[6]; /* 18 zero */
	uint64_t check; /* 24 vista_lane_commit_check(seed, gen, csum, seg) */
};

struct vista_lane_commit {
	struct vista_commit_slot slot[2]; /* 0, 32  slot gen & 1 */
};

static inline uint64_t
vista_lane_commit_check(uint64_t seed, uint64_t gen, uint64_t csum,
	uint16_t seg)
{
	return rio_mix64(rio_mix64(gen ^ seed ^ VISTA_COMMIT_CSUM_SEED) ^
		csum ^ ((uint64_t)seg << 48)) ^ 0x636d6974ull;
}

static inline uint64_t
vista_lane_gen_check(uint64_t seed, uint64_t gen)
{
	return rio_mix64(gen ^ seed ^ VISTA_LANE_CSUM_SEED) ^ 0x67656eull;
}

static inline uint64_t
vista_lane_done_check(uint64_t seed, uint64_t done_gen, const uint64_t *done)
{
	uint64_t h = rio_mix64(done_gen ^ seed ^ 0x646f6e65ull);
	for (unsigned i = 0; i < VISTA_MAX_SEGMENTS / 64; i++)
		h = rio_mix64(h ^ done[i] ^ ((uint64_t)(i + 1) << 56));
	return h;
}

/* Record types */
#define VISTA_REC_RANGES 1 /* before-images: count descriptors, then data;
				the last nnew describe new ranges, no data */
#define VISTA_REC_ALLOC 2  /* heap blocks the transaction allocated */
#define VISTA_REC_FREE 3   /* heap blocks the transaction frees at commit */

/*
 * Record header.  In every domain `check` is rio_checksum(bytes 16..len-1,
 * seed(lane) ^ gen ^ pos): header words, descriptors and before-images.
 * `tag` = vista_rec_tag(seed(lane), gen, pos) says the record belongs to
 * generation gen at this position, and is stored last, with no fence
 * before it (see above).
 * `prev` is the stride of the previous record (0 for the first), so that
 * records can be undone newest first without a separate index.
 * `nnew` (VISTA_REC_RANGES, format 5.1): the last nnew of the count
 * descriptors describe new ranges (vista_set_range_new): their bytes have
 * no before-image -- no data follows for them, undo and recovery never
 * put them back -- but the commit checksum covers them like the others.
 * Zero in other records.
 */
struct vista_rec {
	uint64_t check; /* 0  */
	uint64_t tag;   /* 8  vista_rec_tag(seed, gen, pos), stored last */
	uint32_t len;   /* 16 bytes used, header included; stride = round 64 */
	uint16_t type;  /* 20 VISTA_REC_* */
	uint16_t count; /* 22 descriptors or objects */
	uint32_t prev;  /* 24 stride of the previous record, 0 if first */
	uint16_t flags; /* 28 zero (no flags defined) */
	uint16_t nnew;  /* 30 new-range descriptors at the end (5.1) */
};

/* Descriptors of a VISTA_REC_RANGES record that carry a before-image. */
static inline unsigned
vista_rec_nold(const struct vista_rec *r)
{
	return (unsigned)r->count - r->nnew;
}

/*
 * A before-image descriptor (VISTA_REC_RANGES): one 8-byte word, so that
 * a batch's descriptors share the record's first line with its header and
 * the start of its images.  The descriptors follow the header; the data of
 * descriptor i (i < count - nnew) follows all descriptors, each padded to
 * 8 bytes, in descriptor order; the nnew last descriptors have none.
 * Bit-fields from bit 0 (x86-64 SysV order): off bits
 * 0-39, len bits 40-55, seg bits 56-63.  A longer range takes several
 * descriptors of at most VISTA_RDESC_MAX_LEN bytes; a segment spans at
 * most VISTA_RDESC_MAX_OFF bytes (vista_segment_footprint).
 */
struct vista_rdesc {
	uint64_t off : 40; /* offset from the segment's mapping base */
	uint64_t len : 16; /* bytes of before-image, >= 1 */
	uint64_t seg : 8;  /* segment table index */
};
#define VISTA_RDESC_MAX_LEN 65528u /* 8-byte multiple below 2^16 */
#define VISTA_RDESC_MAX_OFF (1ull << 40)

static inline uint64_t
vista_rec_tag(uint64_t seed, uint64_t gen, uint64_t pos)
{
	return rio_mix64(rio_mix64(gen ^ seed) ^ (pos * 0x9e3779b97f4a7c15ull) ^
		0x746167ull);
}

/* A heap object (VISTA_REC_ALLOC / VISTA_REC_FREE). */
#define VISTA_OBJ_SMALL 1 /* block `n` of the run at `page` */
#define VISTA_OBJ_LARGE 2 /* `n` pages starting at `page` */
struct vista_robj {
	uint32_t page;  /* 0  arena page */
	uint32_t n;     /* 4  block index or page count */
	uint16_t seg;   /* 8  segment table index */
	uint8_t kind;   /* 10 VISTA_OBJ_* */
	uint8_t cls;    /* 11 size class (SMALL) */
	uint32_t reserved; /* 12 zero */
};

RIO_STATIC_ASSERT(sizeof(struct vista_log_hdr) == VISTA_LOG_HDR_SIZE,
	"log header is one page");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_log_hdr, salt) == 64,
	"salt");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_log_hdr, checksum) == 4088,
	"log header checksum is last");
RIO_STATIC_ASSERT(sizeof(struct vista_segent) == 64, "segment entry");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_segent, checksum) == 56,
	"segment entry checksum is last");
RIO_STATIC_ASSERT(sizeof(struct vista_lane_hdr) == 64, "lane header");
RIO_STATIC_ASSERT(sizeof(struct vista_lane_commit) == 64, "commit line");
RIO_STATIC_ASSERT(sizeof(struct vista_commit_slot) == 32, "commit record");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_commit_slot, check) == 24,
	"commit record check is last");
RIO_STATIC_ASSERT(sizeof(struct vista_rec) == 32, "record header");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_rec, tag) == 8, "tag");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_lane_hdr, gen_check) == 48,
	"lane gen check");
RIO_STATIC_ASSERT(sizeof(struct vista_rdesc) == 8, "range descriptor");
RIO_STATIC_ASSERT(VISTA_MAX_SEGMENTS <= 256, "seg fits a descriptor");
RIO_STATIC_ASSERT(sizeof(struct vista_robj) == 16, "heap object");
RIO_STATIC_ASSERT(VISTA_LANES_OFF % 4096 == 0, "lanes are page aligned");
RIO_STATIC_ASSERT(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	"formats are little-endian");

#endif /* VISTA_LOG_LAYOUT_H */
