/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sync.c -- periodic safe sync from a background thread
 *
 * With opts.sync_interval_ms set, a thread safe-syncs the pool every
 * interval.  Each sync writes only the pages whose content differs from
 * the image slot it overwrites (image.c), so a quiet pool costs one pass of
 * hashing per interval and no I/O.  A failing sync is reported once on
 * stderr and retried at the next interval.
 */
#include <errno.h>
#include <time.h>

#include "rio_int.h"

static void *
sync_main(void *arg)
{
	rio_pool *p = arg;
	bool reported = false;

	pthread_mutex_lock(&p->sync_thread_lock);
	while (!p->sync_thread_stop) {
		struct timespec ts;
		int rc;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += p->sync_interval_ms / 1000;
		ts.tv_nsec += (long)(p->sync_interval_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		rc = pthread_cond_timedwait(&p->sync_thread_cond,
			&p->sync_thread_lock, &ts);
		if (p->sync_thread_stop || rc != ETIMEDOUT)
			continue;
		pthread_mutex_unlock(&p->sync_thread_lock);
		rc = rio_safe_sync(p, NULL);
		if (rc && !reported)
			rio__notice("periodic safe sync: %s", rio_errormsg());
		reported = rc != 0;
		pthread_mutex_lock(&p->sync_thread_lock);
	}
	pthread_mutex_unlock(&p->sync_thread_lock);
	return NULL;
}

int
rio__sync_thread_start(rio_pool *p)
{
	int rc;

	p->sync_thread_stop = false;
	rc = pthread_create(&p->sync_thread, NULL, sync_main, p);
	if (rc)
		return rio__err(-rc, "start safe-sync thread for %s: %s",
			p->path, rio_strerror(-rc));
	p->sync_thread_on = true;
	return 0;
}

void
rio__sync_thread_stop(rio_pool *p)
{
	if (!p->sync_thread_on)
		return;
	pthread_mutex_lock(&p->sync_thread_lock);
	p->sync_thread_stop = true;
	pthread_cond_signal(&p->sync_thread_cond);
	pthread_mutex_unlock(&p->sync_thread_lock);
	pthread_join(p->sync_thread, NULL);
	p->sync_thread_on = false;
}
