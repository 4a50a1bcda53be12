// SPDX-License-Identifier: BSD-3-Clause
// fc_lifetime_test.cpp -- a file record is never freed while the
// write-back thread's directory settling holds it (fc_int.h R1-R3)
//
// The interleaving that the safe-save pattern hits at random (write a
// temporary file, close, rename it over the target while the write-back
// thread settles the directory of the files the cache created), forced
// with the fault-injection hook (rio_testhook.h): rename's write-back of
// the temporary file starts directory settling in another thread and lets
// it run up to its directory fsync, then finishes the rename (which drops
// the file), then lets settling go on.  A settling that took the file
// being renamed uses it after rename freed it: the child dies (freed
// memory is poisoned with mallopt(M_PERTURB)).
// Broken build: RIO_BROKEN_FC_LIFETIME (settling takes busy files, and a
// released record is freed whatever holds it) must be caught.
#include <malloc.h>
#include <pthread.h>

#include "fc_int.h"
#include "fc_util.hpp"
#include "rio_testhook.h"

using fct::Env;

namespace {

pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
enum { IDLE, SETTLING, IN_FSYNC, DONE } settler = IDLE;
bool go_on, armed;
thread_local bool is_settler;
rio_fc_cache *cache;
rio_sys_fsync_fn saved_fsync;
rio_sys_fdatasync_fn saved_fdatasync;

void set_state(int s)
{
	pthread_mutex_lock(&mu);
	settler = (decltype(settler))s;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

void *settle_thread(void *)
{
	is_settler = true;
	int rc = rio__fc_settle_dirs(cache);
	set_state(DONE);
	return (void *)(intptr_t)rc;
}

// The settler's directory fsync waits until rename is over.
int hook_fsync(int fd)
{
	if (is_settler) {
		set_state(IN_FSYNC);
		pthread_mutex_lock(&mu);
		while (!go_on)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
	}
	return saved_fsync(fd);
}

pthread_t settler_tid;

// Rename's write-back of the temporary file: settling starts meanwhile.
int hook_fdatasync(int fd)
{
	if (armed) {
		armed = false;
		set_state(SETTLING);
		pthread_create(&settler_tid, nullptr, settle_thread, nullptr);
		pthread_mutex_lock(&mu);
		while (settler == SETTLING)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
	}
	return saved_fdatasync(fd);
}

} // namespace

TEST_CASE("directory settling never uses a file that rename frees",
	"[fc-lifetime]")
{
	Env e;
	auto r = test::run_child([&] {
		mallopt(M_PERTURB, 0x5a);
		struct rio_fc_opts o = {};
		o.flags = RIO_FC_CREATE | RIO_FC_NO_THREAD;
		o.pool_size = 1 << 20;
		if (rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &cache))
			_exit(10);
		std::string tmp = e.file("target.tmp"), target = e.file("target");
		for (int i = 0; i < 3; i++) {
			// A file the cache creates (its record says NEW, so
			// settling wants its directory), written and closed.
			rio_fc_file *f = nullptr;
			std::string data = "version " + std::to_string(i);
			if (rio_fc_open(cache, tmp.c_str(),
				    O_WRONLY | O_CREAT | O_TRUNC, &f) ||
			    rio_fc_pwrite(f, data.data(), data.size(), 0) ||
			    rio_fc_close(f))
				_exit(11);
			saved_fsync = rio_testhook_fsync(hook_fsync);
			saved_fdatasync =
				rio_testhook_fdatasync(hook_fdatasync);
			go_on = false;
			armed = true;
			settler = IDLE;
			int rc = rio_fc_rename(cache, tmp.c_str(), target.c_str());
			pthread_mutex_lock(&mu);
			go_on = true;
			pthread_cond_broadcast(&cv);
			pthread_mutex_unlock(&mu);
			void *ret = nullptr;
			pthread_join(settler_tid, &ret);
			rio_testhook_fsync(saved_fsync);
			rio_testhook_fdatasync(saved_fdatasync);
			if (rc != 0)
				_exit(12);
			if (ret != nullptr)
				_exit(13);
			if (test::read_file(target) != data)
				_exit(14);
		}
		if (rio_fc_cache_close(cache))
			_exit(15);
		_exit(0);
	});
	INFO(r.err);
#ifndef RIO_BROKEN_FC_LIFETIME
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);
#else
	// Caught: the child died or saw a wrong result.
	WARN("broken (lifetime): the child "
		<< (r.exited ? "exited " + std::to_string(r.code) :
			       "was killed by signal " + std::to_string(r.signal)));
	REQUIRE(!(r.exited && r.code == 0));
#endif
}
